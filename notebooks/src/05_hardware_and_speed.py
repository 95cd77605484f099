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
# # 05 · Hardware and speed
#
# INT8 is only fast if the processor multiplies INT8 quickly, and only *measured* speed counts.
# This lesson reads what your CPU offers, measures properly (and shows what a careless measurement
# gets wrong), puts every variant of the earlier lessons side by side, and explains when INT8 pays:
# the instructions, the saturation trap of CPUs without VNNI, and memory-bound versus compute-bound
# work.
#
# **Learning goal.** Measure INT8 speed so that the number survives a second look, and predict
# from a CPU's features and a model's shape whether INT8 will pay.
#
# **Before you start.** Lessons 02–04.
#
# **Lesson plan**
# 1. What this machine has.
# 2. Measuring properly: a bad measurement beside a good one.
# 3. Every variant side by side: latency, throughput over batch sizes, memory, size, accuracy.
# 4. The text encoder over sequence lengths.
# 5. U8S8 saturation: VPMADDUBSW's 16-bit sums, and the fixes.
# 6. Memory-bound versus compute-bound.
# 7. The seed's hardware table beside this machine; where to go next. Summary and exercises.

# %%
import logging
import tempfile
import time
import warnings
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import onnx
import onnxruntime as ort
from IPython.display import Markdown, display
from onnxruntime.quantization import QuantType, quantize_dynamic

import course_lib as cl
from course_lib import affine, bench, calibration, hardware, measure
from course_lib import text_encoder as te

warnings.filterwarnings("ignore")
logging.getLogger().setLevel(logging.ERROR)
work = Path(tempfile.mkdtemp(prefix="lesson05-"))
THREADS = 2

# %% [markdown]
# ## 1. What this machine has
#
# `cl.cpu_report()` reads the CPU's feature flags with py-cpuinfo (falling back to the operating
# system's `/proc/cpuinfo`). These are the ones that decide how ONNX Runtime multiplies INT8:

# %%
cpu = cl.cpu_report()
print(f"{cpu['cpu']} ({cpu['machine']}), {cpu['logical_cores']} logical cores, "
      f"{measure.physical_cores()} physical")  # fmt: skip
for feature, present in cpu["features"].items():
    print(f"  {'✔' if present else '·'} {feature:<16} {hardware.INT8_FEATURES[feature][1]}")
print("ONNX Runtime", ort.__version__, "providers here:", cl.onnxruntime_providers())
vnni = cl.has_vnni()
amx = cpu["features"]["AMX (INT8)"]

# %%
display(
    Markdown(
        "**What to notice.** "
        + (
            "This CPU has an INT8 dot-product instruction"
            + (" and AMX tiles" if amx else "")
            + ": ONNX Runtime's INT8 kernels add u8·s8 products straight into 32-bit sums, with no "
            "saturation risk. Expect INT8 to pay wherever multiplications dominate."
            if vnni
            else "This CPU has **no** INT8 dot-product instruction. With AVX2, ONNX Runtime multiplies u8·s8 "
            "pairs into 16-bit sums that can saturate (section 5), and the INT8 gain over float is smaller."
        )
        + " Only the CPU execution provider is used in this course; section 7 says where the others lead."
    )
)

# %% [markdown]
# ## 2. Measuring properly
#
# Build the lessons' variants of the ResNet18 (the same `quantize_dynamic` / `quantize_static`
# calls as lessons 02–03, collected in `course_lib.bench`):

# %%
for name, (kind, options) in bench.RESNET_VARIANTS.items():
    print(f"  {name:<38} {kind:<8} {options}")
paths = bench.build_resnet_variants(work, tuple(bench.RESNET_VARIANTS), log=lambda _: None)
fp32, best = paths["fp32"], paths[bench.BEST_RESNET]
test_images, test_labels = cl.load_split("test")
x = cl.preprocess(test_images[:2000])
batch64 = {"input": x[:64]}

# %% [markdown]
# **A bad measurement**: time one run of each model, one after the other, right after loading.

