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
# # 03 · Static quantization: QDQ and calibration
#
# Dynamic quantization (lesson 02) measures every activation's range on every run. *Static*
# quantization measures them once, ahead of time, on a small **calibration set**, and writes the
# scales and zero points into the file. No run-time bookkeeping, so more speed, especially on
# convolutions; but the ranges are only as good as the calibration data. This lesson calibrates
# the course's ResNet18 and shows what each choice does to accuracy, size, speed and time.
#
# **Learning goal.** Prepare a model with `quant_pre_process`, feed `quantize_static` through a
# `CalibrationDataReader`, choose calibration method, set size and format, and recognise the
# calibration mistakes that ruin a model silently.
#
# **Before you start.** Lesson 01 (scale and zero point from a range) and lesson 02.
#
# **Lesson plan**
# 1. Pre-process: what `quant_pre_process` changes in a graph.
# 2. The calibration reader: ONNX Runtime's protocol, and data checked before it is used.
# 3. `quantize_static` in QDQ format: unsigned or signed activations.
# 4. MinMax, Entropy, Percentile: the range each picks (the calibration explorer), and what it costs.
# 5. How many calibration images?
# 6. The silent killer: calibrating on the wrong preprocessing.
# 7. QDQ versus QOperator.
# 8. The two-moons MLP: fp32, dynamic and static, side by side.
# 9. The results table, a summary and exercises.

# %%
import logging
import tempfile
import time
import warnings
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import onnx
from IPython.display import Markdown, display
from onnxruntime.quantization import (
    CalibrationDataReader,
    CalibrationMethod,
    QuantFormat,
    QuantType,
    quantize_dynamic,
    quantize_static,
)
from onnxruntime.quantization.shape_inference import quant_pre_process

import course_lib as cl
from course_lib import calibration, measure
from course_lib.explorers import calibration_explorer, plot_subgraph

warnings.filterwarnings("ignore")  # the quantizer's advice and the old exporter's deprecation notice
logging.getLogger().setLevel(logging.ERROR)  # the quantizer logs "please pre-process" on every call
work = Path(tempfile.mkdtemp(prefix="lesson03-"))  # quantized files of this run
THREADS = 2  # fixed, so that every latency below is comparable
results = []  # one row per model variant, for the table at the end


def mb(path):
    return Path(path).stat().st_size / 1e6


# %% [markdown]
# ## 1. Pre-process first
#
# `quant_pre_process` runs symbolic and ONNX shape inference and ONNX Runtime's graph optimiser, and
# writes the result. The quantizer then knows every tensor's shape, and it quantizes the fused
# graph that will actually run, instead of, say, a BatchNorm it would otherwise have to handle on
# its own. Start with the course's export (made by PyTorch's current `dynamo` exporter):

# %%
fp32 = cl.ensure_onnx("fashion_resnet18")
pre = work / "resnet18.pre.onnx"
quant_pre_process(fp32, pre)


def graph_summary(path):
    model = onnx.load(str(path))
    return measure.model_facts(path).op_counts, len(model.graph.value_info)


for label, path in (("course export", fp32), ("pre-processed", pre)):
    ops, shapes = graph_summary(path)
    print(f"{label:>14}: {sum(ops.values())} nodes, {shapes} tensors with a known shape: {dict(ops)}")

# %%
same_nodes = graph_summary(fp32)[0] == graph_summary(pre)[0]
display(
    Markdown(
        "**What to notice.** "
        + (
            "The op counts are the same: the `dynamo` exporter had already folded each BatchNorm into its "
            "convolution, so there was nothing left to fuse. "
            if same_nodes
            else "Pre-processing changed the nodes even of this export. "
        )
        + "Exports made by older tools often keep every BatchNorm. Here is one, made by PyTorch's older "
        "TorchScript exporter with constant folding off, and what pre-processing does to it:"
    )
)

