"""Self-checks for lesson 06 (past W8A8) and its optional lessons 06b (static INT8, the bytes and
profile of 4-bit files) and 06c (quantization-aware training)."""

from __future__ import annotations

import numpy as np

from .result import CheckResult, invalid, needs_answer, wrong


# ---------------------------------------------------------------------------------------------------
# Lesson 06
# ---------------------------------------------------------------------------------------------------
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
    return wrong(f"Got {int(answer):,}: {hint}.", expected)


@needs_answer("answer", hint="the share of A8W8's drift that its activations cause, between 0 and 1.")
def check_activation_share(answer, a8w8_parity, a16w8_parity) -> CheckResult:
    """Exercise (interpret, then compute): A16W8 keeps A8W8's weights and makes the activations'
    rounding nearly free, so its drift estimates the weights' part of A8W8's; the rest of A8W8's
    drift is the activations' share."""
    try:
        share = float(answer)
    except (TypeError, ValueError):
        return invalid(f"Got {answer!r}; write a number between 0 and 1.")
    d8, d16 = a8w8_parity.mean_abs_drift, a16w8_parity.mean_abs_drift
    expected = 1 - d16 / d8
    if abs(share - expected) < 0.01:
        return CheckResult(
            True,
            f"About {expected:.0%}: A16W8 still drifts {d16:.4f} against A8W8's {d8:.4f}, and that part is the "
            "weights' 8-bit rounding. The rest is what 8-bit activations add: the part calibration and "
            "activation types can win back, and weight precision cannot.",
        )
    if abs(share - d16 / d8) < 0.01:
        hint = "that is the part A16W8 keeps, the weights' share; the activations cause the rest"
    elif abs(share - (d8 - d16)) < 1e-4:
        hint = "that is a difference of mean drifts, in logits; divide it by A8W8's drift to make it a share"
    elif 1 < share <= 100:
        hint = "write the share as a fraction of A8W8's drift, not in per cent"
    else:
        hint = "compare the two files' mean_abs_drift: what A16W8 still drifts is the weights' part"
    return wrong(f"Not this run's share: {hint}.", expected)


