"""The same ONNX file on a second runtime: OpenVINO beside ONNX Runtime.

Lesson 05c loads the course's fp32 and QDQ files in OpenVINO's own Python API (`openvino.Core`,
`compile_model`) and compares them with ONNX Runtime. The lesson makes those calls itself; this
module holds what is plumbing around them:

    openvino_or_none   the `openvino` module, or None when it is not installed
    require_openvino   the module, or an ImportError that says how to install it
    OpenVINORunner     a compiled model behind the methods `measure` uses (`run`, `get_inputs`,
                       `get_outputs`), so `compare_latency` times it in turn with an ONNX Runtime
                       session and `measure.logits` scores it
    precision_hint     the precision a compiled model computes its float parts in ("f32", "bf16", …)
                       (the one OpenVINO documents for a CPU: `hardware.expected_default_precision`)
    layer_precisions   what each compute layer of the compiled model really runs: its runtime
                       precision and primitive (OpenVINO's kernel), read from the runtime model
    kernel_precision   the type a kernel computes in, read from its own name: a layer labelled i8
                       can run on an f32 kernel
    Refusal            a file OpenVINO would not compile with some settings on this CPU: the file,
                       the settings, and what OpenVINO said, reduced to its meaningful line

OpenVINO lowers float precision by default where the CPU has a fast path (bf16 on x86 with
AVX512_BF16 or AMX, f16 on ARM); `{"INFERENCE_PRECISION_HINT": "f32"}` pins f32.

A runtime can refuse a valid file on one CPU: OpenVINO 2026.4.1 would not compile the S8S8 QDQ
ResNet18 with its default precision on an Intel Xeon with AMX ("No suitable implementations"),
and compiled it with f32 pinned. The lesson and the benchmark catch the `RuntimeError` of
`compile_model`, keep it as a `Refusal`, and try again with f32 pinned.
"""

from __future__ import annotations

import importlib
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import numpy as np

INSTALL_HINT = (
    "pip install openvino  (or, with the course: pip install 'onnx-quant-course[openvino]'; "
    "`make` installs it)"
)

# The layer types that do a model's multiply-adds, as OpenVINO's runtime model names them.
COMPUTE_LAYERS = ("Convolution", "FullyConnected", "MatMul", "GroupConvolution", "Deconvolution")

# OpenVINO's short element-type names, as `runtimePrecision` reports them, in the lessons' words.
PRECISION_WORDS = {
    "f32": "float32",
    "bf16": "bfloat16",
    "f16": "float16",
    "u8": "uint8 (INT8)",
    "i8": "int8 (INT8)",
}


def openvino_or_none() -> ModuleType | None:
    """The `openvino` module when it is installed and imports, else None (a lesson then skips the
    OpenVINO section and says how to install it).

    Imported without its usage telemetry: `import openvino` imports `openvino.tools.ovc`, which
    sends an "import" event to Google Analytics from a forked process unless the user opted out
    (openvino_telemetry, backend "ga4", no opt-in dialog). The course sends nothing anywhere, and a
    fork of a 1 GB kernel also counts twice against Binder's memory. The telemetry stays off where
    it detects a CI job (`CI=true`), so the import runs with that set, and the variable is restored.
    """
    import os

    before = os.environ.get("CI")
    os.environ["CI"] = "true"
    try:
        return importlib.import_module("openvino")
    except ImportError:
        return None
    finally:
        if before is None:
            os.environ.pop("CI", None)
        else:
            os.environ["CI"] = before


def require_openvino() -> ModuleType:
    """The `openvino` module, or an ImportError that names the fix."""
    module = openvino_or_none()
    if module is None:
        raise ImportError(
            "OpenVINO is not installed: this needs the `openvino` package (an optional extra of the "
            f"course). Install it with: {INSTALL_HINT}. Then restart the kernel."
        )
    return module


def _short(element_type: Any) -> str:
    """An OpenVINO element type (ov.Type, or its string) as its short name: 'f32', 'bf16', 'u8'."""
    name = getattr(element_type, "get_type_name", None)
    if callable(name):
        return str(name())
    text = str(element_type)
    return {"float32": "f32", "bfloat16": "bf16", "float16": "f16"}.get(text, text)


def precision_hint(compiled: Any) -> str:
    """The precision the compiled model computes its float parts in: 'f32', 'bf16' or 'f16'."""
    return _short(compiled.get_property("INFERENCE_PRECISION_HINT"))


