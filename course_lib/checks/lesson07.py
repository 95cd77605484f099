"""Self-checks for lesson 07 (your own model: the NanoGPT and the audit)."""

from __future__ import annotations

from .result import CheckResult, needs_answer, speedup_interval

_VERDICTS = {True: "faster", False: "slower", None: "unsettled"}


def check_nanogpt_prediction(guess, answer, comparison) -> CheckResult:
    """Exercise 1 (predict, then interpret): is dynamic INT8 `"faster"` or `"slower"` than fp32 for
    the NanoGPT at batch 1 on this CPU, or `"unsettled"`? `comparison`: the fp32/INT8
    `LatencyComparison`; `guess`: the prediction written before measuring."""
    expected = _VERDICTS[comparison.speedup_at_least(1.0)]
    got = answer.strip().lower() if isinstance(answer, str) else None
    if got not in _VERDICTS.values():
        return CheckResult(False, f'Got {answer!r}; answer "faster", "slower" or "unsettled".')
    if got != expected:
        hint = {
            "faster": "the whole interval lies above 1x (fp32's time over INT8's), so INT8 is faster.",
            "slower": "the whole interval lies below 1x, so INT8 is slower.",
            "unsettled": "the interval reaches both sides of 1x: this run cannot say which is faster.",
        }[expected]
        return CheckResult(
            False, f"Got {answer!r}, expected {expected!r}: {speedup_interval(comparison)}; {hint}"
        )
    said = guess.strip().lower() if isinstance(guess, str) else None
    if said not in _VERDICTS.values():
        note = "(write your prediction in answer_1_guess before section 3 next time)"
    elif said == expected:
        note = "and you predicted it."
    else:
        note = f"you predicted {said!r}."
    why = (
        " The seed's NanoGPT ran slower with INT8; its figures name no CPU, batch or runtime version. Here the "
        "MatMuls are small (64 channels), so fixed costs (quantizing each activation, the float ops between "
        "the MatMuls) weigh as much as the integer arithmetic saves: whether INT8 wins is a property of "
        "this CPU's kernels, which is why the course measures it."
    )
    return CheckResult(True, f"{expected.capitalize()}: {speedup_interval(comparison)}; {note}{why}")


def check_audit_lessons(answer, result) -> CheckResult:
    """Exercise 2 (interpret): for each measured variant of an audit, the lesson (a number such as
    "02") that teaches how it is built. `result`: the `AuditResult`; `answer`: {variant: lesson}."""
    measured = {v.name: v.lesson[:2] for v in result.variants if v.quality is not None}
    if not isinstance(answer, dict) or not answer:
        names = ", ".join(repr(n) for n in measured)
        return CheckResult(False, f"No answer yet: a dict {{variant: lesson number}} for {names}.")
    missing = sorted(set(measured) - set(answer))
    if missing:
        return CheckResult(False, f"Give a lesson for every measured variant; missing: {', '.join(missing)}.")
    wrong = {n: str(answer[n]).zfill(2)[:2] for n in measured if str(answer[n]).zfill(2)[:2] != measured[n]}
    if wrong:
        name, said = next(iter(wrong.items()))
        hint = {
            "02": "quantize_dynamic, which quantizes activations at run time, is lesson 02's",
            "03": "quantize_static with a calibration reader and QDQ nodes is lesson 03's",
            "06": "weight-only 4-bit (MatMulNBits) is lesson 06's",
        }.get(measured[name], f"it is built in lesson {measured[name]}")
        return CheckResult(False, f"{len(wrong)} not right yet. {name!r}: you said {said}, but {hint}.")
    verdicts = {kind for kind, _ in result.decision.verdicts.values()}
    explains = "lesson 04 explains a failed quality rule, " if "fails" in verdicts else ""
    return CheckResult(
        True,
        f"Right for all {len(measured)} variants. The verdict column comes from other lessons: {explains}"
        "lesson 05 every speed word (an interval wholly above 1x, or tied when two overlap).",
    )


@needs_answer("answer", hint="the parameters times one byte each, in MB (1 MB = 1e6 bytes).")
def check_int8_floor(answer, parameters: int, file_bytes: int) -> CheckResult:
    """Exercise 3 (write code): the smallest file, in MB, that `parameters` weights can make when
    each is stored in one byte (no scales, no graph), beside the INT8 file that was written."""
    expected = parameters / 1e6
    got = float(answer)
    if abs(got - expected) <= 0.005:
        return CheckResult(
            True,
            f"{expected:.2f} MB: one byte per weight is a floor no INT8 file goes below, so a 210k-parameter "
            f"model cannot be 0.03 MB in INT8. The file written here is {file_bytes / 1e6:.2f} MB: the "
            "float parts (LayerNorms, biases, scales), the graph and its metadata come on top.",
        )
    if abs(got - expected * 4) <= 0.02:
        return CheckResult(
            False, f"Got {got:.2f} MB: that is 4 bytes per weight, float32's size. INT8 is one byte."
        )
    if abs(got - parameters / 2**20) <= 0.002:
        return CheckResult(False, f"Got {got:.3f}: the course's MB is 1e6 bytes, not 2**20.")
    return CheckResult(
        False, f"Got {got:.3f} MB, expected {expected:.2f} MB: {parameters:,} parameters x 1 byte."
    )


