"""course_lib.explorers: what the explorers compute, tested without a browser, and their widgets."""

from __future__ import annotations

import numpy as np
import pytest

import course_lib as cl
from course_lib import affine, explorers


@pytest.fixture(scope="module")
def resnet_weights():
    return explorers.weight_tensors(cl.load_model("fashion_resnet18", train=False).module.state_dict())


# ---------------------------------------------------------------------------------------------------
# Quantization error explorer
# ---------------------------------------------------------------------------------------------------


def test_sample_values_are_seeded_and_shaped():
    a = explorers.sample_values("normal", n=5000, seed=3)
    assert a.dtype == np.float32 and a.shape == (5000,)
    assert np.array_equal(a, explorers.sample_values("normal", n=5000, seed=3))
    assert not np.array_equal(a, explorers.sample_values("normal", n=5000, seed=4))
    clean = explorers.sample_values("ReLU activations", n=10_000)
    relu = explorers.sample_values("ReLU activations", n=10_000, outliers=7, outlier_magnitude=20)
    assert relu.min() == 0 and 0.45 < np.mean(clean == 0) < 0.55
    assert np.sum(relu > 2 * clean.max()) == 7  # the outliers, all positive
    u = explorers.sample_values("uniform", n=10_000)
    assert u.min() >= -1 and u.max() <= 1


def test_outliers_have_the_requested_count_and_magnitude():
    x = explorers.sample_values("normal", n=20_000, outliers=5, outlier_magnitude=30)
    bulk_std = explorers.sample_values("normal", n=20_000).std()
    far = np.abs(x) > 20 * bulk_std
    assert far.sum() == 5
    assert np.allclose(np.abs(x[far]), 30 * bulk_std, rtol=1e-5)  # in units of the data's own spread
    assert 0 < np.sum(x[far] > 0) < 5  # random signs (with this seed: both)


def test_resnet_weights_distribution_uses_the_given_tensor():
    w = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert np.array_equal(explorers.sample_values("ResNet weights", weights=w), w.ravel())
    with pytest.raises(ValueError, match="weights="):
        explorers.sample_values("ResNet weights")
    with pytest.raises(ValueError, match="distribution must be one of"):
        explorers.sample_values("cauchy")


def test_more_bits_give_lower_error():
    x = explorers.sample_values("normal", n=50_000)
    mse = [explorers.error_study(x, bits).error.mse for bits in range(2, 9)]
    assert all(later < earlier for earlier, later in zip(mse, mse[1:], strict=False))
    sqnr = [explorers.error_study(x, bits).error.sqnr_db for bits in (6, 7, 8)]
    assert np.diff(sqnr) == pytest.approx([6.02, 6.02], abs=0.6)  # about 6 dB per bit


def test_levels_and_grid_follow_the_bit_width_and_scheme():
    x = explorers.sample_values("normal", n=10_000)
    st = explorers.error_study(x, 3, signed=True, symmetric=True)
    # narrow: the range maps onto -3..3, so +m and -m are mirrored codes; but QuantizeLinear still
    # saturates to the type's full -4..3, so the reserved code -4 stays reachable below -m
    assert st.dtype == "int3" and len(st.levels) == 8
    assert st.zero_point == 0 and st.levels[1] == -st.levels[-1] == -np.abs(x).max()
    st = explorers.error_study(x, 4, signed=False, symmetric=False)
    assert st.dtype == "uint4" and len(st.levels) == 16
    assert 0.0 in st.levels  # real zero is exactly representable
    assert np.allclose(np.diff(st.levels), st.scale)
    assert (st.lo, st.hi) == (float(st.levels[0]), float(st.levels[-1]))


@pytest.mark.parametrize("percentile", [99.0, 99.9])
def test_percentile_range_clips_the_expected_fraction(percentile):
    x = explorers.sample_values("normal", n=200_000, seed=1)
    st = explorers.error_study(x, 8, signed=True, symmetric=False, method="percentile", percentile=percentile)
    expected = 100 - percentile
    assert st.error.percent_clipped == pytest.approx(expected, rel=0.15)
    assert explorers.error_study(x, 8, method="min/max").error.percent_clipped < 0.01


