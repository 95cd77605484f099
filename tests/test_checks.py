"""course_machinery.checks: each exercise check passes the right answer and teaches on a typical wrong one."""

from __future__ import annotations

import numpy as np
import pytest

from course_machinery import checks

# ---------------------------------------------------------------------------------------------------
# Lesson 02
# ---------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def shared_input_int8(tmp_path_factory):
    """Lesson 02's exercise 4 model, dynamically quantized: MatMuls `query` and `key` read `x`,
    `out` reads h = q + k. Three MatMulInteger, two DynamicQuantizeLinear (x once, h once)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from onnxruntime.quantization import quantize_dynamic

    rng = np.random.default_rng(0)
    weights = [
        numpy_helper.from_array(rng.standard_normal((8, 8), dtype=np.float32), name)
        for name in ("w_query", "w_key", "w_out")
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "w_query"], ["q"], name="query"),
        helper.make_node("MatMul", ["x", "w_key"], ["k"], name="key"),
        helper.make_node("Add", ["q", "k"], ["h"], name="add"),
        helper.make_node("MatMul", ["h", "w_out"], ["y"], name="out"),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])
    folder = tmp_path_factory.mktemp("shared_input")
    fp32, int8 = folder / "shared_input.onnx", folder / "shared_input.int8.onnx"
    graph = helper.make_graph(nodes, "shared_input", [x], [y], weights)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(fp32))
    quantize_dynamic(fp32, int8)
    return int8


def test_check_dynamic_quantize_prediction_wants_a_guess_first_and_an_answer(shared_input_int8):
    no_guess = checks.check_dynamic_quantize_prediction(None, 2, shared_input_int8)
    assert not no_guess and "answer_3_guess first" in repr(no_guess)
    no_count = checks.check_dynamic_quantize_prediction(2, None, shared_input_int8)
    assert not no_count and "No answer yet" in repr(no_count)


def test_check_dynamic_quantize_prediction_names_each_wrong_count(shared_input_int8):
    per_op = checks.check_dynamic_quantize_prediction(2, 3, shared_input_int8)
    assert not per_op and "Got 3;" in repr(per_op) and "number of integer ops" in repr(per_op)
    assert "2" not in per_op.message  # the right count is never given away
    none = checks.check_dynamic_quantize_prediction(2, 0, shared_input_int8)
    assert not none and "float model's count" in repr(none)
    other = checks.check_dynamic_quantize_prediction(2, 5, shared_input_int8)
    assert not other and "op_counts['DynamicQuantizeLinear']" in repr(other)


def test_check_dynamic_quantize_prediction_teaches_on_each_wrong_guess(shared_input_int8):
    right = checks.check_dynamic_quantize_prediction(2, 2, shared_input_int8)
    assert right and repr(right).startswith("✅") and "You predicted it" in repr(right)
    assert "x (read by 2), h (read by 1)" in repr(right)
    per_matmul = checks.check_dynamic_quantize_prediction(3, 2, shared_input_int8)
    assert per_matmul and "one per MatMul (3)" in repr(per_matmul)
    assert "reuses the same codes" in repr(per_matmul)
    zero = checks.check_dynamic_quantize_prediction(0, 2, shared_input_int8)
    assert zero and "only the weights" in repr(zero) and "on every run" in repr(zero)
    per_input = checks.check_dynamic_quantize_prediction(1, 2, shared_input_int8)
    assert per_input and "one per graph input (1)" in repr(per_input)
    assert "inside the graph" in repr(per_input)
    other = checks.check_dynamic_quantize_prediction(4, 2, shared_input_int8)
    assert other and "You predicted 4" in repr(other)


def _dq_conv_without_output_q(path):
    """x -> QuantizeLinear -> DequantizeLinear -> Conv(weight via DequantizeLinear) -> y, no Q after.

    The file quantizes the Conv's input and weight, but with no QuantizeLinear on its output ONNX
    Runtime has no QLinearConv to fuse into: the Conv runs in float on dequantized values.
    """
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    inits = [
        numpy_helper.from_array(np.array(0.02, np.float32), "xs"),
        numpy_helper.from_array(np.array(128, np.uint8), "xz"),
        numpy_helper.from_array(np.ones((4, 1, 3, 3), np.int8), "wq"),
        numpy_helper.from_array(np.array(0.05, np.float32), "ws"),
        numpy_helper.from_array(np.array(0, np.int8), "wz"),
    ]
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
        helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
        helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["w"]),
        helper.make_node("Conv", ["xd", "w"], ["y"], name="conv"),
    ]
    graph = helper.make_graph(
        nodes,
        "dq_conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 6, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 4, 4])],
        inits,
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def test_check_integer_kernels_wants_a_prediction_first_and_an_answer(tmp_path):
    path = _dq_conv_without_output_q(tmp_path / "dq_conv.onnx")
    assert "answer_4_guess first" in repr(checks.check_integer_kernels(None, 0, path))
    assert "No answer yet" in repr(checks.check_integer_kernels(1, None, path))


def test_check_integer_kernels_tells_the_file_from_what_runs(tmp_path):
    path = _dq_conv_without_output_q(tmp_path / "dq_conv.onnx")
    file_count = checks.check_integer_kernels(1, 1, path)  # what model_facts says the file quantizes
    assert not file_count and "what the *file* quantizes" in repr(file_count)
    right = checks.check_integer_kernels(1, 0, path)
    assert right and "0 of 1 compute ops" in repr(right)
    assert "The file quantizes 1; ONNX Runtime's optimizer did not fuse the 1 others" in repr(right)
    predicted = checks.check_integer_kernels(0, 0, path)
    assert predicted and "you predicted it" in repr(predicted)


def test_check_integer_kernels_on_a_model_the_runtime_fuses(tmp_path):
    from test_kernels import conv_block, u8s8_qdq

    block = conv_block(tmp_path / "block.onnx", np.random.default_rng(0))
    qdq = u8s8_qdq(block, tmp_path / "block.qdq.onnx", per_channel=False)
    assert checks.check_integer_kernels(2, 2, qdq)  # both convs become QLinearConv on every CPU
    wrong = checks.check_integer_kernels(2, 3, qdq)
    assert not wrong and "Got 3" in repr(wrong) and "integer_count" in repr(wrong)
    assert "expected 2" not in repr(wrong)  # a wrong answer never reads the right one


def test_check_integer_kernels_on_a_float_model(tmp_path):
    from test_kernels import conv_block

    block = conv_block(tmp_path / "block.onnx", np.random.default_rng(0))
    every = checks.check_integer_kernels(0, 2, block)  # two compute ops, none on an integer kernel
    assert not every and "That is every compute op" in repr(every)
    assert checks.check_integer_kernels(0, 0, block)


@pytest.fixture(scope="module")
def sklearn_classifier(tmp_path_factory):
    """A scikit-learn MLP on separable synthetic data, converted with skl2onnx: (path, x, labels)."""
    import onnx
    from skl2onnx import to_onnx
    from sklearn.datasets import make_classification
    from sklearn.neural_network import MLPClassifier

    x, y = make_classification(
        n_samples=1500, n_features=20, n_informative=12, n_classes=3, random_state=0, class_sep=2.0
    )
    x = x.astype(np.float32)
    clf = MLPClassifier(hidden_layer_sizes=(32,), max_iter=300, random_state=0).fit(x[:1000], y[:1000])
    path = tmp_path_factory.mktemp("capstone") / "mlp.onnx"
    onnx.save(to_onnx(clf, x[:1], options={"zipmap": False}, target_opset=17), str(path))
    return path, x, y


def _static(fp32, out, x, **options):
    from onnxruntime.quantization import QuantFormat, quantize_static

    from course_lib import ArrayReader

    quantize_static(fp32, out, ArrayReader(x, fp32, batch_size=100), quant_format=QuantFormat.QDQ, **options)
    return out


def test_check_capstone_accepts_a_static_qdq_copy_and_says_what_runs(sklearn_classifier, tmp_path):
    fp32, x, y = sklearn_classifier
    good = _static(fp32, tmp_path / "good.onnx", x[:500], op_types_to_quantize=["MatMul"])
    result = checks.check_capstone(good, fp32, x[1000:], y[1000:])
    assert result and "Accepted" in repr(result) and "compute ops on integer kernels" in repr(result)


def test_check_capstone_names_each_wrong_answer(sklearn_classifier, tmp_path):
    from onnxruntime.quantization import quantize_dynamic

    fp32, x, y = sklearn_classifier
    assert "No answer yet" in repr(checks.check_capstone(None, fp32, x, y))
    assert "Found no file" in repr(checks.check_capstone(tmp_path / "missing.onnx", fp32, x, y))
    assert "holds no quantized op" in repr(checks.check_capstone(fp32, fp32, x, y))
    dynamic = tmp_path / "dynamic.onnx"
    quantize_dynamic(fp32, dynamic)
    assert "asks for static QDQ" in repr(checks.check_capstone(dynamic, fp32, x, y))
    # Calibrated on inputs 1,000 times too small: every activation range is far too narrow.
    squeezed = _static(fp32, tmp_path / "squeezed.onnx", x[:500] / 1000)
    wrong = checks.check_capstone(squeezed, fp32, x[1000:], y[1000:])
    assert not wrong and "Not accepted" in repr(wrong) and "wrong-preprocessing trap" in repr(wrong)
    # Calibrated on inputs 8 times too small: clipped, still mostly agreeing, but not accepted.
    clipped = _static(fp32, tmp_path / "clipped.onnx", x[:500] / 8)
    close = checks.check_capstone(clipped, fp32, x[1000:], y[1000:])
    assert not close and "Not accepted" in repr(close) and "Your file quantizes" in repr(close)


# Lesson 04's exercise 2 (which variants fail the rule, and why) is tested in tests/test_checks_lesson04.py.


# ---------------------------------------------------------------------------------------------------
# Lesson 06
# ---------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def four_bit_matmul(tmp_path_factory):
    """A MatMul of K=64 by N=32 as ONNX Runtime's 4-bit quantizer writes it: blocks of 32, asymmetric."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    w = np.random.default_rng(0).normal(size=(64, 32)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["y"], name="proj")],
        "one_matmul",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 32])],
        [numpy_helper.from_array(w, "W")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    quantizer = MatMulNBitsQuantizer(model, bits=4, block_size=32, is_symmetric=False)
    quantizer.process()
    path = tmp_path_factory.mktemp("nbits") / "four_bit.onnx"
    quantizer.model.save_model_to_file(str(path), use_external_data_format=False)
    (node,) = [n for n in onnx.load(str(path)).graph.node if n.op_type == "MatMulNBits"]
    return path, node.name


def test_check_nbits_bytes(four_bit_matmul):
    path, name = four_bit_matmul
    # By hand: 64·32/2 = 1,024 bytes of codes; 32 columns × 2 blocks of float32 scales = 256 bytes;
    # 32 × 2 zero points of 4 bits, two per byte = 32 bytes.
    right = checks.check_nbits_bytes(1024 + 256 + 32, path, name)
    assert right and "1,312 bytes" in right.message and "6.2x smaller" in right.message
    assert "codes alone" in checks.check_nbits_bytes(1024, path, name).message
    assert "half a byte" in checks.check_nbits_bytes(64 * 32, path, name).message
    assert "4 bytes each" in checks.check_nbits_bytes(1024 + 128, path, name).message
    assert "zero point" in checks.check_nbits_bytes(1024 + 256, path, name).message
    assert "packed two per byte" in checks.check_nbits_bytes(1024 + 256 + 64, path, name).message
    assert not checks.check_nbits_bytes(None, path, name)
    with pytest.raises(ValueError, match="not a MatMulNBits node"):
        checks.check_nbits_bytes(1312, path, "nowhere")


# ---------------------------------------------------------------------------------------------------
# The "No answer yet" guard every check uses
# ---------------------------------------------------------------------------------------------------
def test_needs_answer_speaks_for_the_first_missing_argument_before_the_check_runs():
    from course_machinery.checks.result import CheckResult, needs_answer

    ran = []

    @needs_answer("guess", message="Write your guess in answer_1_guess first.")
    @needs_answer("low", "high", hint="set answer_1 to (low, high).")
    def check_demo(guess, low, high=None, scale: float = 1.0) -> CheckResult:
        """A demo check."""
        ran.append((guess, low, high, scale))
        return CheckResult(True, "ran")

    guess_first = check_demo(None, None)
    assert not guess_first and guess_first.message == "Write your guess in answer_1_guess first."
    no_answer = check_demo(0.5, 1.0)  # high left at its default None
    assert not no_answer and no_answer.message == "No answer yet: set answer_1 to (low, high)."
    assert not check_demo(guess=0.5, low=None, high=2.0)  # by keyword too
    assert ran == []  # the check never ran on a missing answer
    assert check_demo(0.5, 1.0, 2.0, scale=3.0) and ran == [(0.5, 1.0, 2.0, 3.0)]
    assert check_demo.__name__ == "check_demo" and check_demo.__doc__ == "A demo check."
    with pytest.raises(TypeError):
        check_demo(0.5, 1.0, 2.0, 3.0, "one argument too many")


def test_needs_answer_refuses_a_name_the_check_does_not_take_and_needs_one_wording():
    from course_machinery.checks.result import CheckResult, needs_answer

    with pytest.raises(
        ValueError, match="guards 'answer', which check_demo does not take; its arguments are guess"
    ):

        @needs_answer("answer", hint="compute it.")
        def check_demo(guess) -> CheckResult:
            return CheckResult(True, "ran")

    with pytest.raises(ValueError, match="pass exactly one"):
        needs_answer("answer", hint="compute it.", message="Compute it.")
    with pytest.raises(ValueError, match="pass exactly one"):
        needs_answer("answer")


def test_every_check_that_waits_for_an_answer_says_what_to_do():
    """The student edition calls each check with None answers: each says "No answer yet" (or asks for
    the guess first) and names the step, never a bare refusal."""
    import inspect

    waiting = [
        (name, check)
        for name, check in vars(checks).items()
        if name.startswith("check_") and hasattr(check, "__wrapped__")
    ]
    assert len(waiting) >= 30
    for name, check in waiting:
        args = {p: None for p in inspect.signature(check).parameters}
        result = check(**args)
        assert not result, name
        assert result.message.startswith(("No answer yet: ", "Write ")), (name, result.message)
        assert len(result.message) > len("No answer yet: ") + 10, (name, result.message)


# A wrong answer's feedback never gives the answer away (issue 39): every failed check goes through
# result.wrong (which refuses a message that spells an expected value) or result.invalid (an answer
# of the wrong form), never CheckResult(False, ...) by hand.
def _bare_failures(path):
    import ast

    tree = ast.parse(path.read_text())
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and getattr(node.func, "id", "") == "CheckResult"
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and node.args[0].value is False
    ]


def test_every_failed_check_goes_through_wrong_or_invalid():
    from pathlib import Path

    import course_machinery.checks as checks

    folder = Path(checks.__file__).parent
    found = {p.name: _bare_failures(p) for p in sorted(folder.glob("lesson*.py"))}
    found = {name: lines for name, lines in found.items() if lines}
    assert found == {}, (
        f"CheckResult(False, ...) by hand (use wrong(message, expected) or invalid(message)): {found}"
    )


def test_wrong_refuses_a_message_that_gives_the_answer_away():
    import pytest

    from course_machinery.checks.result import gives_away, wrong

    assert gives_away("Got 20, expected 21.", 21) == ["21"]
    assert gives_away("Got 0.5; the share is 12.50 % here.", 0.125) != []
    assert gives_away("Recount: 121 is not it.", 21) == []  # 21 inside another number is not 21
    assert gives_away('Predict with "more" or "fewer".', "more") == ["more"]
    with pytest.raises(ValueError, match="gives the answer away"):
        wrong("Got 20, expected 21.", 21)
    assert not wrong("Got 20: count the integer kernels again.", 21)
