"""Data for the course: Fashion-MNIST (found, verified, preprocessed, split) and two moons.

Every lesson reads its images through this module, so training, calibration and evaluation
all see the same pixels with the same preprocessing. Sources are tried in a fixed order and
every file is verified by checksum, whichever source it came from.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import os
import shutil
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from fractions import Fraction
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType

import numpy as np

DATA_DIR_ENV = "COURSE_DATA_DIR"
DEBIAN_DIR = Path("/usr/share/datasets/fashion-mnist")
DEBIAN_PACKAGE = "dataset-fashion-mnist"

CLASS_NAMES: tuple[str, ...] = (
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
)

# SHA-256 of the *decompressed* IDX files. The Debian package re-compresses the archives, so
# the .gz bytes differ between sources while the data inside is identical; hashing the content
# verifies the data whichever source (or compression) it came from.
FASHION_FILES: dict[str, tuple[str, str, tuple[int, ...]]] = {
    "train_images": (
        "train-images-idx3-ubyte",
        "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888",
        (60000, 28, 28),
    ),
    "train_labels": (
        "train-labels-idx1-ubyte",
        "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9",
        (60000,),
    ),
    "test_images": (
        "t10k-images-idx3-ubyte",
        "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b",
        (10000, 28, 28),
    ),
    "test_labels": (
        "t10k-labels-idx1-ubyte",
        "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34",
        (10000,),
    ),
}

# Fixed split sizes. The validation subset is held out of the training file (never trained on);
# the calibration pool is drawn from the training split, as a real deployment would.
VALIDATION_SIZE = 500
CALIBRATION_POOL_SIZE = 1000
SPLIT_SEED = 20240607


# --------------------------------------------------------------------------------------------
# Where data lives
# --------------------------------------------------------------------------------------------
PACKAGE_DIR = Path(__file__).resolve().parent  # course_lib/: in a checkout, or in site-packages


def source_checkout() -> Path | None:
    """The course's folder when course_lib runs from it (a git checkout, an unpacked bundle): the
    folder above the package, holding pyproject.toml and notebooks/. None after a pip install
    (Colab), where the folder above the package is site-packages."""
    root = PACKAGE_DIR.parent
    return root if (root / "pyproject.toml").exists() and (root / "notebooks").is_dir() else None


def data_dir() -> Path:
    """The course data directory: $COURSE_DATA_DIR, else `data/` in a checkout, else ~/.cache.

    Downloaded data, trained models, ONNX files and the results store all live here.
    """
    env = os.environ.get(DATA_DIR_ENV)
    if env:
        path = Path(env).expanduser()
    elif (checkout := source_checkout()) is not None:
        path = checkout / "data"
    else:
        path = Path.home() / ".cache" / "onnx-quant-course"
    path.mkdir(parents=True, exist_ok=True)
    return path


def lesson_folder(lesson: str) -> Path:
    """An empty folder for one lesson's files: `<data_dir()>/lessons/<lesson>/`.

    Emptied at the start of each run, so a learner finds the last run's files in one place and
    repeated runs do not fill the disk (a temporary folder per run would, on Binder and Colab).
    """
    name = str(lesson).strip()
    if not name or any(sep in name for sep in "/\\") or name in {".", ".."}:
        raise ValueError(f"lesson must be a plain name such as '03'; got {lesson!r}.")
    folder = data_dir() / "lessons" / name
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    return folder


class DataNotFoundError(FileNotFoundError):
    """Raised when Fashion-MNIST cannot be found or fetched; the message lists the fixes."""


class ChecksumError(ValueError):
    """Raised when a data file exists but its content is not the published Fashion-MNIST."""


@dataclass(frozen=True)
class DataSource:
    """Where the four Fashion-MNIST files were found."""

    kind: str  # "course data directory", "Debian package" or "torchvision download"
    directory: Path


def idx_file(directory: Path, stem: str) -> Path | None:
    """The Fashion-MNIST file `stem` in `directory`, gzipped (preferred) or not; None if neither is there."""
    for name in (stem + ".gz", stem):
        if (directory / name).is_file():
            return directory / name
    return None


def _read_idx_bytes(path: Path) -> bytes:
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as f:
            return f.read()
    except (OSError, EOFError) as exc:  # truncated or corrupt gzip
        raise ChecksumError(
            f"Could not read {path}: {exc}. Delete it and run `python -m course_lib prepare` again."
        ) from exc


def verify_file(path: Path, key: str) -> bytes:
    """Read one IDX file (gzipped or not) and check its content's SHA-256; return the bytes."""
    raw = _read_idx_bytes(path)
    expected = FASHION_FILES[key][1]
    found = hashlib.sha256(raw).hexdigest()
    if found != expected:
        raise ChecksumError(
            f"{path} is not the published Fashion-MNIST {FASHION_FILES[key][0]}: expected content "
            f"SHA-256 {expected[:16]}…, found {found[:16]}…. Delete the file (or unset "
            f"${DATA_DIR_ENV}) and run `python -m course_lib prepare` to fetch a good copy."
        )
    return raw


