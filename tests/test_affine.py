"""course_lib.affine: the lesson's worked examples, the error bounds, and bit-for-bit agreement with
ONNX Runtime's QuantizeLinear, DequantizeLinear and QLinearMatMul and with its quantization tools."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import quant_utils

from course_lib import affine, explorers, integers

ONNX_TYPE = {
    "int8": TensorProto.INT8,
    "uint8": TensorProto.UINT8,
    "int4": TensorProto.INT4,
    "uint4": TensorProto.UINT4,
    "int16": TensorProto.INT16,
    "uint16": TensorProto.UINT16,
}
# ONNX Runtime's Python API cannot hand back int4 tensors, so 4-bit results go through a Cast.
HOLDER_TYPE = {"int4": TensorProto.INT8, "uint4": TensorProto.UINT8}


# ---------------------------------------------------------------------------------------------------
# Running one-node ONNX models
# ---------------------------------------------------------------------------------------------------


def run_onnx(nodes, feeds: dict[str, np.ndarray], output_type: int, initializers, opset: int, shape=None):
    inputs = [
        helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(value.dtype), value.shape)
        for name, value in feeds.items()
    ]
    shape = next(iter(feeds.values())).shape if shape is None else shape  # default: shape of the input
    outputs = [helper.make_tensor_value_info("y", output_type, shape)]
    graph = helper.make_graph(nodes, "affine_check", inputs, outputs, initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(model, full_check=True)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0]


def scale_and_zero_point_initializers(scale, zero_point, dtype: str) -> list:
    zero_point = np.asarray(zero_point)
    return [
        numpy_helper.from_array(np.asarray(scale, dtype=np.float32), "scale"),
        helper.make_tensor("zero_point", ONNX_TYPE[dtype], zero_point.shape, zero_point.ravel().tolist()),
    ]


def ort_quantize(x, scale, zero_point, dtype: str, axis: int | None, opset: int) -> np.ndarray:
    attrs = {} if axis is None else {"axis": axis}
    nodes = [helper.make_node("QuantizeLinear", ["x", "scale", "zero_point"], ["q"], **attrs)]
    if dtype in HOLDER_TYPE:
        nodes.append(helper.make_node("Cast", ["q"], ["y"], to=HOLDER_TYPE[dtype]))
    else:
        nodes[0].output[0] = "y"
    out_type = HOLDER_TYPE.get(dtype, ONNX_TYPE[dtype])
    return run_onnx(
        nodes, {"x": x}, out_type, scale_and_zero_point_initializers(scale, zero_point, dtype), opset
    )


def ort_dequantize(q, scale, zero_point, dtype: str, axis: int | None, opset: int) -> np.ndarray:
    attrs = {} if axis is None else {"axis": axis}
    nodes = [helper.make_node("DequantizeLinear", ["q", "scale", "zero_point"], ["y"], **attrs)]
    if dtype in HOLDER_TYPE:
        nodes.insert(0, helper.make_node("Cast", ["q_held"], ["q"], to=ONNX_TYPE[dtype]))
        feeds = {"q_held": q}
    else:
        feeds = {"q": q}
    inits = scale_and_zero_point_initializers(scale, zero_point, dtype)
    return run_onnx(nodes, feeds, TensorProto.FLOAT, inits, opset)


# ---------------------------------------------------------------------------------------------------
# The lesson's worked examples
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["int8", "uint8"])
def test_worked_examples_with_scale_one_tenth(dtype):
    q = affine.quantize([1.2, 1.24, 0.26], 0.1, 0, dtype)
    assert q.tolist() == [12, 12, 3]
    assert q.dtype == affine._storage_dtype(dtype)
    x_hat = affine.dequantize(q, 0.1, 0)
    assert x_hat.dtype == np.float32
    assert x_hat.tolist() == pytest.approx([1.2, 1.2, 0.3], abs=1e-6)
    assert x_hat[0] == x_hat[1]  # 1.2 and 1.24 share a code: the 0.04 between them is lost
    assert abs(0.26 - x_hat[2]) == pytest.approx(0.04, abs=1e-6)


def test_worked_example_out_of_range_saturates():
    q = affine.quantize([20.0], 0.1, 0, "int8")
    assert q.tolist() == [127]
    x_hat = affine.dequantize(q, 0.1, 0)
    assert x_hat[0] == pytest.approx(12.7, abs=1e-6)
    assert 20.0 - x_hat[0] == pytest.approx(7.3, abs=1e-5)
    assert affine._clipped_mask([20.0, 12.7, -12.8, -12.9], 0.1, 0, "int8").tolist() == [
        True,
        False,
        False,
        True,
    ]


def test_real_zero_is_exact_for_asymmetric_uint8_on_minus_one_to_three():
    scale, zero_point = affine.scale_zero_point(-1.0, 3.0, "uint8")
    assert scale == np.float32(4 / 255)
    assert zero_point == 64 == round(1 / (4 / 255))  # 63.75 rounds to 64
    assert zero_point.dtype == np.uint8
    q = affine.quantize(np.float32(0.0), scale, zero_point, "uint8")
    assert q == 64
    assert affine.dequantize(q, scale, zero_point) == 0.0
    lo, hi = affine.representable_range(scale, zero_point, "uint8")
    assert lo <= -1.0 and hi >= 3.0 - scale / 2  # the calibrated range is covered


@pytest.mark.parametrize(
    ("dtype", "symmetric", "rmin", "rmax"),
    [
        ("uint8", False, -1.0, 3.0),
        ("int8", True, -2.5, 0.7),
        ("uint8", True, -0.3, 1.7),
        ("int4", True, -1, 1),
    ],
)
def test_error_is_at_most_half_a_step_inside_the_range(dtype, symmetric, rmin, rmax):
    scale, zero_point = affine.scale_zero_point(rmin, rmax, dtype, symmetric=symmetric)
    lo, hi = affine.representable_range(scale, zero_point, dtype)
    x = np.random.default_rng(0).uniform(lo, hi, 1_000_000).astype(np.float32)
    x_hat = affine.fake_quantize(x, scale, zero_point, dtype)
    bound = scale / 2 + 4 * np.finfo(np.float32).eps * max(abs(lo), abs(hi))
    assert np.max(np.abs(x - x_hat)) <= bound
    assert np.max(np.abs(x - x_hat)) > 0.49 * scale  # and the bound is reached: it is the right one
    err = affine.quantization_error(x, x_hat, affine._clipped_mask(x, scale, zero_point, dtype))
    assert err.percent_clipped == 0.0
    assert err.max_abs_error <= bound
    assert err.mse == pytest.approx(scale**2 / 12, rel=0.02)  # uniform rounding noise


def test_ties_round_half_to_even():
    s = 0.25  # a power of two: k·s + s/2 is exactly a tie
    halves = np.array([0.5, 1.5, 2.5, 3.5, -0.5, -1.5, -2.5], dtype=np.float32)
    assert affine.round_half_to_even(halves).tolist() == [0, 2, 2, 4, 0, -2, -2]
    q = affine.quantize(halves * s, s, 0, "int8")
    assert q.tolist() == [0, 2, 2, 4, 0, -2, -2]
    assert np.floor(halves + 0.5).tolist() != q.tolist()  # "round half up" would disagree
    # The zero point is added after rounding: 0.5 -> 0 -> 11, not round(11.5) = 12.
    assert affine.quantize(halves[:4] * s, s, 11, "uint8").tolist() == [11, 13, 13, 15]


# ---------------------------------------------------------------------------------------------------
# Bit for bit with ONNX Runtime
# ---------------------------------------------------------------------------------------------------

LAYOUTS = {
    "per-tensor": ((2, 3, 4, 5), None),
    "per-axis-activation": ((2, 3, 4, 5), 1),
    "per-axis-weight": ((16, 24), 0),
}
CASES = [(dtype, layout, opset) for dtype in ("int8", "uint8") for layout in LAYOUTS for opset in (13, 21)]
CASES += [(dtype, layout, 21) for dtype in ("int4", "uint4") for layout in LAYOUTS]


def random_parameters(dtype: str, shape, axis, rng):
    qmin, qmax = affine.qrange(dtype)
    if axis is None:
        return np.float32(0.0375), affine._storage_dtype(dtype)(rng.integers(qmin, qmax + 1))
    n = shape[axis]
    scale = rng.uniform(0.01, 0.3, n).astype(np.float32)
    scale[0] = 0.125  # a power of two, so its ties are exact whatever k is
    return scale, rng.integers(qmin, qmax + 1, n).astype(affine._storage_dtype(dtype))


def tricky_tensor(shape, scale, zero_point, dtype: str, axis, rng) -> np.ndarray:
    """Values across the range and beyond, with many exact ties k·s + s/2, saturation, ±inf and NaN."""
    qmin, qmax = affine.qrange(dtype)
    bshape = [1] * len(shape)
    if axis is not None:
        bshape[axis] = shape[axis]
    s = np.asarray(scale, dtype=np.float32).reshape(bshape)
    z = np.asarray(zero_point, dtype=np.float32).reshape(bshape)
    k = rng.integers(qmin - 5, qmax + 6, shape).astype(np.float32) - z
    offset = rng.choice(np.array([0.5, -0.5, 0.0], dtype=np.float32), shape)
    offset = np.where(rng.random(shape) < 0.4, rng.uniform(-0.5, 0.5, shape).astype(np.float32), offset)
    x = (k + offset) * s
    flat = x.reshape(-1)
    far = rng.choice(flat.size, 12, replace=False)
    flat[far] = np.array([1e4, -1e4, 3e38, -3e38, np.inf, -np.inf, np.nan, 0, -0.0, 1e-30, 500, -500])
    return x


@pytest.mark.parametrize(("dtype", "layout", "opset"), CASES)
def test_quantize_matches_onnxruntime_bit_for_bit(dtype, layout, opset):
    rng = np.random.default_rng([opset, len(dtype), len(layout)])
    shape, axis = LAYOUTS[layout]
    scale, zero_point = random_parameters(dtype, shape, axis, rng)
    x = tricky_tensor(shape, scale, zero_point, dtype, axis, rng)

    with np.errstate(all="ignore"):
        ratio = x / np.asarray(scale).reshape([-1 if i == axis else 1 for i in range(x.ndim)])
        assert np.sum(ratio - np.floor(ratio) == 0.5) > 10  # the data really holds exact ties
    q = affine.quantize(x, scale, zero_point, dtype, axis=axis)
    expected = ort_quantize(x, scale, zero_point, dtype, axis, opset)
    assert q.dtype == expected.dtype == affine._storage_dtype(dtype)
    assert np.array_equal(q, expected)
    qmin, qmax = affine.qrange(dtype)
    assert q.min() == qmin and q.max() == qmax  # saturation was exercised


@pytest.mark.parametrize(("dtype", "layout", "opset"), CASES)
def test_dequantize_matches_onnxruntime_bit_for_bit(dtype, layout, opset):
    rng = np.random.default_rng([opset, len(dtype), len(layout), 1])
    shape, axis = LAYOUTS[layout]
    scale, zero_point = random_parameters(dtype, shape, axis, rng)
    qmin, qmax = affine.qrange(dtype)
    q = rng.integers(qmin, qmax + 1, shape).astype(affine._storage_dtype(dtype))
    q.reshape(-1)[:2] = qmin, qmax

    x_hat = affine.dequantize(q, scale, zero_point, axis=axis)
    expected = ort_dequantize(q, scale, zero_point, dtype, axis, opset)
    assert x_hat.dtype == expected.dtype == np.float32
    assert np.array_equal(x_hat, expected)


def test_quantize_divides_by_the_scale_like_onnxruntime():
    """x / s and x * (1 / s) differ in the last bit for some x, which can flip a rounding."""
    s = np.float32(0.1)
    x = np.random.default_rng(3).uniform(-12, 12, 1_000_000).astype(np.float32)
    flips = x[np.rint(x / s) != np.rint(x * (np.float32(1) / s))]
    assert flips.size > 0
    expected = ort_quantize(flips, s, np.int8(0), "int8", None, 13)
    assert np.array_equal(affine.quantize(flips, s, 0, "int8"), expected)
    assert not np.array_equal(np.rint(flips * (np.float32(1) / s)).astype(np.int8), expected)


# ---------------------------------------------------------------------------------------------------
# Ranges, scale and zero point: the same numbers as ONNX Runtime's quantization tools
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", list(affine.DTYPES))
@pytest.mark.parametrize("reduce_range", [False, True])
def test_qrange_matches_onnxruntime_tables(dtype, reduce_range):
    qmin, qmax = quant_utils.get_qmin_qmax_for_qType(ONNX_TYPE[dtype], reduce_range=reduce_range)
    assert affine.qrange(dtype, reduce_range=reduce_range) == (int(qmin), int(qmax))
    if dtype in ("int8", "int16") and not reduce_range:
        qmin, qmax = quant_utils.get_qmin_qmax_for_qType(ONNX_TYPE[dtype], symmetric=True)
        assert affine.qrange(dtype, narrow=True) == (int(qmin), int(qmax))


def test_qrange_values_named_in_the_lesson():
    assert affine.qrange("int8") == (-128, 127)
    assert affine.qrange("int8", narrow=True) == (-127, 127)
    assert affine.qrange("uint8") == (0, 255)
    assert affine.qrange("uint8", reduce_range=True) == (0, 127)
    assert affine.qrange("int8", reduce_range=True) == (-64, 64)  # ONNX Runtime's table, 129 levels
    assert affine.qrange("int4") == (-8, 7)
    assert affine.qrange("int4", narrow=True) == (-7, 7)
    assert affine.qrange("uint4") == (0, 15)


RANGES = [(-1.0, 3.0), (0.0, 6.0), (-0.37, 0.11), (-5.5, -0.25), (0.0, 0.0), (-1e-3, 2e-3), (-127.3, 4.1)]
# A near tie: uint8 z = 249 from the float64 scale, 248 from the float32 one. ONNX Runtime uses float64.
RANGES += [(-7.436683654785156, 0.19452078640460968)]


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int4", "uint4"])
@pytest.mark.parametrize("symmetric", [False, True])
@pytest.mark.parametrize("reduce_range", [False, True])
def test_scale_zero_point_matches_compute_scale_zp(dtype, symmetric, reduce_range):
    qmin, qmax = quant_utils.get_qmin_qmax_for_qType(ONNX_TYPE[dtype], reduce_range, symmetric=symmetric)
    for rmin, rmax in RANGES:
        zp_ort, scale_ort = quant_utils.compute_scale_zp(
            np.array(rmin, np.float32), np.array(rmax, np.float32), qmin, qmax, symmetric
        )
        scale, zero_point = affine.scale_zero_point(rmin, rmax, dtype, symmetric, reduce_range)
        assert scale.dtype == np.float32 and scale == scale_ort, (rmin, rmax)
        assert zero_point.dtype == affine._storage_dtype(dtype) and int(zero_point) == int(zp_ort), (
            rmin,
            rmax,
        )


@pytest.mark.parametrize(
    ("dtype", "symmetric"), [("uint8", False), ("int8", True), ("uint8", True), ("int8", False)]
)
def test_per_channel_scale_zero_point_matches_compute_scale_zp_channel_by_channel(dtype, symmetric):
    rng = np.random.default_rng(7)
    w = rng.standard_normal((8, 50)).astype(np.float32) * rng.uniform(0.01, 5, (8, 1)).astype(np.float32)
    w[3] = np.abs(w[3])  # an all-positive channel
    w[5] = 0  # an all-zero channel
    rmin, rmax = w.min(axis=1), w.max(axis=1)
    scale, zero_point = affine.scale_zero_point(rmin, rmax, dtype, symmetric)
    assert scale.shape == zero_point.shape == (8,)
    qmin, qmax = quant_utils.get_qmin_qmax_for_qType(ONNX_TYPE[dtype], symmetric=symmetric)
    for c in range(8):
        zp_ort, scale_ort = quant_utils.compute_scale_zp(rmin[c], rmax[c], qmin, qmax, symmetric)
        assert scale[c] == scale_ort and zero_point[c] == zp_ort, c


def test_symmetric_conventions():
    scale, zero_point = affine.scale_zero_point(-0.3, 1.7, "int8", symmetric=True)
    assert zero_point == 0 and scale == np.float32(2 * 1.7 / 254)  # narrow -127..127
    scale, zero_point = affine.scale_zero_point(-0.3, 1.7, "uint8", symmetric=True)
    assert zero_point == 128 and scale == np.float32(2 * 1.7 / 255)
    scale, zero_point = affine.scale_zero_point(-0.3, 1.7, "int4", symmetric=True)
    assert zero_point == 0 and scale == np.float32(2 * 1.7 / 15)  # ONNX Runtime keeps int4 at -8..7
    q = affine.quantize(np.float32([-1.7, 1.7]), *affine.scale_zero_point(-1.7, 1.7, "int8", True), "int8")
    assert q.tolist() == [-127, 127]  # mirrored codes
    assert affine.scale_zero_point(0.0, 0.0, "uint8") == (1.0, 0)  # a zero-width range


# ---------------------------------------------------------------------------------------------------
# What it costs
# ---------------------------------------------------------------------------------------------------


def test_quantization_error_numbers():
    x = np.array([1.0, -1.0, 2.0, -2.0])
    x_hat = np.array([1.1, -0.9, 2.0, -2.0])
    err = affine.quantization_error(x, x_hat, clipped=np.array([True, False, False, False]))
    assert err.mse == pytest.approx(0.005)
    assert err.max_abs_error == pytest.approx(0.1)
    assert err.sqnr_db == pytest.approx(10 * np.log10(2.5 / 0.005))
    assert err.percent_clipped == 25.0
    assert affine.quantization_error(x, x).sqnr_db == float("inf")
    assert affine.quantization_error(x, x).percent_clipped is None


@pytest.mark.parametrize(
    ("dtype", "scale", "zero_point"), [("uint8", 0.02, 37), ("int8", 0.1, 0), ("int8", 0.05, -3)]
)
def test_clipped_means_onnxruntime_saturates_the_code(dtype, scale, zero_point):
    """Half a step past an end level a value still rounds to it (a rounding error, not clipped);
    only further out does QuantizeLinear's saturation change the code, and the error exceed s/2."""
    lo, hi = affine.representable_range(scale, zero_point, dtype)
    low, high = affine._clipping_range(scale, zero_point, dtype)
    assert low == pytest.approx(lo - scale / 2) and high == pytest.approx(hi + scale / 2)
    x = np.linspace(low - 3 * scale, high + 3 * scale, 100_001, dtype=np.float32)
    x = x[(np.abs(x - low) > 1e-4 * scale) & (np.abs(x - high) > 1e-4 * scale)]  # no ties on the ends
    q = ort_quantize(x, scale, np.asarray(zero_point, affine._storage_dtype(dtype)), dtype, None, 13)
    before_saturation = np.rint(x / np.float32(scale)) + zero_point
    qmin, qmax = affine.qrange(dtype)
    clipped = affine._clipped_mask(x, scale, zero_point, dtype)
    assert np.array_equal(clipped, (before_saturation < qmin) | (before_saturation > qmax))
    assert np.array_equal(q[clipped], np.where(x[clipped] > 0, qmax, qmin))
    error = np.abs(affine.dequantize(q, scale, zero_point) - x)
    assert error[~clipped].max() <= scale / 2 * (1 + 1e-4) < error[clipped].min()
    # other integers than dtype's, and one range per channel
    assert affine._clipping_range(scale, zero_point, codes=(-4, 3)) == pytest.approx(
        ((-4 - zero_point - 0.5) * scale, (3 - zero_point + 0.5) * scale)
    )
    per_channel = affine._clipped_mask(
        np.float32([[high + scale], [high]]), [scale, 2 * scale], [zero_point] * 2, dtype, axis=0
    )
    assert per_channel.ravel().tolist() == [True, False]