# %%
trained = cl.load_model("fashion_resnet18", train=False)
legacy = cl.export_onnx(trained, work / "legacy.onnx", exporter="torchscript", keep_batchnorm=True)
legacy_pre = work / "legacy.pre.onnx"
quant_pre_process(legacy, legacy_pre)
for label, path in (("legacy export", legacy), ("pre-processed", legacy_pre)):
    ops, shapes = graph_summary(path)
    print(f"{label:>14}: {sum(ops.values())} nodes, {shapes} tensors with a known shape: {dict(ops)}")

val_images, val_labels = cl.load_split("validation")
val_x = cl.preprocess(val_images)
same = np.abs(measure.make_session(legacy_pre, THREADS).run(None, {"input": val_x})[0]
              - measure.make_session(pre, THREADS).run(None, {"input": val_x})[0]).max()  # fmt: skip
print(f"max |difference| of the two pre-processed models' logits on 500 images: {same:.1e}")

# %%
legacy_ops, legacy_pre_ops = graph_summary(legacy)[0], graph_summary(legacy_pre)[0]
display(
    Markdown(
        f"**What to notice.** Pre-processing removed {legacy_ops.get('BatchNormalization', 0)} BatchNorm and "
        f"{legacy_ops.get('Identity', 0)} Identity nodes ({sum(legacy_ops.values())} → "
        f"{sum(legacy_pre_ops.values())} nodes): each BatchNorm's scale and shift went into the weights and "
        "bias of the convolution before it, and the model computes the same function ("
        + ("identical logits above" if same == 0 else f"the {same:.1e} above is float rounding")
        + "). Quantizing the unfused graph would have quantized the convolution's output, "
        "then the BatchNorm's output: two roundings where one is needed. From here on we use `pre`."
    )
)

# %% [markdown]
# ## 2. The calibration reader
#
# `quantize_static` asks for calibration data through a `CalibrationDataReader`: it calls
# `get_next()` until that returns `None`, and runs the fp32 model on each `{input_name: batch}`
# dict. Writing one takes five lines (exercise 2 asks you to). `course_lib`'s readers add what
# those five lines lack: they check every sample against the model's input before calibration
# starts. `cl.DatasetReader` takes images from the course's calibration pool (1,000 training
# images that the model was trained on but that we keep apart for this) through the production
# preprocessing:

# %%
reader = cl.DatasetReader(pre, count=200, batch_size=20)
print(reader)
print("first batch:", {k: (v.shape, v.dtype) for k, v in reader.get_next().items()})
reader.rewind()

# %% [markdown]
# What happens with a mistake? Feed raw images, as they come from the dataset, without the
# preprocessing:

# %%
calib_images, _ = cl.load_split("calibration")
try:
    cl.ArrayReader(calib_images[:200], pre)
except cl.CalibrationError as err:
    print(err)

# %% [markdown]
# **What to notice.** The error names the first bad sample, what the model expects and what it got,
# and the fix. Without the check, ONNX Runtime would fail somewhere inside the calibrator, or, for
# a mistake that keeps shape and dtype (section 6), not fail at all.
#
# ## 3. `quantize_static` in QDQ format
#
# The call: the pre-processed model, the reader, the QDQ format (section 7), per-channel weights
# (lesson 01), int8 weights. Two choices for the activations: unsigned `QUInt8` (asymmetric,
# 0–255, fits ReLU outputs) or signed `QInt8`. We measure each on the **full test set**
# (10,000 images): accuracy, top-1 agreement with fp32, file size, and throughput at batch 64
# timed in turn with fp32 (`measure.compare_latency`).

# %%
test_images, test_labels = cl.load_split("test")
test_x = cl.preprocess(test_images)
batch64 = {"input": test_x[:64]}


def logits_of(path, x=test_x, batch=500):
    session = measure.make_session(path, THREADS)
    return np.concatenate(
        [session.run(None, {"input": x[i : i + batch]})[0] for i in range(0, len(x), batch)]
    )


ref_logits = logits_of(pre)
evaluated = {}


