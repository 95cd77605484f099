"""Lesson 00's sentences about its results, and the figures its check cell measures.

Each sentence here is written once in the lesson's markdown, with `<!-- claim: name -->` after it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..claims import Book, about

book = Book("00", timed=("train_minutes", "images_per_s"))


# 5. The two demo models ---------------------------------------------------------------------------
@book.figures("5")
def _(mlp_accuracy: float, preds: np.ndarray, labels: np.ndarray, trained: Any, speed: float) -> dict:
    """`preds`: the ResNet18's answers on the test set, `labels` its labels, `trained` its training
    record, `speed`: ONNX Runtime's images per second over the test set."""
    from course_lib.data import CLASS_NAMES

    preds, labels = np.asarray(preds), np.asarray(labels)
    accuracy = float((preds == labels).mean())
    per_class = [float((preds[labels == c] == c).mean()) for c in range(len(CLASS_NAMES))]
    hardest = int(np.argmin(per_class))
    return {
        "mlp_accuracy_pct": 100 * float(mlp_accuracy),
        "onnx_accuracy_pct": 100 * accuracy,
        "torch_accuracy_pct": 100 * float(trained.test_accuracy),
        # how many test images the two accuracies are apart
        "images_apart": round(abs(accuracy - float(trained.test_accuracy)) * len(labels)),
        "train_minutes": trained.meta["train_seconds"] / 60,
        "images_per_s": float(speed),
        "hardest_class": CLASS_NAMES[hardest],
        "hardest_accuracy_pct": 100 * per_class[hardest],
    }


@book.sentence(
    "5",
    "mlp-nine-in-ten",
    "The MLP gets more than nine test points in ten right",
    shows="{mlp_accuracy_pct:.1f} %",
    depends="weights",
)
def _(f):
    return f["mlp_accuracy_pct"] > 90


@book.sentence(
    "5",
    "resnet-nine-in-ten",
    "The ResNet18 gets about nine test images in ten right",
    shows="{onnx_accuracy_pct:.2f} %",
    depends="weights",
)
def _(f):
    return about(f["onnx_accuracy_pct"] / 100, 0.9, tolerance=0.05)


@book.sentence(
    "5",
    "onnx-reproduces",
    "ONNX Runtime reproduces the test accuracy PyTorch measured after training",
    shows="{onnx_accuracy_pct:.2f} % against {torch_accuracy_pct:.2f} %: {images_apart} images apart",
    depends=("runtime", "weights"),
)
def _(f):
    return f["images_apart"] <= 2


@book.sentence(
    "5",
    "shirt-hardest",
    "Shirt is the hardest class",
    shows="{hardest_class}, {hardest_accuracy_pct:.1f} % right",
    depends=("weights", "data"),
)
def _(f):
    return f["hardest_class"] == "Shirt"