def check_rule_against_perplexity(
    answer, result, fp32_perplexity: float, windows, *, tolerance: float = 0.02, perplexity=None
) -> CheckResult:
    """Exercise 4 (write code, then interpret): the variants that pass the audit's output rule
    (cosine with fp32) yet raise the NanoGPT's perplexity on `windows` by more than `tolerance`.
    `result`: the `AuditResult`; `perplexity(path, windows)`: `nanogpt.perplexity` unless given."""
    if perplexity is None:
        from ..nanogpt import perplexity
    measured = [v for v in result.variants if v.quality is not None]
    ppl = {v.name: perplexity(v.path, windows) for v in measured}
    limit = (1 + tolerance) * fp32_perplexity
    expected = [v.name for v in measured if v.quality.passes and ppl[v.name] > limit]
    if answer is None or isinstance(answer, str) or not hasattr(answer, "__iter__"):
        return CheckResult(
            False,
            f"Got {answer!r}; give a list of variant names (an empty list if none), from: "
            + ", ".join(repr(n) for n in ppl)
            + ".",
        )
    got = list(answer)
    unknown = [n for n in got if n not in ppl]
    if unknown:
        return CheckResult(False, f"{unknown[0]!r} is not a variant the audit measured: {', '.join(ppl)}.")

    def rise(name: str) -> str:
        return f"{name} {ppl[name]:.3f} ({ppl[name] / fp32_perplexity - 1:+.1%})"

    if set(got) != set(expected):
        missed, extra = sorted(set(expected) - set(got)), sorted(set(got) - set(expected))
        if missed:
            return CheckResult(
                False,
                f"Missing {rise(missed[0])}: it passes the rule, and its perplexity is more than "
                f"{tolerance:.0%} above fp32's {fp32_perplexity:.3f}.",
            )
        name = extra[0]
        why = (
            "fails the audit's rule, so the rule did not let it through"
            if not next(v for v in measured if v.name == name).quality.passes
            else f"is within {tolerance:.0%} of fp32's {fp32_perplexity:.3f}"
        )
        return CheckResult(False, f"Not {rise(name)}: it {why}.")
    kept = [v.name for v in measured if v.quality.passes and ppl[v.name] <= limit]
    said = (
        f"The rule let through {', '.join(rise(n) for n in expected)}: outputs close in direction (cosine) "
        "can still move the probability of the right character enough to show in perplexity."
        if expected
        else "Here every variant that passed the rule also kept its perplexity."
    )
    return CheckResult(
        True,
        f"Right. {said} Passed and within {tolerance:.0%}: {', '.join(kept) or 'none'}. The rule knows only "
        "the outputs, so it is a floor for any model: judge a model by its own task's measure (lesson 04) "
        "before you ship it.",
    )


def check_serve_batch(guess, answer, first) -> CheckResult:
    """Exercise 5 (predict, then check): the audit of your model again, deciding at batch 1 (the
    batch an online service serves), against `first`, the audit that decided at its largest batch.
    `guess`: "same" or "different", the recommendation predicted before running it."""
    said = guess.strip().lower() if isinstance(guess, str) else None
    if said not in ("same", "different"):
        return CheckResult(False, 'Write "same" or "different" in answer_5_guess first, before you run it.')
    if answer is None:
        return CheckResult(False, "No answer yet: run audit.audit(..., serve_batch=1) on your model.")
    decision = getattr(answer, "decision", None)
    if decision is None or getattr(decision, "batch", None) != 1:
        at = getattr(decision, "decided_at", "no decision")
        return CheckResult(False, f"This audit decided at {at}; pass serve_batch=1 so it decides at batch 1.")
    before, now = first.decision.recommended, decision.recommended
    outcome = "same" if before == now else "different"
    why = (
        f"at batch {first.decision.batch} it recommended {before or 'nothing'}, at batch 1 {now or 'nothing'}. "
        "A file's gain moves with the batch (lesson 05): at batch 1 a run is short, so fixed costs weigh "
        "more and the weights are read once per image; decide at the batch you serve."
    )
    if said == outcome:
        return CheckResult(True, f"{outcome.capitalize()}, as you predicted: {why}")
    return CheckResult(True, f"{outcome.capitalize()}; you predicted {said}: {why}")