def evaluate(name, path, calibration_s=None, timed=True, **facts):
    """Accuracy, agreement and drift on the test set, size, and (timed=True) speed at batch 64."""
    p = measure.parity(ref_logits, logits_of(path), test_labels)
    row = {"variant": name, "MB": f"{mb(path):.1f}", "size": f"{mb(path) / mb(pre):.3f}",
           "accuracy": f"{p.candidate_accuracy:.2%}", "Δ points": f"{100 * (p.candidate_accuracy - p.reference_accuracy):+.2f}",
           "agreement": f"{p.agreement:.2%}"}  # fmt: skip
    speed = None
    if timed:
        c = measure.compare_latency({"fp32": pre, "int8": path}, batch64, threads=THREADS, warmup=3, runs=15)
        speed = c.speedup
        row["speed b64"] = f"{c.speedup:.2f}x ({c.speedup_low:.2f}–{c.speedup_high:.2f})"
    if calibration_s is not None:
        row["calibration s"] = f"{calibration_s:.1f}"
    evaluated[name] = {"path": path, "parity": p, "speedup": speed, "row": row, **facts}
    measure.record(lesson="03", model="fashion_resnet18", variant=name, path=path,
                   metrics={"accuracy": p.candidate_accuracy, "fp32_accuracy": p.reference_accuracy,
                            "agreement": p.agreement, "size_ratio": mb(path) / mb(pre), "speedup_b64": speed,
                            "calibration_s": calibration_s}, options=facts)  # fmt: skip
    return row


def static(name, reader, **options):
    """quantize_static with the lesson's defaults (QDQ, per-channel, int8 weights), timed."""
    out = work / f"resnet18.{name.replace(' ', '_').replace(',', '')}.onnx"
    settings = {
        "quant_format": QuantFormat.QDQ,
        "per_channel": True,
        "weight_type": QuantType.QInt8,
        **options,
    }
    reader.rewind()
    start = time.perf_counter()
    quantize_static(pre, out, reader, **settings)
    return out, time.perf_counter() - start


rows = []
for act in (QuantType.QUInt8, QuantType.QInt8):
    name = "QDQ U8S8" if act == QuantType.QUInt8 else "QDQ S8S8"
    path, seconds = static(name, reader, activation_type=act)
    rows.append(evaluate(name, path, seconds, activation_type=act.name))
print(
    f"fp32: accuracy {evaluated['QDQ U8S8']['parity'].reference_accuracy:.2%} on {len(test_labels):,} test images"
)
display(Markdown(measure.markdown_table(rows)))

# %%
u8, s8 = evaluated["QDQ U8S8"], evaluated["QDQ S8S8"]
display(
    Markdown(
        f"**What to notice.** Both files are {u8['row']['size']} of the fp32 size, and both keep the accuracy "
        f"within {max(abs(100 * (v['parity'].candidate_accuracy - v['parity'].reference_accuracy)) for v in (u8, s8)):.2f} "
        f"points. The speed is another story: unsigned activations ran at **{u8['speedup']:.2f}x** the fp32 "
        f"speed, signed ones at **{s8['speedup']:.2f}x**. ONNX Runtime's x86 integer kernels are built "
        "for uint8 × int8 (U8S8), the form the CPU's multiply-add instructions take; signed activations "
        + (
            "take a slower path on this machine. "
            if s8["speedup"] < u8["speedup"]
            else "did not cost speed on this machine. "
        )
        + "So on x86: QUInt8 activations, QInt8 weights. Lesson 05 looks at the instructions."
    )
)
best_format = "QDQ U8S8" if u8["speedup"] >= s8["speedup"] else "QDQ S8S8"
best_act = QuantType.QUInt8 if best_format == "QDQ U8S8" else QuantType.QInt8

# %% [markdown]
# ## 4. MinMax, Entropy, Percentile
#
# A calibration method turns the values seen on the calibration set into a range per tensor:
#
# - **MinMax** takes the smallest and largest value seen: nothing is clipped, but one outlier
#   stretches the steps for all other values.
# - **Entropy** picks the range whose quantized histogram keeps the most information (smallest
#   KL divergence from the float histogram): it may clip a long tail.
# - **Percentile** clips at a percentile of the absolute values (ONNX Runtime's default: 99.999).
#
# `calibration.calibration_ranges` runs ONNX Runtime's own calibrators and returns the ranges. A
# detail that matters: ONNX Runtime's Entropy calibrator defaults to a 128-bin histogram searched
# for a 128-level range, which leaves it no room to clip, and `quantize_static` has no option to
# change that. `calibration_ranges` can pass the calibrator's own `num_bins`, so we also run it
# with 2,048 bins (the number TensorRT's entropy calibration uses).