@dataclass(frozen=True)
class Layer:
    """One layer of a compiled model's runtime graph: what it is and what it really ran."""

    name: str
    layer_type: str
    runtime_precision: str  # the precision its kernel computes in: f32, bf16, u8, i8 …
    output_precision: str
    primitive: str  # OpenVINO's kernel, e.g. 'brgconv_avx512_I8' or 'jit_avx2_FP32'


def runtime_layers(compiled: Any) -> list[Layer]:
    """Every layer of the compiled model's runtime graph, in execution order."""
    layers = []
    for op in compiled.get_runtime_model().get_ordered_ops():
        info = op.get_rt_info()

        def read(key: str, info=info) -> str:
            return info[key].astype(str) if key in info else ""

        layers.append(
            Layer(
                name=op.get_friendly_name(),
                layer_type=read("layerType"),
                runtime_precision=read("runtimePrecision"),
                output_precision=read("outputPrecisions"),
                primitive=read("primitiveType"),
            )
        )
    return layers


def layer_precisions(
    compiled_or_layers: Any, layer_types: Iterable[str] = COMPUTE_LAYERS
) -> Counter[tuple[str, str]]:
    """How many compute layers ran in which precision: {(layer type, runtime precision): count}.

    Accepts a compiled model or a list of `Layer`s (from `runtime_layers`)."""
    layers = (
        compiled_or_layers if isinstance(compiled_or_layers, list) else runtime_layers(compiled_or_layers)
    )
    wanted = set(layer_types)
    return Counter(
        (layer.layer_type, layer.runtime_precision) for layer in layers if layer.layer_type in wanted
    )


def describe_precisions(counts: Mapping[tuple[str, str], int]) -> str:
    """E.g. '20 Convolution in u8, 1 FullyConnected in bf16' (largest counts first)."""
    if not counts:
        return "no compute layers"
    parts = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return ", ".join(f"{n} {layer_type} in {precision}" for (layer_type, precision), n in parts)


# The type at the end of a kernel's name (oneDNN's, as OpenVINO reports it), in the short names.
_KERNEL_TYPES = {
    "fp32": "f32",
    "f32": "f32",
    "bf16": "bf16",
    "fp16": "f16",
    "f16": "f16",
    "i8": "i8",
    "u8": "u8",
}


def kernel_precision(primitive: str) -> str:
    """The type a kernel computes in, read from the end of its name: 'brgconv_avx512_amx_I8' -> 'i8',
    'brgconv_avx512_f32' and 'jit_avx2_FP32' -> 'f32', 'undef_bf16' -> 'bf16'; '' when the name
    does not say.

    A layer's runtime precision is the type of its data; the kernel can differ. OpenVINO 2026.4.1,
    given the S8S8 ResNet18 with f32 pinned on an AMX Xeon, labelled its convolutions i8 and ran them
    on 'brgconv_avx512_f32': float arithmetic, no faster than the fp32 file."""
    return _KERNEL_TYPES.get(primitive.rpartition("_")[2].lower(), "")


def integer_share(counts: Mapping[tuple[str, str], int]) -> float:
    """The share of compute layers whose kernel computes in an 8-bit integer type (u8 or i8)."""
    total = sum(counts.values())
    return sum(n for (_, p), n in counts.items() if p in ("u8", "i8")) / total if total else 0.0


