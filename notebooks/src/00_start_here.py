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
# # 00 · Start here
#
# This course teaches **post-training INT8 quantization with ONNX Runtime**: storing a trained
# model's numbers as small integers so that the file shrinks and, on the right hardware,
# inference gets faster. Quantization is not free. It trades precision for size and speed, and
# how good that trade is depends on the model, the data and *your* CPU.
#
# So this course measures everything on the machine you run it on. Every number in these
# notebooks is computed in the run you are looking at. When we quote a figure from elsewhere
# (a blog post's "2-4x faster"), it is labelled as a quote and shown beside what your machine
# measured.
#
# **Learning goal.** Know how to run the course, what your machine offers for INT8, and the data
# and the two demo models that the lessons quantize.
#
# **Before you start.** Python functions and NumPy arrays. *Inference* means using a trained model
# to compute an answer; a *graph* describes the operations of that computation; an *operator* is
# one kind of operation, such as a matrix multiplication.
#
# **Lesson plan**
# 1. How to run the course: Colab, Binder or your own machine.
# 2. Your environment: library versions, CPU features that matter for INT8.
# 3. The data: Fashion-MNIST and two moons, and the one preprocessing every lesson uses.
# 4. The two demo models, run with ONNX Runtime, with their accuracy measured now.
# 5. A sample browser, then exercises that check themselves.

# %% [markdown]
# ## 1. How to run the course
#
# | where | how | notes |
# |---|---|---|
# | your machine (Linux, Python 3.11+) | `make run` runs everything headless; `make lab` opens JupyterLab | `make` creates `.venv`, installs `course_lib`, finds the data, trains and caches the models |
# | Binder | the *Launch Binder* link in the README | the image is built with trained models; about 2 GB of memory |
# | Colab (CPU runtime) | the *Open in Colab* link in the README | 2 cores, like the machines this course was written on |
#
# `python -m course_lib doctor` prints the same environment report as the next cells, plus what to
# do next if something is missing. `python -m course_lib prepare` fetches data and trains the
# models; it reuses everything that is already cached and valid.

# %%
import time

import matplotlib.pyplot as plt
import numpy as np
import onnxruntime as ort
from IPython.display import Markdown, display

import course_lib as cl

np.random.seed(0)

# %% [markdown]
# ## 2. Your environment
#
# ONNX Runtime runs INT8 models fastest on CPUs with an *INT8 dot-product instruction*: VNNI on
# recent Intel and AMD chips, the dot-product extension on ARM. Without one, INT8 still works but
# the gains are smaller. Lesson 05 measures exactly how much.

# %%
report = cl.cpu_report()
versions = cl.models.library_versions()
print(f"CPU: {report['cpu']} — {report['logical_cores']} logical cores ({report['machine']})")
for feature, present in report["features"].items():
    print(f"  {'✔' if present else '·'} {feature}")
print("ONNX Runtime providers:", ", ".join(cl.onnxruntime_providers()))
print("Libraries:", ", ".join(f"{k} {v}" for k, v in versions.items()))

# %%
display(
    Markdown(
        "**What to notice.** This machine has "
        + (
            "an INT8 dot-product instruction, so the lessons' INT8 speed-ups should be clear."
            if cl.has_vnni()
            else "**no** INT8 dot-product instruction (no VNNI). INT8 models will shrink by about 4x as "
            "everywhere, but expect modest speed-ups here; lesson 05 explains why, and shows the "
            "saturation that AVX2-only kernels can cause."
        )
    )
)

# %% [markdown]
# ## 3. The data
#
# **Fashion-MNIST** is 70,000 grayscale 28×28 pictures of clothing in 10 classes, published by
# Zalando Research as a harder drop-in replacement for MNIST's digits. `course_lib` looks for it in
# the course data directory, then in the Debian package `dataset-fashion-mnist`, then downloads it
# with torchvision, and checks every file's SHA-256 whichever source it came from.

# %%
fmnist = cl.load_fashion_mnist()
print(f"Found in the {fmnist.source.kind}: {fmnist.source.directory}")
print("train:", fmnist.train_images.shape, fmnist.train_images.dtype, "| test:", fmnist.test_images.shape)
print("checksums verified:", ", ".join(f"{k} {v[:10]}…" for k, v in fmnist.checksums.items()))

# %% [markdown]
# The lessons use fixed, seeded splits of it. *Calibration* (lesson 03) draws from the training
# data, as you would in production; *validation* is a small held-out set for quick checks; *test*
# is the published test set, used for the accuracy we report.