def test_each_bit_adds_about_six_db():
    x = np.random.default_rng(1).uniform(-1, 1, 200_000).astype(np.float32)
    sqnr = {}
    for dtype in ("int4", "int8"):
        scale, zero_point = affine.scale_zero_point(-1, 1, dtype, symmetric=True)
        sqnr[dtype] = affine.quantization_error(x, affine.fake_quantize(x, scale, zero_point, dtype)).sqnr_db
    assert sqnr["int8"] - sqnr["int4"] == pytest.approx(4 * 6.02, abs=1.0)


# ---------------------------------------------------------------------------------------------------
# Granularity
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("dtype", "symmetric"), [("int8", True), ("int4", True), ("uint8", False)])
@pytest.mark.parametrize("axis", [0, 1])
def test_blockwise_matches_onnxruntime(dtype, symmetric, axis):
    w = np.random.default_rng(5).standard_normal((12, 20)).astype(np.float32)
    block_size = 8  # 20 is not a multiple: the last block along axis 1 is short
    scale, zero_point = affine._block_scale_zero_point(w, block_size, dtype, symmetric, axis)
    zp_ort, scale_ort = quant_utils.compute_scale_zp_blocked(w, ONNX_TYPE[dtype], axis, block_size, symmetric)
    assert np.array_equal(zero_point, zp_ort)
    if symmetric:
        assert np.array_equal(scale, scale_ort)
    else:
        # compute_scale_zp_blocked subtracts rmax - rmin in float32, compute_scale_zp in float64: the
        # two ONNX Runtime helpers disagree in the last bit for some blocks. affine follows compute_scale_zp.
        np.testing.assert_array_max_ulp(scale, scale_ort, maxulp=1)
        qmin, qmax = quant_utils.get_qmin_qmax_for_qType(ONNX_TYPE[dtype])
        for index in np.ndindex(*scale.shape):
            rows = [
                slice(i, i + 1) if d != axis else slice(i * block_size, (i + 1) * block_size)
                for d, i in enumerate(index)
            ]
            block = w[tuple(rows)]
            zp_c, scale_c = quant_utils.compute_scale_zp(block.min(), block.max(), qmin, qmax, symmetric)
            assert scale[index] == scale_c and zero_point[index] == zp_c, index

    w_hat, n_params = affine._quantize_blockwise(w, block_size, dtype, symmetric, axis)
    nodes = [
        helper.make_node(
            "QuantizeLinear", ["x", "scale", "zero_point"], ["q"], axis=axis, block_size=block_size
        ),
        helper.make_node(
            "DequantizeLinear", ["q", "scale", "zero_point"], ["y"], axis=axis, block_size=block_size
        ),
    ]
    inits = scale_and_zero_point_initializers(scale, zero_point, dtype)
    assert np.array_equal(w_hat, run_onnx(nodes, {"x": w}, TensorProto.FLOAT, inits, 21))
    n_blocks = 12 * 3 if axis == 1 else 2 * 20
    assert n_params == n_blocks * (1 if symmetric else 2)