# %%
cold = {}
for name in ("fp32", bench.BEST_RESNET):
    start = time.perf_counter()
    session = ort.InferenceSession(str(paths[name]), providers=["CPUExecutionProvider"])
    loaded = time.perf_counter()
    session.run(None, batch64)
    cold[name] = ((loaded - start) * 1e3, (time.perf_counter() - loaded) * 1e3)
    print(f"{name:<26} load {cold[name][0]:6.1f} ms, first run {cold[name][1]:6.1f} ms")
print(f"cold ratio fp32 / int8 (first runs): {cold['fp32'][1] / cold[bench.BEST_RESNET][1]:.2f}x")

# %% [markdown]
# **A good one**: the same thread count for both, warm-up runs discarded, many runs, the median
# with its spread, and the two models timed in turn so that whatever else the machine does hits
# both alike (`measure.compare_latency`).

# %%
good = measure.compare_latency({"fp32": fp32, "int8": best}, batch64, threads=THREADS, warmup=5, runs=40)
for name, lat in good.latency.items():
    print(
        f"{name:<5} median {lat.median_ms:6.2f} ms, p10–p90 {lat.p10_ms:.2f}–{lat.p90_ms:.2f} ms over {lat.runs} runs"
    )
print(f"ratio {good.speedup:.2f}x, 90% interval {good.speedup_low:.2f}–{good.speedup_high:.2f}")

# %%
cold_ratio = cold["fp32"][1] / cold[bench.BEST_RESNET][1]
display(
    Markdown(
        f"**What to notice.** The first runs took {cold['fp32'][1]:.1f} and {cold[bench.BEST_RESNET][1]:.1f} ms, "
        f"against steady medians of {good.latency['fp32'].median_ms:.1f} and {good.latency['int8'].median_ms:.1f} ms: "
        "a first run allocates buffers and picks kernels. The cold ratio says "
        f"{cold_ratio:.2f}x, the careful one {good.speedup:.2f}x ({good.speedup_low:.2f}–{good.speedup_high:.2f}). "
        "A single run also has no spread, so it cannot tell a difference from noise. Thread count matters "
        "as much: ONNX Runtime defaults to all cores, and a comparison across different thread counts "
        "compares the threading, not the models."
    )
)

# %% [markdown]
# ## 3. Every variant side by side
#
# For each variant: accuracy and agreement on 2,000 test images, file size, peak memory of loading
# it and running a batch of 64 in a fresh process (`measure.peak_memory`), and its speed against
# fp32 at batch 1, 8 and 64, timed in turn.

# %%
ref = measure.make_session(fp32, THREADS).run(None, {"input": x})[0]
batches = (1, 8, 64)
rows, speed = [], {}
for name, path in paths.items():
    p = measure.parity(
        ref, measure.make_session(path, THREADS).run(None, {"input": x})[0], test_labels[:2000]
    )
    mem = measure.peak_memory(path, batch64, threads=THREADS)
    row = {"variant": name, "MB": f"{path.stat().st_size / 1e6:.1f}", "peak memory MB": f"{mem.increase_bytes / 1e6:.0f}",
           "accuracy": f"{p.candidate_accuracy:.2%}", "agreement": f"{p.agreement:.2%}"}  # fmt: skip
    if name != "fp32":
        for b in batches:
            c = speed[name, b] = measure.compare_latency({"fp32": fp32, name: path}, {"input": x[:b]}, threads=THREADS,
                                                         warmup=3, runs=15 if b == 64 else 40)  # fmt: skip
            row[f"b{b} speed"] = f"{c.speedup:.2f}x"
        row["b1 latency ms"] = f"{speed[name, 1].latency[name].median_ms:.2f}"
        measure.record(lesson="05", model="fashion_resnet18", variant=name, path=path,
                       metrics={"speedup": speed[name, 64].speedup, **{f"speedup_b{b}": speed[name, b].speedup for b in batches},
                                "agreement": p.agreement, "accuracy": p.candidate_accuracy,
                                "peak_memory_bytes": mem.increase_bytes}, options={"threads": THREADS})  # fmt: skip
    else:
        row.update({f"b{b} speed": "1.00x (baseline)" for b in batches})
        row["b1 latency ms"] = "(below)"
    rows.append(row)
