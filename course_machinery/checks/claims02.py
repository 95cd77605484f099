"""Lesson 02's sentences about its results, and the figures each section's check cell measures.

Each sentence here is written once in the lesson's markdown, with `<!-- claim: name -->` after it.
"""

from __future__ import annotations

from typing import Any

from ..claims import X86, Book, about, all_of, at_least, below, far, faster, nearly_all, speed

book = Book("02")


def _drift_ratio(worse: float, better: float) -> float:
    """How many times further from fp32 one embedding's worst cosine lies than another's
    (1 - cosine: the distance from a perfect match)."""
    return (1 - worse) / max(1 - better, 1e-9)


# 2. The two-moons MLP ------------------------------------------------------------------------------
@book.figures("2")
def _(size_ratio: float, mlp_parity: Any, mlp_cmp: Any, external_same: bool) -> dict:
    return {
        "mlp_size_ratio": float(size_ratio),
        "mlp_agreement": float(mlp_parity.agreement),
        "mlp_b": speed(mlp_cmp),
        "mlp_speedup": mlp_cmp.speedup,
        "mlp_max_rel_drift": float(mlp_parity.max_rel_drift),
        "mlp_fp32_ms": mlp_cmp.latency["fp32"].median_ms,
        "mlp_int8_ms": mlp_cmp.latency["int8"].median_ms,
        "external_same": bool(external_same),
    }


@book.sentence(
    "2",
    "mlp-half-size",
    "The MLP's INT8 file is about half the size of its fp32 file",
    shows="{mlp_size_ratio:.2f}x smaller",
    depends="runtime",
)
def _(f):
    return about(f["mlp_size_ratio"], 2.0)


@book.sentence(
    "2",
    "mlp-agrees",
    "INT8 answers nearly every test point as fp32 does",
    shows="agreement {mlp_agreement:.2%}",
    depends=("weights", "cpu"),
)
def _(f):
    return nearly_all(f["mlp_agreement"])


@book.sentence(
    "2",
    "mlp-not-halved",
    "INT8 takes more than half of fp32's time on the MLP",
    shows="{mlp_b} fp32's speed",
    depends="speed",
)
def _(f):
    return below(f["mlp_b"], 2.0)


@book.sentence(
    "2",
    "external-same",
    "The graph file and its external data load as one model, with the same outputs",
    shows="same outputs: {external_same}",
    depends="runtime",
)
def _(f):
    return f["external_same"]


# 3. The text encoder: what the quantizer writes and what runs ----------------------------------------
@book.figures("3")
def _(ran: dict, int8_graph: Any, paths: dict, te_parity: dict, moved: Any) -> dict:
    import onnx

    from course_lib.measure import model_facts

    int8 = ran["dynamic int8 per-channel"]
    dtype_of = {t.name: onnx.TensorProto.DataType.Name(t.data_type) for t in int8_graph.initializer}
    skip_ln = [n for n in int8_graph.node if n.op_type == "SkipLayerNormalization"]
    ln_params = {dtype_of[name] for n in skip_ln for name in n.input if name in dtype_of}
    pt, pc = te_parity[False], te_parity[True]
    return {
        "te_integer_ops": int8.integer_count,
        "te_compute_ops": int8.compute_count,
        "skip_ln_int8": len(skip_ln),
        "skip_ln_fp32": model_facts(paths["optimized"]).op_counts.get("SkipLayerNormalization", 0),
        "skip_ln_params": sorted(ln_params),
        "te_cos_min_pt": pt["cos_min"],
        "te_cos_min_pc": pc["cos_min"],
        "te_nn_agreement_pc": pc["nn_agreement"],
        "pt_over_pc_drift": _drift_ratio(pt["cos_min"], pc["cos_min"]),
        "batch_moved": float(moved.max()),
    }


@book.sentence(
    "3",
    "te-all-integer",
    "Every compute op of the INT8 encoder runs on an integer kernel",
    shows="{te_integer_ops} of {te_compute_ops}",
    depends=("cpu", "runtime"),
)
def _(f):
    return f["te_integer_ops"] == f["te_compute_ops"]


@book.sentence(
    "3",
    "layernorm-float",
    "Every SkipLayerNormalization of the encoder stays float",
    shows="{skip_ln_int8} of {skip_ln_fp32}, parameters {skip_ln_params}",
    depends="runtime",
)
def _(f):
    return f["skip_ln_int8"] == f["skip_ln_fp32"] > 0 and f["skip_ln_params"] == ["FLOAT"]


@book.sentence(
    "3",
    "per-channel-far-closer",
    "Per-channel weights keep the worst sentence far closer to fp32 than per-tensor weights",
    shows="1 - worst cosine {pt_over_pc_drift:.1f}x smaller (per-tensor {te_cos_min_pt:.4f}, "
    "per-channel {te_cos_min_pc:.4f})",
    depends=("cpu", "runtime", "data"),
)
def _(f):
    return far(f["pt_over_pc_drift"])


@book.sentence(
    "3",
    "batching-changes",
    "Batching the sentences differently changes their INT8 embeddings",
    shows="largest change of a cosine {batch_moved:.4f}",
    depends="runtime",
)
def _(f):
    return f["batch_moved"] > 0