def _complete(directory: Path) -> bool:
    return all(idx_file(directory, stem) for stem, _, _ in FASHION_FILES.values())


def _torchvision_download(target: Path) -> Path:
    """Fetch Fashion-MNIST with torchvision's downloader (the online path)."""
    from torchvision.datasets import FashionMNIST

    for train in (True, False):
        FashionMNIST(root=str(target), train=train, download=True)
    return target / "FashionMNIST" / "raw"


def _not_found_message(tried: list[str]) -> str:
    return (
        "Fashion-MNIST was not found. Tried:\n  - "
        + "\n  - ".join(tried)
        + "\nFix it in one of three ways:\n"
        f"  1. Put the four files (train-images-idx3-ubyte.gz, …) in {data_dir() / 'fashion-mnist'}"
        f" or point ${DATA_DIR_ENV} at a directory whose fashion-mnist/ folder holds them.\n"
        f"  2. Install the Debian/Ubuntu package: sudo apt-get install -y {DEBIAN_PACKAGE}"
        f" (it installs to {DEBIAN_DIR}).\n"
        "  3. Go online once and run `python -m course_lib prepare`: torchvision downloads it."
    )


def find_fashion_mnist(download: bool = True) -> DataSource:
    """Locate the four Fashion-MNIST files: course data dir, then Debian's package, then download.

    Only locates; `load_fashion_mnist` verifies the checksums when it reads the files.
    """
    tried = []
    course = data_dir() / "fashion-mnist"
    tv_raw = data_dir() / "FashionMNIST" / "raw"  # where an earlier download left them
    for kind, directory in (("course data directory", course), ("course data directory", tv_raw)):
        if _complete(directory):
            return DataSource(kind, directory)
    tried.append(f"the course data directory ({course})")
    if _complete(DEBIAN_DIR):
        return DataSource("Debian package", DEBIAN_DIR)
    tried.append(f"the Debian package {DEBIAN_PACKAGE} ({DEBIAN_DIR})")
    if download:
        try:
            raw = _torchvision_download(data_dir())
        except Exception as exc:  # offline: URLError, socket errors, HTTP errors …
            tried.append(f"torchvision's downloader (failed: {type(exc).__name__}: {exc})")
        else:
            if _complete(raw):
                return DataSource("torchvision download", raw)
            tried.append(f"torchvision's downloader (files missing in {raw})")
    else:
        tried.append("torchvision's downloader (not attempted: download=False)")
    raise DataNotFoundError(_not_found_message(tried))


@dataclass(frozen=True)
class FashionMNIST:
    """The raw dataset: uint8 images (N, 28, 28) and int64 labels, as published."""

    train_images: np.ndarray
    train_labels: np.ndarray
    test_images: np.ndarray
    test_labels: np.ndarray
    source: DataSource

    @property
    def checksums(self) -> dict[str, str]:
        return {key: sha for key, (_, sha, _) in FASHION_FILES.items()}


def _parse_idx(raw: bytes, shape: tuple[int, ...]) -> np.ndarray:
    offset = 8 if len(shape) == 1 else 16  # IDX header: magic, then one int32 per dimension
    return np.frombuffer(raw, dtype=np.uint8, offset=offset).reshape(shape)


