"""Training the demo models here: seeded recipes, a progress bar, one line per epoch.

- `train_moons_mlp`: the two-moons MLP, on the CPU, in seconds.
- `train_resnet18`: the ResNet18 on Fashion-MNIST, on a CUDA GPU when PyTorch sees one
  (`training_device`), else on the CPU with convolutions that skip the taps that only see padding.

`seed_everything`, `torch_threads`, `progress_bar` and `device_description` are shared with the
NanoGPT's training (`course_machinery.nanogpt`).
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import time
from collections.abc import Callable

import numpy as np
import torch
from torch import nn

from course_lib import data as _data
from course_lib.units import format_duration

from .architectures import MoonsMLP, build_resnet18
from .store import MOONS_RECIPE, RESNET_RECIPE, Recipe


def seed_everything(seed: int) -> None:
    """Seed torch's and numpy's global generators, so that a recipe's run repeats."""
    torch.manual_seed(seed)
    np.random.seed(seed)


def _accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor, batch: int = 1000) -> float:
    model.eval()
    correct = 0
    with torch.inference_mode():
        for i in range(0, len(x), batch):
            correct += int((model(x[i : i + batch]).argmax(1) == y[i : i + batch]).sum())
    return correct / len(x)


@contextlib.contextmanager
def torch_threads(n: int):
    """Run the block with n torch threads (0: leave torch's setting alone)."""
    before = torch.get_num_threads()
    if n:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def progress_bar(total: int, desc: str, enabled: bool):
    """A tqdm progress bar counting batches; with `enabled=False` it shows nothing."""
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="batch", disable=not enabled, leave=True, dynamic_ncols=True)


def stop_bar_here(bar) -> None:
    """End a bar where training stopped early (a time budget): at 100 % of the steps it ran, since
    a notebook draws a bar closed short of its total in red, as if something had failed."""
    bar.total = bar.n
    widget = getattr(bar, "container", None)  # in a notebook: an ipywidget that keeps its first max
    if widget is not None:
        widget.children[1].max = bar.n
    bar.refresh()


def train_moons_mlp(
    recipe: Recipe = MOONS_RECIPE, progress: bool = False, log: Callable[[str], None] = print
) -> tuple[nn.Module, dict]:
    """Train the two-moons MLP; returns the model and what to record (accuracy, time).

    Always on the CPU, on one thread: for 4,500 parameters a GPU's start-up costs more than the
    whole run.
    """
    seed_everything(recipe.seed)
    moons = _data.load_moons()
    x, y = torch.from_numpy(moons.x_train), torch.from_numpy(moons.y_train)
    model = MoonsMLP()
    opt = torch.optim.Adam(model.parameters(), lr=recipe.lr)
    gen = torch.Generator().manual_seed(recipe.seed)
    start = time.perf_counter()
    steps = recipe.epochs * math.ceil(len(x) / recipe.batch_size)
    with torch_threads(recipe.threads), progress_bar(steps, "two-moons MLP", progress) as bar:
        for _ in range(recipe.epochs):
            model.train()
            for batch in torch.randperm(len(x), generator=gen).split(recipe.batch_size):
                loss = nn.functional.cross_entropy(model(x[batch]), y[batch])
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                bar.update()
    seconds = time.perf_counter() - start
    acc = _accuracy(model, torch.from_numpy(moons.x_test), torch.from_numpy(moons.y_test))
    with torch_threads(recipe.threads):
        device = device_description(torch.device("cpu"))
    return model.eval(), {"test_accuracy": acc, "train_seconds": seconds, "device": device}


def _live_taps(size: int, kernel: int, stride: int, padding: int) -> tuple[int, int]:
    """The first and last kernel taps that ever touch a real input pixel along one axis.

    Output position j reads input index j*stride - padding + t with tap t; taps that only ever
    land on the zero padding multiply zeros, and their gradient is exactly zero. (When no tap
    touches the input at all, all of them are returned: nothing is gained by cropping.)
    """
    out = (size + 2 * padding - kernel) // stride + 1
    used = [t for t in range(kernel) if any(0 <= j * stride - padding + t < size for j in range(out))]
    return (used[0], used[-1]) if used else (0, kernel - 1)


