"""The course models' cache on disk, readable without PyTorch.

Each model's entry is a folder, `<data dir>/models/<name>/`, holding its metadata (`meta.json`),
its ONNX export and, for the models trained here, its weights. The metadata records the recipe the
weights were trained with, the data they were trained on, and the SHA-256 of the weights and of
every ONNX file (`export.export_record`); an entry is used only when all of them still match
(`check_entry`, and `check_onnx` for every ONNX file of every model).

Kept apart from the modules that import PyTorch, because importing torch costs about 0.5 GB
here: a lesson that only needs a demo model's ONNX file (`models.get` on a verified cache) never
pays it. Binder gives a notebook about 2 GB. This module imports no other module of the package.
"""

from __future__ import annotations

import enum
import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from course_lib import data as _data
from course_lib.files import atomic_write, sha256_file
from course_lib.names import MOONS_MLP, NANOGPT, RESNET18, TEXT_ENCODER

CACHE_FORMAT = 1
ONNX_OPSET = 18
# torch.onnx's exporter: "dynamo" (torch.export-based, the default since PyTorch 2.9) or
# "torchscript" (the legacy one). An export made with another exporter is redone.
ONNX_EXPORTER = "dynamo"


@dataclass(frozen=True)
class Recipe:
    """Everything that decides what a training run produces. Changing it invalidates the cache."""

    epochs: int
    batch_size: int
    lr: float
    weight_decay: float
    seed: int = 0
    momentum: float = 0.9
    label_smoothing: float = 0.0
    pct_start: float = 0.25
    augment: tuple[str, ...] = ()
    optimizer: str = "sgd-nesterov"
    schedule: str = "onecycle"
    threads: int = 0  # torch intra-op threads while training; 0 = torch's default (all cores)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["augment"] = list(self.augment)
        return d

    def digest(self) -> str:
        return hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True).encode()).hexdigest()[:16]


# The seed both demo models are trained with. `COURSE_TRAINING_SEED=N` trains them with another one
# (in a data directory of their own: `COURSE_DATA_DIR`), to see which of a lesson's sentences rest on
# the weights: a sentence about trained weights must hold for any seed (benchmarks/weights_across_seeds.py).
SEED_ENV = "COURSE_TRAINING_SEED"


def training_seed() -> int:
    """The training seed: 0, or the whole number in $COURSE_TRAINING_SEED."""
    raw = os.environ.get(SEED_ENV, "").strip()
    if not raw:
        return 0
    try:
        return int(raw)
    except ValueError:
        raise ValueError(
            f"{SEED_ENV} must be a whole number (the training seed), not {raw!r}; unset it for the course's seed, 0."
        ) from None


# One thread: for a model this small, thread hand-offs cost more than the arithmetic.
MOONS_RECIPE = Recipe(
    epochs=100,
    batch_size=250,
    lr=0.01,
    weight_decay=0.0,
    optimizer="adam",
    schedule="constant",
    threads=1,
    seed=training_seed(),
)
# Chosen for 2-core CPUs without AVX-512 (most Colab runtimes). Measured on a 2-core AMD EPYC
# (AVX2, no AVX-512, no VNNI), with convolutions skipping their dead taps (see models): 6 epochs
# reached 91.68 % test accuracy in 11.0 min; 5 epochs 90.71 % in 9.2 min; 6 epochs with one shift
# per batch instead of one per image 91.36 %, with flips alone 89.58 %.
# `benchmarks/training_curve.py` and `benchmarks/training_speed.py` measure it on any machine.
RESNET_RECIPE = Recipe(
    epochs=6,
    batch_size=256,
    lr=0.2,
    weight_decay=5e-4,
    label_smoothing=0.1,
    pct_start=0.25,
    augment=("hflip", "shift2-each"),
    seed=training_seed(),
)


def moons_fingerprint() -> str:
    """What identifies the two-moons training data (it is generated, so its settings do)."""
    return hashlib.sha256(f"make_moons:noise={_data.MOONS_NOISE}:seed=0:n=1000".encode()).hexdigest()


# Each demo model's recipe and the fingerprint of the data it is trained on.
RECIPES: dict[str, Recipe] = {MOONS_MLP: MOONS_RECIPE, RESNET18: RESNET_RECIPE}
FINGERPRINTS: dict[str, Callable[[], str]] = {MOONS_MLP: moons_fingerprint, RESNET18: _data.data_fingerprint}


# Every model the course gets by name (`models.get`): the two demo models, the pretrained text
# encoder (lessons 02-06c) and lesson 07's NanoGPT.
KNOWN: tuple[str, ...] = (MOONS_MLP, RESNET18, TEXT_ENCODER, NANOGPT)


def known(name: str) -> str:
    """`name` when the course has a model of that name; KeyError listing the names otherwise."""
    if name not in KNOWN:
        raise KeyError(
            f"Unknown model {name!r}: expected one of {', '.join(KNOWN)}. "
            f"Use one of these names (`course_machinery.models.KNOWN`)."
        )
    return name


def cache_dir(name: str) -> Path:
    """Where a model's weights, metadata and ONNX files live: `<data dir>/models/<name>/`."""
    return _data.data_dir() / "models" / known(name)


def onnx_path(name: str) -> Path:
    """A model's exported fp32 ONNX file (for the text encoder: the export before optimizing)."""
    return cache_dir(name) / f"{name}.onnx"


def meta_path(name: str) -> Path:
    """The metadata file of a model's cache entry (recipe, hashes, parity, where it came from)."""
    return cache_dir(name) / "meta.json"


def weights_path(name: str) -> Path:
    """The trained weights (a PyTorch state dict) of a model trained here."""
    return cache_dir(name) / "weights.pt"