# %%
for split in ("train", "calibration", "validation", "test"):
    images, labels = cl.load_split(split)
    counts = np.bincount(labels, minlength=10)
    print(f"{split:<12} {len(labels):>6,} images, per class {counts.min():,}–{counts.max():,}")

# %%
train_images, train_labels = cl.load_split("train")
fig, axes = plt.subplots(1, 10, figsize=(12, 1.8))
for c, ax in enumerate(axes):
    ax.imshow(train_images[np.flatnonzero(train_labels == c)[0]], cmap="gray_r")
    ax.set_title(cl.CLASS_NAMES[c], fontsize=8)
    ax.axis("off")
fig.suptitle("One training image per class")
plt.show()

# %% [markdown]
# **One preprocessing for everything.** A model only works on inputs prepared the way its training
# inputs were. `course_lib` has exactly one preprocessing function, used for training, calibration
# and evaluation: pad 28×28 to 32×32 with background, scale to [0, 1], subtract the training set's
# mean and divide by its standard deviation. Lesson 03 shows what happens when calibration data is
# prepared differently.

# %%
prep = cl.default_preprocessing()
x = cl.preprocess(train_images[:2000])
print(prep)
print(
    f"raw: {train_images.dtype}, {train_images[:2000].shape}, values {train_images.min()}–{train_images.max()}"
)
print(f"preprocessed: {x.dtype}, {x.shape}, mean {x.mean():+.3f}, std {x.std():.3f}")

# %% [markdown]
# **What to notice.** After preprocessing the values are centred near 0 with spread near 1 (not
# exactly, because the 2-pixel padding adds background). Those two constants, mean and std, are
# stored inside every ONNX file the course exports, so the file alone says how to feed it.
#
# **Two moons** is a toy problem: two interleaved half-circles of 2-D points. The lessons use it for
# a model small enough to inspect completely. Its *edge set* holds points where the classes overlap
# and points outside the training range, where a quantized model can drift (lesson 04).

# %%
moons = cl.load_moons()
fig, ax = plt.subplots(figsize=(6, 4))
ax.scatter(*moons.x_train.T, c=moons.y_train, cmap="coolwarm", s=8, alpha=0.6, label="train")
for kind, marker in (("boundary", "x"), ("outside", "^")):
    sel = moons.edge_kind == kind
    ax.scatter(*moons.x_edge[sel].T, marker=marker, c="k", s=14, label=f"edge: {kind}")
ax.set(title="Two moons: training points and the edge set", xlabel="x₁", ylabel="x₂")
ax.legend(fontsize=8, loc="lower left")
plt.show()

# %% [markdown]
# ## 4. The two demo models
#
# Both models were trained on this machine's CPU by `python -m course_lib prepare` (or are trained
# now, with a progress bar, if they are not cached yet) and exported to ONNX. From here on we use
# them the way a deployment would: an ONNX file and an ONNX Runtime `InferenceSession`.

# %%
mlp_path = cl.ensure_onnx("moons_mlp")
mlp = ort.InferenceSession(mlp_path, providers=["CPUExecutionProvider"])
print("inputs:", [(i.name, i.shape, i.type) for i in mlp.get_inputs()])
print("outputs:", [(o.name, o.shape, o.type) for o in mlp.get_outputs()])
mlp_logits = mlp.run(None, {"input": moons.x_test})[0]
mlp_accuracy = (mlp_logits.argmax(1) == moons.y_test).mean()

# %%
xx, yy = np.meshgrid(np.linspace(-2, 3, 250), np.linspace(-1.5, 2, 180))
grid = np.c_[xx.ravel(), yy.ravel()].astype(np.float32)
p_upper = mlp.run(None, {"input": grid})[0]
p_upper = np.exp(p_upper - p_upper.max(1, keepdims=True))
p_upper = (p_upper / p_upper.sum(1, keepdims=True))[:, 1].reshape(xx.shape)
fig, ax = plt.subplots(figsize=(6, 4))
cs = ax.contourf(xx, yy, p_upper, levels=20, cmap="coolwarm", alpha=0.7)
ax.scatter(*moons.x_test.T, c=moons.y_test, cmap="coolwarm", edgecolor="k", s=10)
fig.colorbar(cs, label="P(class 1)")
ax.set(title=f"Two-moons MLP, ONNX Runtime: test accuracy {mlp_accuracy:.1%}", xlabel="x₁", ylabel="x₂")
plt.show()

