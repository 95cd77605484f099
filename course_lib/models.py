"""The course's demo models: build, train (with a progress bar), cache, export to ONNX.

Two models, both trained here on the CPU with a seeded recipe:
- `moons_mlp`: a tiny MLP on two moons, trains in seconds.
- `fashion_resnet18`: torchvision's ResNet18 with a 1-channel stem, trained from scratch on
  Fashion-MNIST.

Each trained model is cached under `<data dir>/models/<name>/` as weights plus a metadata file
(recipe, data checksums, library versions, accuracy, training time, weight hash). The cache is
written atomically and verified on every read: a corrupt or stale entry is rebuilt, with a
message, never used silently.

Getting a model (cache, archive, release download, else training here) is `course_lib.pipeline`'s
job, which calls this module; this module imports neither it nor `release`.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import nn

from . import data as _data
from .cache import (  # the cache's files and checks, which need no torch
    CACHE_FORMAT,
    MOONS_RECIPE,
    ONNX_EXPORTER,
    ONNX_OPSET,
    RESNET_RECIPE,
    CacheProblem,
    Origin,
    Recipe,
    cache_dir,
    check_entry,
    export_record,
    meta_path,
    moons_fingerprint,
    onnx_path,
    weights_path,
)
from .cache import model_files as model_files
from .files import atomic_write, sha256_file
from .names import MOONS_MLP, RESNET18  # defined apart, torch-free, for the report
from .units import format_duration
from .versions import library_versions


# --------------------------------------------------------------------------------------------
# Architectures
# --------------------------------------------------------------------------------------------
class MoonsMLP(nn.Module):
    """2 -> 64 -> 64 -> 2 with ReLU: the seed notebook's small two-moons classifier."""

    def __init__(self, hidden: int = 64):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(2, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 2)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def build_resnet18(num_classes: int = 10) -> nn.Module:
    """torchvision's ResNet18, standard stem, with a 1-channel conv1 for grayscale input."""
    from torchvision.models import resnet18

    model = resnet18(weights=None, num_classes=num_classes)
    model.conv1 = nn.Conv2d(1, 64, kernel_size=7, stride=2, padding=3, bias=False)
    return model


# --------------------------------------------------------------------------------------------
# Training
# --------------------------------------------------------------------------------------------
def _seed_everything(seed: int) -> None:
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
def _threads(n: int):
    """Run the block with n torch threads (0: leave torch's setting alone)."""
    before = torch.get_num_threads()
    if n:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _progress(total: int, desc: str, enabled: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="batch", disable=not enabled, leave=True, dynamic_ncols=True)


def train_moons_mlp(
    recipe: Recipe = MOONS_RECIPE, progress: bool = False, log: Callable[[str], None] = print
) -> tuple[nn.Module, dict]:
    """Train the two-moons MLP; returns the model and what to record (accuracy, time).

    Always on the CPU, on one thread: for 4,500 parameters a GPU's start-up costs more than the
    whole run.
    """
    _seed_everything(recipe.seed)
    moons = _data.load_moons()
    x, y = torch.from_numpy(moons.x_train), torch.from_numpy(moons.y_train)
    model = MoonsMLP()
    opt = torch.optim.Adam(model.parameters(), lr=recipe.lr)
    gen = torch.Generator().manual_seed(recipe.seed)
    start = time.perf_counter()
    steps = recipe.epochs * math.ceil(len(x) / recipe.batch_size)
    with _threads(recipe.threads), _progress(steps, "two-moons MLP", progress) as bar:
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
    with _threads(recipe.threads):
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
    from .hardware import cpu_name

    threads = torch.get_num_threads()
    return f"CPU ({cpu_name()}, {threads} thread{'s' if threads != 1 else ''})"


def _resnet_optimizer(model: nn.Module, recipe: Recipe, steps_per_epoch: int):
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