rows[0]["b1 latency ms"] = (
    f"{speed[bench.BEST_RESNET, 1].latency['fp32'].median_ms:.2f}"  # fp32, from its turn with the best
)
display(Markdown(measure.markdown_table(rows)))

# %%
fig, ax = plt.subplots(figsize=(8, 3.6))
for name in paths:
    if name == "fp32":
        continue
    ax.plot(batches, [speed[name, b].latency[name].throughput for b in batches], "o-", label=name, ms=4)
ax.plot(
    batches,
    [speed[bench.BEST_RESNET, b].latency["fp32"].throughput for b in batches],
    "k--",
    label="fp32",
    lw=2,
)
ax.set_xscale("log", base=2)
ax.set_xticks(batches, [str(b) for b in batches])
ax.set_xlabel("batch size")
ax.set_ylabel("images per second")
ax.legend(fontsize=7)
ax.set_title("Throughput over batch size (each variant timed in turn with fp32)")
plt.show()

# %%
fastest = max((n for n in paths if n != "fp32"), key=lambda n: speed[n, 64].speedup)
slowest = min((n for n in paths if n != "fp32"), key=lambda n: speed[n, 64].speedup)
mem = {r["variant"]: float(r["peak memory MB"]) for r in rows}
size = {r["variant"]: float(r["MB"]) for r in rows}
display(
    Markdown(
        f"**What to notice.** At batch 64 the fastest variant is *{fastest}* ({speed[fastest, 64].speedup:.2f}x fp32) "
        f"and the slowest *{slowest}* ({speed[slowest, 64].speedup:.2f}x): the same weights and nearly the same "
        "accuracy, yet a several-fold spread in speed, set by which kernels each graph reaches. The files shrank "
        f"{size['fp32'] / size[bench.BEST_RESNET]:.1f}x and the peak memory of loading and running a batch of 64 "
        f"{mem['fp32'] / mem[bench.BEST_RESNET]:.1f}x ({mem['fp32']:.0f} → {mem[bench.BEST_RESNET]:.0f} MB for "
        f"*{bench.BEST_RESNET}*): memory is its own measurement (activations, buffers, and, for fp32, the "
        "runtime's repacked copies of the weights), neither the file size nor the speed."
    )
)

# %% [markdown]
# ## 4. The text encoder over sequence lengths
#
# For a transformer, the sequence length sets how much arithmetic each weight takes part in. The
# optimized fp32 graph against dynamic INT8 per-channel (lesson 02), at batch 1, sequence lengths
# 16 to 256.

# %%
te_paths = te.ensure_onnx(log=print)
te_int8 = work / "text_encoder.int8.onnx"
quantize_dynamic(te_paths["optimized"], te_int8, weight_type=QuantType.QInt8, per_channel=True,
                 extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})  # fmt: skip
sentences = te.load_sentences(16)
seq_rows, seq_speed = [], {}
for length in (16, 64, 128, 256):
    words = " ".join(sentences)  # long enough to fill 256 tokens
    feed = te.encode([words], max_length=length, padding="max_length")
    c = seq_speed[length] = measure.compare_latency({"fp32": te_paths["optimized"], "int8": te_int8}, feed,
                                                    threads=THREADS, warmup=3, runs=20 if length < 256 else 10)  # fmt: skip
    seq_rows.append({"sequence length": length, "fp32 ms": f"{c.latency['fp32'].median_ms:.1f}",
                     "int8 ms": f"{c.latency['int8'].median_ms:.1f}", "speed": f"{c.speedup:.2f}x ({c.speedup_low:.2f}–{c.speedup_high:.2f})"})  # fmt: skip
    measure.record(lesson="05", model="text_encoder", variant=f"dynamic int8 per-channel, seq {length}", path=te_int8,
                   metrics={"speedup": c.speedup, "fp32_ms": c.latency["fp32"].median_ms}, options={"threads": THREADS, "batch": 1})  # fmt: skip
