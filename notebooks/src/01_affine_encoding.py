# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 01 · Affine encoding
#
# An INT8 model keeps each tensor as small integers plus one or a few real numbers that say what
# the integers mean. The rule that links them is called *affine* quantization: a **scale** `s` (the
# real distance between neighbouring integers) and a **zero point** `z` (the integer that stands
# for real 0). Every choice later in the course, from `quantize_dynamic` to calibration methods,
# is a choice of `s` and `z` for some tensor, so this lesson takes the rule apart on your machine:
# what it keeps, what it loses, and what it costs to store.
#
# **Learning goal.** Quantize and dequantize by hand and with ONNX Runtime; choose a scale and zero
# point from a range; predict the error of rounding and of clipping; compare per-tensor,
# per-channel and block-wise scales on real weights; count the bytes; and follow an integer matrix
# product from codes to result.
#
# **Before you start.** Lesson 00. Floating-point numbers, rounding, NumPy arrays. *Weights* are the
# learned parameters of a model; *activations* are the intermediate results computed from an input.
#
# **Lesson plan**
# 1. Encode and decode one value: scale, zero point, rounding, clipping.
# 2. The rounding rule ONNX Runtime really uses, seen in a one-node ONNX model.
# 3. Scale and zero point from a range: asymmetric, symmetric and the conventions around them.
# 4. Ranges and outliers, on a real ResNet18 weight.
# 5. Granularity: one scale per tensor, per channel or per block.
# 6. Payload arithmetic with real bytes, including packed int4.
# 7. An integer matrix product, checked against ONNX Runtime's `QLinearMatMul`.
# 8. Two explorers, a summary, and exercises that check themselves.
#
# All the arithmetic comes from `course_lib.affine`, a short module you can read beside this
# lesson; its tests check it bit for bit against ONNX Runtime's own kernels.

# %%
import math
import time

import matplotlib.pyplot as plt
import numpy as np
import onnx
import onnxruntime as ort
import torch
from IPython.display import Markdown, display
from onnx import TensorProto, helper, numpy_helper

import course_lib as cl
from course_lib import affine, explore

rng = np.random.default_rng(0)
lesson_start = time.perf_counter()

# %% [markdown]
# ## 1. Encode and decode
#
# To **encode** a real number `x`, divide by the scale, round to the nearest integer, add the zero
# point, and clip to the integers the type can hold:
#
# $$q = \mathrm{clip}\big(\mathrm{round}(x / s) + z,\ q_{min},\ q_{max}\big)$$
#
# To **decode**, undo the shift and the scaling: $\hat{x} = s\,(q - z)$. In ONNX these are the
# operators `QuantizeLinear` and `DequantizeLinear`; `affine.quantize` and `affine.dequantize` do
# the same arithmetic. Take signed int8 (codes −128 to 127) with `s = 0.1` and `z = 0`:

# %%
scale, zero_point = np.float32(0.1), 0
x = np.array([1.2, 1.24, 0.26, 20.0], dtype=np.float32)
q = affine.quantize(x, scale, zero_point, "int8")
x_hat = affine.dequantize(q, scale, zero_point)
clipped = affine.clipped_mask(x, scale, zero_point, "int8")
lo, hi = affine.representable_range(scale, zero_point, "int8")

print(
    f"int8, scale {scale:g}, zero point {zero_point}: codes {affine.qrange('int8')}, reals [{lo:.1f}, {hi:.1f}]"
)
print(f"{'x':>6} {'x / s':>7} {'code q':>7} {'x̂ = s(q - z)':>13} {'|x - x̂|':>8}  clipped?")
for xi, qi, xh, c in zip(x, q, x_hat, clipped, strict=True):
    print(f"{xi:>6.2f} {xi / scale:>7.1f} {qi:>7d} {xh:>13.2f} {abs(xi - xh):>8.2f}  {'yes' if c else 'no'}")

# %%
display(
    Markdown(
        f"**What to notice.** {x[0]:.2f} and {x[1]:.2f} both become code {q[0]} and both come back as "
        f"{x_hat[0]:.2f}: the {x[1] - x[0]:.2f} between them is gone for good. {x[2]:.2f} becomes code "
        f"{q[2]} and comes back as {x_hat[2]:.2f}, off by {abs(x[2] - x_hat[2]):.2f}, less than half a step "
        f"(s/2 = {scale / 2:.2f}). But {x[3]:.0f} / s = {x[3] / scale:.0f} is beyond the largest code, "
        f"so the code saturates at {q[3]} and decodes to {x_hat[3]:.1f}: an error of "
        f"{abs(x[3] - x_hat[3]):.1f}, far larger than any rounding error. Inside the range "
        f"[{lo:.1f}, {hi:.1f}] the error is small and bounded; outside it, it grows without limit."
    )
)

# %% [markdown]
# Is "at most half a step" really a bound? Quantize a million random values spread over the whole
# representable range and look at the worst one.

# %%
u = rng.uniform(lo, hi, 1_000_000).astype(np.float32)
u_hat = affine.fake_quantize(u, scale, zero_point, "int8")  # quantize, then dequantize
u_err = affine.quantization_error(u, u_hat, affine.clipped_mask(u, scale, zero_point, "int8"))
print(f"worst error |x - x̂| over 1,000,000 values: {u_err.max_abs_error:.7f}")
print(f"half a step, s / 2:                        {scale / 2:.7f}")
print(
    f"mean squared error {u_err.mse:.4e}  vs  s² / 12 = {scale**2 / 12:.4e}; clipped: {u_err.percent_clipped}%"
)