def _fast_convolutions(model: nn.Module, device: torch.device):
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
    _seed_everything(recipe.seed)
    prep = _data.default_preprocessing()
    train_x, train_y = _data.load_split("train")
    val_x, val_y = _data.load_split("validation")
    test_x, test_y = _data.load_split("test")
    x = torch.from_numpy(prep(train_x)).to(device).contiguous(memory_format=torch.channels_last)
    y = torch.from_numpy(train_y).to(device)
    val_x, val_y = torch.from_numpy(prep(val_x)).to(device), torch.from_numpy(val_y).to(device)

    model = build_resnet18().to(device, memory_format=torch.channels_last)
    steps_per_epoch = math.ceil(len(x) / recipe.batch_size)
    opt, sched = _resnet_optimizer(model, recipe, steps_per_epoch)
    gen = torch.Generator().manual_seed(recipe.seed)
    history: list[dict] = []
    start = time.perf_counter()
    with (
        _threads(recipe.threads),
        _progress(recipe.epochs * steps_per_epoch, "ResNet18 on Fashion-MNIST", progress) as bar,
        _fast_convolutions(model, device),
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


# --------------------------------------------------------------------------------------------
# The registry of demo models
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ModelSpec:
    name: str
    build: Callable[[], nn.Module]
    train: Callable[..., tuple[nn.Module, dict]]
    recipe: Recipe
    input_name: str
    output_name: str
    class_names: tuple[str, ...]
    example_shape: tuple[int, ...]  # one input sample, batch dimension excluded
    description: str
    data_fingerprint: Callable[[], str] = field(default=lambda: "")


# The demo models' names, as the cache, the results store (`measure.record`) and the report know them.

MODELS: dict[str, ModelSpec] = {
    MOONS_MLP: ModelSpec(
        name=MOONS_MLP,
        build=MoonsMLP,
        train=train_moons_mlp,
        recipe=MOONS_RECIPE,
        input_name="input",
        output_name="logits",
        class_names=("upper moon", "lower moon"),
        example_shape=(2,),
        description="two-moons MLP (2-64-64-2)",
        data_fingerprint=moons_fingerprint,
    ),
    RESNET18: ModelSpec(
        name=RESNET18,
        build=build_resnet18,
        train=train_resnet18,
        recipe=RESNET_RECIPE,
        input_name="input",
        output_name="logits",
        class_names=_data.CLASS_NAMES,
        example_shape=(1, 32, 32),
        description="torchvision ResNet18, 1-channel stem, Fashion-MNIST",
        data_fingerprint=_data.data_fingerprint,
    ),
}


def _spec(name: str) -> ModelSpec:
    if name not in MODELS:
        raise KeyError(f"Unknown model {name!r}; the course's models are: {', '.join(MODELS)}.")
    return MODELS[name]


# --------------------------------------------------------------------------------------------
# The cache: atomic writes, verified reads
# --------------------------------------------------------------------------------------------
@dataclass
class TrainedModel:
    """A demo model loaded from the cache, with its metadata and where this copy came from."""

    name: str
    module: nn.Module
    meta: dict
    origin: Origin = Origin.CACHE
    exported: bool = False  # set by ensure_export when it had to export the ONNX file

    @property
    def test_accuracy(self) -> float:
        return float(self.meta["test_accuracy"])

    @property
    def preprocessing(self) -> _data.Preprocessing | None:
        p = self.meta.get("preprocessing")
        return _data.Preprocessing.from_dict(p) if p else None

    @property
    def onnx_path(self) -> Path:
        return onnx_path(self.name)


def load_cached(name: str, directory: Path | None = None) -> TrainedModel:
    """Load a cache entry (or the same files in `directory`), raising CacheProblem with the reason
    if it is missing, corrupt or stale. Never fetches or trains: `pipeline.load_model` does."""
    spec = _spec(name)
    directory = Path(directory) if directory is not None else cache_dir(name)
    meta = check_entry(directory, spec.recipe, spec.data_fingerprint())
    try:
        state = torch.load(directory / "weights.pt", map_location="cpu", weights_only=True)
        module = spec.build()
        module.load_state_dict(state, strict=True)
    except Exception as exc:
        raise CacheProblem(f"corrupt: weights do not load ({type(exc).__name__}: {exc})") from exc
    return TrainedModel(name, module.eval(), meta)


def cache_status(name: str) -> str:
    """'ok' or the reason the cache entry would be rebuilt (for `doctor`)."""
    try:
        load_cached(name)
    except CacheProblem as exc:
        return str(exc)
    return "ok"


def train_and_cache(name: str, progress: bool = True, log: Callable[[str], None] = print) -> TrainedModel:
    """Train a demo model with its recipe and write weights and metadata atomically."""
    spec = _spec(name)
    module, record = spec.train(spec.recipe, progress=progress, log=log)
    return cache_trained(name, module, record)


def cache_trained(name: str, module: nn.Module, record: dict) -> TrainedModel:
    """Write a model just trained with its spec's recipe (and what training recorded) into the cache."""
    spec = _spec(name)
    threads = torch.get_num_threads()
    weights = weights_path(name)
    atomic_write(weights, lambda p: torch.save(module.state_dict(), p))
    meta = {
        "format": CACHE_FORMAT,
        "name": name,
        "description": spec.description,
        "recipe": spec.recipe.to_dict(),
        "data_fingerprint": spec.data_fingerprint(),
        "data_checksums": {k: v[1] for k, v in _data.FASHION_FILES.items()} if name == RESNET18 else {},
        "class_names": list(spec.class_names),
        "versions": library_versions(),
        "torch_threads": spec.recipe.threads or threads,
        "trained_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "weights_sha256": sha256_file(weights),
        "parameters": sum(p.numel() for p in module.parameters()),
        **record,
        "source": {"kind": str(Origin.TRAINED), "device": record["device"]},
    }
    # The metadata names the weights' hash, so it is written second: a crash in between leaves
    # an entry whose hash does not match, which the next read rebuilds.
    atomic_write(meta_path(name), lambda p: p.write_text(json.dumps(meta, indent=2)))
    onnx_file = onnx_path(name)
    with contextlib.suppress(FileNotFoundError):
        onnx_file.unlink()  # an older export belongs to older weights
    return TrainedModel(name, module, meta, Origin.TRAINED)


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
    spec = _spec(name)
    recipe = spec.recipe
    if name == MOONS_MLP:
        device = torch.device("cpu")
        moons = _data.load_moons()
        n = len(moons.x_train)
        x = torch.from_numpy(moons.x_train[: recipe.batch_size])
        y = torch.from_numpy(moons.y_train[: recipe.batch_size])
        model = MoonsMLP()
        opt = torch.optim.Adam(model.parameters(), lr=recipe.lr)
        with _threads(recipe.threads):
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
        opt, _ = _resnet_optimizer(model, recipe, 1)
        with _threads(recipe.threads), _fast_convolutions(model, device):
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


# --------------------------------------------------------------------------------------------
# Export to ONNX
# --------------------------------------------------------------------------------------------
def onnx_metadata(path: str | Path) -> dict[str, str]:
    """The metadata_props of an ONNX file as a dict (preprocessing, class names, …)."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    return {p.key: p.value for p in model.metadata_props}


def _metadata_props(trained: TrainedModel) -> dict[str, str]:
    spec = _spec(trained.name)
    props = {
        "course.model": trained.name,
        "course.description": spec.description,
        "class_names": json.dumps(list(spec.class_names)),
        "input_name": spec.input_name,
        "input_shape": json.dumps(["batch", *spec.example_shape]),
        "weights_sha256": trained.meta["weights_sha256"],
        "test_accuracy": f"{trained.test_accuracy:.4f}",
    }
    prep = trained.preprocessing
    if prep is not None:
        props.update(
            {
                "preprocessing": json.dumps(
                    {
                        **prep.to_dict(),
                        "input": "uint8 28x28 grayscale, zero-padded to size x size",
                        "formula": "(pixel / 255 - mean) / std",
                    }
                ),
                "input_size": str(prep.size),
                "normalization_mean": repr(prep.mean),
                "normalization_std": repr(prep.std),
            }
        )
    else:
        props["preprocessing"] = json.dumps(
            {"input": "raw (x, y) coordinates as float32", "formula": "identity"}
        )
    return props


def _example_input(name: str, n: int = 2) -> torch.Tensor:
    spec = _spec(name)
    return torch.zeros((n, *spec.example_shape), dtype=torch.float32)


def export_onnx(
    trained: TrainedModel,
    path: Path | None = None,
    exporter: str = ONNX_EXPORTER,
    keep_batchnorm: bool = False,
) -> Path:
    """Export with `torch.onnx.export`: named input/output, dynamic batch, one self-contained file.

    The file carries the preprocessing and class names in metadata_props and is checked with
    `onnx.checker` before it replaces any earlier export. `exporter` is "dynamo" (the course's
    default) or "torchscript" (the older exporter); with "torchscript", `keep_batchnorm=True`
    turns off constant folding so that BatchNormalization nodes stay in the graph, as many
    exports found in the wild have them (lesson 03 shows `quant_pre_process` fusing them).
    """
    if exporter not in ("dynamo", "torchscript"):
        raise ValueError(f"exporter must be 'dynamo' or 'torchscript'; got {exporter!r}.")
    if keep_batchnorm and exporter != "torchscript":
        raise ValueError(
            "keep_batchnorm=True needs exporter='torchscript' (the dynamo exporter always folds)."
        )
    import onnx

    spec = _spec(trained.name)
    path = Path(path or onnx_path(trained.name))

    def write(tmp: Path) -> None:
        kwargs: dict = {
            "input_names": [spec.input_name],
            "output_names": [spec.output_name],
            "opset_version": ONNX_OPSET,
        }
        if exporter == "dynamo":
            kwargs.update(
                dynamo=True,
                external_data=False,
                verbose=False,
                dynamic_shapes=({0: torch.export.Dim("batch")},),
            )
        else:
            kwargs.update(
                dynamo=False,
                dynamic_axes={spec.input_name: {0: "batch"}, spec.output_name: {0: "batch"}},
            )
            if keep_batchnorm:
                kwargs.update(do_constant_folding=False, training=torch.onnx.TrainingMode.PRESERVE)
        with torch.no_grad():
            torch.onnx.export(trained.module.eval(), (_example_input(trained.name),), str(tmp), **kwargs)
        model = onnx.load(str(tmp))
        onnx.helper.set_model_props(model, _metadata_props(trained))
        model.producer_name = "onnx-quant-course"
        onnx.checker.check_model(model, full_check=True)
        onnx.save(model, str(tmp))

    atomic_write(path, write)
    return path


def onnx_parity(trained: TrainedModel, path: Path, inputs: np.ndarray) -> float:
    """Max absolute difference between PyTorch and ONNX Runtime logits on the given inputs."""
    import onnxruntime as ort

    spec = _spec(trained.name)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    ort_out = session.run([spec.output_name], {spec.input_name: inputs.astype(np.float32)})[0]
    with torch.inference_mode():
        torch_out = trained.module.eval()(torch.from_numpy(inputs.astype(np.float32))).numpy()
    return float(np.abs(ort_out - torch_out).max())


def parity_inputs(name: str, n: int = 256) -> np.ndarray:
    """Real test inputs for a parity check: preprocessed test images, or two-moons test points."""
    if name == RESNET18:
        images, _ = _data.load_split("test")
        return _data.preprocess(images[:n])
    return _data.load_moons().x_test[:n]


PARITY_ATOL = 1e-4


def ensure_export(trained: TrainedModel, log: Callable[[str], None] = print) -> TrainedModel:
    """`trained` with a verified ONNX export: redone (and parity-checked against PyTorch) when the
    file is missing, does not match the hash recorded with the weights, or was made by another
    exporter; the export's record is then written into the cache entry's metadata."""
    name = trained.name
    path = onnx_path(name)
    recorded = trained.meta.get("onnx", {})
    found = sha256_file(path) if path.exists() else None
    if found is not None and found == recorded.get("sha256"):
        if recorded.get("exporter") == ONNX_EXPORTER:
            return trained
        log(
            f"{path.name} was made by the {recorded.get('exporter', 'torchscript')} exporter; exporting again."
        )
    elif found is not None:
        log(f"{path.name} does not match the cached weights' export record; exporting again.")
    elif recorded:
        log(f"{path.name} is missing; exporting again.")
    export_onnx(trained, path)
    trained.exported = True
    inputs = parity_inputs(name)
    diff = onnx_parity(trained, path, inputs)
    if diff > PARITY_ATOL:
        raise RuntimeError(
            f"ONNX export of {name} disagrees with PyTorch: max |diff| = {diff:.2e} > {PARITY_ATOL:.0e}."
        )
    trained.meta["onnx"] = export_record(path, diff, len(inputs))
    atomic_write(meta_path(name), lambda p: p.write_text(json.dumps(trained.meta, indent=2)))
    return trained
