"""The demo models by name: their settings (`MODELS`), and their trained weights in the cache.

Each trained demo model is cached under `<data dir>/models/<name>/` as weights plus a metadata file
(recipe, data checksums, library versions, accuracy, training time, weight hash). The cache is
written atomically and verified on every read: a corrupt or stale entry is rebuilt, with a
message, never used silently. Where a model comes from when the cache has none (archive, release
download, training here) is `pipeline`'s job.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from course_lib import data as _data
from course_lib.files import atomic_write, sha256_file
from course_lib.names import MOONS_MLP, RESNET18  # defined apart, torch-free, for the report
from course_lib.versions import library_versions

from .architectures import MoonsMLP, build_resnet18, parameter_count
from .store import (
    CACHE_FORMAT,
    MOONS_RECIPE,
    RESNET_RECIPE,
    CacheProblem,
    Origin,
    Recipe,
    cache_dir,
    check_entry,
    meta_path,
    moons_fingerprint,
    onnx_path,
    weights_path,
    write_meta,
)
from .training import train_moons_mlp, train_resnet18


@dataclass(frozen=True)
class ModelSpec:
    """One demo model: how to build and train it, its recipe, its ONNX names and classes."""

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


# The demo models' names, as the cache, the results store (`results.record`) and the report know them.

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


def spec(name: str) -> ModelSpec:
    """The demo model `name`'s settings; KeyError naming the demo models otherwise."""
    if name not in MODELS:
        raise KeyError(f"Unknown model {name!r}; the course's models are: {', '.join(MODELS)}.")
    return MODELS[name]


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
    entry = spec(name)
    directory = Path(directory) if directory is not None else cache_dir(name)
    meta = check_entry(directory, entry.recipe, entry.data_fingerprint())
    try:
        state = torch.load(directory / "weights.pt", map_location="cpu", weights_only=True)
        module = entry.build()
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
    entry = spec(name)
    module, record = entry.train(entry.recipe, progress=progress, log=log)
    return cache_trained(name, module, record)


def cache_trained(name: str, module: nn.Module, record: dict) -> TrainedModel:
    """Write a model just trained with its spec's recipe (and what training recorded) into the cache."""
    entry = spec(name)
    threads = torch.get_num_threads()
    weights = weights_path(name)
    atomic_write(weights, lambda p: torch.save(module.state_dict(), p))
    meta = {
        "format": CACHE_FORMAT,
        "name": name,
        "description": entry.description,
        "recipe": entry.recipe.to_dict(),
        "data_fingerprint": entry.data_fingerprint(),
        "data_checksums": {k: v[1] for k, v in _data.FASHION_FILES.items()} if name == RESNET18 else {},
        "class_names": list(entry.class_names),
        "versions": library_versions(),
        "torch_threads": entry.recipe.threads or threads,
        "trained_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "weights_sha256": sha256_file(weights),
        "parameters": parameter_count(module),
        **record,
        "source": {"kind": str(Origin.TRAINED), "device": record["device"]},
    }
    # The metadata names the weights' hash, so it is written second: a crash in between leaves
    # an entry whose hash does not match, which the next read rebuilds.
    write_meta(meta_path(name), meta)
    onnx_file = onnx_path(name)
    with contextlib.suppress(FileNotFoundError):
        onnx_file.unlink()  # an older export belongs to older weights
    return TrainedModel(name, module, meta, Origin.TRAINED)