@lru_cache(maxsize=1)
def _load_cached(directory: str, kind: str) -> FashionMNIST:
    arrays = {}
    for key, (stem, _, shape) in FASHION_FILES.items():
        path = idx_file(Path(directory), stem)
        arrays[key] = _parse_idx(verify_file(path, key), shape)
    for key in ("train_labels", "test_labels"):
        arrays[key] = arrays[key].astype(np.int64)
    for array in arrays.values():
        array.setflags(write=False)  # shared by every caller in this process: nobody may edit it
    return FashionMNIST(**arrays, source=DataSource(kind, Path(directory)))


def load_fashion_mnist(download: bool = True) -> FashionMNIST:
    """Find, verify (SHA-256 of every file) and load Fashion-MNIST; cached in memory per process."""
    source = find_fashion_mnist(download=download)
    return _load_cached(str(source.directory), source.kind)


# --------------------------------------------------------------------------------------------
# One preprocessing, used by training, calibration and evaluation alike
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Preprocessing:
    """uint8 (N, 28, 28) images -> float32 (N, 1, size, size), zero-padded and normalised.

    The mean and std are computed from the training set (`_fit_preprocessing`) and stored with
    every trained model and inside every exported ONNX file.
    """

    mean: float
    std: float
    size: int = 32
    layout: str = "NCHW"
    dtype: str = "float32"

    def __call__(self, images: np.ndarray) -> np.ndarray:
        images = np.asarray(images)
        if images.ndim == 2:
            images = images[None]
        if images.ndim != 3 or images.shape[1:] != (28, 28) or images.dtype != np.uint8:
            raise ValueError(
                f"preprocess expects raw Fashion-MNIST images: uint8 with shape (N, 28, 28) or "
                f"(28, 28); got dtype {images.dtype} and shape {images.shape}. "
                "Pass the images from course_lib.load_split(...) before any other transform."
            )
        pad = (self.size - 28) // 2
        x = np.pad(images, ((0, 0), (pad, self.size - 28 - pad), (pad, self.size - 28 - pad)))
        x = (x.astype(np.float32) / 255.0 - np.float32(self.mean)) / np.float32(self.std)
        return x[:, None, :, :].astype(np.float32, copy=False)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Preprocessing:
        return cls(**{k: d[k] for k in ("mean", "std", "size", "layout", "dtype")})


