"""Self-checks for lesson 07 (your own model: the NanoGPT and the audit)."""

from __future__ import annotations

from types import SimpleNamespace

from .result import CheckResult, invalid, needs_answer, wrong


def _close(a: float, b: float, rel: float = 0.005) -> bool:
    return abs(a - b) <= rel * max(abs(b), 1e-12)


@needs_answer(
    "guess", message="Write your guess in answer_1_guess first, a speed-up such as 1.5, before you compute."
)
@needs_answer("answer", hint="the total time over the time left once the quantized ops cost nothing.")
def check_matmul_ceiling(guess, answer, profile, ops) -> CheckResult:
    """Exercise 1 (predict, then compute): how many times faster a file would run if the op types
    `ops` (its quantized MatMuls) took no time at all, from its profile: Amdahl's ceiling,
    total / (total - their time)."""
    total = float(profile.total_ms)
    theirs = sum(ms for op, ms in profile.ms_per_run.items() if op in set(ops))
    if not 0 < theirs < total:
        return invalid("This profile holds none of those op types: profile the dynamic file, `dynamic`.")
    share = theirs / total
    expected = total / (total - theirs)
    try:
        got, guessed = float(answer), float(guess)
    except (TypeError, ValueError):
        return invalid(f"Got {answer!r} and {guess!r}; give two numbers, speed-ups such as 1.5.")
    if _close(got, expected):
        said = (
            "close to it"
            if abs(guessed - expected) <= 0.1 * expected
            else ("above it" if guessed > expected else "below it")
        )
        return CheckResult(
            True,
            f"At most {expected:.2f}x: the quantized MatMuls take {share:.0%} of the kernel time, so even "
            f"free MatMuls leave {1 - share:.0%} of it. Your guess, {guessed:.2f}x, was {said}. On a model "
            "this small a faster integer kernel has little left to win: the gain of INT8 is capped by the "
            "share of the time its kernels take (Amdahl's law), which is why lesson 05 looks at the profile "
            "before it expects a speed-up.",
        )
    slips = {
        share: "That is the share of the time they take; the ceiling is how many times faster the run "
        "gets when that share costs nothing.",
        1 - share: "That is the share of the time that is left; a run that takes that share of its time "
        "runs the inverse of it times faster.",
        1 / share: "That would be the gain if everything but the quantized ops cost nothing.",
        1 + share: "That adds the share to one; the run's time becomes the total minus their time, and the "
        "speed-up is the total over that.",
    }
    hint = next(
        (why for value, why in slips.items() if _close(got, value)),
        "Add up profile.ms_per_run for the op types in `quantized`, then divide the total by the time left.",
    )
    return wrong(f"Got {got:.3f}. {hint}", expected)


def _stand_in(name: str, passes: bool | None, ratio: tuple[float, float, float] | None, batch: int):
    quality = None if passes is None else SimpleNamespace(passes=passes)
    speed = (
        {}
        if ratio is None
        else {batch: SimpleNamespace(speedup=ratio[0], speedup_low=ratio[1], speedup_high=ratio[2])}
    )
    return SimpleNamespace(name=name, quality=quality, speed=speed)


# Tables the speed rule is tried on, each with the name it must return (None: no variant qualifies).
_TABLES = [
    (
        [
            ("fast but fails", False, (1.9, 1.8, 2.0)),
            ("clearly faster", True, (1.4, 1.3, 1.5)),
            ("faster still, but not clearly", True, (1.6, 1.0, 2.2)),
            ("slower", True, (0.8, 0.7, 0.9)),
        ],
        "clearly faster",
    ),
    (
        [
            ("on the line", True, (1.2, 1.05, 1.3)),
            ("just below the line", True, (1.3, 1.04, 1.6)),
            ("set aside", None, None),
        ],
        "on the line",
    ),
    ([("a tie with fp32", True, (1.02, 0.98, 1.06)), ("fails", False, (1.5, 1.4, 1.6))], None),
    ([("second", True, (1.2, 1.1, 1.3)), ("first", True, (1.5, 1.1, 1.9)), ("untimed", True, None)], "first"),
]


