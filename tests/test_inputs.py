"""course_lib.inputs: the one check for arrays fed to a model's input, and the one error it raises,
from calibration, the audit and the scoring of rows alike."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from course_lib import calibration, measure
from course_lib.inputs import InputError, InputSpec, check_array
from course_machinery.audit import inputs as audit_inputs

SPEC = InputSpec("input", np.dtype(np.float32), ("N", 1, 4, 4))


def _message(err: pytest.ExceptionInfo) -> str:
    return str(err.value)


def _says(err: pytest.ExceptionInfo, *parts: str) -> None:
    missing = [p for p in parts if p not in _message(err)]
    assert not missing, f"{missing} not in: {_message(err)}"


@pytest.fixture(scope="module")
def classifier(tmp_path_factory):
    """x [N, 16] float32 -> Gemm -> y [N, 4]: a one-input classifier every call site can read."""
    path = tmp_path_factory.mktemp("inputs") / "fp32.onnx"
    rng = np.random.default_rng(0)
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["x", "W", "B"], ["y"])],
        "classifier",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])],
        [
            numpy_helper.from_array(rng.standard_normal((16, 4)).astype(np.float32), "W"),
            numpy_helper.from_array(np.zeros(4, np.float32), "B"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def _rows(n: int = 120, dtype=np.float32) -> np.ndarray:
    return np.random.default_rng(1).standard_normal((n, 16)).astype(dtype)


# ------------------------------------------------------------------------------------ the spec
def test_the_spec_is_read_from_a_graph_input_and_from_a_session_input(classifier):
    graph_input = onnx.load(str(classifier)).graph.input[0]
    spec = InputSpec.of(graph_input)
    assert spec == InputSpec("x", np.dtype(np.float32), ("N", 16))
    assert spec.sample_shape == (16,) and spec.fixed_batch is None
    session = ort.InferenceSession(str(classifier), providers=["CPUExecutionProvider"])
    assert InputSpec.of_session_input(session.get_inputs()[0]) == spec


def test_an_input_that_no_array_of_numbers_can_feed_is_refused_when_read():
    text = helper.make_tensor_value_info("text", TensorProto.STRING, ["N"])
    with pytest.raises(InputError) as err:
        InputSpec.of(text)
    _says(err, "Expected an input of numbers", "'text' has ONNX element type STRING", "Export the model with")
    sequence = helper.make_tensor_sequence_value_info("seq", TensorProto.FLOAT, None)
    with pytest.raises(InputError) as err:
        InputSpec.of(sequence)
    _says(err, "Expected a tensor input", "'seq' is a sequence_type", "export the model with tensor inputs")


# ------------------------------------------------------------------------------------ each wrong array
def test_a_right_array_comes_back_as_a_numpy_array():
    x = np.zeros((3, 1, 4, 4), np.float32)
    assert check_array(x, SPEC) is x
    listed = check_array([[[[0.0] * 4] * 4]], InputSpec("input", np.dtype(np.float64), ("N", 1, 4, 4)))
    assert isinstance(listed, np.ndarray) and listed.shape == (1, 1, 4, 4)
    assert check_array(np.zeros((1, 4, 4), np.float32), SPEC, batched=False).shape == (1, 4, 4)


def test_a_wrong_dtype_names_both_dtypes_and_the_conversion():
    with pytest.raises(InputError) as err:
        check_array(np.zeros((3, 1, 4, 4)), SPEC)
    _says(
        err,
        "The array has dtype float64",
        "the model's input 'input' expects float32",
        "x.astype(np.float32)",
    )
    assert (err.value.expected, err.value.found) == (np.float32, np.float64)
    with pytest.raises(InputError) as err:
        check_array(np.zeros((3, 1, 4, 4), np.uint8), SPEC)
    _says(err, "has dtype uint8", "apply the production preprocessing")


def test_a_wrong_rank_names_both_ranks_and_the_axis_to_add_or_drop():
    with pytest.raises(InputError) as err:
        check_array(np.zeros((3, 4, 4), np.float32), SPEC)
    _says(
        err,
        "has shape (3, 4, 4) (rank 3)",
        "expects rank 4: (N, 1, 4, 4), i.e. samples of shape (1, 4, 4)",
        "np.expand_dims(x, 1)",
    )
    assert (err.value.expected, err.value.found) == (("N", 1, 4, 4), (3, 4, 4))
    with pytest.raises(InputError) as err:
        check_array(np.zeros((1, 4, 4), np.float32), SPEC)  # one sample without its batch axis
    _says(err, "one sample without its batch axis", "np.expand_dims(x, 0)")
    with pytest.raises(InputError) as err:
        check_array(np.zeros((3, 1, 1, 4, 4), np.float32), SPEC, name="images")
    _says(err, "rank 5", "np.squeeze(images, 1)")


def test_a_wrong_dimension_names_the_axis_and_both_sizes():
    with pytest.raises(InputError) as err:
        check_array(np.zeros((3, 1, 4, 5), np.float32), SPEC, what="Batch 2")
    _says(
        err,
        "Batch 2 has shape (3, 1, 4, 5)",
        "expects (N, 1, 4, 4)",
        "axis 3 is 5, not 4",
        "Resize, pad or reorder",
    )
    check_array(np.zeros((7, 1, 4, 4), np.float32), SPEC)  # the batch axis is free


@pytest.mark.parametrize(
    "value, found",
    [
        ({"input": 1}, "dict"),
        ("pixels.npy", "str"),
        (None, "NoneType"),
        ([[1.0, 2.0], [3.0]], "list"),
        (np.array(["a", "b"]), "ndarray"),
    ],
    ids=["dict", "str", "None", "ragged", "strings"],
)
def test_something_that_is_not_an_array_of_numbers_is_named_as_what_it_is(value, found):
    with pytest.raises(InputError) as err:
        check_array(value, SPEC)
    _says(
        err,
        "The array is a ",
        "not an array of numbers",
        "expects an array of float32",
        "np.asarray(x",
    )
    assert err.value.found == found
    named = "numpy array of dtype <U1" if found == "ndarray" else found
    assert f"The array is a {named}" in _message(err)


def test_non_finite_values_are_refused_only_when_asked_and_the_first_bad_sample_is_named():
    x = np.zeros((5, 1, 4, 4), np.float32)
    x[2, 0, 1, 3] = np.inf
    x[4, 0, 0, 0] = np.nan
    assert check_array(x, SPEC) is x
    with pytest.raises(InputError) as err:
        check_array(x, SPEC, finite=True)
    _says(
        err,
        "NaN or inf in 2 of its 5 samples",
        "the first is sample 2, with inf",
        "(the first at index (0, 1, 3))",
    )
    assert err.value.sample == 2


def test_the_model_is_named_when_given():
    with pytest.raises(InputError) as err:
        check_array(np.zeros((3, 1, 4, 4)), SPEC, model="fp32.onnx", what="The feed")
    _says(err, "The feed has dtype float64; input 'input' of fp32.onnx expects float32")


# ------------------------------------------------------------------------------------ the three callers
def test_the_old_error_names_are_the_one_error():
    assert calibration.CalibrationError is InputError and audit_inputs.AuditError is InputError
    assert issubclass(InputError, ValueError)


def test_the_three_callers_refuse_a_wrong_dtype_with_the_one_error(classifier):
    rows = _rows(120, np.float64)
    info = audit_inputs.read_model(classifier)
    calls = {
        "calibration": lambda: calibration.ArrayReader(rows, classifier),
        "audit": lambda: audit_inputs.read_samples({"x": rows}, info),
        "logits": lambda: measure.logits(classifier, rows, threads=1),
    }
    for where, call in calls.items():
        with pytest.raises(InputError) as err:
            call()
        _says(err, "has dtype float64", "expects float32", "astype(np.float32)")
        assert (err.value.expected, err.value.found) == (np.float32, np.float64), where


def test_the_three_callers_refuse_a_wrong_dimension_with_the_one_error(classifier):
    rows = _rows()[:, :15]
    info = audit_inputs.read_model(classifier)
    calls = {
        "calibration": lambda: calibration.ArrayReader(rows, classifier),
        "audit": lambda: audit_inputs.read_samples({"x": rows}, info),
        "logits": lambda: measure.logits(classifier, rows, threads=1),
    }
    for where, call in calls.items():
        with pytest.raises(InputError) as err:
            call()
        _says(err, "expects (N, 16)", "15, not 16", "each sample has shape (16,)")
        assert err.value.expected == ("N", 16), where


def test_the_three_callers_refuse_a_wrong_input_name_with_the_one_error(classifier):
    rows = _rows()
    info = audit_inputs.read_model(classifier)
    with pytest.raises(InputError) as err:
        calibration.ArrayReader(rows, classifier, input_name="pixels")
    _says(err, "no input named 'pixels'", "its inputs are 'x'", "Pass one of them")
    with pytest.raises(InputError) as err:
        audit_inputs.read_samples({"pixels": rows, "extra": rows}, info)
    _says(err, "named 'x'", "holds 'pixels', 'extra'", "np.savez(path, x=...)")
    with pytest.raises(InputError) as err:
        measure.logits(classifier, {"pixels": rows}, threads=1)
    _says(err, "inputs ['x']; got ['pixels']", "for exactly those names")