# %% [markdown]
# The ResNet18 ONNX file carries its own preprocessing and class names in its metadata, so a client
# that has only the file can use it:

# %%
resnet_path = cl.ensure_onnx("fashion_resnet18")
meta = cl.onnx_metadata(resnet_path)
for key in ("input_size", "normalization_mean", "normalization_std", "class_names"):
    print(f"{key:>20}: {meta[key]}")
print(f"{'file size':>20}: {resnet_path.stat().st_size / 1e6:.1f} MB")

# %%
resnet = ort.InferenceSession(resnet_path, providers=["CPUExecutionProvider"])
test_images, test_labels = cl.load_split("test")
start = time.perf_counter()
test_logits = np.concatenate(
    [
        resnet.run(None, {"input": cl.preprocess(test_images[i : i + 500])})[0]
        for i in range(0, len(test_images), 500)
    ]
)
seconds = time.perf_counter() - start
preds = test_logits.argmax(1)
resnet_accuracy = (preds == test_labels).mean()
trained = cl.load_model("fashion_resnet18", train=False)
display(
    Markdown(
        f"ONNX Runtime classified the **{len(test_labels):,} test images in {seconds:.1f} s** "
        f"({len(test_labels) / seconds:,.0f} images/s on {report['logical_cores']} cores): "
        f"**test accuracy {resnet_accuracy:.2%}**. PyTorch measured {trained.test_accuracy:.2%} "
        f"on the same images after training ({trained.meta['train_seconds'] / 60:.1f} min of training "
        f"on this kind of CPU). "
        + (
            "The two agree: the export reproduces PyTorch's logits to about "
            if abs(resnet_accuracy - trained.test_accuracy) < 5e-5
            else "They differ, although the export reproduced PyTorch's logits to about "
        )
        + f"{trained.meta['onnx']['parity_max_abs_diff']:.0e} when it was checked."
    )
)

# %%
per_class = [(preds[test_labels == c] == c).mean() for c in range(10)]
fig, ax = plt.subplots(figsize=(8, 3))
ax.barh(cl.CLASS_NAMES, per_class, color="steelblue")
ax.set(xlim=(0.5, 1), xlabel="accuracy on the test set", title="ResNet18 fp32: accuracy per class")
ax.invert_yaxis()
plt.show()
worst = int(np.argmin(per_class))
print(
    f"Hardest class: {cl.CLASS_NAMES[worst]} ({per_class[worst]:.1%}); easiest: "
    f"{cl.CLASS_NAMES[int(np.argmax(per_class))]} ({max(per_class):.1%})"
)

# %% [markdown]
# **What to notice.** Accuracy is not uniform: shirts are confused with T-shirts, pullovers and
# coats. When lesson 04 compares the INT8 model with this fp32 one, it looks per class too, because
# an average can hide a class that quantization hurt.
#
# ## 5. Browse the data
#
# Pick a split, a class and a page. Titles show the true class and, after the arrow, the fp32
# model's answer; red titles are mistakes.

# %%
from course_lib.explorers import sample_browser


def predict(images):
    return resnet.run(None, {"input": cl.preprocess(images)})[0].argmax(1)


browser = sample_browser(predict=predict)

# %% [markdown]
# ## Summary
#
# - The course measures on your machine; quoted figures are labelled as quotes.
# - Fashion-MNIST is found locally or downloaded, and verified by checksum; one preprocessing serves
#   training, calibration and evaluation, and its constants travel inside the ONNX file.
# - Two demo models, an MLP on two moons and a ResNet18 on Fashion-MNIST, run in ONNX Runtime with
#   the accuracy printed above.
#
# ## Exercises
#
# Each exercise ends with a check that tells you what passed or what differed.
#
# **1.** A raw pixel of value 200 goes into the ResNet. Using the mean and std from the ONNX file's
# metadata (`meta`), what value does the model actually see?

# %%
mean, std = float(meta["normalization_mean"]), float(meta["normalization_std"])
answer_1 = (200 / 255 - mean) / std  # solution
cl.checks.check_normalised_pixel(answer_1, 200, mean, std)

# %% [markdown]
# **2.** How many of the 10,000 test images does the fp32 ResNet get wrong? Use `preds` and
# `test_labels` from above.

# %%
answer_2 = int((preds != test_labels).sum())  # solution
cl.checks.check_error_count(answer_2, preds, test_labels)