def test_granularity_trades_error_for_metadata():
    rng = np.random.default_rng(11)
    channel_size = np.logspace(-2, 0, 32).astype(np.float32)[:, None]  # channels of very different size
    w = rng.standard_normal((32, 256)).astype(np.float32) * channel_size
    studies = [explorers.granularity_study(w, g, 32) for g in ("per-tensor", "per-channel", "block-wise")]
    (per_tensor, n_tensor), (per_channel, n_channel), (block, n_block) = (
        (st.error, st.n_scales + st.n_zero_points) for st in studies
    )
    assert (n_tensor, n_channel, n_block) == (1, 32, 32 * 8)
    assert per_channel.mse < per_tensor.mse / 4
    assert per_channel.sqnr_db > per_tensor.sqnr_db + 6  # worth more than one extra bit
    assert block.mse < per_channel.mse
    # one block per row is per-channel quantization
    w_hat, n = affine._quantize_blockwise(w, 256, axis=1)
    scale, zero_point = affine.scale_zero_point(w.min(axis=1), w.max(axis=1), "int8", symmetric=True)
    assert n == 32 and np.array_equal(w_hat, affine.fake_quantize(w, scale, zero_point, "int8", axis=0))


# ---------------------------------------------------------------------------------------------------
# int4 storage
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [0, 1, 2, 7, 8, 1001])
@pytest.mark.parametrize("signed", [True, False])
def test_pack_unpack_int4_round_trip_and_onnx_layout(n, signed):
    import ml_dtypes

    qmin, qmax = affine.qrange("int4" if signed else "uint4")
    q = np.random.default_rng(n).integers(qmin, qmax + 1, n).astype(np.int8 if signed else np.uint8)
    packed = integers.pack_int4(q)
    assert packed.dtype == np.uint8 and packed.size == (n + 1) // 2
    unpacked = integers.unpack_int4(packed, n, signed=signed)
    assert unpacked.dtype == q.dtype and np.array_equal(unpacked, q)
    if n:
        onnx_tensor = numpy_helper.from_array(q.astype(ml_dtypes.int4 if signed else ml_dtypes.uint4), "q")
        assert packed.tobytes() == onnx_tensor.raw_data


