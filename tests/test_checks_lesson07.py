"""Lesson 07's self-checks: each passes the right answer, teaches on the wrong answers it knows, and
never spells the expected value in a wrong answer's feedback (result.wrong raises under pytest)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from course_machinery import checks

# ---------------------------------------------------------------------------------------------------
# Exercise 1: the ceiling on the quantized kernels' gain
# ---------------------------------------------------------------------------------------------------
QUANTIZED = ("DynamicQuantizeMatMul", "DynamicQuantizeLinear")


@pytest.fixture
def profile():
    """A profile of 10 ms: the quantized ops 2.5 ms of it, so the ceiling is 10 / 7.5 = 1.333x."""
    ms = {"DynamicQuantizeMatMul": 2.0, "DynamicQuantizeLinear": 0.5, "Softmax": 3.0, "Transpose": 4.5}
    return SimpleNamespace(ms_per_run=ms, total_ms=10.0)


def test_ceiling_wants_a_guess_then_the_speed_up(profile):
    assert "answer_1_guess first" in checks.check_matmul_ceiling(None, 1.3, profile, QUANTIZED).message
    assert "No answer yet" in checks.check_matmul_ceiling(1.5, None, profile, QUANTIZED).message
    right = checks.check_matmul_ceiling(2.0, 10 / 7.5, profile, QUANTIZED)
    assert (
        right and "At most 1.33x" in right.message and "25%" in right.message and "above it" in right.message
    )
    assert "close to it" in checks.check_matmul_ceiling(1.3, 10 / 7.5, profile, QUANTIZED).message


@pytest.mark.parametrize(
    "answer, hint",
    [
        (0.25, "share of the time they take"),
        (0.75, "share of the time that is left"),
        (4.0, "everything but"),
        (1.25, "adds the share"),
    ],
)
def test_ceiling_names_each_slip_without_the_answer(profile, answer, hint):
    result = checks.check_matmul_ceiling(1.5, answer, profile, QUANTIZED)
    assert not result and hint in result.message and "1.33" not in result.message


def test_ceiling_refuses_a_profile_without_the_quantized_ops(profile):
    fp32 = SimpleNamespace(ms_per_run={"MatMul": 2.0, "Add": 8.0}, total_ms=10.0)
    result = checks.check_matmul_ceiling(1.5, 1.2, fp32, QUANTIZED)
    assert not result and "profile the dynamic file" in result.message


# ---------------------------------------------------------------------------------------------------
# Exercise 2: the audit's speed rule, written by the learner
# ---------------------------------------------------------------------------------------------------
def _variant(name, passes, ratio, batch=1):
    quality = None if passes is None else SimpleNamespace(passes=passes)
    timed = (
        {}
        if ratio is None
        else {batch: SimpleNamespace(speedup=ratio[0], speedup_low=ratio[1], speedup_high=ratio[2])}
    )
    return SimpleNamespace(name=name, quality=quality, speed=timed)


@pytest.fixture
def audited():
    variants = [
        _variant("dynamic INT8 per-channel", True, (1.2, 1.15, 1.25)),
        _variant("static U8S8 per-tensor", True, (1.25, 1.1, 1.4)),
        _variant("static S8S8 per-channel", True, (1.3, 1.0, 1.6)),
        _variant("4-bit weight-only", False, (0.9, 0.85, 0.95)),
    ]
    decision = SimpleNamespace(
        batch=1, recommended="dynamic INT8 per-channel", tied=["static U8S8 per-tensor"]
    )
    return SimpleNamespace(variants=variants, decision=decision)


def _right(variants, batch):
    fast = [
        v
        for v in variants
        if v.quality is not None
        and v.quality.passes
        and batch in v.speed
        and v.speed[batch].speedup_low >= 1.05
    ]
    return max(fast, key=lambda v: v.speed[batch].speedup).name if fast else None


def test_speed_rule_passes_the_rule_on_the_audit_and_the_planted_tables(audited):
    assert "No answer yet" in checks.check_speed_rule(None, audited).message
    right = checks.check_speed_rule(_right, audited)
    assert right and "agrees with the audit's on its variants and on 4 tables" in right.message
    assert "static U8S8 per-tensor overlapped the fastest" in right.message


def test_speed_rule_names_each_slip_without_the_answer(audited):
    def by_median(variants, batch):  # the fastest by its median, interval ignored
        timed = [v for v in variants if v.quality is not None and v.quality.passes and batch in v.speed]
        return max(timed, key=lambda v: v.speed[batch].speedup).name

    def any_quality(variants, batch):  # takes the fastest clearly faster one, passing or not
        fast = [v for v in variants if batch in v.speed and v.speed[batch].speedup_low >= 1.05]
        return max(fast, key=lambda v: v.speed[batch].speedup).name if fast else None

    def strict(variants, batch):  # > 1.05 where the rule says >= 1.05
        fast = [
            v
            for v in variants
            if v.quality is not None
            and v.quality.passes
            and batch in v.speed
            and v.speed[batch].speedup_low > 1.05
        ]
        return max(fast, key=lambda v: v.speed[batch].speedup).name if fast else None

    median = checks.check_speed_rule(by_median, audited)
    assert not median and "this audit's variants" in median.message
    assert "dynamic INT8 per-channel" not in median.message
    failing = checks.check_speed_rule(any_quality, audited)
    assert not failing and "fails the quality rule" in failing.message
    edge = checks.check_speed_rule(strict, audited)
    assert not edge and "1.05 itself is enough" in edge.message
    crashes = checks.check_speed_rule(lambda variants, batch: variants[0].quality.passes and None, audited)
    assert not crashes
    called = checks.check_speed_rule(_right(audited.variants, 1), audited)
    assert not called and "without calling it" in called.message


def test_speed_rule_reports_a_crash_with_what_to_guard(audited):
    def unguarded(variants, batch):
        return max(
            (v for v in variants if v.quality.passes and v.speed[batch].speedup_low >= 1.05),
            key=lambda v: v.speed[batch].speedup,
        ).name

    result = checks.check_speed_rule(unguarded, audited)
    assert not result and "pick raised" in result.message and "quality None" in result.message


# ---------------------------------------------------------------------------------------------------
# Exercise 3: the share of the INT8 file that is int8 weights
# ---------------------------------------------------------------------------------------------------
@pytest.fixture
def int8_file(tmp_path):
    """A file with 4,096 int8 bytes, 256 float bytes and 256 uint8 bytes (an embedding, say)."""
    w = numpy_helper.from_array(np.ones((64, 64), np.int8), "w_quantized")
    s = numpy_helper.from_array(np.ones(64, np.float32), "w_scale")
    z = numpy_helper.from_array(np.zeros(256, np.uint8), "embedding_quantized")
    node = helper.make_node("Identity", ["x"], ["y"], name="id")
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
        [w, s, z],
    )
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph), str(path))
    return path


def test_int8_share_wants_a_guess_then_the_share(int8_file):
    share = 4096 / int8_file.stat().st_size
    assert "answer_3_guess first" in checks.check_int8_share(None, share, int8_file).message
    assert "No answer yet" in checks.check_int8_share(0.5, None, int8_file).message
    right = checks.check_int8_share(0.5, share, int8_file)
    assert (
        right
        and "(4,096 bytes); you guessed 50%" in right.message
        and "float32 256, uint8 256" in right.message
    )


def test_int8_share_names_each_slip_without_the_answer(int8_file):
    size = int8_file.stat().st_size
    share = 4096 / size
    every = checks.check_int8_share(0.5, (4096 + 256 + 256) / size, int8_file)
    assert not every and "every initializer" in every.message
    with_uint8 = checks.check_int8_share(0.5, (4096 + 256) / size, int8_file)
    assert not with_uint8 and "uint8" in with_uint8.message
    rest = checks.check_int8_share(0.5, 1 - share, int8_file)
    assert not rest and "everything else" in rest.message
    in_bytes = checks.check_int8_share(0.5, 4096, int8_file)
    assert not in_bytes and "not bytes" in in_bytes.message
    for result in (every, with_uint8, rest):
        assert f"{share:.3f}" not in result.message


# ---------------------------------------------------------------------------------------------------
# Exercise 4: the rule against perplexity
# ---------------------------------------------------------------------------------------------------
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
    assert not missed and "1 variant(s)" in missed.message and "4-bit" not in missed.message
    assert "fails the audit's rule" in check(["4-bit", "static per-tensor"]).message
    assert "within 2%" in check(["4-bit", "dynamic"]).message
    assert not check("4-bit") and "list of variant names" in check("4-bit").message
    assert not check(None)
    assert "not a variant the audit measured" in check(["skipped"]).message
    # With a looser tolerance nothing passes the rule and loses perplexity: the empty list is right.
    loose = check([], tolerance=0.1)
    assert loose and "every variant that passed the rule also kept its perplexity" in loose.message


# ---------------------------------------------------------------------------------------------------
# Exercise 5: your model at the batch you serve
# ---------------------------------------------------------------------------------------------------
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