display(Markdown(measure.markdown_table(seq_rows)))
grows = seq_speed[256].speedup > seq_speed[16].speedup
display(
    Markdown(
        f"**What to notice.** {seq_speed[16].speedup:.2f}x at 16 tokens, {seq_speed[256].speedup:.2f}x at 256: the "
        "sequence length sets how much arithmetic each weight does, and with it the balance between the integer "
        "MatMuls and the fixed costs (quantizing activations, the float LayerNorms and softmax, per-op overhead). "
        + (
            "Here the longer the input, the more INT8 pays. "
            if grows
            else "Here the ratio did not grow with length: at 16 tokens both models take a few milliseconds, "
            "dominated by per-op costs that INT8 also cuts, and the intervals are wide. "
        )
        + "Sequence length, like image resolution, is a lever to measure before promising a speed-up."
    )
)

# %% [markdown]
# ## 5. U8S8 saturation
#
# On x86, ONNX Runtime multiplies uint8 activations by int8 weights (U8S8). Without VNNI it uses
# AVX2's `VPMADDUBSW`: it multiplies neighbouring pairs of bytes and adds **each pair into a 16-bit
# sum**, saturating at 32,767. Two products can reach 2 × 255 × 127 = 64,770: such a pair is
# clipped, silently. The fixes:
#
# - `reduce_range=True`: 7-bit weights (|w| ≤ 64), so a pair stays below 2 × 255 × 64 = 32,640;
# - U8U8 (uint8 weights too), which takes another kernel path;
# - a CPU with VNNI (or ARM's dot product), which adds into 32 bits directly: S8S8 and U8S8 are safe.
#
# This machine's CPU decides which path ONNX Runtime takes, so we **simulate** `VPMADDUBSW` in
# numpy (`affine.vpmaddubsw_matmul`) on the real network: every convolution's int8 weights
# (per-channel, full range or reduce_range) times its real uint8 input activations on 16 test
# images (`affine.im2col` lays the inputs out as the kernel sees them). An illustrative
# simulation of the AVX2 instruction, not ONNX Runtime itself.

# %%
graph = onnx.load(str(fp32)).graph
inits = {t.name: onnx.numpy_helper.to_array(t) for t in graph.initializer}
convs = [n for n in graph.node if n.op_type == "Conv"]
inputs = calibration.activation_values(fp32, {"input": x[:16]}, sorted({n.input[0] for n in convs}))


def simulate(node, reduce_range):
    """Saturated pair sums, all pair sums, and the worst error relative to the largest output."""
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    w, act = inits[node.input[1]], inputs[node.input[0]]
    cols = affine.im2col(
        act, tuple(attrs["kernel_shape"]), attrs.get("strides", (1, 1)), attrs.get("pads", (0, 0, 0, 0))
    )
    a_scale, a_zero = affine.scale_zero_point(min(float(act.min()), 0.0), float(act.max()), "uint8")  # MinMax
    qa = affine.quantize(cols, a_scale, a_zero, "uint8")
    m = np.abs(w).reshape(w.shape[0], -1).max(axis=1)
    w_scale, w_zero = affine.scale_zero_point(-m, m, "int8", symmetric=True, reduce_range=reduce_range)
    qw = affine.quantize(w.reshape(w.shape[0], -1), w_scale, w_zero, "int8", axis=0).T  # (K, out)
    exact = qa.astype(np.int64) @ qw.astype(np.int64)
    simulated, saturated, pairs = affine.vpmaddubsw_matmul(qa, qw)
    return saturated, pairs, float(np.abs(simulated - exact).max() / max(np.abs(exact).max(), 1))


sat = {(n.name, rr): simulate(n, rr) for n in convs for rr in (False, True)}
sat_rows = []
for label, rr in (("full int8 weights", False), ("reduce_range (7-bit)", True)):
    saturated = sum(sat[n.name, rr][0] for n in convs)
    pairs = sum(sat[n.name, rr][1] for n in convs)
    worst = max(convs, key=lambda n: sat[n.name, rr][0] / sat[n.name, rr][1])
    sat_rows.append({"weights": label, "pairs saturated (all 20 convs)": f"{saturated:,} of {pairs:,}",
                     "worst layer": f"{worst.name}: {sat[worst.name, rr][0] / sat[worst.name, rr][1]:.3%} of its pairs",
                     "its worst error / largest output": f"{sat[worst.name, rr][2]:.2%}"})  # fmt: skip
