"""Training throughput of the ResNet18 recipe on this machine, setting by setting.

    python benchmarks/training_speed.py [--steps 8]

For each setting (input size, batch size, memory layout, whether convolutions skip the taps that
only see padding) it times a few real training steps on real Fashion-MNIST batches and prints
images/s and the time the recipe's epochs would take. The first row is the course's recipe.
Figures are this machine's: the CPU is named in the first line.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from course_lib import data
from course_machinery import (
    hardware,
    models,  # noqa: E402
)
from course_machinery.models import estimate, training  # noqa: E402

# (label, input size, batch size, channels_last, skip dead taps)
SETTINGS = [
    ("the recipe: 32 px, batch 256, channels_last, dead taps skipped", 32, 256, True, True),
    ("every tap computed (the recipe before)", 32, 256, True, False),
    ("contiguous (NCHW) layout", 32, 256, False, True),
    ("batch 128", 32, 128, True, True),
    ("batch 512", 32, 512, True, True),
    ("28 px (no zero border)", 28, 256, True, True),
    ("28 px, every tap computed", 28, 256, True, False),
]


def images_per_second(size: int, batch: int, channels_last: bool, skip: bool, steps: int) -> float:
    recipe = models.RESNET_RECIPE
    prep = data.default_preprocessing()
    images, labels = data.load_split("train")
    x = torch.from_numpy(data.Preprocessing(prep.mean, prep.std, size=size)(images[:batch]))
    y = torch.from_numpy(labels[:batch].copy())
    model = models.build_resnet18()
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
        model = model.to(memory_format=torch.channels_last)
    opt, _ = training.resnet_optimizer(model, recipe, 1)
    fast = training._skipping_dead_taps(model) if skip else contextlib.nullcontext()
    with fast:
        per_step = estimate._time_steps(model, opt, x, y, steps, label_smoothing=recipe.label_smoothing)
    return batch / per_step


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--steps", type=int, default=8, help="timed steps per setting (after two warm-up steps)"
    )
    args = parser.parse_args(argv)
    recipe = models.RESNET_RECIPE
    n = len(data._split_indices()["train"])
    print(f"{hardware.cpu_summary()}, {torch.get_num_threads()} torch threads, torch {torch.__version__}")
    print(f"recipe: {recipe.epochs} epochs of {n:,} images; {args.steps} timed steps per setting\n")
    images_per_second(32, 256, True, True, 2)  # the first steps of a process are slow: not timed
    print(f"| setting | images/s | one epoch | {recipe.epochs} epochs |")
    print("|---|---:|---:|---:|")
    for label, size, batch, channels_last, skip in SETTINGS:
        ips = images_per_second(size, batch, channels_last, skip, args.steps)
        print(
            f"| {label} | {ips:,.0f} | {n / ips / 60:.1f} min | {recipe.epochs * n / ips / 60:.1f} min |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
