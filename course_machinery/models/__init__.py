"""The course's models: one `get(name)` for all four, their cache, training and export.

    get(name)       the verified files of "moons_mlp", "fashion_resnet18", "text_encoder" or
                    "nanogpt" (`KNOWN`), as one `ModelFiles`: made first when missing or corrupt
    catalog         `get` and `status`: which model comes from where
    store           the cache on disk, without PyTorch: paths, recipes, metadata, `check_onnx` (the
                    one check every cached ONNX file passes), `ModelFiles`
    pipeline        a demo model from the cache, a release archive, the release download, else
                    trained here; `load_model` gives the PyTorch module itself
    registry        the demo models' settings (`MODELS`) and their trained weights in the cache
    architectures   the demo models' networks; `parameter_count`
    training        training the demo models (seeded recipes, progress bar, GPU when there is one)
    estimate        how long training would take here, from a few timed steps
    export          `export_onnx`, `onnx_parity`, `export_record` (what meta.json keeps of an export)

Only `store` and `catalog` are imported with the package (neither imports PyTorch); every other
name below is imported from its module when first used (PEP 562), so that a lesson that only
needs a verified ONNX file never pays torch's 0.5 GB.
"""

import importlib

from course_lib.names import MOONS_MLP, NANOGPT, RESNET18, TEXT_ENCODER

from .catalog import get, status
from .store import (
    KNOWN,
    MOONS_RECIPE,
    ONNX_EXPORTER,
    ONNX_OPSET,
    RECIPES,
    RESNET_RECIPE,
    CacheProblem,
    ModelFiles,
    Origin,
    Recipe,
    cache_dir,
    check_onnx,
    meta_path,
    model_files,
    onnx_path,
    weights_path,
)

_LAZY = {
    "architectures": ("MoonsMLP", "build_resnet18", "parameter_count"),
    "training": (
        "AUGMENTATIONS",
        "TRAIN_DEVICE_ENV",
        "device_description",
        "train_moons_mlp",
        "train_resnet18",
        "training_device",
    ),
    "registry": (
        "MODELS",
        "ModelSpec",
        "TrainedModel",
        "cache_status",
        "cache_trained",
        "load_cached",
        "train_and_cache",
    ),
    "estimate": ("TrainingEstimate", "estimate_training"),
    "export": (
        "PARITY_ATOL",
        "ensure_export",
        "export_onnx",
        "export_record",
        "onnx_metadata",
        "onnx_parity",
        "parity_inputs",
    ),
    "pipeline": ("ensure_model", "ensure_models", "export_trained", "fetch", "load_model"),
}
_HOME = {name: module for module, names in _LAZY.items() for name in names}


def __getattr__(name: str):
    if name in _HOME:
        value = getattr(importlib.import_module(f".{_HOME[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'course_machinery.models' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


__all__ = [
    "KNOWN",
    "MOONS_MLP",
    "MOONS_RECIPE",
    "NANOGPT",
    "ONNX_EXPORTER",
    "ONNX_OPSET",
    "RECIPES",
    "RESNET18",
    "RESNET_RECIPE",
    "TEXT_ENCODER",
    "CacheProblem",
    "ModelFiles",
    "Origin",
    "Recipe",
    "cache_dir",
    "check_onnx",
    "get",
    "meta_path",
    "model_files",
    "onnx_path",
    "status",
    "weights_path",
    *_HOME,
]