def test_clipped_means_more_than_half_a_step_beyond_the_end_levels():
    # affine._clipping_range's meaning, on 3-bit codes too: a min/max range never clips its own
    # extremes, although rounding the zero point can leave one just past the last level
    x = explorers.sample_values("normal", n=20_000)
    for bits, signed in ((8, True), (3, True), (5, False)):
        st = explorers.error_study(x, bits, signed=signed, symmetric=False)
        assert (st.clip_low, st.clip_high) == pytest.approx((st.lo - st.scale / 2, st.hi + st.scale / 2))
        assert st.error.percent_clipped == 0.0
        assert np.array_equal(st.clipped, np.abs(st.x_hat - x) > st.scale / 2 * (1 + 1e-4))


def test_an_outlier_raises_the_error_of_a_min_max_range():
    clean = explorers.sample_values("normal", n=20_000)
    dirty = explorers.sample_values("normal", n=20_000, outliers=1, outlier_magnitude=40)
    min_max = explorers.error_study(dirty, 8)
    assert min_max.scale > 5 * explorers.error_study(clean, 8).scale
    assert min_max.error.mse > 20 * explorers.error_study(clean, 8).error.mse
    # clipping the outlier away brings back the resolution of the bulk (and pays on the outlier)
    clipped = explorers.error_study(dirty, 8, method="percentile", percentile=99.99)
    bulk = np.abs(dirty) < 10
    bulk_mse = [np.mean((st.x_hat[bulk] - dirty[bulk]) ** 2) for st in (min_max, clipped)]
    assert bulk_mse[1] < bulk_mse[0] / 20
    assert np.abs(clipped.x_hat - dirty)[~bulk].max() > 30


def test_range_by_hand_and_its_mistakes():
    x = np.linspace(-4, 4, 1001, dtype=np.float32)
    st = explorers.error_study(x, 8, signed=False, method="by hand", low=-1.0, high=1.0)
    assert (st.rmin, st.rmax) == (-1.0, 1.0)
    assert st.error.percent_clipped == pytest.approx(100 * np.mean(np.abs(x) > 1.0), abs=0.3)
    assert np.all(st.x_hat[st.clipped] == np.where(x[st.clipped] > 0, st.hi, st.lo))
    with pytest.raises(ValueError, match="low <= high"):
        explorers.quantization_error._choose_range(x, "by hand", low=2.0, high=1.0)
    with pytest.raises(ValueError, match="percentile must be"):
        explorers.quantization_error._choose_range(x, "percentile", percentile=30)
    with pytest.raises(ValueError, match="method must be one of"):
        explorers.quantization_error._choose_range(x, "entropy")


def test_error_study_matches_affine_directly():
    x = explorers.sample_values("normal", n=5000, seed=2)
    st = explorers.error_study(x, 8, signed=False, symmetric=False)
    scale, zero_point = affine.scale_zero_point(x.min(), x.max(), "uint8")
    assert st.scale == scale and st.zero_point == zero_point
    assert np.array_equal(st.x_hat, affine.fake_quantize(x, scale, zero_point, "uint8"))
    assert "uint8 asymmetric" in st.describe() and "SQNR" in st.describe()


def test_error_curve_is_bounded_inside_and_ramps_outside():
    x = explorers.sample_values("normal", n=20_000)
    st = explorers.error_study(x, 4, method="percentile", percentile=99)
    grid, err = explorers.quantization_error._error_curve(st)
    inside = (grid >= st.lo) & (grid <= st.hi)
    assert np.abs(err[inside]).max() <= st.scale / 2 * (1 + 1e-5)
    assert np.abs(err[~inside]).max() > st.scale  # clipping error outgrows the rounding bound


def test_thin_levels():
    shown, every = explorers.quantization_error._thin_levels(np.arange(256), max_lines=64)
    assert every == 4 and len(shown) == 64
    shown, every = explorers.quantization_error._thin_levels(np.arange(15), max_lines=64)
    assert every == 1 and len(shown) == 15