def test_pack_int4_low_nibble_first_and_odd_padding():
    assert integers.pack_int4(np.array([1, -2, 3], dtype=np.int8)).tolist() == [0xE1, 0x03]


def test_a_million_int4_values_take_half_a_million_bytes():
    q = np.random.default_rng(0).integers(-8, 8, 1_000_000).astype(np.int8)
    assert q.nbytes == 1_000_000  # simulated int4: still one byte per value
    packed = integers.pack_int4(q)
    assert packed.nbytes == 500_000
    assert np.array_equal(integers.unpack_int4(packed, q.size), q)


# ---------------------------------------------------------------------------------------------------
# Integer matmul
# ---------------------------------------------------------------------------------------------------


def quantized_operands(rng, per_column: bool):
    a = rng.standard_normal((7, 64)).astype(np.float32)
    b = rng.standard_normal((64, 9)).astype(np.float32) * rng.uniform(0.1, 2, 9).astype(np.float32)
    a_scale, a_zp = affine.scale_zero_point(a.min(), a.max(), "uint8")
    if per_column:
        b_scale, b_zp = affine.scale_zero_point(b.min(axis=0), b.max(axis=0), "int8", symmetric=True)
    else:
        b_scale, b_zp = affine.scale_zero_point(b.min(), b.max(), "int8", symmetric=True)
    qa = affine.quantize(a, a_scale, a_zp, "uint8")
    qb = affine.quantize(b, b_scale, b_zp, "int8", axis=1 if per_column else None)
    return qa, a_scale, a_zp, qb, b_scale, b_zp