# 4. Speed: against fp32 and against PyTorch ------------------------------------------------------------
QUOTED_LOW = 2.5  # the lower end of seed 000's "2.5-3x faster"


@book.figures("4")
def _(opt1: Any, opt16: Any, vs_torch: Any, torch_parity: dict, te_parity: dict) -> dict:
    pc = te_parity[True]
    return {
        "te_b1": speed(opt1),
        "te_b16": speed(opt16),
        "te_speedup_b1": opt1.speedup,
        "te_speedup_b16": opt16.speedup,
        "quoted_low": QUOTED_LOW,
        "ort_vs_torch": speed(vs_torch),
        "ort_vs_torch_b1": vs_torch.speedup,
        "torch_cos_min": torch_parity["cos_min"],
        "torch_over_ort_drift": _drift_ratio(torch_parity["cos_min"], pc["cos_min"]),
    }


@book.sentence(
    "4",
    "te-faster",
    "INT8 per-channel runs faster than the optimized fp32 graph at batch 1 and 16",
    shows="{te_b1} at batch 1, {te_b16} at batch 16",
    depends="speed",
)
def _(f):
    return all_of(faster(f["te_b1"]), faster(f["te_b16"]))


@book.sentence(
    "4",
    "short-of-quote",
    "It stays short of the lower figure seed 000 quotes, at batch 1 and 16",
    shows="{te_b1} and {te_b16} against {quoted_low}x",
    depends="speed",
)
def _(f):
    return all_of(below(f["te_b1"], f["quoted_low"]), below(f["te_b16"], f["quoted_low"]))


@book.sentence(
    "4",
    "torch-far-further",
    "PyTorch's dynamic INT8 takes the worst sentence far further from fp32 than ONNX Runtime's per-channel INT8",
    shows="1 - worst cosine {torch_over_ort_drift:.1f}x larger (PyTorch {torch_cos_min:.4f})",
    depends=("cpu", "runtime", "data"),
)
def _(f):
    return far(f["torch_over_ort_drift"])


@book.sentence(
    "4",
    "ort-faster-than-torch",
    "ONNX Runtime's INT8 runs faster than PyTorch's INT8 at batch 1",
    shows="{ort_vs_torch}",
    scope=X86,
    depends="speed",
)
def _(f):
    return faster(f["ort_vs_torch"])


# 5. Ship it or not? ------------------------------------------------------------------------------------
@book.figures("5")
def _(te_parity: dict, opt1: Any, opt16: Any) -> dict:
    from ..audit.decide import MIN_SPEEDUP
    from ..audit.evaluate import MIN_MEAN_COSINE, MIN_WORST_COSINE

    pc = te_parity[True]
    return {
        "cos_min": pc["cos_min"],
        "cos_mean": pc["cos_mean"],
        "min_worst_cosine": MIN_WORST_COSINE,
        "min_mean_cosine": MIN_MEAN_COSINE,
        "min_speedup": MIN_SPEEDUP,
        "ship_b1": speed(opt1),
        "ship_b16": speed(opt16),
    }


@book.sentence(
    "5",
    "passes-quality",
    "The per-channel encoder passes the audit's quality rule",
    shows="worst cosine {cos_min:.4f}, mean {cos_mean:.4f} (rule {min_worst_cosine}, {min_mean_cosine})",
    depends=("cpu", "runtime", "data"),
)
def _(f):
    return f["cos_min"] >= f["min_worst_cosine"] and f["cos_mean"] >= f["min_mean_cosine"]


@book.sentence(
    "5",
    "clearly-faster",
    "The per-channel encoder is clearly faster than fp32 by the audit's rule at batch 1 and 16",
    shows="{ship_b1} at batch 1, {ship_b16} at batch 16 (whole interval at least {min_speedup}x)",
    depends="speed",
)
def _(f):
    return all_of(at_least(f["ship_b1"], f["min_speedup"]), at_least(f["ship_b16"], f["min_speedup"]))


@book.end
def _(mlp_int8: Any, te_int8: Any) -> None:
    """The course's results store: the MLP and the text encoder, for the report and lesson 06's table."""
    from course_machinery import results

    from ..verdicts import figures

    f = figures("02")
    mlp_metrics = {
        "speedup": f["mlp_speedup"],
        "max_rel_drift": f["mlp_max_rel_drift"],
        "fp32_ms": f["mlp_fp32_ms"],
        "int8_ms": f["mlp_int8_ms"],
    }
    results.record("02", "moons_mlp", "dynamic int8", mlp_metrics, {"weight_type": "QInt8"}, mlp_int8)
    te_metrics = {
        "speedup_vs_optimized_b1": f["te_speedup_b1"],
        "speedup_vs_optimized_b16": f["te_speedup_b16"],
        "speedup_vs_torch_int8_b1": f["ort_vs_torch_b1"],
        "cos_min": f["cos_min"],
        "cos_mean": f["cos_mean"],
        "nn_agreement": f["te_nn_agreement_pc"],
    }
    te_settings = {"weight_type": "QInt8", "per_channel": True, "threads": 2}
    results.record("02", "text_encoder", "dynamic int8 per-channel", te_metrics, te_settings, te_int8)