def _fit_preprocessing(train_images: np.ndarray, size: int = 32) -> Preprocessing:
    """Normalisation constants from the training images (pixel values scaled to [0, 1]).

    Exact integer sums over chunks of images: a float64 copy of the whole set would take 376 MB,
    which matters on Binder's 2 GB.
    """
    flat = np.asarray(train_images).reshape(len(train_images), -1)
    n, total, squares = flat.size, 0, 0
    for chunk in np.array_split(flat, max(1, len(flat) // 5000)):
        wide = chunk.astype(np.int64)
        total += int(wide.sum())
        squares += int((wide * wide).sum())
    mean = Fraction(total, n * 255)
    variance = Fraction(squares * n - total * total, n * n * 255 * 255)
    return Preprocessing(mean=round(float(mean), 6), std=round(math.sqrt(variance), 6), size=size)


@lru_cache(maxsize=1)
def _default_preprocessing() -> Preprocessing:
    return _fit_preprocessing(load_fashion_mnist().train_images)


def default_preprocessing() -> Preprocessing:
    """The course's preprocessing, fitted on the Fashion-MNIST training set."""
    return _default_preprocessing()


def preprocess(images: np.ndarray, preprocessing: Preprocessing | None = None) -> np.ndarray:
    """Apply the course's one preprocessing (or a given one) to raw uint8 images."""
    return (preprocessing or default_preprocessing())(images)


# --------------------------------------------------------------------------------------------
# Fixed, seeded splits
# --------------------------------------------------------------------------------------------
SPLITS = ("train", "calibration", "validation", "test")


@lru_cache(maxsize=1)
def _split_indices() -> Mapping[str, np.ndarray]:
    """Indices into the training file for train / calibration / validation (fixed seed).

    Computed once per process and shared by every caller, so neither the mapping nor its
    arrays can be written: a caller that wants to edit one takes a copy (`idx["train"].copy()`).
    """
    rng = np.random.default_rng(SPLIT_SEED)
    order = rng.permutation(60000)
    validation = np.sort(order[:VALIDATION_SIZE])
    train = np.sort(order[VALIDATION_SIZE:])
    calibration = np.sort(rng.choice(train, size=CALIBRATION_POOL_SIZE, replace=False))
    splits = {"train": train, "calibration": calibration, "validation": validation}
    for indices in splits.values():
        indices.setflags(write=False)
    return MappingProxyType(splits)


def load_split(name: str) -> tuple[np.ndarray, np.ndarray]:
    """Raw uint8 images and int64 labels of one split: train, calibration, validation or test.

    train: 59,500 images; calibration: a 1,000-image pool drawn from train; validation: 500
    images held out of training; test: the published 10,000-image test set.
    """
    if name not in SPLITS:
        raise ValueError(f"Unknown split {name!r}; choose one of {', '.join(SPLITS)}.")
    ds = load_fashion_mnist()
    if name == "test":
        return ds.test_images, ds.test_labels
    idx = _split_indices()[name]
    return ds.train_images[idx], ds.train_labels[idx]


def data_fingerprint() -> str:
    """One hash over the data checksums, the split definition and sizes: stored with each model."""
    payload = json.dumps(
        {
            "files": {k: v[1] for k, v in FASHION_FILES.items()},
            "split": [SPLIT_SEED, VALIDATION_SIZE, CALIBRATION_POOL_SIZE],
        },
        sort_keys=True,
    )
    return hashlib.sha256(payload.encode()).hexdigest()


# --------------------------------------------------------------------------------------------
# Two moons
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Moons:
    """Two-moons data: train/test sets plus an 'edge' set for the parity lesson.

    The edge set has two parts, told apart by `edge_kind`: "boundary" points drawn where the two
    classes overlap (labelled by the moon they came from) and "outside" points beyond the
    training range (label -1: no ground truth exists there).
    """

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    x_edge: np.ndarray
    y_edge: np.ndarray
    edge_kind: np.ndarray


MOONS_NOISE = 0.2


def load_moons(seed: int = 0, n_train: int = 1000, n_test: int = 500, n_edge: int = 400) -> Moons:
    """Seeded two-moons data from scikit-learn, with a boundary-and-beyond edge set."""
    from sklearn.datasets import make_moons

    x_train, y_train = make_moons(n_train, noise=MOONS_NOISE, random_state=seed)
    x_test, y_test = make_moons(n_test, noise=MOONS_NOISE, random_state=seed + 1)

    # Near the boundary: noisy points that lie closer to the *other* moon's centre line than a
    # typical point does to its own, i.e. where the classes overlap.
    cx, cy = make_moons(600, noise=0.0, random_state=seed)
    xb, yb = make_moons(10 * n_edge, noise=0.35, random_state=seed + 2)
    d = np.linalg.norm(xb[:, None, :] - cx[None, :, :], axis=2)
    d_own = np.where(yb[:, None] == cy[None, :], d, np.inf).min(1)
    d_other = np.where(yb[:, None] != cy[None, :], d, np.inf).min(1)
    ambiguous = np.abs(d_own - d_other) < 0.15
    half = n_edge // 2
    x_boundary, y_boundary = xb[ambiguous][:half], yb[ambiguous][:half]

    # Outside the training range: a ring around the training data's bounding box.
    rng = np.random.default_rng(seed + 3)
    lo, hi = x_train.min(0), x_train.max(0)
    centre, half_span = (lo + hi) / 2, (hi - lo) / 2
    n_out = n_edge - len(x_boundary)
    angle = rng.uniform(0, 2 * np.pi, n_out)
    radius = rng.uniform(1.1, 2.0, n_out)
    x_outside = centre + half_span * radius[:, None] * np.c_[np.cos(angle), np.sin(angle)] * np.sqrt(2)

    x_edge = np.concatenate([x_boundary, x_outside]).astype(np.float32)
    y_edge = np.concatenate([y_boundary, -np.ones(n_out, dtype=np.int64)]).astype(np.int64)
    kind = np.array(["boundary"] * len(x_boundary) + ["outside"] * n_out)
    return Moons(
        x_train.astype(np.float32),
        y_train.astype(np.int64),
        x_test.astype(np.float32),
        y_test.astype(np.int64),
        x_edge,
        y_edge,
        kind,
    )
