"""Lesson 04b's sentences about its results, and the figures each section's check cell measures.

Each sentence here is written once in the lesson's markdown, with `<!-- claim: name -->` after it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from course_lib.measure import RELATIVE_DRIFT_EPS

from ..claims import NOT_SATURATING, SATURATING, Book, far, most, nearly_all, several_times

book = Book("04b")


# 2. Segments and hard cases ---------------------------------------------------------------------------
@book.figures("2")
def _(per_class: dict, parity: dict, main: str, disagree: Any, margin: Any) -> dict:
    from course_lib.data import CLASS_NAMES as names

    fp32 = np.asarray(per_class["fp32"])
    change = np.asarray(per_class["weak calibration"]) - fp32
    weak = parity["weak calibration"]
    disagree, margin = np.asarray(disagree, dtype=bool), np.asarray(margin)
    low = margin <= np.quantile(margin, 0.1)
    total = int(disagree.sum())
    return {
        "main": main,
        "main_worst_class_points": float(100 * np.abs(np.asarray(per_class[main]) - fp32).max()),
        "worst_class": names[int(change.argmin())],
        "worst_class_change": float(100 * change.min()),
        "weak_drop": float(100 * (weak.reference_accuracy - weak.candidate_accuracy)),
        "disagreements": total,
        "low_tenth_share": float(disagree[low].sum() / total) if total else 0.0,
    }


@book.sentence(
    "2",
    "production-every-class",
    "The production choice stays within a couple of points (under 2) of fp32's accuracy in every class",
    shows="{main}: at most {main_worst_class_points:.1f} points",
    depends=("weights", "cpu"),
)
def _(f):
    return f["main_worst_class_points"] < 2


@book.sentence(
    "2",
    "weak-worst-class",
    "Weak calibration's weakest class loses several times its overall drop",
    shows="{worst_class} {worst_class_change:+.1f} points, overall -{weak_drop:.2f}",
    depends=("weights", "cpu"),
)
def _(f):
    return f["weak_drop"] > 0 and several_times(-f["worst_class_change"] / f["weak_drop"])


@book.sentence(
    "2",
    "most-in-low-tenth",
    "Most of the production choice's disagreements sit in the least sure tenth of the images, far more "
    "than the tenth chance would put there",
    shows="{low_tenth_share:.0%} of {disagreements}",
    depends=("weights", "cpu"),
)
def _(f):
    return most(f["low_tenth_share"]) and bool(far(f["low_tenth_share"] / 0.1))


# 3. Debugging with qdq_loss_debug ---------------------------------------------------------------------
@book.figures("3")
def _(input_sqnr: dict, weight_sqnr: dict, main: str) -> dict:
    first = {name: float(values[0]) for name, values in input_sqnr.items()}
    others = min(db for name, db in first.items() if name != "weak calibration")
    pt, pc = np.asarray(weight_sqnr["per-tensor"]), np.asarray(weight_sqnr[main])
    worst = int(np.nanargmin(pt))
    return {
        "weak_first_input_db": first["weak calibration"],
        "others_first_input_db": others,
        "weakest_layer": worst,
        "weakest_per_tensor_db": float(pt[worst]),
        "weakest_per_channel_db": float(pc[worst]),
    }


@book.sentence(
    "3",
    "weak-first-input",
    "Weak calibration's first-layer input is tens of dB (at least 20) below every other variant's",
    shows="{weak_first_input_db:.1f} dB, the others at least {others_first_input_db:.1f} dB",
    depends=("weights", "runtime"),
)
def _(f):
    return f["weak_first_input_db"] <= f["others_first_input_db"] - 20


@book.sentence(
    "3",
    "per-tensor-weakest-weights",
    "Per-tensor's weakest layer weights lie below the same layer's per-channel weights",
    shows="layer {weakest_layer}: per-tensor {weakest_per_tensor_db:.1f} dB, per-channel {weakest_per_channel_db:.1f} dB",
    depends=("weights", "runtime"),
)
def _(f):
    return f["weakest_per_tensor_db"] < f["weakest_per_channel_db"]


# 4. What the debugger cannot see ----------------------------------------------------------------------
TWICE_THE_NOISE_DB = 10 * math.log10(2)  # the SQNR gap at which the noise power doubles


@book.figures("4")
def _(gap: dict) -> dict:
    widest = max(gap, key=lambda name: abs(gap[name]))
    return {
        "debugger_gap_full_range": float(gap["per-channel"]),
        "debugger_gap_largest": float(gap[widest]),
        "widest_gap_variant": widest,
    }


@book.sentence(
    "4",
    "simulation-matches",
    "The debugger's float simulation matches the real session within a fraction of a dB (under 0.5) for "
    "every variant",
    shows="largest gap {debugger_gap_largest:.2f} dB",
    scope=NOT_SATURATING,
    depends=("cpu", "weights"),
)
def _(f):
    return abs(f["debugger_gap_largest"]) < 0.5


@book.sentence(
    "4",
    "full-range-gap",
    "The real session of the full-range per-channel variant carries more than twice the quantization noise "
    "the debugger shows (a gap above 3 dB)",
    shows="gap {debugger_gap_full_range:.1f} dB",
    scope=SATURATING,
    depends=("cpu", "weights"),
)
def _(f):
    return f["debugger_gap_full_range"] > TWICE_THE_NOISE_DB


# 5. Drift over the two-moons input plane --------------------------------------------------------------
@book.figures("5")
def _(drift: Any, on_grid: Any, test_in: Any, parity: dict, pair: tuple) -> dict:
    """`drift`: the grid's largest |logit drift| per point; `on_grid`, `test_in`: which grid and test points
    lie inside the training range; `parity`: the MLP's per segment; `pair`: its (fp32, int8) test logits."""
    grid_drift, grid_inside = np.asarray(drift), np.asarray(on_grid, dtype=bool)
    test_fp32, test_int8 = (np.asarray(a) for a in pair)
    test_inside = np.asarray(test_in, dtype=bool)
    test_drift = np.abs(test_int8 - test_fp32).max(axis=1)
    worst = int(test_drift.argmax())
    rel = np.abs(test_int8 - test_fp32) / np.maximum(np.abs(test_fp32), RELATIVE_DRIFT_EPS)
    row, col = np.unravel_index(rel.argmax(), rel.shape)
    test, edge = parity["test"], parity["edge set"]
    inside_max = float(test_drift[test_inside].max()) if test_inside.any() else 0.0
    return {
        "mlp_grid_drift_inside": float(grid_drift[grid_inside].max()),
        "mlp_grid_drift_outside": float(grid_drift[~grid_inside].max()),
        "test_points": int(len(test_inside)),
        "test_points_outside": int((~test_inside).sum()),
        "test_inside_share": float(test_inside.mean()),
        "test_worst_outside": not bool(test_inside[worst]),
        "test_inside_max_drift": inside_max,
        "mlp_test_max_drift": float(test.max_abs_drift),
        "mlp_edge_max_drift": float(edge.max_abs_drift),
        "test_agreement": float(test.agreement),
        "edge_agreement": float(edge.agreement),
        "max_rel_drift": float(rel.max()),
        "rel_logit": float(abs(test_fp32[row, col])),
        "median_logit": float(np.median(np.abs(test_fp32))),
    }