# %% [markdown]
# **What to notice.** The worst error sits right at `s/2` (any excess is in the last digit of
# float32), and the mean squared error matches `s²/12`, the variance of an error spread evenly
# over one step. Rounding error depends only on the step; clipping error depends on how far the
# value lies outside the range. The rest of the lesson is about trading one against the other.
#
# ## 2. The rounding rule the runtime really uses
#
# "Round to nearest" leaves one question open: what happens exactly halfway? At school, ties go
# up (`math.floor(x + 0.5)`). ONNX's `QuantizeLinear` rounds **half to even**: a tie goes to the
# even neighbour, so 0.5 → 0, 1.5 → 2, 2.5 → 2. (Python's own `round()` does the same, which
# surprises many people.) Here is a one-node ONNX model, built with `onnx.helper`, that contains
# only a `QuantizeLinear` with `s = 1`, `z = 0`, run by ONNX Runtime:

# %%
quantize_graph = helper.make_graph(
    nodes=[helper.make_node("QuantizeLinear", ["x", "scale", "zero_point"], ["q"])],
    name="one_quantize_linear",
    inputs=[helper.make_tensor_value_info("x", TensorProto.FLOAT, [None])],
    outputs=[helper.make_tensor_value_info("q", TensorProto.INT8, [None])],
    initializer=[
        numpy_helper.from_array(np.array(1.0, dtype=np.float32), "scale"),
        numpy_helper.from_array(np.array(0, dtype=np.int8), "zero_point"),
    ],
)
quantize_model = helper.make_model(quantize_graph, opset_imports=[helper.make_opsetid("", 21)])
onnx.checker.check_model(quantize_model)
quantize_session = ort.InferenceSession(
    quantize_model.SerializeToString(), providers=["CPUExecutionProvider"]
)

ties = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5], dtype=np.float32)
q_ort = quantize_session.run(None, {"x": ties})[0]
print(f"{'x / s':>7} {'half up':>8} {'round()':>8} {'affine':>7} {'ONNX Runtime':>13}")
for t, q_rt, q_aff in zip(ties, q_ort, affine.quantize(ties, 1.0, 0, "int8"), strict=True):
    print(f"{t:>7.1f} {math.floor(t + 0.5):>8d} {round(float(t)):>8d} {q_aff:>7d} {q_rt:>13d}")

# %% [markdown]
# Why bother? Ties are not rare: pixels are multiples of 1/255, and many tensors hold values on a
# coarse grid of their own. Round a hundred ties, 0.5, 1.5, …, 99.5, both ways:

# %%
halves = np.arange(100, dtype=np.float32) + 0.5
bias_half_up = np.mean(np.floor(halves + 0.5) - halves)
q_halves = quantize_session.run(None, {"x": halves})[0]
bias_runtime = np.mean(q_halves.astype(np.float32) - halves)
same = np.array_equal(q_halves, affine.quantize(halves, 1.0, 0, "int8"))
print(f"mean error, round half up:               {bias_half_up:+.3f}")
print(f"mean error, ONNX Runtime (half to even): {bias_runtime:+.3f}")
print(f"ONNX Runtime and affine.quantize agree on every tie: {same}")

# %% [markdown]
# **What to notice.** Rounding half up moves every tie the same way, so the reconstructed tensor is
# biased by half a step on average. Half to even sends half of the ties down and half up, and the
# bias cancels. ONNX Runtime's codes match `affine.quantize` exactly, so every number in this
# lesson is what the runtime would produce.
#
# ## 3. Scale and zero point from a range
#
# In practice we do not pick `s` and `z`; we pick the real range `[min, max]` a tensor should
# cover and derive them. **Asymmetric** quantization stretches the range over all the codes:
#
# $$s = \frac{max - min}{q_{max} - q_{min}}, \qquad z = \mathrm{round}\Big(q_{min} - \frac{min}{s}\Big)$$
#
# For uint8 (codes 0 to 255) on `[-1, 3]`:

# %%
s_asym, z_asym = affine.scale_zero_point(-1.0, 3.0, "uint8")
z_exact = 0 - (-1.0) / float(s_asym)
print(
    f"s = (3 - (-1)) / (255 - 0) = {s_asym:.6f};  z = round(0 - (-1) / s) = round({z_exact:.2f}) = {z_asym}"
)
probe = np.array([-1.0, 0.0, 1.0, 3.0], dtype=np.float32)
q_probe = affine.quantize(probe, s_asym, z_asym, "uint8")
for xi, qi, xh in zip(probe, q_probe, affine.dequantize(q_probe, s_asym, z_asym), strict=True):
    print(f"  {xi:+.1f} → code {qi:>3} → {xh:+.6f}")

# %% [markdown]
# **What to notice.** Real 0 gets the code `z` and comes back as exactly 0. Rounding the zero point
# from the ideal value shifted the grid by a fraction of a step, so the ends come back a hair off,
# still within half a step.
#
# **Why must real 0 be exact?** Zeros are everywhere in a network: the zero padding around an image
# that every convolution reads, and every negative value that a ReLU turns into 0. Suppose we
# kept the ideal, fractional zero point. `affine.quantize` refuses it, and says why:

# %%
try:
    affine.quantize(np.float32([0.0]), s_asym, z_exact, "uint8")
except ValueError as err:
    print("affine.quantize:", err)

code_of_zero = np.rint(0.0 / s_asym + z_exact)  # codes are integers: a fractional z gets rounded away
zero_back = s_asym * (code_of_zero - z_exact)
relu_out = np.maximum(rng.standard_normal(100_000), 0).astype(np.float32)  # half the values are exactly 0
print(f"with z = {z_exact:.2f}: real 0 → code {code_of_zero:.0f} → {zero_back:.6f} (error {zero_back:.6f})")
print(
    f"a ReLU output with {np.mean(relu_out == 0):.1%} zeros: every one of them shifted by the same {zero_back:.6f}"
)

# %% [markdown]
# **What to notice.** Each zero comes back as the same wrong value, so the error does not average
# out: it is a bias added to half of a ReLU output and to every padded border. With an integer zero
# point, which `scale_zero_point` guarantees by widening the range to include 0 and rounding `z`,
# zero is exact.
#
# **Symmetric** quantization centres the grid on 0: the range becomes `[-m, m]` with
# `m = max(|min|, |max|)` and, for int8, `z = 0`. It is simpler to compute with (no zero point to
# subtract) and is the usual choice for weights, whose values spread on both sides of 0. On a
# lopsided range it wastes codes:

# %%
s_sym, z_sym = affine.scale_zero_point(-1.0, 3.0, "int8", symmetric=True)
qmin_n, qmax_n = affine.qrange("int8", narrow=True)
q_ends = affine.quantize(np.float32([-1.0, 3.0]), s_sym, z_sym, "int8")
used = int(q_ends[1]) - int(q_ends[0]) + 1
print(
    f"int8 symmetric on [-1, 3]: m = 3, codes {qmin_n}..{qmax_n}, s = 2·3 / {qmax_n - qmin_n} = {s_sym:.6f}, z = {z_sym}"
)
print(f"[-1, 3] uses codes {q_ends[0]}..{q_ends[1]}: {used} of {qmax_n - qmin_n + 1}")
print(f"step: symmetric {s_sym:.6f} vs asymmetric {s_asym:.6f} ({s_sym / s_asym:.2f}x coarser)")

# %%
display(
    Markdown(
        f"**What to notice.** No value in `[-1, 3]` maps below code {q_ends[0]}, so the "
        f"{int(q_ends[0]) - qmin_n} codes from {qmin_n} to {int(q_ends[0]) - 1} are never used, and the step is "
        f"{s_sym / s_asym:.2f} times coarser than asymmetric uint8's. Symmetric fits a range centred near 0, "
        "and fits a ReLU output, which is never negative, poorly."
    )
)

# %% [markdown]
# **Conventions.** The bit width alone does not pin the grid down. The integer type can be signed
# or unsigned; a signed symmetric grid usually **reserves** its most negative code (int8 −127..127
# instead of −128..127, the *narrow* range) so that `+m` and `−m` get mirrored codes; and ONNX
# Runtime's `reduce_range` option uses one bit less. Here is what each convention makes of the same
# range `[-1, 3]`:

# %%
conventions = [  # (type, symmetric, reduce_range, narrow, what it is)
    ("uint8", False, False, False, "full range"),
    ("int8", False, False, False, "full range"),
    ("uint8", True, False, False, "zero point mid-codes"),
    ("int8", True, False, False, "full range"),
    ("int8", True, False, True, "narrow: ONNX Runtime's default"),
    ("uint8", False, True, False, "reduce_range"),
    ("int8", True, True, True, "reduce_range"),
]
rows = [
    "| type | scheme | convention | codes | levels | scale | zero point | grid spans |",
    "|---|---|---|---|---|---|---|---|",
]
for dtype, sym, reduce, narrow, what in conventions:
    qmin, qmax = affine.qrange(dtype, reduce_range=reduce, narrow=narrow)
    s_c, z_c = affine.scale_zero_point(-1.0, 3.0, dtype, symmetric=sym, reduce_range=reduce, narrow=narrow)
    rows.append(
        f"| {dtype} | {'symmetric' if sym else 'asymmetric'} | {what} | {qmin}..{qmax} | {qmax - qmin + 1} "
        f"| {s_c:.5f} | {z_c} | [{s_c * (qmin - int(z_c)):.3f}, {s_c * (qmax - int(z_c)):.3f}] |"
    )
display(Markdown("\n".join(rows)))

# %%
act_max, w_red_max = affine.qrange("uint8")[1], affine.qrange("int8", reduce_range=True)[1]
full_top = affine.representable_range(
    *affine.scale_zero_point(-1.0, 3.0, "int8", True, narrow=False), "int8"
)[1]
display(
    Markdown(
        "**What to notice.** Asymmetric uint8 and int8 give the same grid, only shifted by 128: the "
        "sign of the type matters less than where the zero point sits. Symmetric int8 on the full -128..127 "
        f"tops out at {full_top:.3f}, so +3 itself is clipped; the narrow range gives +m and -m mirrored "
        "codes. Symmetric uint8 puts its zero point "
        f"in the middle of the codes, {affine.scale_zero_point(-1.0, 3.0, 'uint8', True)[1]}. "
        f"`reduce_range` maps the range onto {affine.qrange('uint8', reduce_range=True)} for uint8 and "
        f"{affine.qrange('int8', reduce_range=True)} for int8, exactly as ONNX Runtime defines it (note "
        "the int8 upper end, 64, not 63). It exists for CPUs without an INT8 dot-product instruction, "
        "whose AVX2 instruction adds two uint8 × int8 products into a saturating int16: with 7-bit weights "
        f"the worst pair, 2 · {act_max} · {w_red_max} = {2 * act_max * w_red_max:,}, stays below int16's "
        f"32,767, where full int8 weights could reach 2 · {act_max} · 128 = {2 * act_max * 128:,}. "
        "Lesson 05 measures it. The price is a step twice as large. One more detail: these conventions "
        "only choose which codes the range is mapped onto. `QuantizeLinear` itself still saturates to the "
        "type's full range, so a value beyond the range can still land on a reserved code."
    )
)