def _conv_without_dead_taps(conv: nn.Conv2d, x: torch.Tensor) -> torch.Tensor:
    """The same convolution, computed without the taps that only ever see zero padding.

    In this ResNet18 the last stage works on 2x2 and 1x1 feature maps: a padded 3x3 kernel on
    a 1x1 map multiplies only its centre tap. The result and the gradients are the same as the
    full convolution's (the dead taps' gradient is zero either way), but oneDNN's AVX2 backward
    pass for 3x3 kernels on 1x1 maps is many times slower than for the equivalent 1x1 kernel.
    """
    (h, w), (kh, kw), (sh, sw), (ph, pw) = x.shape[-2:], conv.kernel_size, conv.stride, conv.padding
    (h0, h1), (w0, w1) = _live_taps(h, kh, sh, ph), _live_taps(w, kw, sw, pw)
    if (h0, h1, w0, w1) == (0, kh - 1, 0, kw - 1):
        return conv._conv_forward(x, conv.weight, conv.bias)
    oh, ow = (h + 2 * ph - kh) // sh + 1, (w + 2 * pw - kw) // sw + 1
    weight = conv.weight[:, :, h0 : h1 + 1, w0 : w1 + 1]
    # Pad (or, with negative amounts, crop) so that the cropped kernel sees what the full one did.
    top, left = ph - h0, pw - w0
    bottom = (oh - 1) * sh + (h1 - h0 + 1) - h - top
    right = (ow - 1) * sw + (w1 - w0 + 1) - w - left
    x = nn.functional.pad(x, (left, right, top, bottom))
    return nn.functional.conv2d(x, weight, conv.bias, conv.stride, 0, conv.dilation, conv.groups)


@contextlib.contextmanager
def _skipping_dead_taps(model: nn.Module):
    """While training: every plain zero-padded Conv2d of `model` skips its dead taps."""
    convs = [
        m
        for m in model.modules()
        if isinstance(m, nn.Conv2d)
        and m.padding_mode == "zeros"
        and m.dilation == (1, 1)
        and isinstance(m.padding, tuple)
    ]
    for conv in convs:
        conv.forward = functools.partial(_conv_without_dead_taps, conv)
    try:
        yield model
    finally:
        for conv in convs:
            del conv.forward


AUGMENTATIONS = ("hflip", "shift2-each")


def _augment(x: torch.Tensor, recipe: Recipe, gen: torch.Generator) -> torch.Tensor:
    """Cheap tensor augmentations: a horizontal flip and a shift of up to 2 pixels, per image.

    The random numbers come from `gen` on the CPU whatever device `x` is on, so a run on a GPU
    draws the same flips and shifts as a run on the CPU.
    """
    if "hflip" in recipe.augment:
        flip = (torch.rand(len(x), generator=gen) < 0.5).to(x.device)
        x = torch.where(flip[:, None, None, None], x.flip(3), x)
    if "shift2-each" in recipe.augment:
        # Each image its own shift: one gather, no per-image Python work. Shifting by rolling is
        # exact here, since what rolls round is the 2-pixel zero border of the 32x32 input.
        n, _, h, w = x.shape
        dy, dx = (torch.randint(-2, 3, (2, n), generator=gen)).to(x.device)
        rows = (torch.arange(h, device=x.device)[None, :] - dy[:, None]) % h
        cols = (torch.arange(w, device=x.device)[None, :] - dx[:, None]) % w
        x = x[torch.arange(n, device=x.device)[:, None, None], 0, rows[:, :, None], cols[:, None, :]][:, None]
        x = x.contiguous(memory_format=torch.channels_last)
    return x


TRAIN_DEVICE_ENV = "COURSE_TRAIN_DEVICE"


def training_device() -> torch.device:
    """Where the demo models train: a CUDA GPU when PyTorch sees one (Colab's GPU runtime), else the CPU.

    Set COURSE_TRAIN_DEVICE to `cpu` or `cuda` to choose yourself (`auto` is the default).
    """
    choice = os.environ.get(TRAIN_DEVICE_ENV, "auto").strip().lower() or "auto"
    if choice not in ("auto", "cpu", "cuda"):
        raise ValueError(
            f"{TRAIN_DEVICE_ENV} must be 'auto', 'cpu' or 'cuda'; found {choice!r}. "
            f"Unset it to let the course choose (CUDA when available, else the CPU)."
        )
    cuda = torch.cuda.is_available()
    if choice == "cuda" and not cuda:
        raise RuntimeError(
            f"{TRAIN_DEVICE_ENV}=cuda, but PyTorch sees no CUDA device (torch {torch.__version__}). "
            f"Unset {TRAIN_DEVICE_ENV} to train on the CPU, or install a CUDA build of PyTorch."
        )
    return torch.device("cuda" if cuda and choice != "cpu" else "cpu")


def device_description(device: torch.device) -> str:
    """The device in words, for messages and the cache metadata: 'CPU (AMD EPYC, 2 threads)', …"""
    if device.type == "cuda":
        return f"CUDA ({torch.cuda.get_device_name(device)})"
    from course_machinery.hardware import cpu_name

    threads = torch.get_num_threads()
    return f"CPU ({cpu_name()}, {threads} thread{'s' if threads != 1 else ''})"