def _rule(variants, batch: int) -> str | None:
    """The audit's speed rule, without its tie-break: the fastest variant that passes and whose
    interval's low end reaches 1.05x at `batch`."""
    fast = [
        v
        for v in variants
        if v.quality is not None
        and v.quality.passes
        and batch in v.speed
        and v.speed[batch].speedup_low >= 1.05
    ]
    return max(fast, key=lambda v: v.speed[batch].speedup).name if fast else None


@needs_answer("pick", hint="write pick(variants, batch), then set answer_2 = pick.")
def check_speed_rule(pick, result) -> CheckResult:
    """Exercise 2 (write code): `pick(variants, batch)`, the audit's speed rule (the fastest variant
    that passes its quality rule and is at least 5 % faster than fp32 over its whole interval), run
    on the audit's own variants and on planted tables."""
    if not callable(pick):
        return invalid(
            f"Got a {type(pick).__name__}; set answer_2 to your function, pick, without calling it."
        )
    batch = result.decision.batch
    cases = [(list(result.variants), _rule(result.variants, batch), "this audit's variants", batch, [])]
    for rows, name in _TABLES:
        variants = [_stand_in(n, p, r, 8) for n, p, r in rows]
        cases.append((variants, name, "a table of the check's own", 8, rows))
    for variants, expected, where, at, rows in cases:
        try:
            got = pick(variants, at)
        except Exception as exc:  # the learner's code: say what failed
            return invalid(
                f"pick raised {type(exc).__name__} on {where}: {str(exc)[:160]}. A variant set aside has "
                "quality None, and one not timed at a batch has no entry for it in v.speed."
            )
        got = getattr(got, "name", got)
        if got == expected:
            continue
        if where == "this audit's variants":
            return wrong("On this audit's variants pick names another variant than the rule does.", expected)
        names = {n: (p, r) for n, p, r in rows}
        passes, ratio = names.get(got, (None, None))
        if got is not None and got not in names:
            hint = "it returned something that is not a variant's name; return v.name."
        elif got is not None and not passes:
            hint = "it chose a variant that fails the quality rule (or has no quality)."
        elif got is not None and ratio and ratio[1] < 1.05:
            hint = "it chose a variant whose interval reaches below 1.05x: compare speedup_low, not speedup."
        elif got is None:
            hint = "it returned None where a variant qualifies: 1.05 itself is enough (>=)."
        else:
            hint = "among the variants that qualify, it did not take the highest speedup."
        return wrong(f"On {where}, {hint}", expected)
    chosen = result.decision.recommended
    tied = (
        f" The audit also weighed ties: {', '.join(result.decision.tied)} overlapped the fastest, and it"
        if result.decision.tied
        else " The audit"
    )
    return CheckResult(
        True,
        f"Your rule agrees with the audit's on its variants and on {len(_TABLES)} tables of the check's own."
        f"{tied} recommends "
        f"{chosen or 'nothing'} at batch {batch}: among variants whose intervals overlap the fastest, it takes "
        "the one closest to fp32, then the smaller file. A speed word is an interval's, never a median's: "
        "a variant whose interval reaches below 1.05x may be no faster on the next run.",
    )


