"""How long training a demo model would take here, from a few timed training steps.

`pipeline.load_model` says it before it trains, so that nobody waits without knowing for how long.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from course_lib import data as _data
from course_lib.names import MOONS_MLP
from course_lib.units import format_duration

from .architectures import MoonsMLP, build_resnet18
from .registry import spec
from .training import device_description, fast_convolutions, resnet_optimizer, torch_threads, training_device


@dataclass(frozen=True)
class TrainingEstimate:
    """How long training a demo model would take here, projected from a few timed training steps."""

    seconds: float
    images_per_second: float
    steps_timed: int
    device: str

    def __str__(self) -> str:
        return (
            f"about {format_duration(self.seconds)} on this machine's {self.device} (measured "
            f"{self.images_per_second:,.0f} samples/s over {self.steps_timed} training steps)"
        )


def _time_steps(
    model: nn.Module, opt, x: torch.Tensor, y: torch.Tensor, steps: int, warmup: int = 2, **loss_kw
) -> float:
    """Median seconds of one training step on one batch, after `warmup` untimed steps (a process's
    first steps run slower while oneDNN creates its kernels)."""
    model.train()
    times = []
    for i in range(steps + warmup):
        start = time.perf_counter()
        loss = nn.functional.cross_entropy(model(x), y, **loss_kw)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if x.device.type == "cuda":
            torch.cuda.synchronize(x.device)
        if i >= warmup:
            times.append(time.perf_counter() - start)
    return float(np.median(times))


def estimate_training(name: str, steps: int = 4, device: torch.device | None = None) -> TrainingEstimate:
    """Time a few real training steps of a fresh model (a few seconds) and project the whole recipe.

    The steps run exactly as training runs them (same batch size, threads, device, memory layout);
    the model is thrown away afterwards.
    """
    recipe = spec(name).recipe
    if name == MOONS_MLP:
        device = torch.device("cpu")
        moons = _data.load_moons()
        n = len(moons.x_train)
        x = torch.from_numpy(moons.x_train[: recipe.batch_size])
        y = torch.from_numpy(moons.y_train[: recipe.batch_size])
        model = MoonsMLP()
        opt = torch.optim.Adam(model.parameters(), lr=recipe.lr)
        with torch_threads(recipe.threads):
            per_step = _time_steps(model, opt, x, y, max(steps, 20))
            described = device_description(device)
        steps_timed = max(steps, 20)
    else:
        device = device or training_device()
        images, labels = _data.load_split("train")
        n = len(images)
        prep = _data.default_preprocessing()
        x = torch.from_numpy(prep(images[: recipe.batch_size])).to(device)
        x = x.contiguous(memory_format=torch.channels_last)
        y = torch.from_numpy(labels[: recipe.batch_size]).to(device)
        model = build_resnet18().to(device, memory_format=torch.channels_last)
        opt, _ = resnet_optimizer(model, recipe, 1)
        with torch_threads(recipe.threads), fast_convolutions(model, device):
            per_step = _time_steps(model, opt, x, y, steps, label_smoothing=recipe.label_smoothing)
            described = device_description(device)
        steps_timed = steps
    total_steps = recipe.epochs * math.ceil(n / recipe.batch_size)
    return TrainingEstimate(
        seconds=per_step * total_steps,
        images_per_second=recipe.batch_size / per_step,
        steps_timed=steps_timed,
        device=described,
    )