def resnet_optimizer(model: nn.Module, recipe: Recipe, steps_per_epoch: int):
    """The ResNet18's SGD (Nesterov, no weight decay on biases and BatchNorm) and its one-cycle schedule."""
    decay = [p for p in model.parameters() if p.ndim > 1]
    no_decay = [p for p in model.parameters() if p.ndim <= 1]  # biases and BatchNorm: no decay
    opt = torch.optim.SGD(
        [{"params": decay, "weight_decay": recipe.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=recipe.lr,
        momentum=recipe.momentum,
        nesterov=True,
    )
    sched = torch.optim.lr_scheduler.OneCycleLR(
        opt, max_lr=recipe.lr, total_steps=recipe.epochs * steps_per_epoch, pct_start=recipe.pct_start
    )
    return opt, sched


def fast_convolutions(model: nn.Module, device: torch.device):
    """On the CPU, skip the convolution taps that only see padding (see `_conv_without_dead_taps`)."""
    return _skipping_dead_taps(model) if device.type == "cpu" else contextlib.nullcontext(model)


def train_resnet18(
    recipe: Recipe = RESNET_RECIPE,
    progress: bool = True,
    log: Callable[[str], None] = print,
    device: torch.device | None = None,
) -> tuple[nn.Module, dict]:
    """Train the Fashion-MNIST ResNet18 from scratch; returns the model and its record.

    SGD with Nesterov momentum under a one-cycle schedule, label smoothing, and flips and
    shifts done on whole tensors (no per-image Python work), channels_last memory layout, and on
    the CPU convolutions that skip the taps that only see padding (the same arithmetic). On a
    CUDA device when there is one (`training_device`), else on the CPU. One line per epoch goes
    to `log` (images/s, accuracy so far, time left), with or without the progress bar.
    """
    unknown = sorted(set(recipe.augment) - set(AUGMENTATIONS))
    if unknown:
        raise ValueError(f"Unknown augmentation {unknown} in the recipe; the course has {AUGMENTATIONS}.")
    device = device or training_device()
    seed_everything(recipe.seed)
    prep = _data.default_preprocessing()
    train_x, train_y = _data.load_split("train")
    val_x, val_y = _data.load_split("validation")
    test_x, test_y = _data.load_split("test")
    x = torch.from_numpy(prep(train_x)).to(device).contiguous(memory_format=torch.channels_last)
    y = torch.from_numpy(train_y).to(device)
    val_x, val_y = torch.from_numpy(prep(val_x)).to(device), torch.from_numpy(val_y).to(device)

    model = build_resnet18().to(device, memory_format=torch.channels_last)
    steps_per_epoch = math.ceil(len(x) / recipe.batch_size)
    opt, sched = resnet_optimizer(model, recipe, steps_per_epoch)
    gen = torch.Generator().manual_seed(recipe.seed)
    history: list[dict] = []
    start = time.perf_counter()
    with (
        torch_threads(recipe.threads),
        progress_bar(recipe.epochs * steps_per_epoch, "ResNet18 on Fashion-MNIST", progress) as bar,
        fast_convolutions(model, device),
    ):
        say = bar.write if progress else log
        for epoch in range(recipe.epochs):
            model.train()
            epoch_start = time.perf_counter()
            correct = torch.zeros((), dtype=torch.long, device=device)
            loss_sum = torch.zeros((), device=device)
            for batch in torch.randperm(len(x), generator=gen).split(recipe.batch_size):
                batch = batch.to(device)
                xb = _augment(x[batch], recipe, gen)
                logits = model(xb)
                loss = nn.functional.cross_entropy(logits, y[batch], label_smoothing=recipe.label_smoothing)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                sched.step()
                correct += (logits.argmax(1) == y[batch]).sum()
                loss_sum += loss.detach() * len(batch)
                bar.update()
                bar.set_postfix(epoch=f"{epoch + 1}/{recipe.epochs}", refresh=False)
            seconds = time.perf_counter() - epoch_start
            val_acc = _accuracy(model, val_x, val_y)
            elapsed = time.perf_counter() - start
            left = elapsed / (epoch + 1) * (recipe.epochs - epoch - 1)
            row = {
                "epoch": epoch + 1,
                "images_per_second": len(x) / seconds,
                "loss": float(loss_sum) / len(x),
                "train_accuracy": int(correct) / len(x),
                "validation_accuracy": val_acc,
                "seconds": elapsed,
            }
            history.append(row)
            when = (
                f"{format_duration(elapsed)} so far, about {format_duration(left)} left"
                if epoch + 1 < recipe.epochs
                else f"done in {format_duration(elapsed)}"
            )
            say(
                f"ResNet18 epoch {epoch + 1}/{recipe.epochs}: {row['images_per_second']:.0f} images/s, "
                f"loss {row['loss']:.3f}, train accuracy {row['train_accuracy']:.1%}, validation accuracy "
                f"{val_acc:.1%} ({len(val_x)} held-out images); {when}"
            )
    seconds = time.perf_counter() - start
    model = model.to("cpu", memory_format=torch.contiguous_format).eval()
    acc = _accuracy(model, torch.from_numpy(prep(test_x)), torch.from_numpy(test_y.copy()))
    record = {
        "test_accuracy": acc,
        "train_seconds": seconds,
        "preprocessing": prep.to_dict(),
        "device": device_description(device),
        "history": history,
    }
    return model, record