def _fastest(rows, model: str, size_target: bool):
    """Lesson 06's rule on its table: of `model`'s rows that meet the quality floor (and, with
    `size_target`, the size target) and were timed in turn, the fastest, or None."""
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
    once the size target is dropped: the fastest of the rows that meet the quality floor and were
    timed in turn. `rows` are the lesson's table rows ("option", "quality floor", "size target",
    "_model", "_speedup")."""
    if isinstance(answer, dict):  # the row itself
        answer = answer.get("option")
    options = {r["option"]: r for r in rows if r.get("_model") == model}
    if answer not in options:
        return invalid(f"{answer!r} is not an option of this model's rows: {', '.join(map(repr, options))}.")
    expected, with_size = _fastest(rows, model, False), _fastest(rows, model, True)
    if expected is None:
        return invalid(
            "No row meets the quality floor and was timed in turn on this run: the rule picks none, and "
            "there is no option to name."
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
        hint = f"{answer} was not timed in turn here ({r['speed'] or 'no speed'}), so the rule cannot rank it"
    elif with_size is not None and answer == with_size["option"]:
        hint = (
            "that is the pick with the size target; without it, rows that keep more of fp32's bytes compete "
            "too: compare the speeds of every row with ✔ in the quality floor column"
        )
    else:
        hint = f"another row that meets the floor runs faster than {answer}'s {r['speed']}"
    return wrong(f"Not quite: {hint}.", expected["option"])


# ---------------------------------------------------------------------------------------------------
# Lesson 06b
# ---------------------------------------------------------------------------------------------------
def _decoded_nbits(graph, zero_point: str = "stored"):
    """The first MatMulNBits weight of `graph` decoded to a (K, N) float32 array, and each weight's
    step. `zero_point`: "stored" (the file's own), or "8" (the symmetric files' implied one)."""
    import onnx

    from course_lib.integers import unpack_int4

    graph = getattr(graph, "graph", graph)
    node = next((n for n in graph.node if n.op_type == "MatMulNBits"), None)
    if node is None:
        raise ValueError("This graph holds no MatMulNBits node; pass the graph MatMulNBitsQuantizer wrote.")
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    K, N, block = attrs["K"], attrs["N"], attrs["block_size"]
    blocks = -(-K // block)
    stored = {t.name: onnx.numpy_helper.to_array(t) for t in graph.initializer if t.name in node.input}
    packed, scales = stored[node.input[1]], stored[node.input[2]].reshape(N, blocks, 1)
    codes = unpack_int4(packed, N * blocks * block, signed=False).reshape(N, blocks, block).astype(np.float32)
    if zero_point == "8" or len(node.input) < 4 or node.input[3] not in stored:
        zp = np.full((N, blocks, 1), 8, np.float32)
    else:
        zps = stored[node.input[3]].reshape(N, -1)
        zp = np.stack([unpack_int4(row, blocks, signed=False) for row in zps]).astype(np.float32)[..., None]
    decoded = ((codes - zp) * scales).reshape(N, -1)[:, :K].T
    step = np.abs(np.repeat(scales.reshape(N, blocks), block, axis=1)[:, :K].T)
    return decoded, step


@needs_answer("guess", message='Write your guess in answer_1_guess first: "none" or "some".')
@needs_answer("answer", hint="decode the weight: (code − zero point) · scale, as a (K, N) array.")
def check_asymmetric_decode(guess, answer, graph, original) -> CheckResult:
    """Exercise (predict, then decode): the first MatMulNBits weight of an asymmetric file decoded
    by hand with its packed 4-bit zero points, against the float32 weight it replaced; the guess
    says whether any weight lands more than half a step off."""
    said = str(guess).strip().lower()
    if said not in ("none", "some"):
        return invalid(f'Got the guess {guess!r}; answer with one word: "none" or "some".')
    expected, step = _decoded_nbits(graph)
    mine = np.asarray(answer, dtype=np.float64)
    if mine.shape != expected.shape:
        flipped = (
            " (transposed: the weight is K inputs by N outputs)" if mine.shape == expected.shape[::-1] else ""
        )
        return invalid(f"Got an array of shape {mine.shape}; the weight is {expected.shape}{flipped}.")
    if not np.allclose(mine, expected, rtol=1e-5, atol=1e-7):
        with_eight, _ = _decoded_nbits(graph, zero_point="8")
        if np.allclose(mine, with_eight, rtol=1e-5, atol=1e-7):
            hint = (
                "you subtracted 8, the zero point symmetric files imply; this file stores one per block: "
                "unpack them from the zero-point tensor, two per byte, low nibble first"
            )
        else:
            off = int((~np.isclose(mine, expected, rtol=1e-5, atol=1e-7)).sum())
            hint = (
                f"{off:,} of {mine.size:,} values differ from the file's: each column stores its zero points "
                "in a row of bytes, two per byte with the low nibble first; a weight is (code − zero point) · "
                "scale, with the block's scale"
            )
        return wrong(f"Not the file's weights: {hint}.")
    far_off = int((np.abs(expected - np.asarray(original)) / step > 0.5 + 1e-4).sum())
    actual = "none" if far_off == 0 else "some"
    verdict = "as you predicted" if said == actual else f"you predicted {said}"
    if far_off == 0:
        why = (
            "an asymmetric block maps its own minimum and maximum onto the ends of 0..15, so no weight "
            "falls outside the grid, and rounding moves each by half a step at most"
        )
    else:
        why = "the grid's ends, rounded onto whole codes, cut off a few of the extreme weights"
    return CheckResult(
        True, f"Decoded right. {far_off:,} weights land more than half a step off, {verdict}: {why}."
    )


# ---------------------------------------------------------------------------------------------------
# Lesson 06c
# ---------------------------------------------------------------------------------------------------
def _int4_weights(path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """{weight name: (codes, scale)} of every INT4 weight a QDQ file stores."""
    import onnx

    stored = {t.name: t for t in onnx.load(str(path)).graph.initializer}
    out = {}
    for name, t in stored.items():
        base = name.removesuffix("_quantized")
        if name.endswith("_quantized") and t.data_type == onnx.TensorProto.INT4 and f"{base}_scale" in stored:
            codes = onnx.numpy_helper.to_array(t).astype(np.float32)
            out[base] = (codes, onnx.numpy_helper.to_array(stored[f"{base}_scale"]).astype(np.float32))
    return out


@needs_answer("guess", message='Write your guess in answer_a_guess first: "passes" or "fails".')
@needs_answer("answer", hint="quantize with per_channel=True and put the file's path in answer_a.")
def check_per_channel_int4(guess, answer, test) -> CheckResult:
    """Exercise (predict, then measure): a 4-bit file with one scale per output channel, scored
    against fp32 on `test` (a scoring.TestSet) by lesson 04's acceptance rule; the guess says
    whether it passes."""
    from pathlib import Path

    from course_lib.measure import acceptance, logits, parity

    said = str(guess).strip().lower()
    if said not in ("passes", "fails"):
        return invalid(f'Got the guess {guess!r}; answer with one word: "passes" or "fails".')
    if not Path(answer).is_file():
        return invalid(f"{answer} does not exist: run quantize_static(opset21, answer_a, ...) first.")
    weights = _int4_weights(answer)
    if not weights:
        return invalid("Your file stores no INT4 weight: quantize with weight_type=QuantType.QInt4.")
    if all(scale.size == 1 for _, scale in weights.values()):
        return invalid("Your file has one scale per weight tensor: pass per_channel=True.")
    found = parity(
        test.fp32_logits, logits(answer, {test.input_name: test.x}, threads=test.threads), test.labels
    )
    verdict = acceptance(found)
    actual = "passes" if verdict.passes else "fails"
    compared = "as you predicted" if said == actual else f"not as you predicted ({said})"
    return CheckResult(
        True,
        f"One scale per channel: accuracy {found.candidate_accuracy:.2%} against fp32's "
        f"{found.reference_accuracy:.2%}, agreement {found.agreement_text()}. It {actual} lesson 04's rule "
        f"({verdict.advice}), {compared}. Each channel's scale now follows its own largest weight, so the "
        "small channels keep their levels instead of rounding to zero.",
    )


@needs_answer("function", hint="define fake_quant_per_channel(w) and pass the function itself.")
def check_per_channel_fake_quant(function, int4_path, fp32_path) -> CheckResult:
    """Exercise (write the code): a fake quantizer that rounds each output channel as
    `quantize_static` does for an INT4 weight with one scale per channel and reduce_range, checked
    against the codes and scales the per-channel file stores, and for its straight-through gradient."""
    from pathlib import Path

    import onnx
    import torch

    if not callable(function):
        return invalid(f"Got {function!r}; pass the function itself, fake_quant_per_channel, not a call.")
    if int4_path is None or not Path(int4_path).is_file():
        return invalid("Exercise A's file is not there yet: do exercise A first (answer_a).")
    weights = _int4_weights(int4_path)
    if not weights or all(scale.size == 1 for _, scale in weights.values()):
        return invalid("The file has no per-channel INT4 weight: do exercise A first (per_channel=True).")
    floats = {t.name: onnx.numpy_helper.to_array(t) for t in onnx.load(str(fp32_path)).graph.initializer}
    differ = total = 0
    slip = None
    for name, (codes, scale) in weights.items():
        w = torch.tensor(floats[name], requires_grad=True)
        got = function(w)
        if not isinstance(got, torch.Tensor) or tuple(got.shape) != tuple(w.shape):
            return invalid(
                f"For {name} your function returned {type(got).__name__}; return a tensor shaped like w."
            )
        want = codes * scale.reshape(-1, *[1] * (codes.ndim - 1))
        mine = got.detach().numpy()
        bad = ~np.isclose(mine, want, rtol=1e-6, atol=1e-8)
        differ, total = differ + int(bad.sum()), total + bad.size
        if bad.any() and slip is None:
            per_tensor = np.clip(
                np.round(floats[name] / np.float32(2 * np.abs(floats[name]).max() / 7)), -8, 7
            )
            if np.array_equal(mine, codes):
                slip = "it returns the codes; return them times the scale, code · scale, as floats"
            elif np.allclose(mine / np.float32(2 * np.abs(floats[name]).max() / 7), per_tensor, atol=1e-4):
                slip = "it uses one scale for the whole tensor; take each output channel's own max|w|"
        if not bad.any():
            if got.requires_grad:
                got.sum().backward()
            if w.grad is None or not torch.allclose(w.grad, torch.ones_like(w)):
                return wrong(
                    "The values are right, but the gradient does not pass straight through: return "
                    "w + (rounded − w).detach(), as fake_quant does."
                )
    if differ:
        hint = slip or (
            "compare each output channel's scale with 2·max|w| / 7 over that channel (every axis but the "
            "first), rounded half to even and clipped to [−8, 7]"
        )
        return wrong(f"{differ:,} of {total:,} values differ from the file's: {hint}.")
    return CheckResult(
        True,
        f"Every one of the {total:,} weights of the {len(weights)} layers rounds to the file's value, and the "
        "gradient passes straight through: training with this fake quantizer would train the weights that "
        "quantize_static(per_channel=True) writes.",
    )