@pytest.mark.parametrize("per_column", [False, True])
def test_integer_matmul_against_exact_integers_float_reference_and_onnxruntime(per_column):
    rng = np.random.default_rng(2)
    qa, a_scale, a_zp, qb, b_scale, b_zp = quantized_operands(rng, per_column)
    axis = 1 if per_column else None
    reference = affine.dequantize(qa, a_scale, a_zp).astype(np.float64) @ affine.dequantize(
        qb, b_scale, b_zp, axis=axis
    ).astype(np.float64)
    out_scale, out_zp = affine.scale_zero_point(reference.min(), reference.max(), "uint8")
    q_out, acc = integers.integer_matmul(qa, a_scale, a_zp, qb, b_scale, b_zp, out_scale, out_zp, "uint8")

    exact = [
        [
            sum(
                (int(qa[i, k]) - int(a_zp)) * (int(qb[k, j]) - int(np.broadcast_to(b_zp, 9)[j]))
                for k in range(64)
            )
        ]
        for i in range(7)
        for j in range(9)
    ]
    assert acc.dtype == np.int32 and acc.reshape(-1).tolist() == [row[0] for row in exact]
    assert q_out.dtype == np.uint8
    assert np.max(np.abs(affine.dequantize(q_out, out_scale, out_zp) - reference)) <= out_scale

    names = ["a_scale", "a_zp", "qb", "b_scale", "b_zp", "out_scale", "out_zp"]
    values = [a_scale, a_zp, qb, b_scale, b_zp, out_scale, out_zp]
    inits = [numpy_helper.from_array(np.asarray(v), name) for name, v in zip(names, values, strict=True)]
    node = helper.make_node("QLinearMatMul", ["qa", *names], ["y"])
    assert np.array_equal(q_out, run_onnx([node], {"qa": qa}, TensorProto.UINT8, inits, 21, (7, 9)))