def test_clipping_sweep_finds_an_interior_optimum_at_low_bits():
    x = explorers.sample_values("normal", n=50_000, outliers=20, outlier_magnitude=15)
    percentiles = [95, 99, 99.9, 99.99, 100]
    mse = explorers.clipping_sweep(x, percentiles, bits=4)
    assert mse[-1] == explorers.error_study(x, 4, symmetric=True).error.mse  # 100 is min/max
    assert 0 < int(np.argmin(mse)) < len(percentiles) - 1


def test_bit_widths_from_two_to_eight():
    assert explorers.quantization_error._integer_range(3, signed=True) == (-4, 3)
    assert explorers.quantization_error._integer_range(2, signed=False) == (0, 3)
    assert explorers.quantization_error._integer_range(5, signed=True, narrow=True) == (-15, 15)
    for bits, signed, dtype in (
        (8, True, "int8"),
        (8, False, "uint8"),
        (4, True, "int4"),
        (4, False, "uint4"),
    ):
        assert explorers.quantization_error._integer_range(bits, signed) == affine.qrange(dtype)
    with pytest.raises(ValueError, match="from 2 to 8"):
        explorers.quantization_error._integer_range(9, True)
    q = explorers.quantization_error._quantize_bits(
        np.float32([-9.0, -0.5, 0.5, 1.5, 9.0]), 1.0, 0, 3, signed=True
    )
    assert q.tolist() == [-4, 0, 0, 2, 3]  # half to even, saturated to -4..3


@pytest.mark.parametrize(
    ("dtype", "symmetric"),
    [("int8", False), ("int8", True), ("uint8", False), ("uint8", True), ("int4", True), ("uint4", False)],
)
def test_the_general_formula_is_affines_on_onnx_types(dtype, symmetric):
    rng = np.random.default_rng(5)
    narrow = symmetric and dtype == "int8"
    for rmin, rmax in [(-1.0, 3.0), (0.0, 0.0), (0.2, 5.0), *rng.normal(0, 2, (20, 2)).tolist()]:
        rmin, rmax = min(rmin, rmax), max(rmin, rmax)
        scale, zero_point = affine.scale_zero_point(rmin, rmax, dtype, symmetric, narrow=narrow)
        ours = explorers.quantization_error._range_scale_zero_point(
            rmin, rmax, *affine.qrange(dtype, narrow=narrow), symmetric
        )
        assert ours == (float(scale), int(zero_point)), (rmin, rmax)


# ---------------------------------------------------------------------------------------------------
# Granularity explorer, on the real ResNet18 weights
# ---------------------------------------------------------------------------------------------------


def test_weight_tensors_keeps_conv_and_linear_weights(resnet_weights):
    assert len(resnet_weights) == 21  # 20 convolutions and the final linear layer
    assert resnet_weights["fc.weight"].shape == (10, 512)
    assert all(w.ndim in (2, 4) and w.dtype == np.float32 for w in resnet_weights.values())
    with pytest.raises(ValueError, match="no conv or linear weights"):
        explorers.weight_tensors({"bias": np.zeros(3)})


def test_per_channel_error_is_at_most_per_tensor_on_real_weights(resnet_weights):
    # Only what holds for any trained weights: channel by channel a smaller scale can round one
    # channel a little worse (it did on an AMD-trained fc.weight), so the checks are the tensor-wide
    # MSE, and the channel that holds the tensor's largest |w|, whose scale is the same either way.
    for name, w in resnet_weights.items():
        per_tensor = explorers.granularity_study(w, "per-tensor")
        per_channel = explorers.granularity_study(w, "per-channel")
        assert per_channel.error.mse <= per_tensor.error.mse, name
        widest = int(np.abs(w.reshape(len(w), -1)).max(axis=1).argmax())
        assert per_channel.channel_mse[widest] == per_tensor.channel_mse[widest], name


def _weights_with_an_outlier(seed: int = 0) -> np.ndarray:
    """64 output channels of N(0, 0.02) weights, the channels' spreads varying 8-fold, and one
    weight in channel 3 twelve times the bulk's largest: the shape of a layer with an outlier."""
    rng = np.random.default_rng(seed)
    w = rng.normal(0, 0.02, (64, 128, 3, 3)) * np.geomspace(0.25, 2.0, 64)[:, None, None, None]
    w[3, 5, 1, 1] = 12 * np.abs(w).max()
    return w.astype(np.float32)