def model_files(name: str) -> dict[str, Path]:
    """The files of one cache entry, by role: weights, onnx, meta (the metadata names the other two)."""
    return {"weights": weights_path(name), "onnx": onnx_path(name), "meta": meta_path(name)}


class Origin(enum.StrEnum):
    """Where a cache entry came from (its metadata's source kind), and where `pipeline.load_model`
    found a model this time."""

    CACHE = "verified cache"
    EXPORTED = "exported here"
    ARCHIVE = "release archive"
    BUNDLE = "workshop bundle"
    DOWNLOAD = "release download"
    TRAINED = "trained here"


class CacheProblem(Exception):
    """Why a cache entry cannot be used (missing, corrupt or stale)."""


def read_meta(path: Path) -> dict:
    """A cache entry's metadata, or CacheProblem saying why it cannot be read."""
    if not path.exists():
        raise CacheProblem("not trained yet")
    try:
        meta = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise CacheProblem(f"metadata unreadable ({exc})") from exc
    if not isinstance(meta, dict):
        raise CacheProblem("metadata is not a JSON object")
    return meta


def check_entry(
    directory: Path,
    recipe,
    fingerprint: str,
    *,
    fingerprint_key: str = "data_fingerprint",
    stale_data: str = "trained on different data or splits",
    cache_format: int = CACHE_FORMAT,
) -> dict:
    """The metadata of the entry in `directory` when its format, recipe (anything with `to_dict()`),
    data (`meta[fingerprint_key]`) and weights' SHA-256 all match; CacheProblem with the reason
    otherwise. Whether the weights load is the caller's part."""
    meta = read_meta(directory / "meta.json")
    if meta.get("format") != cache_format:
        raise CacheProblem(f"cache format {meta.get('format')!r}, expected {cache_format}")
    if meta.get("recipe") != json.loads(json.dumps(recipe.to_dict())):  # as meta.json holds it
        raise CacheProblem("stale: trained with a different recipe")
    if meta.get(fingerprint_key) != fingerprint:
        raise CacheProblem(f"stale: {stale_data}")
    weights = directory / "weights.pt"
    if not weights.exists():
        raise CacheProblem("weights file missing")
    if sha256_file(weights) != meta.get("weights_sha256"):
        raise CacheProblem("corrupt: weights file does not match its recorded SHA-256")
    return meta


def write_meta(path: Path, meta: dict) -> None:
    """Write a cache entry's metadata atomically. It names the other files' hashes, so it is written
    last: an interruption in between leaves an entry whose hashes do not match, which is rebuilt."""
    atomic_write(path, lambda p: p.write_text(json.dumps(meta, indent=2)))


def check_onnx(path: Path, record: dict, *, exporter: str | None = None, opset: int | None = None) -> Path:
    """`path` when it is the file its export record (`export.export_record`, kept in meta.json)
    describes: same SHA-256, and, when given, the same exporter and opset. CacheProblem otherwise,
    naming what was expected and what was found. The one check every cached ONNX file passes
    before use."""
    path = Path(path)
    if not path.exists():
        raise CacheProblem(f"{path.name} is missing")
    expected = record.get("sha256")
    found = sha256_file(path)
    if found != expected:
        recorded = f"records SHA-256 {expected[:12]}…" if expected else "records no export"
        raise CacheProblem(
            f"corrupt: {path.name} does not match its export record (meta.json {recorded}, "
            f"the file has {found[:12]}…)"
        )
    made = (record.get("exporter", "torchscript"), record.get("opset"))
    wanted = (exporter or made[0], opset or made[1])
    if made != wanted:
        raise CacheProblem(
            f"stale: {path.name} was made by the {made[0]} exporter at opset {made[1]}; "
            f"expected the {wanted[0]} exporter at opset {wanted[1]}"
        )
    return path


def check_demo(name: str) -> tuple[Path, dict]:
    """A demo model's verified ONNX file and metadata (recipe, data, weights' and export's SHA-256),
    read without PyTorch; CacheProblem with the reason otherwise."""
    if name not in RECIPES:
        raise KeyError(f"{name!r} is not a demo model: expected one of {', '.join(RECIPES)}.")
    meta = check_entry(cache_dir(name), RECIPES[name], FINGERPRINTS[name]())
    path = check_onnx(onnx_path(name), meta.get("onnx", {}), exporter=ONNX_EXPORTER, opset=ONNX_OPSET)
    return path, meta


@dataclass(frozen=True)
class ModelFiles:
    """A course model's verified files, as `models.get` returns them for every model.

    `onnx` is the fp32 ONNX file the lessons start from (the text encoder's export before ONNX
    Runtime's optimizer); `onnx_files` holds every verified ONNX file of the entry by role
    ({"fp32": ...}, or the text encoder's {"raw": ..., "optimized": ...}); `meta` is the entry's
    meta.json (hashes, recipe or source, parity, what training recorded).
    """

    name: str
    onnx: Path
    meta: dict
    origin: Origin = Origin.CACHE  # where it came from this time
    onnx_files: dict[str, Path] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.onnx_files:
            object.__setattr__(self, "onnx_files", {"fp32": self.onnx})

    @property
    def directory(self) -> Path:
        """The cache entry's folder."""
        return self.onnx.parent

    @property
    def weights(self) -> Path | None:
        """The trained weights, for the models trained here (None for the text encoder's)."""
        path = self.directory / "weights.pt"
        return path if path.exists() else None

    @property
    def parameters(self) -> int:
        """The parameter count, as recorded when the model was trained or exported."""
        return int(self.meta["parameters"])

    @property
    def trained(self) -> bool:
        """Whether this call trained the model here (rather than finding it)."""
        return self.origin is Origin.TRAINED