# %% [markdown]
# ## 4. Ranges and outliers
#
# With a fixed number of codes, a wider range means a larger step for every value in it:

# %%
for top in (1.0, 100.0):
    s_r, z_r = affine.scale_zero_point(0.0, top, "uint8")
    print(f"uint8 on [0, {top:g}]: step {s_r:.5f} (= {top:g}/255), worst rounding error {s_r / 2:.5f}")

# %% [markdown]
# A hundred times the range, a hundred times the step: a tensor whose values are mostly in [0, 1]
# but which contains a single 100 loses its fine resolution because of that one value. Real
# weights do this too. Load the Fashion-MNIST ResNet18 from lesson 00 and, for every conv and linear
# weight, compare the largest |w| with the 99.9th percentile of |w| (the value that 99.9% of the
# weights stay below):

# %%
trained = cl.load_model("fashion_resnet18", train=False)
weights = explore.weight_tensors(trained.module.state_dict())
ratios = {layer: explore.outlier_ratio(w) for layer, w in weights.items()}
print(f"{len(weights)} weight tensors, {sum(w.size for w in weights.values()):,} weights")
for layer in sorted(ratios, key=ratios.get, reverse=True)[:4]:
    print(f"  {layer:<30} {str(weights[layer].shape):<18} max|w| / 99.9th percentile = {ratios[layer]:.2f}")
name = max(ratios, key=ratios.get)
w = weights[name]
abs_w = np.abs(w)
p999 = float(np.percentile(abs_w, 99.9))

# %% [markdown]
# Take the tensor with the most extreme outlier (first in the list) and quantize it to symmetric
# int8 two ways: with the range set by its min and max, and with the range clipped at the 99.9th
# percentile of |w|.
# "Bulk" is the 99.9% of weights inside the clipped range; "tail" is the 0.1% outside it.

# %%
bulk = abs_w <= p999
s_minmax, z_w = affine.scale_zero_point(w.min(), w.max(), "int8", symmetric=True)
s_clip, _ = affine.scale_zero_point(-p999, p999, "int8", symmetric=True)
outlier_rows = {}
for label, s_w in (("min/max", s_minmax), ("clip at 99.9th pct", s_clip)):
    w_hat = affine.fake_quantize(w, s_w, z_w, "int8")
    outlier_rows[label] = (
        s_w,
        affine.quantization_error(w[bulk], w_hat[bulk]),
        affine.quantization_error(w[~bulk], w_hat[~bulk]),
        affine.quantization_error(w, w_hat, affine.clipped_mask(w, s_w, z_w, "int8")),
    )
print(f"{name}: {w.size:,} weights, max |w| = {abs_w.max():.4f}, 99.9th percentile of |w| = {p999:.4f}")
print(
    f"{'range':<20} {'step':>9} {'bulk MSE':>10} {'tail MSE':>10} {'all MSE':>10} {'SQNR':>8} {'clipped':>8}"
)
for label, (s_w, e_bulk, e_tail, e_all) in outlier_rows.items():
    print(
        f"{label:<20} {s_w:>9.2e} {e_bulk.mse:>10.2e} {e_tail.mse:>10.2e} {e_all.mse:>10.2e} "
        f"{e_all.sqnr_db:>6.1f} dB {e_all.percent_clipped:>7.2f}%"
    )

fig, ax = plt.subplots(figsize=(9, 3.2))
ax.hist(w.ravel(), bins=300, color="steelblue", log=True)
for sign in (-1, 1):
    ax.axvline(
        sign * abs_w.max(), color="crimson", ls="--", lw=1, label="min/max range" if sign > 0 else None
    )
    ax.axvline(sign * p999, color="darkorange", lw=1, label="99.9th percentile" if sign > 0 else None)
ax.set(title=f"{name}: the weights and two ranges", xlabel="weight value", ylabel="count (log scale)")
ax.legend(fontsize=8)
plt.show()

# %%
(s_a4, bulk_a, _, all_a), (s_b4, bulk_b, tail_b, all_b) = outlier_rows.values()
display(
    Markdown(
        f"**What to notice.** In `{name}` the largest weight, {abs_w.max():.4f}, is {ratios[name]:.1f} times "
        f"the 99.9th percentile, {p999:.4f}. Covering it makes the step {s_a4:.2e}; clipping it makes the step "
        f"{s_b4:.2e}, {s_a4 / s_b4:.1f} times finer, and the error of the bulk drops from {bulk_a.mse:.2e} to "
        f"{bulk_b.mse:.2e}. The price is paid by the {100 - 99.9:.1f}% of weights in the tail, whose mean squared "
        f"error rises to {tail_b.mse:.2e}. Over the whole tensor the MSE goes from {all_a.mse:.2e} to "
        f"{all_b.mse:.2e}. Whether that is a good trade depends on how much those few large weights matter "
        "to the model's output, which a tensor-level number cannot tell you (lesson 04 measures it on "
        "predictions)."
    )
)