def test_finer_granularity_helps_most_where_an_outlier_sits():
    w = _weights_with_an_outlier()
    assert explorers.outlier_ratio(w) > 2.5  # far beyond its 99.9th percentile
    per_tensor = explorers.granularity_study(w, "per-tensor")
    per_channel = explorers.granularity_study(w, "per-channel")
    # The outlier sets the per-tensor scale for all 64 channels; per channel it costs only its own.
    assert np.all(np.delete(per_channel.channel_mse < per_tensor.channel_mse, 3))
    assert per_channel.channel_mse[3] == per_tensor.channel_mse[3]
    sqnr = [
        explorers.granularity_study(w, g, b).error.sqnr_db
        for g, b in (("per-tensor", 32), ("per-channel", 32), ("block-wise", 128), ("block-wise", 32))
    ]
    assert sqnr == sorted(sqnr) and sqnr[1] - sqnr[0] > 3


def test_metadata_counts_are_exact(resnet_weights):
    w = resnet_weights["layer3.0.conv2.weight"]  # (256, 256, 3, 3): 2,304 weights per output channel
    st = explorers.granularity_study(w, "per-tensor")
    assert (st.n_scales, st.n_zero_points, st.metadata_bytes, st.payload_bytes) == (1, 0, 4, w.size)
    st = explorers.granularity_study(w, "per-channel")
    assert (st.n_scales, st.n_zero_points, st.metadata_bytes) == (256, 0, 1024)
    st = explorers.granularity_study(w, "block-wise", 32)
    assert (st.n_scales, st.metadata_bytes) == (256 * 72, 4 * 256 * 72)
    st = explorers.granularity_study(w, "block-wise", 100)  # 2,304 / 100: 24 blocks, the last one short
    assert st.n_scales == 256 * 24
    st = explorers.granularity_study(w, "per-channel", dtype="uint8", symmetric=False)
    assert (st.n_scales, st.n_zero_points, st.metadata_bytes) == (256, 256, 256 * 5)
    st = explorers.granularity_study(w, "block-wise", 32, dtype="int4")
    assert st.payload_bytes == w.size // 2 and st.metadata_bytes == 4 * 256 * 72
    st = explorers.granularity_study(resnet_weights["conv1.weight"], "block-wise", 32)  # 49 per channel
    assert st.n_scales == 64 * 2 and len(st.channel_sqnr_db) == 64


def test_granularity_study_agrees_with_affine(resnet_weights):
    w = resnet_weights["fc.weight"]  # (10, 512)
    per_tensor = affine.scale_zero_point(w.min(), w.max(), "int8", symmetric=True)
    per_channel = affine.scale_zero_point(w.min(axis=1), w.max(axis=1), "int8", symmetric=True)
    block_hat, block_params = affine._quantize_blockwise(w, 32, "int8", symmetric=True, axis=1)
    for mode, w_hat, n_params in (
        ("per-tensor", affine.fake_quantize(w, *per_tensor, "int8"), 1),
        ("per-channel", affine.fake_quantize(w, *per_channel, "int8", axis=0), 10),
        ("block-wise", block_hat, block_params),
    ):
        ours = explorers.granularity_study(w, mode, 32)
        theirs = affine.quantization_error(w, w_hat)
        assert ours.error.mse == pytest.approx(theirs.mse, rel=1e-9) and ours.n_scales == n_params
    with pytest.raises(ValueError, match="granularity must be one of"):
        explorers.granularity_study(w, "per-row")
    with pytest.raises(ValueError, match="dtype must be one of"):
        explorers.granularity_study(w, dtype="int3")


# ------------------------------------------------------------------ sample browser
def test_sample_page_pages_through_one_class_and_clamps_the_page():
    of_class = np.flatnonzero(cl.load_split("test")[1] == 3)
    images, labels, indices, n = explorers.pages._sample_page("test", class_id=3, page=1, per_page=24)
    assert images.shape == (24, 28, 28) and set(labels) == {3} and n == len(of_class)
    assert np.array_equal(indices, of_class[24:48])
    images, _, indices, _ = explorers.pages._sample_page("test", class_id=3, page=10**6, per_page=24)
    assert len(images) == (len(of_class) - 1) % 24 + 1 and indices[-1] == of_class[-1]  # the last page