def test_integer_matmul_rescales_in_float32_like_onnxruntime():
    """A product that is a tie in float32 (-73.5) but not in float64 (-73.4999979): the float32 one wins."""
    a_scale, b_scale, out_scale = np.float32(0.01410758), np.float32(0.05871878), np.float32(0.07050809)
    rng = np.random.default_rng(4)
    qa = rng.integers(0, 256, (3, 16)).astype(np.uint8)
    qb = rng.integers(-128, 128, (16, 4)).astype(np.int8)
    qa[0] = 64  # the zero point: contributes nothing ...
    qa[0, 0], qb[0, 0] = 200, -46  # ... except (200 - 64) * (-46 - 0) = -6256
    q_out, acc = integers.integer_matmul(qa, a_scale, 64, qb, b_scale, 0, out_scale, 128, "uint8")
    assert acc[0, 0] == -6256
    multiplier = a_scale * b_scale / out_scale
    assert np.float32(-6256) * multiplier == -73.5 and round(-6256 * float(multiplier)) == -73
    assert q_out[0, 0] == 128 - 74  # half to even on the float32 product

    names = ["a_scale", "a_zp", "qb", "b_scale", "b_zp", "out_scale", "out_zp"]
    values = [a_scale, np.uint8(64), qb, b_scale, np.int8(0), out_scale, np.uint8(128)]
    inits = [numpy_helper.from_array(np.asarray(v), name) for name, v in zip(names, values, strict=True)]
    node = helper.make_node("QLinearMatMul", ["qa", *names], ["y"])
    assert np.array_equal(q_out, run_onnx([node], {"qa": qa}, TensorProto.UINT8, inits, 21, (3, 4)))