@needs_answer(
    "guess", message="Write your guess in answer_3_guess first, a share from 0 to 1, before you compute."
)
@needs_answer("answer", hint="the int8 initializers' bytes over the file's size.")
def check_int8_share(guess, answer, path) -> CheckResult:
    """Exercise 3 (predict, then compute): the share of a dynamic INT8 file's bytes that are its int8
    weights; the feedback names what the rest is (float tensors, the mask, the graph's nodes)."""
    from pathlib import Path

    import onnx
    from onnx import numpy_helper

    path = Path(path)
    size = path.stat().st_size
    model = onnx.load(path)
    by_type: dict[str, int] = {}
    for tensor in model.graph.initializer:
        array = numpy_helper.to_array(tensor)
        by_type[str(array.dtype)] = by_type.get(str(array.dtype), 0) + array.nbytes
    int8 = by_type.get("int8", 0)
    expected = int8 / size
    try:
        got, guessed = float(answer), float(guess)
    except (TypeError, ValueError):
        return invalid(f"Got {answer!r} and {guess!r}; give two shares from 0 to 1.")
    if not (0 <= got <= 1 and 0 <= guessed <= 1):
        return invalid("Give shares from 0 to 1 (0.5 for half the file), not bytes or per cent.")
    if _close(got, expected, 0.01):
        others = sum(b for t, b in by_type.items() if t != "int8")
        nodes = sum(len(n.SerializeToString()) for n in model.graph.node)
        rest = ", ".join(
            f"{t} {b:,}" for t, b in sorted(by_type.items(), key=lambda kv: -kv[1]) if t != "int8"
        )
        return CheckResult(
            True,
            f"{expected:.1%} of the file's {size:,} bytes are int8 weights ({int8:,} bytes); you guessed "
            f"{guessed:.0%}. The other tensors take {others:,} bytes ({rest}: the float LayerNorms, biases "
            f"and scales, the causal mask, the quantized embedding), and the graph's {len(model.graph.node)} "
            f"nodes {nodes:,} bytes, most of it the metadata the exporter writes on each node. One byte per "
            "weight is a floor that a small model's file sits well above: the quote's 0.03 MB cannot hold "
            "210,000 weights.",
        )
    everything = sum(by_type.values())
    slips = {
        everything / size: "That counts every initializer; keep the int8 ones (their arrays' dtype is int8).",
        (int8 + by_type.get("uint8", 0)) / size: "That adds the uint8 tensors (zero points and the quantized "
        "embedding); keep the int8 weights.",
        1 - expected: "That is the share of everything else; take the int8 weights' share.",
    }
    hint = next(
        (why for value, why in slips.items() if _close(got, value, 0.01)),
        "Add up numpy_helper.to_array(t).nbytes over the initializers whose arrays have dtype int8, and "
        "divide by the size of the file on disk (dynamic.stat().st_size).",
    )
    return wrong(f"Got {got:.3f}. {hint}", expected)


def check_rule_against_perplexity(
    answer, result, fp32_perplexity: float, windows, *, tolerance: float = 0.02, perplexity=None
) -> CheckResult:
    """Exercise 4 (write code, then interpret): the variants that pass the audit's output rule
    (cosine with fp32) yet raise the NanoGPT's perplexity on `windows` by more than `tolerance`.
    `result`: the `AuditResult`; `perplexity(path, windows)`: `nanogpt.perplexity` unless given."""
    if perplexity is None:
        from course_machinery.nanogpt import perplexity
    measured = [v for v in result.variants if v.quality is not None]
    if answer is None or isinstance(answer, str) or not hasattr(answer, "__iter__"):
        return invalid(
            f"Got {answer!r}; give a list of variant names (an empty list if none), from: "
            + ", ".join(repr(v.name) for v in measured)
            + "."
        )
    ppl = {v.name: perplexity(v.path, windows) for v in measured}
    limit = (1 + tolerance) * fp32_perplexity
    expected = [v.name for v in measured if v.quality.passes and ppl[v.name] > limit]
    got = list(answer)
    unknown = [n for n in got if n not in ppl]
    if unknown:
        return invalid(f"{unknown[0]!r} is not a variant the audit measured: {', '.join(ppl)}.")

    def rise(name: str) -> str:
        return f"{name} {ppl[name]:.3f} ({ppl[name] / fp32_perplexity - 1:+.1%})"

    if set(got) != set(expected):
        missed, extra = sorted(set(expected) - set(got)), sorted(set(got) - set(expected))
        if missed:
            return wrong(
                f"{len(missed)} variant(s) that pass the rule and lose more than {tolerance:.0%} of perplexity "
                "are missing: compute the perplexity of each variant that passes, not only of the ones you "
                "suspect.",
                *missed,
            )
        name = extra[0]
        why = (
            "fails the audit's rule, so the rule did not let it through"
            if not next(v for v in measured if v.name == name).quality.passes
            else f"is within {tolerance:.0%} of fp32's perplexity"
        )
        return wrong(f"Not {name}: it {why}.", *[n for n in expected if n != name])
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
        return invalid('Write "same" or "different" in answer_5_guess first, before you run it.')
    if answer is None:
        return invalid("No answer yet: run audit.audit(..., serve_batch=1) on your model.")
    decision = getattr(answer, "decision", None)
    if decision is None or getattr(decision, "batch", None) != 1:
        at = getattr(decision, "decided_at", "no decision")
        return invalid(f"This audit decided at {at}; pass serve_batch=1 so it decides at batch 1.")
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