# ------------------------------------------------------------------ calibration explorer, subgraph
def test_describe_ranges_reports_each_methods_clipped_share():
    values = np.concatenate([np.zeros(990), np.full(10, 5.0)]).astype(np.float32)
    line = explorers.ranges._describe_ranges(
        "relu_7", values, {"MinMax": (0.0, 5.0), "Percentile": (0.0, 1.0)}
    )
    assert "<b>relu_7</b>: 1,000 values in [0, 5]" in line
    assert "MinMax [0, 5] clips 0.000%" in line and "Percentile [0, 1] clips 1.000%" in line


def test_calibration_explorer_draws_the_chosen_tensor_and_refuses_unknown_ones():
    import matplotlib

    matplotlib.use("Agg")
    rng = np.random.default_rng(0)
    values = {
        "a": rng.standard_normal(500).astype(np.float32),
        "b": rng.exponential(size=500).astype(np.float32),
    }
    ranges = {
        n: {"MinMax": (float(v.min()), float(v.max())), "Percentile": (0.0, 1.0)} for n, v in values.items()
    }
    box = explorers.calibration_explorer(values, ranges, tensor="b")
    controls, status = box.children[0].children, box.children[1]
    assert controls[0].value == "b" and "<b>b</b>" in status.value
    controls[0].value = "a"  # choosing another tensor redraws the status line for it
    assert "<b>a</b>" in status.value and "MinMax" in status.value
    controls[1].value = ("Percentile",)
    assert "MinMax" not in status.value and "Percentile" in status.value
    with pytest.raises(ValueError, match="not one of a, b"):
        explorers.calibration_explorer(values, ranges, tensor="c")
    with pytest.raises(ValueError, match="No tensor has both"):
        explorers.calibration_explorer({"x": values["a"]}, ranges)


def test_disagreement_page_lists_only_disagreements_least_sure_first():
    ref = np.array([[3.0, 0, 0], [1.0, 0.9, 0], [0, 2.0, 0], [0.2, 0.1, 0], [0, 0, 1.0]])
    cand = np.array([[0, 3.0, 0], [0.9, 1.0, 0], [0, 2.0, 0], [0.1, 0.2, 0], [0, 0, 1.0]])
    shown, n, pages = explorers.pages._disagreement_page(ref, cand, "fp32 margin", 0, per_page=2)
    assert n == 3 and pages == 2
    assert list(shown) == [3, 1]  # rows 3 and 1 are the least sure; row 0 (sure, yet flipped) comes last
    assert list(explorers.pages._disagreement_page(ref, cand, "fp32 margin", 1, per_page=2)[0]) == [0]
    assert list(explorers.pages._disagreement_page(ref, cand, "index", 5, per_page=2)[0]) == [
        3
    ]  # clamped to the last
    with pytest.raises(ValueError, match="order must be one of"):
        explorers.pages._disagreement_page(ref, cand, "loss")


def test_disagreement_browser_switches_variants():
    import matplotlib

    matplotlib.use("Agg")
    images = np.zeros((4, 28, 28), np.uint8)
    labels = np.array([0, 1, 2, 3])
    ref = np.eye(10)[[0, 1, 2, 3]] * 5
    one = ref.copy()
    one[1] = np.eye(10)[5] * 5  # disagrees on image 1
    two = np.eye(10)[[4, 4, 4, 3]] * 5  # disagrees on 0, 1, 2
    box = explorers.disagreement_browser(images, labels, ref, {"one": one, "two": two})
    controls, status = box.children[0].children, box.children[1]
    assert "<b>one</b>: 1 disagreements" in status.value and "(25.00%)" in status.value
    controls[0].value = "two"
    assert "<b>two</b>: 3 disagreements" in status.value and "int8 wrong on 3 of the 3 shown" in status.value
    with pytest.raises(ValueError, match="at least one variant"):
        explorers.disagreement_browser(images, labels, ref, {})
