"""Lesson 07's self-checks: each passes the right answer and teaches on the wrong answers it knows."""

from __future__ import annotations

from types import SimpleNamespace

from course_lib import checks
from course_lib.measure import LatencyComparison


def comparison(speedup: float, low: float, high: float) -> LatencyComparison:
    return LatencyComparison("fp32", "dynamic", {}, speedup, low, high, 0.9)


def test_nanogpt_prediction_reads_the_interval_and_compares_the_guess():
    faster, slower, unsure = (
        comparison(1.24, 1.20, 1.28),
        comparison(0.7, 0.66, 0.74),
        comparison(1.02, 0.97, 1.08),
    )
    assert checks.check_nanogpt_prediction("faster", "faster", faster)
    assert "and you predicted it" in checks.check_nanogpt_prediction("faster", "faster", faster).message
    assert "you predicted 'slower'" in checks.check_nanogpt_prediction("slower", "faster", faster).message
    wrong = checks.check_nanogpt_prediction("faster", "faster", slower)
    assert not wrong and "expected 'slower'" in wrong.message and "below 1x" in wrong.message
    assert checks.check_nanogpt_prediction("faster", "unsettled", unsure)
    hedged = checks.check_nanogpt_prediction("faster", "faster", unsure)
    assert not hedged and "both sides of 1x" in hedged.message
    odd = checks.check_nanogpt_prediction("faster", "much faster", faster)
    assert not odd and '"faster", "slower" or "unsettled"' in odd.message


def _audit(*variants, verdicts=None):
    rows = [SimpleNamespace(name=n, lesson=lesson, quality=q) for n, lesson, q in variants]
    decision = SimpleNamespace(verdicts=verdicts or {n: ("recommended", "") for n, _, _ in variants})
    return SimpleNamespace(variants=rows, decision=decision)


def test_audit_lessons_wants_every_measured_variant_and_names_the_right_lesson():
    result = _audit(
        ("dynamic INT8 per-channel", "02_dynamic_quantization.ipynb", 0.99),
        ("static U8S8 per-channel", "03_static_qdq.ipynb", 0.99),
        ("4-bit weight-only", "06_past_w8a8.ipynb", 0.98),
        ("static S8S8 per-channel", "03_static_qdq.ipynb", None),  # set aside after building: not asked
        verdicts={"static U8S8 per-channel": ("fails", "")},
    )
    right = {"dynamic INT8 per-channel": "02", "static U8S8 per-channel": "03", "4-bit weight-only": 6}
    passed = checks.check_audit_lessons(right, result)
    assert passed and "lesson 04 explains a failed quality rule" in passed.message
    assert "No answer yet" in checks.check_audit_lessons(None, result).message
    missing = checks.check_audit_lessons({"dynamic INT8 per-channel": "02"}, result)
    assert not missing and "4-bit weight-only" in missing.message
    swapped = checks.check_audit_lessons(right | {"dynamic INT8 per-channel": "03"}, result)
    assert not swapped and "quantize_dynamic" in swapped.message


def test_int8_floor_is_one_byte_per_parameter():
    assert checks.check_int8_floor(0.210368, 210_368, 400_000)
    assert "0.40 MB" in checks.check_int8_floor(0.21, 210_368, 400_000).message
    four = checks.check_int8_floor(0.84, 210_368, 400_000)
    assert not four and "float32" in four.message
    mib = checks.check_int8_floor(210_368 / 2**20, 210_368, 400_000)
    assert not mib and "2**20" in mib.message
    assert "No answer yet" in checks.check_int8_floor(None, 210_368, 400_000).message


def test_the_rule_against_perplexity_finds_what_the_cosine_rule_let_through():
    passed = SimpleNamespace(passes=True)
    failed = SimpleNamespace(passes=False)
    variants = [
        SimpleNamespace(name="dynamic", path="d.onnx", quality=passed),
        SimpleNamespace(name="4-bit", path="q4.onnx", quality=passed),
        SimpleNamespace(name="static per-tensor", path="s.onnx", quality=failed),
        SimpleNamespace(name="skipped", path="x.onnx", quality=None),
    ]
    result = SimpleNamespace(variants=variants)
    measured = {"d.onnx": 4.05, "q4.onnx": 4.2, "s.onnx": 9.0}
    asked = []

    def perplexity(path, windows):
        asked.append((path, windows))
        return measured[path]

    def check(answer, **kw):
        return checks.check_rule_against_perplexity(answer, result, 4.0, "W", perplexity=perplexity, **kw)

    right = check(["4-bit"])
    assert (
        right and "4-bit 4.200 (+5.0%)" in right.message and "Passed and within 2%: dynamic" in right.message
    )
    assert sorted(asked) == [("d.onnx", "W"), ("q4.onnx", "W"), ("s.onnx", "W")]  # skipped: never timed
    missed = check([])
    assert not missed and "Missing 4-bit" in missed.message
    assert "fails the audit's rule" in check(["4-bit", "static per-tensor"]).message
    assert "within 2%" in check(["4-bit", "dynamic"]).message
    assert not check("4-bit") and "list of variant names" in check("4-bit").message
    assert not check(None)
    assert "not a variant the audit measured" in check(["skipped"]).message
    # With a looser tolerance nothing passes the rule and loses perplexity: the empty list is right.
    loose = check([], tolerance=0.1)
    assert loose and "every variant that passed the rule also kept its perplexity" in loose.message


def _decided(recommended, batch):
    return SimpleNamespace(
        decision=SimpleNamespace(recommended=recommended, batch=batch, decided_at=f"batch {batch}")
    )


def test_serve_batch_wants_a_guess_then_an_audit_decided_at_batch_1():
    first = _decided("static U8S8 per-channel", 32)
    assert "answer_5_guess first" in checks.check_serve_batch(None, _decided("x", 1), first).message
    assert "No answer yet" in checks.check_serve_batch("same", None, first).message
    wrong_batch = checks.check_serve_batch("same", _decided("x", 32), first)
    assert (
        not wrong_batch
        and "decided at batch 32" in wrong_batch.message
        and "serve_batch=1" in wrong_batch.message
    )


def test_serve_batch_compares_the_two_decisions_and_the_prediction():
    first = _decided("static U8S8 per-channel", 32)
    same = checks.check_serve_batch("same", _decided("static U8S8 per-channel", 1), first)
    assert same and same.message.startswith("Same, as you predicted")
    moved = checks.check_serve_batch("same", _decided(None, 1), first)
    assert (
        moved
        and moved.message.startswith("Different; you predicted same")
        and "at batch 1 nothing" in moved.message
    )