# ---------------------------------------------------------------------------------------------------
# Errors say what was expected, what was found, and the fix
# ---------------------------------------------------------------------------------------------------


def test_unknown_dtype_names_the_allowed_values():
    with pytest.raises(ValueError, match=r"'int8', 'uint8', 'int4', 'uint4'.*got 'int9'.*dtype='int8'"):
        affine.qrange("int9")
    with pytest.raises(ValueError, match="'uint8'.*got 'float16'"):
        affine.scale_zero_point(-1, 1, "float16")
    with pytest.raises(ValueError, match="got 'INT8'"):
        affine.quantize([1.0], 0.1, 0, "INT8")


@pytest.mark.parametrize("bad_scale", [0.0, -0.1, np.nan, np.inf, np.array([0.1, 0.0])])
def test_non_positive_scale_is_refused_with_the_fix(bad_scale):
    axis = None if np.ndim(bad_scale) == 0 else 0
    with pytest.raises(ValueError, match="scale must be positive and finite.*scale_zero_point"):
        affine.quantize(np.ones(2), bad_scale, 0, "int8", axis=axis)
    with pytest.raises(ValueError, match="scale must be positive and finite"):
        affine.dequantize(np.ones(2, dtype=np.int8), bad_scale, 0, axis=axis)


def test_other_mistakes_are_explained():
    x = np.ones((2, 3), dtype=np.float32)
    with pytest.raises(ValueError, match=r"zero_point must be an integer in \[0, 255\].*found 300"):
        affine.quantize(x, 0.1, 300, "uint8")
    with pytest.raises(ValueError, match=r"shape \(3,\).*found shape \(2,\)"):
        affine.quantize(x, np.array([0.1, 0.2]), np.array([0, 0]), "int8", axis=1)
    with pytest.raises(ValueError, match="axis is None.*axis="):
        affine.quantize(x, np.array([0.1, 0.2]), 0, "int8")
    with pytest.raises(ValueError, match="unsigned.*narrow=False"):
        affine.qrange("uint8", narrow=True)
    with pytest.raises(ValueError, match="rmin must be <= rmax.*minimum first"):
        affine.scale_zero_point(3.0, -1.0)
    with pytest.raises(ValueError, match=r"\[-8, 7\] or uint4.*found values in \[0, 16\]"):
        integers.pack_int4(np.array([0, 16]))
    with pytest.raises(ValueError, match="n must be between 0 and 2"):
        integers.unpack_int4(np.zeros(2, dtype=np.uint8), 5)
    with pytest.raises(ValueError, match="integer array.*quantize"):
        affine.dequantize(np.ones(2), 0.1, 0)
    with pytest.raises(ValueError, match="block_size must be a positive integer"):
        affine._quantize_blockwise(x, 0)