# %% [markdown]
# **The trade-off as a curve.** Sweep the clipping point: keep the central p% of the weights and
# clip the rest, for p from 90 to 100 (100 is min/max), at 8 and at 4 bits.

# %%
percentiles = [90, 95, 98, 99, 99.5, 99.8, 99.9, 99.95, 99.98, 99.99, 99.995, 99.999, 100]
sweep = {bits: explore.clipping_sweep(w.ravel(), percentiles, bits=bits) for bits in (8, 4)}
fig, axes = plt.subplots(1, 2, figsize=(11, 3.5))
for ax, (bits, mse) in zip(axes, sweep.items(), strict=True):
    best = int(np.argmin(mse))
    ax.plot(range(len(percentiles)), mse, marker="o", color="steelblue")
    ax.plot(best, mse[best], marker="*", ms=14, color="darkorange", label=f"lowest: {percentiles[best]}%")
    ax.set_xticks(range(len(percentiles)), [f"{p:g}" for p in percentiles], rotation=60, fontsize=8)
    ax.set(title=f"int{bits} symmetric", xlabel="central percentage of weights kept in range", ylabel="MSE")
    ax.set_yscale("log")
    ax.legend(fontsize=8)
fig.suptitle(f"{name}: clipping versus resolution")
fig.tight_layout()
plt.show()

# %%
best8, best4 = (percentiles[int(np.argmin(sweep[b]))] for b in (8, 4))
display(
    Markdown(
        f"**What to notice.** Both curves fall, then rise: clip too little and the step is coarse for "
        f"everyone; clip too much and the clipped values' errors dominate. At 8 bits the lowest MSE is at "
        f"{best8}% ({sweep[8].min():.2e}, against {sweep[8][-1]:.2e} for min/max); at 4 bits, with 16 times "
        f"fewer codes, resolution is so scarce that the best point clips far more, at {best4}%. This is "
        "what the Percentile and Entropy calibration methods of lesson 03 try to find for activations."
    )
)

# %% [markdown]
# ## 5. Granularity: how many scales?
#
# A single scale for a whole tensor (**per-tensor**) makes every value share the grid of the
# tensor's extreme. **Per-channel** gives each output channel of a weight its own scale, so a
# channel of small weights gets a fine grid even if another channel holds an outlier.
# **Block-wise** goes further: one scale per block of, say, 32 consecutive weights within a channel.
# Each step adds scales to store and asks more of the kernels that use them. Here are the four
# choices on the same tensor, symmetric int8:

# %%
choices = [("per-tensor", None), ("per-channel", None), ("block-wise", 128), ("block-wise", 32)]
studies = {
    f"{g}" + (f" {b}" if b else ""): explore.granularity_study(w, g, b or 32, "int8") for g, b in choices
}
rows = [
    "| granularity | scales | zero points | metadata bytes | % of int8 payload | SQNR (dB) | MSE |",
    "|---|---|---|---|---|---|---|",
]
for label, st in studies.items():
    rows.append(
        f"| {label} | {st.n_scales:,} | {st.n_zero_points} | {st.metadata_bytes:,} "
        f"| {100 * st.metadata_bytes / st.payload_bytes:.2f}% | {st.error.sqnr_db:.1f} | {st.error.mse:.2e} |"
    )
display(Markdown(f"`{name}`, {w.size:,} weights, {w.shape[0]} output channels\n\n" + "\n".join(rows)))

fig, ax = plt.subplots(figsize=(10, 3.8))
for (label, st), color in zip(studies.items(), ["gray", "steelblue", "seagreen", "darkorange"], strict=True):
    ax.plot(st.channel_sqnr_db, lw=0.8, color=color, label=label)
ax.set(
    title=f"{name}: int8 error per output channel",
    xlabel="output channel",
    ylabel="SQNR (dB, higher is better)",
)
ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
fig.tight_layout()
plt.show()

# %%
per_tensor, per_channel = studies["per-tensor"], studies["per-channel"]
worse = int(np.sum(per_channel.channel_mse > per_tensor.channel_mse))
outlier_channel = int(np.unravel_index(np.argmax(abs_w), w.shape)[0])
display(
    Markdown(
        f"**What to notice.** Per-channel scales raise the SQNR from {per_tensor.error.sqnr_db:.1f} dB to "
        f"{per_channel.error.sqnr_db:.1f} dB (each 6 dB is worth about one bit) for {per_channel.metadata_bytes:,} "
        f"bytes of scales, {100 * per_channel.metadata_bytes / per_channel.payload_bytes:.2f}% of the payload. "
        f"Channel {outlier_channel}, which holds the outlier, gains nothing: its own range is the tensor's, so "
        f"it keeps the per-tensor grid ({per_channel.channel_sqnr_db[outlier_channel]:.1f} dB either way). "
        "Every other channel gets a finer grid; "
        + (
            "none came out worse. "
            if worse == 0
            else f"{worse} of {w.shape[0]} came out slightly worse all the same, by the luck of rounding. "
        )
        + f"Blocks of 32 reach "
        f"{studies['block-wise 32'].error.sqnr_db:.1f} dB but store "
        f"{studies['block-wise 32'].n_scales:,} scales, "
        f"{100 * studies['block-wise 32'].metadata_bytes / studies['block-wise 32'].payload_bytes:.1f}% on top "
        "of the int8 payload. No zero points are stored: symmetric int8 has them all at 0, and ONNX lets a "
        "graph leave them out."
    )
)