display(Markdown(measure.markdown_table(sat_rows)))

# %%
pc, rr = "static U8S8 per-channel", "static U8S8 per-channel reduce_range"
pc_p = measure.parity(
    ref, measure.make_session(paths[pc], THREADS).run(None, {"input": x})[0], test_labels[:2000]
)
rr_p = measure.parity(
    ref, measure.make_session(paths[rr], THREADS).run(None, {"input": x})[0], test_labels[:2000]
)
full_sat = sum(sat[n.name, False][0] for n in convs)
first = convs[0].name
display(
    Markdown(
        f"**What to notice.** In the simulation, full-range int8 weights saturate {full_sat:,} pair sums"
        + (
            f", most of them in layers like `{first}`, whose uint8 inputs (image pixels) often sit near 255 next "
            "to each other"
            if sat[first, False][0] == max(sat[n.name, False][0] for n in convs) and full_sat
            else ""
        )
        + "; 7-bit weights saturate none, by construction. Saturation needs two large products side by side, "
        "so it is rare, but each one is a silent error in a sum. "
        f"On *this* CPU ({'with' if vnni else 'without'} VNNI), ONNX Runtime's real U8S8 model agrees with fp32 on "
        f"{pc_p.agreement:.2%} of 2,000 test images and the reduce_range one on {rr_p.agreement:.2%}. "
        + (
            "Here the kernels add into 32 bits, so full-range weights are safe and reduce_range only gives "
            "away one bit of weight precision. "
            if vnni
            else "Without VNNI the saturation is real: reduce_range trades one bit of weight precision for "
            "correct sums. "
        )
        + "\n\n> **Quote** (a first measurement on an AMD Zen 3, AVX2 without VNNI, from this course's issue "
        "tracker; not measured here): static per-channel U8S8 agreed 98.5 % with fp32, and 99.3 % with reduce_range."
    )
)

# %% [markdown]
# ## 6. Memory-bound versus compute-bound
#
# INT8 speeds up *arithmetic* (more multiply-adds per instruction) and *data movement* (a quarter
# of the bytes). When neither is the bottleneck, nothing improves: a tiny model spends its time in
# per-op overhead, and a small input gives each weight little work. The measurements above, and the
# two-moons MLP for the tiny end:

# %%
moons = cl.load_moons()
mlp = cl.ensure_onnx("moons_mlp")
quantize_dynamic(mlp, work / "mlp.int8.onnx", weight_type=QuantType.QInt8)
mlp_c = measure.compare_latency({"fp32": mlp, "int8": work / "mlp.int8.onnx"}, {"input": moons.x_test}, threads=1,
                                warmup=20, runs=200)  # fmt: skip
lever = [
    {"case": "two-moons MLP (4,000 weights), 500 points", "INT8 speed": f"{mlp_c.speedup:.2f}x"},
    {
        "case": f"ResNet18 {bench.BEST_RESNET}, batch 1",
        "INT8 speed": f"{speed[bench.BEST_RESNET, 1].speedup:.2f}x",
    },
    {
        "case": f"ResNet18 {bench.BEST_RESNET}, batch 64",
        "INT8 speed": f"{speed[bench.BEST_RESNET, 64].speedup:.2f}x",
    },
    {"case": "MiniLM-L6, 16 tokens", "INT8 speed": f"{seq_speed[16].speedup:.2f}x"},
    {"case": "MiniLM-L6, 256 tokens", "INT8 speed": f"{seq_speed[256].speedup:.2f}x"},
]
display(Markdown(measure.markdown_table(lever)))
b1, b64 = speed[bench.BEST_RESNET, 1].speedup, speed[bench.BEST_RESNET, 64].speedup
display(
    Markdown(
        f"**What to notice.** The tiny MLP gains nothing ({mlp_c.speedup:.2f}x): its time goes to per-op overhead, "
        f"not arithmetic. For MiniLM the sequence length moved the ratio from {seq_speed[16].speedup:.2f}x at 16 "
        f"tokens to {seq_speed[256].speedup:.2f}x at 256. For the ResNet18 "
        f"the batch size moved the ratio from {b1:.2f}x at batch 1 to {b64:.2f}x at batch 64"
        + (
            ": on this machine ONNX Runtime's fp32 path spends relatively more time on a single 32×32 image "
            "than its INT8 path does, so INT8's lead is largest on the smallest input. Which way batch size "
            "moves the ratio depends on the kernels: measure, don't assume."
            if b1 > b64
            else ": more images per call give the integer kernels more to do."
        )
        + " The file size, a quarter in every case, predicts none of this."
    )
)