@book.sentence(
    "5",
    "grid-outside-far",
    "Outside the training range the grid drifts far more than inside it",
    shows="{mlp_grid_drift_outside:.2f} against {mlp_grid_drift_inside:.2f}",
    depends="weights",
)
def _(f):
    return far(f["mlp_grid_drift_outside"] / f["mlp_grid_drift_inside"])


@book.sentence(
    "5",
    "test-nearly-all-inside",
    "Nearly all the test points lie inside the training range",
    shows="{test_points_outside} of {test_points} outside",
    depends="data",
)
def _(f):
    return nearly_all(f["test_inside_share"])


@book.sentence(
    "5",
    "test-worst-outside",
    "The test set's largest drift is at a point outside the training range; inside it, the test drift stays "
    "within the grid's inside level",
    shows="largest {mlp_test_max_drift:.3f}, outside: {test_worst_outside}; inside at most {test_inside_max_drift:.3f}",
    depends="weights",
)
def _(f):
    return f["test_worst_outside"] and f["test_inside_max_drift"] <= f["mlp_grid_drift_inside"]


@book.sentence(
    "5",
    "edge-far-more",
    "The edge set drifts far more than the test set and agrees with fp32 less often",
    shows="{mlp_edge_max_drift:.2f} against {mlp_test_max_drift:.2f}; agreement {edge_agreement:.2%} against "
    "{test_agreement:.2%}",
    depends="weights",
)
def _(f):
    return (
        bool(far(f["mlp_edge_max_drift"] / f["mlp_test_max_drift"]))
        and f["edge_agreement"] < f["test_agreement"]
    )


@book.sentence(
    "5",
    "relative-drift-with-agreement",
    "On the test set the two models agree on nearly every point, while some logit moves by more than its own size",
    shows="agreement {test_agreement:.2%}; largest relative drift {max_rel_drift:.0%}",
    depends="weights",
)
def _(f):
    return nearly_all(f["test_agreement"]) and f["max_rel_drift"] > 1


@book.sentence(
    "5",
    "relative-drift-small-logit",
    "The largest relative drift comes from a logit far smaller than the median logit",
    shows="|logit| {rel_logit:.3f} against a median of {median_logit:.2f}",
    depends="weights",
)
def _(f):
    return f["rel_logit"] > 0 and bool(far(f["median_logit"] / f["rel_logit"]))