# %% [markdown]
# Is that one layer special? The same comparison on every weight of the model:

# %%
layer_sqnr = {
    g: [explore.granularity_study(wl, g, 32, "int8").error.sqnr_db for wl in weights.values()]
    for g in ("per-tensor", "per-channel", "block-wise")
}
fig, ax = plt.subplots(figsize=(11, 3.8))
positions = np.arange(len(weights))
for k, (g, values) in enumerate(layer_sqnr.items()):
    ax.bar(positions + (k - 1) * 0.27, values, width=0.27, label=g + (" (32)" if g == "block-wise" else ""))
ax.set_xticks(positions, [n.removesuffix(".weight") for n in weights], rotation=60, ha="right", fontsize=7)
all_sqnr = np.concatenate(list(layer_sqnr.values()))
ax.set(title="ResNet18, int8 symmetric: SQNR of every weight", ylabel="SQNR (dB)")
ax.set_ylim(all_sqnr.min() - 5, all_sqnr.max() + 3)
ax.legend(fontsize=8, ncol=3)
plt.show()
gains = np.array(layer_sqnr["per-channel"]) - np.array(layer_sqnr["per-tensor"])
print(f"per-channel minus per-tensor: {gains.min():+.1f} to {gains.max():+.1f} dB over {len(gains)} weights")

# %% [markdown]
# **What to notice.** Per-channel beats per-tensor on every weight of this model, by the range
# printed above, which is why `quantize_static(..., per_channel=True)` is the usual choice for
# CNNs in lesson 03. These are PyTorch's weights; the exported ONNX file folds each BatchNorm into
# the convolution before it, which rescales every output channel, so lesson 03 quantizes slightly
# different tensors. In ONNX, block-wise scales exist since opset 21 (the `block_size`
# attribute of `QuantizeLinear`/`DequantizeLinear`); ONNX Runtime uses them mostly for 4-bit
# MatMul weights.
#
# ## 6. Payload arithmetic with real bytes
#
# Take one million of the model's weights and store them four ways. The byte counts below are the
# `.nbytes` of the arrays that hold them; int4 uses symmetric blocks of 32 (as 4-bit weights
# usually do) and `affine.pack_int4` to put two values in each byte.

# %%
params = np.concatenate([wl.ravel() for wl in weights.values()])[:1_000_000]
s8, z8 = affine.scale_zero_point(params.min(), params.max(), "int8", symmetric=True)
q8 = affine.quantize(params, s8, z8, "int8")

blocks = params.reshape(-1, 32)  # one row per block of 32 consecutive weights
s4, z4 = affine.scale_zero_point(blocks.min(axis=1), blocks.max(axis=1), "int4", symmetric=True)
q4 = affine.quantize(blocks, s4, z4, "int4", axis=0)  # int4 values, held one per byte in an int8 array
packed = affine.pack_int4(q4)
assert np.array_equal(affine.unpack_int4(packed, q4.size).reshape(q4.shape), q4)  # nothing lost

quoted = {"float32": 4_000_000, "int8": 1_000_000, "int4 held in int8": None, "int4 packed": 500_000}
payload = {  # format: (array holding the values, metadata bytes, what the metadata is)
    "float32": (params, 0, "none"),
    "int8": (q8, np.asarray(s8).nbytes + np.asarray(z8).nbytes, "1 scale + 1 zero point"),
    "int4 held in int8": (q4, s4.nbytes, f"{s4.size:,} float32 scales"),
    "int4 packed": (packed, s4.nbytes, f"{s4.size:,} float32 scales"),
}
rows = [
    f"| {params.size:,} weights | array dtype | payload `.nbytes` | metadata | total | vs float32 | quoted payload |",
    "|---|---|---|---|---|---|---|",
]
for fmt, (array, meta_bytes, what) in payload.items():
    quote = f"{quoted[fmt]:,} (quote)" if quoted[fmt] else ""
    total = array.nbytes + meta_bytes
    rows.append(
        f"| {fmt} | {array.dtype} | {array.nbytes:,} | {meta_bytes:,} ({what}) | {total:,} "
        f"| {total / params.nbytes:.1%} | {quote} |"
    )
display(Markdown("\n".join(rows)))

# %% [markdown]
# **What to notice.** The quoted column is the lesson's source text ("one million float32 weights
# occupy 4 million bytes; int8 1 million; ideally packed 4-bit 500,000"); the measured payloads
# agree exactly. The metadata does not come free: int8 with one scale adds a few bytes, but int4 in
# blocks of 32 adds one 4-byte scale per 16 bytes of packed payload, a quarter on top. And a 4-bit
# *simulation* (4-bit values in an int8 array) takes as much room as int8 until it is packed. A
# model file adds more still: the graph, tensors left in float, and the container (lesson 02
# measures real files).
#
# ## 7. An integer matrix product
#
# Quantization pays off in speed when the arithmetic itself runs on integers. Take the model's
# last layer, `fc`: a matrix product of the 512 features of an image with a 512 × 10 weight. Since
# `a = sₐ(qₐ − zₐ)` and `b = s_b(q_b − z_b)`,
#
# $$a \cdot b = s_a s_b \sum_k (q_{a,k} - z_a)(q_{b,k} - z_b)$$
#
# so the sum can run on integers and be rescaled once at the end. First, real features of eight test
# images, captured on their way into `fc`:

# %%
test_images, test_labels = cl.load_split("test")
captured = {}
hook = trained.module.fc.register_forward_hook(lambda mod, inp, out: captured.update(features=inp[0].numpy()))
with torch.no_grad():
    trained.module(torch.from_numpy(cl.preprocess(test_images[:8])))
hook.remove()
a = captured["features"]  # (8, 512), after ReLU and average pooling: never negative
b = weights["fc.weight"].T.copy()  # (512, 10)
fc_bias = trained.module.fc.bias.detach().numpy()
reference = a.astype(np.float64) @ b.astype(
    np.float64
)  # the float result (the bias is added later, in float)

a_scale, a_zp = affine.scale_zero_point(a.min(), a.max(), "uint8")  # activations: asymmetric uint8
b_scale, b_zp = affine.scale_zero_point(b.min(axis=0), b.max(axis=0), "int8", symmetric=True)  # per column
out_scale, out_zp = affine.scale_zero_point(reference.min(), reference.max(), "uint8")  # output grid
qa = affine.quantize(a, a_scale, a_zp, "uint8")
qb = affine.quantize(b, b_scale, b_zp, "int8", axis=1)
print(f"A: {qa.shape} {qa.dtype}, scale {a_scale:.4g}, zero point {a_zp}")
print(f"B: {qb.shape} {qb.dtype}, {b_scale.size} scales (one per output column), zero points all {b_zp[0]}")
print(f"output: uint8, scale {out_scale:.4g}, zero point {out_zp}")

# %% [markdown]
# Now the four steps, written out: subtract the zero points, multiply and accumulate in int32,
# rescale by one float multiplier per column, then round, add the output zero point and clip.

# %%
accumulator = (qa.astype(np.int32) - np.int32(a_zp)) @ (qb.astype(np.int32) - b_zp.astype(np.int32))
multiplier = a_scale * b_scale / out_scale  # float32, one per output column
q_out = np.clip(np.rint(accumulator.astype(np.float32) * multiplier) + out_zp, 0, 255).astype(np.uint8)

q_lib, acc_lib = affine.integer_matmul(qa, a_scale, a_zp, qb, b_scale, b_zp, out_scale, out_zp, "uint8")
out_hat = affine.dequantize(q_out, out_scale, out_zp)
print(
    f"accumulator: {accumulator.dtype}, values {accumulator.min():,} to {accumulator.max():,} (int16 stops at 32,767)"
)
print(
    f"by hand == affine.integer_matmul: {np.array_equal(q_out, q_lib) and np.array_equal(accumulator, acc_lib)}"
)
print(
    f"largest |integer result - float result|: {np.abs(out_hat - reference).max():.4f} (output step {out_scale:.4f})"
)
same_class = (out_hat + fc_bias).argmax(1) == (reference + fc_bias).argmax(1)
print(f"same predicted class as float for {same_class.sum()} of {len(same_class)} images")

# %% [markdown]
# ONNX's `QLinearMatMul` takes exactly these inputs: the quantized matrices, their scales and zero
# points, and the output's. Run it in ONNX Runtime on the same codes:

# %%
names = ["a_scale", "a_zero_point", "qb", "b_scale", "b_zero_point", "out_scale", "out_zero_point"]
values = [a_scale, a_zp, qb, b_scale, b_zp, out_scale, out_zp]
matmul_graph = helper.make_graph(
    nodes=[helper.make_node("QLinearMatMul", ["qa", *names], ["y"])],
    name="one_qlinear_matmul",
    inputs=[helper.make_tensor_value_info("qa", TensorProto.UINT8, list(qa.shape))],
    outputs=[helper.make_tensor_value_info("y", TensorProto.UINT8, [qa.shape[0], qb.shape[1]])],
    initializer=[numpy_helper.from_array(np.asarray(v), n) for n, v in zip(names, values, strict=True)],
)
matmul_model = helper.make_model(matmul_graph, opset_imports=[helper.make_opsetid("", 21)])
onnx.checker.check_model(matmul_model)
matmul_session = ort.InferenceSession(matmul_model.SerializeToString(), providers=["CPUExecutionProvider"])
q_ort_mm = matmul_session.run(None, {"qa": qa})[0]
print(f"ONNX Runtime QLinearMatMul == the four steps above, bit for bit: {np.array_equal(q_ort_mm, q_out)}")
print("first image, codes:", q_ort_mm[0].tolist())

# %%
display(
    Markdown(
        f"**What to notice.** The accumulator reaches {np.abs(accumulator).max():,} in magnitude, far past "
        "int16, which is why integer kernels accumulate in int32. The integer result differs from the float "
        f"one by at most {np.abs(out_hat - reference).max():.4f}, "
        f"{np.abs(out_hat - reference).max() / out_scale:.1f} output steps: half a step from requantizing the "
        "result, the rest from rounding the inputs. The predicted class is unchanged for "
        f"{same_class.sum()} of {len(same_class)} images. ONNX Runtime's `QLinearMatMul` produced "
        f"{'the very same' if np.array_equal(q_ort_mm, q_out) else 'different'} codes. The error enters twice: "
        "when the inputs are quantized and when the result is requantized onto the output grid."
    )
)

