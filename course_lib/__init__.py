"""course_lib: the helper library of the onnx-quant-course notebooks.

It does the plumbing (data, training, caching, timing, plotting, widgets) so that the lessons
can keep the quantization calls themselves in plain sight. One module per idea:

    data      Fashion-MNIST (sources, checksums, one preprocessing, splits) and two moons
    models    the demo models: build, train, cache (atomic, verified), export to ONNX
    calibration  CalibrationDataReaders that check what they feed (ArrayReader, DatasetReader)
    measure   size and graph facts, latency, peak memory, parity, the results store
    hardware  the CPU features that matter for INT8, ONNX Runtime's providers
    explorers ipywidgets explorers (imported by notebooks, never by the modules above)
"""

from . import affine, calibration, checks, explore, measure, text_encoder
from .calibration import ArrayReader, CalibrationError, DatasetReader
from .data import (
    CLASS_NAMES,
    ChecksumError,
    DataNotFoundError,
    Preprocessing,
    data_dir,
    default_preprocessing,
    find_fashion_mnist,
    load_fashion_mnist,
    load_moons,
    load_split,
    preprocess,
)
from .hardware import cpu_report, has_vnni, onnxruntime_providers
from .models import (
    MODELS,
    TrainedModel,
    ensure_onnx,
    export_onnx,
    load_model,
    onnx_metadata,
    onnx_path,
)

__all__ = [
    "CLASS_NAMES",
    "ArrayReader",
    "CalibrationError",
    "DatasetReader",
    "affine",
    "calibration",
    "checks",
    "explore",
    "measure",
    "text_encoder",
    "MODELS",
    "ChecksumError",
    "DataNotFoundError",
    "Preprocessing",
    "TrainedModel",
    "cpu_report",
    "data_dir",
    "default_preprocessing",
    "ensure_onnx",
    "export_onnx",
    "find_fashion_mnist",
    "has_vnni",
    "load_fashion_mnist",
    "load_model",
    "load_moons",
    "load_split",
    "onnx_metadata",
    "onnx_path",
    "onnxruntime_providers",
    "preprocess",
]
