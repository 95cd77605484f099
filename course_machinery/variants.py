"""The INT8 variants of the course ResNet18: the quantizer settings of lessons 02 and 03, built in one call.

Lesson 05 sets every variant side by side, and the course benchmark (`python -m course_lib bench`)
times each against fp32; both build them here, with the same `quantize_dynamic` and
`quantize_static` calls the earlier lessons make one by one, calibrated on 200 images with the
production preprocessing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

# name -> (kind, quantize options). Static variants: QDQ unless quant_format says otherwise.
RESNET_VARIANTS: dict[str, tuple[str, dict]] = {
    "dynamic (QUInt8)": ("dynamic", {"weight_type": "QUInt8"}),
    "static U8S8 per-channel": ("static", {"activation_type": "QUInt8", "per_channel": True}),
    "static U8S8 per-channel reduce_range": (
        "static",
        {"activation_type": "QUInt8", "per_channel": True, "reduce_range": True},
    ),
    "static U8S8 per-tensor": ("static", {"activation_type": "QUInt8", "per_channel": False}),
    "static S8S8 per-channel": ("static", {"activation_type": "QInt8", "per_channel": True}),
    "static S8S8 per-channel reduce_range": (
        "static",
        {"activation_type": "QInt8", "per_channel": True, "reduce_range": True},
    ),
    "QOperator U8S8 per-channel": (
        "static",
        {"activation_type": "QUInt8", "per_channel": True, "quant_format": "QOperator"},
    ),
}
BEST_RESNET = "static U8S8 per-channel"


def production_resnet_variant() -> str:
    """The variant lesson 03 ships on this CPU: U8S8 per-channel, with reduce_range where its kernels
    can saturate (x86 without VNNI), as ONNX Runtime advises."""
    from course_machinery.hardware import u8s8_can_saturate

    return f"{BEST_RESNET} reduce_range" if u8s8_can_saturate() else BEST_RESNET


def quant_types(options: Mapping[str, Any]) -> dict[str, Any]:
    """The options with their enum names ("QUInt8", "QOperator") turned into the quantizer's enums."""
    from onnxruntime.quantization import QuantFormat, QuantType

    out = dict(options)
    for key in ("activation_type", "weight_type"):
        if key in out:
            out[key] = QuantType[out[key]]
    if "quant_format" in out:
        out["quant_format"] = QuantFormat[out["quant_format"]]
    return out


def build_resnet_variants(
    directory: Path, names: tuple[str, ...], log: Callable[[str], None] = print
) -> dict:
    """fp32 (pre-processed) and the named INT8 variants of the course ResNet18, written to `directory`."""
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_dynamic, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process

    from course_lib.calibration import DatasetReader
    from course_machinery import models

    unknown = [n for n in names if n not in RESNET_VARIANTS]
    if unknown:
        raise ValueError(f"Unknown variant(s) {unknown}; choose from {', '.join(RESNET_VARIANTS)}.")
    directory.mkdir(parents=True, exist_ok=True)
    paths = {"fp32": directory / "resnet18.fp32.onnx"}
    quant_pre_process(str(models.get(models.RESNET18).onnx), str(paths["fp32"]))
    reader = DatasetReader(paths["fp32"], count=200, batch_size=20)
    for name in names:
        kind, options = RESNET_VARIANTS[name]
        out = directory / f"resnet18.{name.replace(' ', '_').replace('(', '').replace(')', '')}.onnx"
        start = time.perf_counter()
        if kind == "dynamic":
            quantize_dynamic(paths["fp32"], out, **quant_types(options))
        else:
            reader.rewind()
            settings = {
                "quant_format": QuantFormat.QDQ,
                "weight_type": QuantType.QInt8,
                **quant_types(options),
            }
            quantize_static(paths["fp32"], out, reader, **settings)
        log(f"  built {name} in {time.perf_counter() - start:.1f} s")
        paths[name] = out
    return paths