# %% [markdown]
# ## 8. Explorer: quantization error
#
# Everything in sections 1–4 on one screen. Pick the data (the default is normal; *ResNet weights*
# is `name`, the tensor with the outlier), add outliers, choose bits, signed or unsigned, symmetric
# or asymmetric, and how the range is set. The histogram shows the levels the grid can represent
# (orange; thinned when there are many) and the clipped regions (red); below it, the error of every
# possible input. **Try:** add 5 outliers of 30σ to the normal data and watch the SQNR fall; then
# set the range to *percentile* 99.9. Drop to 4 bits and compare asymmetric with symmetric on
# *ReLU activations*, signed and unsigned.
#
# Two details you will meet. With *min/max*, a value or two may still count as clipped: rounding the
# zero point shifts the grid by up to half a step, so an extreme can sit just past the last level,
# with an error still under `s/2` (section 3 met this with +3.0). And signed symmetric grids show
# one level more than their narrow range: the reserved code, which values below −m can still reach.

# %%
from course_lib.explorers import granularity_explorer, quantization_error_explorer

error_explorer = quantization_error_explorer(weights=w, weights_name=name)

# %% [markdown]
# ## 9. Explorer: granularity
#
# Choose a layer, a granularity, a block size and int8 or int4; the plot shows every output
# channel's SQNR, with per-tensor in gray for reference, and the status line the metadata it costs.
# It opens on `name`, the layer with the outlier. **Try:** per-tensor, then per-channel; then int4,
# where per-tensor quantization loses far more, and block-wise with blocks of 256 down to 8. Then
# `fc.weight`, the last layer.

# %%
granularity_view = granularity_explorer(weights, layer=name)

# %% [markdown]
# ## Summary
#
# - A quantized tensor is integers plus a scale `s` (the step) and a zero point `z` (the code of real
#   0): `q = clip(round(x/s) + z)`, `x̂ = s(q − z)`. Inside the range the error is at most `s/2`;
#   outside it, clipping error has no bound.
# - ONNX Runtime rounds ties half to even, which keeps ties from biasing a tensor; the one-node model
#   above showed it.
# - `s` and `z` come from a range. Asymmetric uses every code; symmetric is simpler and suits ranges
#   centred on 0. The zero point must be an integer so that 0 is exact. Narrow ranges and
#   `reduce_range` are conventions you must know to read a quantized file.
# - One outlier widens the step for everyone; clipping trades resolution for clipping error, and the
#   best point depends on the bit width. Finer granularity isolates outliers at the cost of metadata.
# - Bytes: float32 4, int8 1, int4 ½ per value once packed, plus the scales.
# - Integer matrix products subtract zero points, accumulate in int32 and rescale once; the result
#   matched ONNX Runtime's `QLinearMatMul` bit for bit.

# %%
print(f"This notebook ran in {time.perf_counter() - lesson_start:.0f} s on this machine.")

# %% [markdown]
# ## Exercises
#
# Each exercise ends with a check that says what passed or what differed.
#
# **1.** Compute the scale and zero point that map `[-1, 3]` onto uint8, asymmetric, with the two
# formulas of section 3 (not with `scale_zero_point`).

# %%
answer_1_scale = (3 - (-1)) / (255 - 0)  # solution
answer_1_zero_point = round(0 - (-1) / answer_1_scale)  # solution
cl.checks.check_scale_zero_point(answer_1_scale, answer_1_zero_point, rmin=-1.0, rmax=3.0, dtype="uint8")

# %% [markdown]
# **2.** int8, `s = 0.05`, `z = 0`. What does `7.0` come back as after quantize and dequantize?
# Work it out, then confirm with `affine.fake_quantize`.

# %%
answer_2 = 0.05 * (min(round(7.0 / 0.05), 127) - 0)  # solution
cl.checks.check_decoded_value(answer_2, x=7.0, scale=0.05, zero_point=0, dtype="int8")

# %% [markdown]
# **3.** A uint8 activation with zero point 128 and an int8 weight with zero point 0 meet in a dot
# product. What is the int32 accumulator, before any rescaling?

# %%
qa_3, qb_3 = np.array([130, 120, 200, 128], dtype=np.uint8), np.array([5, -3, 10, 77], dtype=np.int8)
answer_3 = int(np.sum((qa_3.astype(np.int32) - 128) * (qb_3.astype(np.int32) - 0)))  # solution
cl.checks.check_accumulator(answer_3, qa_3, 128, qb_3, 0)

# %% [markdown]
# **4.** `layer3.0.conv2.weight` is stored as symmetric int4, packed two values per byte, with one
# float32 scale per block of 32 consecutive weights within each output channel (no zero points).
# How many bytes does it take, payload plus scales?

# %%
w_4 = weights["layer3.0.conv2.weight"]
answer_4 = w_4.size // 2 + 4 * w_4.shape[0] * math.ceil(w_4[0].size / 32)  # solution
cl.checks.check_packed_int4_bytes(answer_4, w_4.shape, block_size=32)
