"""Self-checks for lesson 06 (past W8A8)."""

from __future__ import annotations

import numpy as np

from .result import CheckResult, needs_answer


def _nbits_node(path, node_name: str):
    import onnx

    graph = onnx.load(str(path)).graph
    nodes = {n.name: n for n in graph.node if n.op_type == "MatMulNBits"}
    if node_name not in nodes:
        raise ValueError(
            f"{node_name!r} is not a MatMulNBits node of {path}; its MatMulNBits nodes include "
            f"{', '.join(list(nodes)[:3])} …"
        )
    node = nodes[node_name]
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    stored = {t.name: t for t in graph.initializer}
    sizes = [
        int(np.prod(stored[name].dims)) * (4 if stored[name].data_type == onnx.TensorProto.FLOAT else 1)
        for name in node.input[1:4]
        if name in stored
    ]
    return attrs, sizes


@needs_answer("answer", hint="codes + scales + zero points, in bytes.")
def check_nbits_bytes(answer, path, node_name: str) -> CheckResult:
    """Exercise (by hand, then check): the bytes a MatMulNBits node's weight takes in the file:
    its packed 4-bit codes, float32 scales and (asymmetric) packed 4-bit zero points."""
    attrs, sizes = _nbits_node(path, node_name)
    K, N, block = attrs["K"], attrs["N"], attrs["block_size"]
    blocks = -(-K // block)
    expected = sum(sizes)
    codes = N * blocks * block // 2
    scales = N * blocks * 4
    if int(answer) == expected:
        return CheckResult(
            True,
            f"{expected:,} bytes: {expected / (K * N):.3f} bytes per weight, "
            f"{K * N * 4 / expected:.1f}x smaller than float32's {K * N * 4:,}.",
        )
    slips = {
        codes: "those are the codes alone; every block also stores a float32 scale",
        K * N: "a 4-bit code takes half a byte: two codes share one byte",
        codes + N * blocks * 2: "the scales are float32 here, 4 bytes each, not 2",
        codes
        + scales: "this file is asymmetric: it also stores one 4-bit zero point per block, two per byte",
        codes
        + scales
        + N * blocks: "zero points are 4-bit too, packed two per byte (a row's count rounded up)",
    }
    hint = slips.get(int(answer), f"count the codes (K·N/2), the scales (4 bytes per block of {block})")
    return CheckResult(False, f"Got {int(answer):,}, expected {expected:,}: {hint}.")


def _weight_scale(path, weight: str) -> float:
    """The scale a QDQ file stores for the quantized weight `weight` (one scale per tensor)."""
    import onnx

    stored = {t.name: t for t in onnx.load(str(path)).graph.initializer}
    name = f"{weight}_scale"
    if name not in stored:
        scales = [n.removesuffix("_scale") for n in stored if n.endswith("weight_scale")]
        raise ValueError(
            f"{path} has no scale for a weight named {weight!r}; its quantized weights include "
            f"{', '.join(scales[:3])} …"
        )
    scale = onnx.numpy_helper.to_array(stored[name])
    if scale.size != 1:
        raise ValueError(
            f"{weight!r} has {scale.size} scales (per channel); this exercise needs one per tensor."
        )
    return float(scale.reshape(()))


@needs_answer("answer", hint="the scale, from the weight's largest |value|.")
def check_int4_scale(answer, path, weight: str) -> CheckResult:
    """Exercise (by hand, then check): the scale `quantize_static` stores for a symmetric INT4
    weight with one scale per tensor and `reduce_range`, from the weight's largest |value|."""
    expected = _weight_scale(path, weight)
    absmax = expected * 3.5
    if np.isclose(float(answer), expected, rtol=1e-5):
        return CheckResult(
            True,
            f"scale {expected:.6g} = 2·max|w| / 7: with reduce_range the range is [−4, 3], 7 steps, so "
            f"the largest weight ({absmax:.4g}) sits 3.5 steps from zero and rounds to the code ±4.",
        )
    slips = {
        absmax
        / 7.5: "that is the scale without reduce_range: [−8, 7] has 15 steps; reduce_range takes [−4, 3]",
        absmax / 7: "that is the symmetric ±7 of lesson 01; ONNX Runtime's reduce_range range is [−4, 3]",
        absmax / 8: "INT4's most negative code is −8, but reduce_range takes the range [−4, 3]",
        absmax / 4: "the range is [−4, 3], and the scale is 2·max|w| / (qmax − qmin) = 2·max|w| / 7",
        absmax / 3: "the range is [−4, 3], and the scale is 2·max|w| / (qmax − qmin) = 2·max|w| / 7",
    }
    hint = next(
        (why for value, why in slips.items() if np.isclose(float(answer), value, rtol=1e-5)),
        "start from max|w|, the weight's largest magnitude, and the range [−4, 3]",
    )
    return CheckResult(False, f"Got {float(answer):.6g}, expected {expected:.6g}: {hint}.")


@needs_answer("prediction", message="Write your guess in answer_2_guess first (section 2), before you count.")
def check_a16w8_integer_kernels(prediction, answer, a16w8_path) -> CheckResult:
    """Exercise (predict, then check): how many of the A16W8 file's compute ops run on integer
    kernels here. Lesson 03's check, with this lesson's names in its messages."""
    from .lesson03 import check_integer_kernels

    return check_integer_kernels(prediction, answer, a16w8_path)


@needs_answer("answer", hint="the set of labels that pass, e.g. {label for label, p in ... if ...}.")
def check_ship_verdicts(answer, parities: dict) -> CheckResult:
    """Exercise (interpret, then write the code): the set of variants that pass lesson 04's
    acceptance rule, from their parities with fp32 (computed with labels). The expected set is
    computed here with `measure.acceptance`."""
    from ..measure import acceptance

    if isinstance(answer, str) or not hasattr(answer, "__iter__"):
        return CheckResult(False, f"Got {answer!r}; write a set of labels, the keys of resnet_parities.")
    answer = set(answer)
    unknown = sorted(map(str, answer - set(parities)))
    if unknown:
        return CheckResult(
            False, f"{unknown[0]!r} is not one of the variants: {', '.join(map(repr, parities))}."
        )
    verdicts = {label: acceptance(p) for label, p in parities.items()}
    expected = {label for label, v in verdicts.items() if v.passes}
    if answer == expected:
        names = ", ".join(sorted(expected)) or "none"
        return CheckResult(True, f"These pass lesson 04's rule: {names}. The others are not ones to ship.")
    hints = []
    for label in sorted(answer - expected):
        v = verdicts[label]
        hints.append(
            f"{label!r} fails: it loses {v.drop_points:.2f} points of accuracy with {v.agreement:.2%} agreement; "
            "the rule needs at most 0.5 points and more than 99 % together. Winning back most of a loss is not "
            "passing"
        )
    for label in sorted(expected - answer):
        v = verdicts[label]
        hints.append(
            f"{label!r} passes: {v.drop_points:.2f} points lost, {v.agreement:.2%} agreement. The rule is "
            "about accuracy and agreement only; a slow file can pass it (speed is the next question)"
        )
    return CheckResult(False, "Not quite. " + "; ".join(hints) + ".")


def _fastest(rows, model: str, size_target: bool):
    """Lesson 06's rule on its table: of `model`'s rows that meet the quality floor (and, with
    `size_target`, the size target) and were timed at the ranked setting, the fastest, or None."""
    qualified = [
        r
        for r in rows
        if r.get("_model") == model
        and r.get("quality floor") == "✔"
        and (r.get("size target") == "✔" or not size_target)
        and r.get("_speedup")
    ]
    return max(qualified, key=lambda r: r["_speedup"], default=None)


@needs_answer("answer", hint='the "option" of the row the rule picks without the size target.')
def check_pick_without_size_target(answer, rows, model: str) -> CheckResult:
    """Exercise (change the rule, then write the code): the row lesson 06's rule picks for `model`
    once the size target is dropped: the fastest, at the ranked setting, of the rows that meet the
    quality floor. `rows` are the lesson's table rows ("option", "quality floor", "size target",
    "_model", "_speedup")."""
    if isinstance(answer, dict):  # the row itself
        answer = answer.get("option")
    options = {r["option"]: r for r in rows if r.get("_model") == model}
    if answer not in options:
        return CheckResult(
            False, f"{answer!r} is not an option of this model's rows: {', '.join(map(repr, options))}."
        )
    expected, with_size = _fastest(rows, model, False), _fastest(rows, model, True)
    if expected is None:
        return CheckResult(
            False,
            "No row meets the quality floor and was timed at the ranked setting on this run: the rule picks "
            "none, and there is no option to name.",
        )
    if answer == expected["option"]:
        if with_size is not None and with_size["option"] == answer:
            note = "the same row as with the size target: on this run dropping it changes nothing"
        else:
            note = (
                f"with the size target the rule picks {with_size['option'] if with_size else 'none'}; without "
                f"it, speed wins, and the file keeps {expected['of fp32']} of fp32's bytes"
            )
        return CheckResult(
            True, f"{answer}: the fastest row that meets the quality floor ({expected['speed']}); {note}."
        )
    r = options[answer]
    if r.get("quality floor") != "✔":
        hint = f"{answer} misses the quality floor ({r['quality']}): quality comes first, whatever the speed"
    elif not r.get("_speedup"):
        hint = f"{answer} was not timed at the ranked setting ({r['speed']}), so the rule cannot rank it"
    elif with_size is not None and answer == with_size["option"]:
        hint = (
            f"that is the pick with the size target; without it {expected['option']} competes too, and runs "
            f"faster ({expected['speed']} against {r['speed']})"
        )
    else:
        hint = f"{expected['option']} also meets the floor and runs faster ({expected['speed']} against {r['speed']})"
    return CheckResult(False, f"Not quite: {hint}.")


@needs_answer(
    "guess", message="Write your guess in answer_a_guess first (section 3), before the files are scored."
)
def check_ship_prediction(guess, answer, parities: dict) -> CheckResult:
    """Exercise (predict, then write the code): the set of ResNet18 files that pass lesson 04's
    acceptance rule, guessed before the files were scored (`guess`), then computed (`answer`).
    The answer is checked as `check_ship_verdicts` checks it; the feedback then says how the
    guess compared."""
    if isinstance(guess, str) or not hasattr(guess, "__iter__"):
        return CheckResult(
            False, f"Got the guess {guess!r}; write a set of labels, the keys of resnet_parities."
        )
    result = check_ship_verdicts(answer, parities)
    if not result:
        return result
    from ..measure import acceptance

    expected = {label for label, p in parities.items() if acceptance(p).passes}
    guess = set(guess)
    if guess == expected:
        return CheckResult(True, f"You predicted it. {result.message}")
    missed = ", ".join(sorted(map(str, expected - guess))) or "none"
    extra = ", ".join(sorted(map(str, guess - expected))) or "none"
    return CheckResult(
        True,
        f"{result.message} Your guess differed: it left out {missed} and counted {extra}. A file that wins back "
        "most of what rounding lost can still fail the rule, and a slow file can pass it: the rule reads "
        "accuracy and agreement only.",
    )