# %% [markdown]
# ## 7. The seed's hardware table, beside this machine
#
# > **Quote** (seed 000, not measured here):
# >
# > | Hardware | INT8 speedup | Notes |
# > |---|---|---|
# > | Modern Intel CPU (Cascade Lake and later, VNNI) | 2–4x | Dynamic and static both win. |
# > | ARM v8.4-A CPUs (mobile, Apple M-series) | 2–3x | Static preferred. |
# > | NVIDIA GPU (Turing and later) via TensorRT | 3–5x | Static, per-channel, QDQ format. |
# > | Older CPUs without VNNI | Marginal | Quantize for size, not for latency. |

# %%
best_seen = max(max(c.speedup for c in speed.values()), max(c.speedup for c in seq_speed.values()))
display(
    Markdown(
        f"**Measured here** ({cpu['cpu']}, {'VNNI' if vnni else 'no VNNI'}{', AMX' if amx else ''}, {THREADS} threads): "
        f"the best INT8/fp32 ratio of this lesson is **{best_seen:.2f}x**; ResNet18 static U8S8 at batch 64 "
        f"{speed[bench.BEST_RESNET, 64].speedup:.2f}x; MiniLM-L6 at 256 tokens {seq_speed[256].speedup:.2f}x. "
        + (
            "Some cases above reach the quoted 2–4x for VNNI CPUs, others do not: the quote names no model, batch "
            "size or thread count. "
            if vnni and best_seen >= 2
            else "Below the quoted 2–4x: the quote's models and batch sizes are not given, and our models are "
            "small and our fp32 baseline already uses AVX-512. "
        )
        + "Always measure on the hardware you deploy to.\n\n"
        "**Where to go next: execution providers.** The same ONNX file can run on other backends by passing "
        "`providers=[...]` to `InferenceSession`: CUDA (NVIDIA GPUs; INT8 mostly through TensorRT), TensorRT "
        "(reads QDQ graphs and builds INT8 engines; per-channel, QDQ), OpenVINO (Intel CPUs, GPUs and NPUs; "
        "reads QDQ). This build of ONNX Runtime offers: "
        + ", ".join(f"`{p}`" for p in cl.onnxruntime_providers())
        + "."
    )
)

# %% [markdown]
# ## Summary
#
# - Read the CPU first: VNNI / AVX-VNNI / AMX (or ARM's dot product) make INT8 fast; AVX2 alone
#   gives less, and its 16-bit pair sums can saturate (reduce_range fixes that).
# - Measure with warm-up, many runs, medians and spread, fixed threads, and A/B in turn.
# - Speed depends on the kernels a graph reaches (U8S8 versus S8S8, QDQ versus QOperator), not on
#   the file size; peak memory shrinks less than the file.
# - INT8 pays where arithmetic dominates: large batches, long sequences, big layers.
#
# ## Exercises
#
# **1.** How many of this CPU's INT8 features (section 1) are present? Count the ✔.

# %%
answer_1 = sum(cpu["features"].values())  # solution
cl.checks.check_feature_count(answer_1)

# %% [markdown]
# **2.** What is the largest sum of two u8·s8 products when the weights use reduce_range (7 bits,
# |w| ≤ 64)? Does it fit in a signed 16-bit integer?

# %%
answer_2 = 2 * 255 * 64  # solution
cl.checks.check_pair_sum(answer_2, weight_bits=7)