class OpenVINORunner:
    """A compiled OpenVINO model behind the methods timing and scoring use (`run(None, feed)`,
    `get_inputs()`, `get_outputs()`), like `measure.TorchRunner`, so that `measure.compare_latency`
    times it in turn with an ONNX Runtime session on the same feed dict.

    `threads` must be the compiled model's own INFERENCE_NUM_THREADS: pass
    `{"INFERENCE_NUM_THREADS": threads}` to `compile_model`, as the lesson does."""

    def __init__(self, compiled: Any, threads: int | None = None, name: str = "openvino"):
        found = int(compiled.get_property("INFERENCE_NUM_THREADS"))
        if threads is not None and threads != found:
            raise ValueError(
                f"threads={threads} was asked for, but this compiled model runs with {found} threads. "
                f'Compile it with {{"INFERENCE_NUM_THREADS": {threads}}} so both runtimes use the same '
                "threads, or leave threads out."
            )
        self.compiled, self.threads, self.name = compiled, found, name
        self._request = compiled.create_infer_request()

    @staticmethod
    def _describe(port: Any) -> SimpleNamespace:
        shape = [d.get_length() if d.is_static else "N" for d in port.get_partial_shape()]
        element = _short(port.get_element_type())
        onnx_type = {
            "f32": "float",
            "f16": "float16",
            "i64": "int64",
            "i32": "int32",
            "u8": "uint8",
            "i8": "int8",
        }
        return SimpleNamespace(
            name=port.get_any_name(), shape=shape, type=f"tensor({onnx_type.get(element, element)})"
        )

    def get_inputs(self) -> list[SimpleNamespace]:
        return [self._describe(port) for port in self.compiled.inputs]

    def get_outputs(self) -> list[SimpleNamespace]:
        return [self._describe(port) for port in self.compiled.outputs]

    def run(self, output_names: Any, feed: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        """Run one inference; return the outputs named (all when None) as numpy arrays, in order."""
        self._request.infer({name: np.asarray(array) for name, array in feed.items()})
        ports = list(self.compiled.outputs)
        if output_names is not None:
            by_name = {port.get_any_name(): i for i, port in enumerate(ports)}
            missing = [n for n in output_names if n not in by_name]
            if missing:
                raise ValueError(
                    f"{self.name} has no output {missing[0]!r}; its outputs are {sorted(by_name)}."
                )
            indices = [by_name[n] for n in output_names]
        else:
            indices = range(len(ports))
        return [self._request.get_output_tensor(i).data.copy() for i in indices]


# The lines OpenVINO wraps its message in: each layer it passed through, and a failed check.
_PASSED_THROUGH = re.compile(r"^Exception from (?P<where>\S+?):?$")
_FAILED_CHECK = re.compile(r"^Check '(?P<check>.*)' failed at (?P<where>\S+?):?$")


@dataclass(frozen=True)
class Refusal:
    """A file a runtime would not compile with some settings on this CPU, and what it said.

    A valid file can be refused on one CPU and compile on the next: OpenVINO picks its kernels per
    CPU and per precision, and one combination can have none. Kept as a value (not an exception), so
    that a lesson or the benchmark records it, says so, and goes on with the next run."""

    file: str  # the file's name
    settings: dict[str, str] = field(default_factory=dict)  # beside the threads; {}: the defaults
    message: str = ""  # the runtime's meaningful line, e.g. 'No suitable implementations'
    detail: str = ""  # what the runtime added to it, e.g. 'This may indicate that …'
    where: str = ""  # the runtime's source line that raised it, e.g. '…/executor_factory.hpp:117'
    run: str = ""  # the run's name where one was given, e.g. 'OpenVINO S8S8 per-channel'
    runtime: str = "OpenVINO"

    @classmethod
    def from_exception(
        cls, exc: BaseException, file: str | Path, settings: Mapping[str, Any] | None = None, run: str = ""
    ) -> Refusal:
        """The refusal an exception from `compile_model` says, for `file` compiled with `settings`.

        OpenVINO's text names every layer the error passed through ("Exception from
        src/inference/src/cpp/core.cpp:132:"), then the check that failed and where, then the message
        itself. What a reader needs is the message's first sentence and the place that raised it."""
        where, lines = "", []
        for line in (raw.strip() for raw in str(exc).splitlines()):
            found = _FAILED_CHECK.match(line) or _PASSED_THROUGH.match(line)
            if found:
                where = found["where"]  # the innermost one is the last
            elif line:
                lines.append(line)
        text = re.sub(r"\.(?=[A-Z])", ". ", " ".join(lines))  # "implementations.This" -> ". This"
        message, _, detail = text.partition(". ")
        return cls(
            file=Path(file).name,
            settings={str(k): str(v) for k, v in (settings or {}).items()},
            message=message.rstrip(".") or type(exc).__name__,
            detail=detail.strip(),
            where=where,
            run=run,
        )

    @property
    def settings_text(self) -> str:
        """The settings in words: 'default' for none, else 'INFERENCE_PRECISION_HINT=f32'."""
        return ", ".join(f"{k}={v}" for k, v in self.settings.items()) or "default"

    @property
    def said(self) -> str:
        """What the runtime said, in one line: its message and where it was raised."""
        return f"{self.message} (at {self.where})" if self.where else self.message

    @property
    def retry_run(self) -> str:
        """The name of the run that retries it with f32 pinned: 'OpenVINO S8S8 per-channel, f32 pinned
        (default refused)'."""
        return f"{self.run or self.file}, f32 pinned ({self.settings_text} refused)"

    def __str__(self) -> str:
        settings = "its default settings" if not self.settings else self.settings_text
        return f"{self.runtime} refused to compile {self.file} with {settings} here: {self.said}."