# %%
start = time.perf_counter()
ranges = calibration.calibration_ranges(pre, reader)
print(f"{len(ranges)} tensors calibrated 3 ways in {time.perf_counter() - start:.1f} s")
# Entropy with 2,048 bins, in a fresh process that also measures its peak memory (used again below)
entropy_2048, entropy_2048_memory = measure.peak_memory_of(
    calibration.calibration_ranges, pre, reader, methods=["Entropy"], extra_options={"num_bins": 2048}
)
print(f"Entropy with 2,048 bins: {entropy_2048_memory.seconds:.1f} s")
for name in ranges:
    ranges[name]["Entropy, 2048 bins"] = entropy_2048[name]["Entropy"]
for label in ("Entropy", "Entropy, 2048 bins", "Percentile"):
    same = sum(r[label] == r["MinMax"] for r in ranges.values())
    print(f"{label:>18} chose exactly the MinMax range for {same} of {len(ranges)} tensors")

graph = onnx.load(str(pre), load_external_data=False).graph
relus = [n.output[0] for n in graph.node if n.op_type == "Relu"]
shown = [
    relus[0],
    relus[len(relus) // 2],
    relus[-1],
    graph.node[-1].input[0],
]  # early, middle, late; last layer
values = calibration.activation_values(pre, {"input": val_x}, shown)  # real inputs the calibration never saw

# %% [markdown]
# The **calibration explorer**: pick a tensor to see its values on the 500 validation images (which
# calibration never saw) and each method's range. Values outside a range saturate: they are stored
# as the range's end.

# %%
explorer = calibration_explorer(values, {name: ranges[name] for name in shown}, tensor=shown[1])

# %%
mid = ranges[shown[1]]
display(
    Markdown(
        f"**What to notice.** For `{shown[1]}`, a ReLU in the middle of the network, MinMax covers "
        f"[{mid['MinMax'][0]:.2f}, {mid['MinMax'][1]:.2f}], Percentile stops at {mid['Percentile'][1]:.2f} and "
        f"Entropy with 2,048 bins at {mid['Entropy, 2048 bins'][1]:.2f}. ReLU outputs pile up near 0 with a long "
        "tail, so a shorter range gives the crowd finer steps at the price of clipping the tail. Which trade "
        "wins is an empirical question: quantize with each and measure."
    )
)

# %% [markdown]
# Each method's full `quantize_static` run, in a fresh process so that its peak memory can be
# measured (`measure.peak_memory_of`). For Entropy with 2,048 bins, which `quantize_static` cannot
# ask for, we compute the ranges with `calibration_ranges` and hand them to `quantize_static` as
# `TensorQuantOverrides`: a range per tensor that takes the calibrator's place.

# %%
methods = {
    "MinMax": {"calibrate_method": CalibrationMethod.MinMax},
    "Entropy": {"calibrate_method": CalibrationMethod.Entropy},
    "Percentile 99.999": {"calibrate_method": CalibrationMethod.Percentile},
}
static_options = dict(
    quant_format=QuantFormat.QDQ, per_channel=True, weight_type=QuantType.QInt8, activation_type=best_act
)
rows = []
for label, options in methods.items():
    out = work / f"resnet18.{label.split()[0].lower()}.onnx"
    reader.rewind()
    _, memory = measure.peak_memory_of(quantize_static, pre, out, reader, **static_options, **options)
    row = evaluate(f"{best_format}, {label}", out, memory.seconds, timed=False, method=label)
    rows.append({**row, "peak memory MB": f"{memory.increase_bytes / 1e6:.0f}"})

overrides = {name: [{"rmin": np.float32(r["Entropy"][0]), "rmax": np.float32(r["Entropy"][1])}]
             for name, r in entropy_2048.items()}  # fmt: skip
out = work / "resnet18.entropy2048.onnx"
reader.rewind()
start = time.perf_counter()
quantize_static(pre, out, reader, **static_options, extra_options={"TensorQuantOverrides": overrides})
row = evaluate(f"{best_format}, Entropy, 2048 bins", out, entropy_2048_memory.seconds + time.perf_counter() - start,
               timed=False, method="Entropy, 2048 bins (TensorQuantOverrides)")  # fmt: skip
rows.append({**row, "peak memory MB": f"{entropy_2048_memory.increase_bytes / 1e6:.0f}"})
display(Markdown(measure.markdown_table(rows)))

# %%
acc = {r["variant"]: evaluated[r["variant"]]["parity"].candidate_accuracy for r in rows}
best_method, worst_method = max(acc, key=acc.get), min(acc, key=acc.get)
display(
    Markdown(
        f"**What to notice.** The methods end {100 * (acc[best_method] - acc[worst_method]):.2f} points apart: "
        f"best here *{best_method}*, worst *{worst_method}* (a point is 100 test images). Entropy through "
        "`quantize_static` gave "
        + (
            "exactly the MinMax model"
            if acc[f"{best_format}, Entropy"] == acc[f"{best_format}, MinMax"]
            else "its own model"
        )
        + ", for the 128-bin reason above. Histogram methods cost more time and memory than MinMax because "
        "they keep a histogram per tensor. Clipping is a bet that the tail does not matter; read the rows to "
        "see whether it paid on this model. MinMax is the cheap default; try Percentile or a finer Entropy "
        "when a few outliers stretch the ranges, and keep whichever measures best."
    )
)

# %% [markdown]
# ## 5. How many calibration images?
#
# The usual advice is 100–500 representative samples. Measure: calibrate on the first 10, 50, 200
# and 500 images of the pool, and count how many real activation values (every tensor, 500 test
# images the calibration never saw) fall outside the calibrated ranges. `calibration.quantized_ranges`
# reads the ranges back from the INT8 file; a value outside is stored as the range's end: it
# **saturates**.

# %%
all_tensors = [n.output[0] for n in graph.node if n.op_type in ("Relu", "Add", "MaxPool")]
real = calibration.activation_values(pre, {"input": test_x[:500]}, ["input", *all_tensors, shown[-1]])


def saturated(path):
    """Per tensor, and over all values: the share of real activation values that saturate in `path`."""
    sat = calibration.saturation(calibration.quantized_ranges(path), real)
    return sat, sum(sat[n] * real[n].size for n in sat) / sum(real[n].size for n in sat)


rows = []
for count in (10, 50, 200, 500):
    sized = cl.DatasetReader(pre, count=count, batch_size=10)
    path, seconds = static(f"{count} images", sized, activation_type=best_act)
    row = evaluate(f"{best_format}, {count} calibration images", path, seconds, timed=False, count=count)
    rows.append({"images": count, "values saturated": f"{saturated(path)[1]:.3%}",
                 **{k: row[k] for k in ("accuracy", "Δ points", "agreement", "calibration s")}})  # fmt: skip
display(Markdown(measure.markdown_table(rows)))

# %%
by_count = {r["images"]: r for r in rows}
display(
    Markdown(
        f"**What to notice.** With 10 images, {by_count[10]['values saturated']} of the real activation values "
        f"fall outside the calibrated ranges; with 500, {by_count[500]['values saturated']}: a small set misses "
        f"rarer large values. Agreement with fp32: {by_count[10]['agreement']} with 10 images, "
        f"{by_count[500]['agreement']} with 500. This model's ranges are set by values that even a few images "
        "show; do not count on that for yours. A few hundred images cost seconds, and past that the ranges "
        "stop moving while calibration time keeps growing."
    )
)

# %% [markdown]
# ## 6. The silent killer: calibrating on the wrong data
#
# The calibration set must go through the **production** preprocessing. Three realistic mistakes,
# each of which keeps shape and dtype, so no check can catch it:
#
# - **training-time augmentation**: calibrating from the training data loader, with random crops,
#   flips and brightness changes;
# - **another normalisation**: the common "mean 0.5, std 0.5" instead of the dataset's own;
# - **no normalisation**: pixels scaled to [0, 1] and nothing else.
#
# Here they are, written as a learner might write them:

# %%
prod = cl.default_preprocessing()
rng = np.random.default_rng(0)


def augmented(images):
    """A training loader's transform: random crops (shifts up to 4 pixels), flips, brightness jitter."""
    x = np.pad(images.astype(np.float32) / 255, ((0, 0), (6, 6), (6, 6)))  # 28 + 12 = 40
    out = np.empty((len(x), 32, 32), np.float32)
    for i, img in enumerate(x):
        dy, dx = rng.integers(0, 9, size=2)
        crop = img[dy : dy + 32, dx : dx + 32]
        out[i] = (crop[:, ::-1] if rng.random() < 0.5 else crop) * rng.uniform(0.6, 1.4)
    return ((out - prod.mean) / prod.std)[:, None].astype(np.float32)


def half_normalised(images):
    """Normalised with mean 0.5 and std 0.5 instead of the training set's own values."""
    x = np.pad(images.astype(np.float32) / 255, ((0, 0), (2, 2), (2, 2)))
    return ((x - 0.5) / 0.5)[:, None].astype(np.float32)


def not_normalised(images):
    """Scaled to [0, 1], no mean or std."""
    return np.pad(images.astype(np.float32) / 255, ((0, 0), (2, 2), (2, 2)))[:, None]


fig, axes = plt.subplots(1, 4, figsize=(8, 2.2))
for ax, transform in zip(axes, (cl.preprocess, augmented, half_normalised, not_normalised), strict=True):
    x = transform(calib_images[:1])[0, 0]
    ax.imshow(x, cmap="gray_r")
    ax.set_title(f"{transform.__name__}\n[{x.min():.2f}, {x.max():.2f}]", fontsize=8)
    ax.axis("off")
plt.show()

# %% [markdown]
# Calibrate with each, then count how many real activation values (correctly preprocessed test
# images) saturate in each INT8 file, as in section 5.

# %%
rows = []
for transform in (cl.preprocess, augmented, half_normalised, not_normalised):
    rng = np.random.default_rng(0)
    bad = cl.DatasetReader(pre, count=200, batch_size=20, transform=transform)
    path, seconds = static(f"calibrated on {transform.__name__}", bad, activation_type=best_act)
    sat, overall = saturated(path)
    name = f"{best_format}, calibrated on {transform.__name__}"
    row = evaluate(name, path, seconds, timed=False, transform=transform.__name__)
    evaluated[name]["saturation"] = sat
    rows.append({"calibration preprocessing": transform.__name__, "input pixels saturated": f"{sat['input']:.2%}",
                 "values saturated (all tensors)": f"{overall:.2%}", "accuracy": row["accuracy"],
                 "Δ points": row["Δ points"], "agreement": row["agreement"]})  # fmt: skip
display(Markdown(measure.markdown_table(rows)))

# %%
trap = {r["calibration preprocessing"]: r for r in rows}
worst = min(trap, key=lambda k: float(trap[k]["accuracy"].rstrip("%")))
display(
    Markdown(
        "**What to notice.** Every one of these models was written without an error or a warning. With the "
        f"production preprocessing {trap['preprocess']['values saturated (all tensors)']} of the real activation "
        f"values saturate. Calibrated on *{worst}* inputs, {trap[worst]['values saturated (all tensors)']} do, "
        f"with {trap[worst]['input pixels saturated']} of the input pixels (real inputs reach {test_x.max():.2f}), "
        f"and accuracy falls to {trap[worst]['accuracy']}. Augmentation "
        + (
            f"moved accuracy by only {trap['augmented']['Δ points']} points here: brightness jitter widens ranges "
            "rather than narrowing them, which costs resolution, not clipping. "
            if abs(float(trap["augmented"]["Δ points"])) < 0.5
            else f"moved accuracy by {trap['augmented']['Δ points']} points. "
        )
        + "The only defence is to calibrate through the production code path, then verify on held-out "
        "data (lesson 04)."
    )
)

# %% [markdown]
# ## 7. QDQ versus QOperator
#
# Two ways to write the same INT8 model. **QDQ** keeps each original op (`Conv`) and wraps it in
# `QuantizeLinear` / `DequantizeLinear` pairs that carry the scales; ONNX Runtime (and TensorRT,
# OpenVINO, mobile runtimes) recognise the pattern and run an INT8 kernel. **QOperator** replaces
# the op with a dedicated quantized one (`QLinearConv`), which only runtimes that implement those
# ops can execute.

# %%
qop, qop_s = static("QOperator", reader, activation_type=best_act, quant_format=QuantFormat.QOperator)
qdq = evaluated[best_format]["path"]
fig, axes = plt.subplots(1, 2, figsize=(9, 6.5))
plot_subgraph(
    qdq,
    first=9,
    title=f"QDQ: first 9 of {sum(measure.model_facts(qdq).op_counts.values())} nodes",
    ax=axes[0],
)
plot_subgraph(
    qop,
    first=9,
    title=f"QOperator: first 9 of {sum(measure.model_facts(qop).op_counts.values())} nodes",
    ax=axes[1],
)
plt.show()
for label, path in (("QDQ", qdq), ("QOperator", qop)):
    print(f"{label:>9}: {dict(measure.model_facts(path).op_counts)}")
rows = [evaluated[best_format]["row"], evaluate(f"QOperator {best_format.split()[-1]}", qop, qop_s)]
display(Markdown(measure.markdown_table(rows)))

# %%
q_ops = measure.model_facts(qop).op_counts
display(
    Markdown(
        f"**What to notice.** The QOperator graph is shorter ({sum(q_ops.values())} nodes against "
        f"{sum(measure.model_facts(qdq).op_counts.values())}): {q_ops.get('QLinearConv', 0)} `QLinearConv` nodes "
        "with the scales inside them. Same weights, same size; on this machine the speed and accuracy in the "
        "table are what each format gets from ONNX Runtime's CPU kernels. QDQ is the portable choice: it still "
        "reads as the float graph with annotations, every runtime that understands ONNX can at least run it, "
        "and hardware runtimes look for exactly this pattern."
    )
)

# %% [markdown]
# ## 8. The two-moons MLP: three variants
#
# The seed notebook's experiment, completed: the tiny MLP as fp32, dynamic INT8 and static QDQ
# INT8 (calibrated on 200 training points with `cl.ArrayReader`), compared on size, latency,
# test accuracy and maximum relative output drift.

# %%
moons = cl.load_moons()
mlp = cl.ensure_onnx("moons_mlp")
mlp_dynamic, mlp_static = work / "mlp.dynamic.onnx", work / "mlp.static.onnx"
quantize_dynamic(mlp, mlp_dynamic, weight_type=QuantType.QInt8)
quantize_static(mlp, mlp_static, cl.ArrayReader(moons.x_train[:200], mlp, batch_size=50),
                quant_format=QuantFormat.QDQ, activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)  # fmt: skip
mlp_ref = measure.make_session(mlp, 1).run(None, {"input": moons.x_test})[0]
moon_rows = []
for label, path in (("fp32", mlp), ("dynamic int8", mlp_dynamic), ("static QDQ int8", mlp_static)):
    out = measure.make_session(path, 1).run(None, {"input": moons.x_test})[0]
    p = measure.parity(mlp_ref, out, moons.y_test)
    ms = measure.measure_latency(path, {"input": moons.x_test}, threads=1, warmup=20, runs=300).median_ms
    moon_rows.append({"variant": label, "kB": f"{mb(path) * 1e3:.1f}", "ms (500 points)": f"{ms:.3f}",
                      "accuracy": f"{p.candidate_accuracy:.2%}", "max relative drift": f"{p.max_rel_drift:.2%}",
                      "max abs drift": f"{p.max_abs_drift:.4f}"})  # fmt: skip
    results.append({"model": "two-moons MLP", "variant": label, "MB": f"{mb(path):.3f}", "speed": f"{ms:.3f} ms",
                    "accuracy": f"{p.candidate_accuracy:.2%}", "agreement": f"{p.agreement:.2%}"})  # fmt: skip
display(Markdown(measure.markdown_table(moon_rows)))

# %% [markdown]
# **What to notice.** Read the latency column against the quote below: on a model this small,
# quantize/dequantize steps can cost more than the integer arithmetic saves, and static
# quantization adds a QuantizeLinear/DequantizeLinear pair around every op.
#
# > **Quote** (seed 003, a May 2026 NanoGPT test, not measured here): fp32 1,292.2 ms, dynamic INT8
# > 1,877.0 ms (0.69x), static INT8 2,353.2 ms (0.55x); size 0.84 → 0.03 MB.
#
# Lesson 04 takes the MLP's drift apart over the whole input plane.
#
# ## 9. Results
#
# Every ResNet18 variant of this run on the 10,000 test images (speed: batch 64, timed in turn
# with fp32, where measured; size as a fraction of fp32):

# %%
for name, v in evaluated.items():
    results.append({"model": "ResNet18", "variant": name, "MB": v["row"]["MB"],
                    "speed": f"{v['speedup']:.2f}x" if v["speedup"] else "", "accuracy": v["row"]["accuracy"],
                    "agreement": v["row"]["agreement"]})  # fmt: skip
display(Markdown(measure.markdown_table(results)))

# %% [markdown]
# ## Summary
#
# - Pre-process first: `quant_pre_process` fuses what the runtime would fuse (BatchNorm into Conv)
#   and records shapes, so the quantizer works on the graph that will run.
# - A `CalibrationDataReader` feeds `{input_name: batch}` dicts until it returns `None`; feed it
#   production-preprocessed inputs, and check them before calibrating.
# - On x86, QUInt8 activations with QInt8 per-channel weights is the fast combination.
# - MinMax, Entropy and Percentile trade clipping against resolution; measure which wins.
#   ONNX Runtime's Entropy needs more than its default 128 bins to clip at all.
# - A few hundred calibration images suffice; the wrong preprocessing ruins a model silently.
# - QDQ is the portable format; QOperator is shorter but needs runtimes that implement its ops.
#
# ## Exercises
#
# **1.** How many `QuantizeLinear` nodes does the QDQ U8S8 model contain? Use
# `measure.model_facts(path).op_counts`.

# %%
answer_1 = measure.model_facts(evaluated["QDQ U8S8"]["path"]).op_counts["QuantizeLinear"]  # solution
cl.checks.check_quantize_linear_count(answer_1, evaluated["QDQ U8S8"]["path"])

# %% [markdown]
# **2.** Write your own `CalibrationDataReader`: a class whose `get_next()` returns
# `{"input": batch}` for the first 40 calibration images in batches of 10, through
# `cl.preprocess`, then `None`. It must feed exactly what
# `cl.DatasetReader(pre, count=40, batch_size=10)` feeds.


# %%
class MyReader(CalibrationDataReader):  # solution
    def __init__(self, images, batch_size=10):  # solution
        x = cl.preprocess(images)  # solution
        self.batches = iter([x[i : i + batch_size] for i in range(0, len(x), batch_size)])  # solution

    def get_next(self):  # solution
        batch = next(self.batches, None)  # solution
        return None if batch is None else {"input": batch}  # solution


answer_2 = MyReader(calib_images[:40])  # solution
cl.checks.check_reader(answer_2, cl.DatasetReader(pre, count=40, batch_size=10))

# %% [markdown]
# **3.** In the not-normalised model, what fraction of the **input** values of the 500 test images
# saturate? Compare `real["input"]` with the input's range in
# `calibration.quantized_ranges(path)["input"]`, using `calibration.clipped_fraction`.

# %%
bad_path = evaluated[f"{best_format}, calibrated on not_normalised"]["path"]
answer_3 = calibration.clipped_fraction(
    real["input"], *calibration.quantized_ranges(bad_path)["input"]
)  # solution
cl.checks.check_saturated_share(answer_3, real["input"], bad_path, "input")