def test_vpmaddubsw_saturates_full_range_weights_and_not_reduced_ones():
    rng = np.random.default_rng(0)
    a = rng.integers(0, 256, size=(16, 33), dtype=np.uint8)  # odd K: padded with a zero pair
    w = rng.integers(-127, 128, size=(33, 8)).astype(np.int8)
    exact = a.astype(np.int64) @ w.astype(np.int64)
    got, saturated, pairs = integers.vpmaddubsw_matmul(a, w, chunk=3)
    assert pairs == 16 * 17 * 8 and saturated > 0
    assert not np.array_equal(got, exact)
    # Rebuild the expected result independently, pair by pair with int16 saturation.
    a_pad = np.concatenate([a, np.zeros((16, 1), np.uint8)], 1).astype(np.int64)
    w_pad = np.concatenate([w, np.zeros((1, 8), np.int8)], 0).astype(np.int64)
    pair = a_pad[:, 0::2, None] * w_pad[None, 0::2] + a_pad[:, 1::2, None] * w_pad[None, 1::2]
    np.testing.assert_array_equal(got, np.clip(pair, -32768, 32767).sum(1))
    assert saturated == int((np.abs(pair) > 32767).sum() - (pair == -32768).sum())

    reduced = rng.integers(-64, 65, size=(33, 8)).astype(np.int8)  # reduce_range: 7-bit weights
    got, saturated, _ = integers.vpmaddubsw_matmul(a, reduced)
    assert saturated == 0 and np.array_equal(got, a.astype(np.int64) @ reduced.astype(np.int64))
    with pytest.raises(ValueError, match="uint8 by int8"):
        integers.vpmaddubsw_matmul(a.astype(np.int8), w)


def test_im2col_times_the_weights_is_the_convolution():
    import torch

    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 7, 6)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    cols = integers.im2col(x, (3, 3), strides=(2, 2), pads=(1, 1, 1, 1))  # output 4 x 3 per image
    ours = (cols @ w.reshape(4, -1).T).reshape(2, 4, 3, 4).transpose(0, 3, 1, 2)  # (N, OH, OW, out) -> NCHW
    ref = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w), stride=2, padding=1).numpy()
    np.testing.assert_allclose(ours, ref, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match=r"expects \(N, C, H, W\)"):
        integers.im2col(x[0], (3, 3))
