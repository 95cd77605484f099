"""Which INT8 variants fit a model and this CPU, and building them with ONNX Runtime's own calls.

work_shares     where the multiply-adds and the weights sit: Conv, MatMul, Gemm (`WorkShares`)
activation_matmuls  the MatMuls of two activations (attention's queries by keys, weights by values)
plan_variants   the variants to build, and those skipped with the reason (lessons 02, 03, 05, 06)
pre_process     `quant_pre_process`, with `skip_symbolic_shape=True` when symbolic inference fails
FeedReader      a CalibrationDataReader over sample rows of every input
Recipe          one quantizer call as plain data: function, keyword arguments (enums by name), the
                calibration reader described; it runs the call, and writes it as Python
recipe_for      the Recipe of a planned variant; `build` runs it
rebuild_code    the Python that rebuilds a variant from the fp32 model: pre-processing, then the call
sensitive_layers  `qdq_loss_debug`: the layers that lose the most, to keep in float
"""

from __future__ import annotations

import contextlib
import logging
import tempfile
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnxruntime.quantization import CalibrationDataReader

from course_machinery.variants import quant_types

_WEIGHTED = ("Conv", "MatMul", "Gemm")

# What a calibration pass or the debugger may hold of the samples' tensors. The audit runs beside a
# lesson kernel, and Binder gives a session 2 GB: calibrating the text encoder 16 sentences at a
# time took 2.7 GB, and debugging 32 sentences 2.3 GB.
ROW_MEMORY = 400 * 2**20
CALIBRATION_MOST_ROWS = 16
DEBUG_MOST_ROWS = 32


# --------------------------------------------------------------------------------------------
# Where the work is
# --------------------------------------------------------------------------------------------
@dataclass
class WorkShares:
    """Multiply-adds of one sample, and weight elements, per op type that multiplies by a weight.

    `how`: "symbolic shapes" (ONNX Runtime's symbolic shape inference, as measure.weight_work),
    "onnx shapes" (ONNX's own), or "weights only" when no shapes were known: then the multiply-adds
    are the weights' element counts, a stand-in."""

    multiply_adds: dict[str, int]
    weights: dict[str, int]
    how: str

    def share(self, *ops: str, of: str = "multiply_adds") -> float:
        counts = getattr(self, of)
        total = sum(counts.values())
        return sum(counts.get(op, 0) for op in ops) / total if total else 0.0

    def to_dict(self) -> dict:
        return {
            "multiply_adds": self.multiply_adds,
            "weights": self.weights,
            "how": self.how,
            "matmul_gemm_share": self.share("MatMul", "Gemm"),
            "matmul_weight_share": self.share("MatMul", of="weights"),
        }


def _shaped(
    model: onnx.ModelProto, sample_shapes: Mapping[str, tuple[int, ...]]
) -> tuple[onnx.ModelProto, str]:
    model = onnx.ModelProto.FromString(model.SerializeToString())
    for graph_input in model.graph.input:
        if graph_input.name in sample_shapes:
            dims = graph_input.type.tensor_type.shape.dim
            for dim, size in zip(dims, (1, *sample_shapes[graph_input.name]), strict=False):
                dim.Clear()
                dim.dim_value = int(size)
    try:
        from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference

        return SymbolicShapeInference.infer_shapes(model, auto_merge=True), "symbolic shapes"
    except Exception:  # noqa: BLE001 - any failure: fall back to ONNX's own inference
        pass
    try:
        return onnx.shape_inference.infer_shapes(model), "onnx shapes"
    except Exception:  # noqa: BLE001
        return model, "weights only"


def work_shares(path: str | Path, sample_shapes: Mapping[str, tuple[int, ...]]) -> WorkShares:
    """Multiply-adds per Conv / MatMul / Gemm for one sample of these shapes (batch 1), counted as
    `measure.weight_work` counts them: a Conv uses its whole weight once per output position, a
    MatMul or Gemm once per row of its output."""
    model, how = _shaped(onnx.load(str(path)), sample_shapes)
    graph = model.graph
    weights = {t.name: tuple(t.dims) for t in graph.initializer}
    shapes = {
        v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
        for v in (*graph.value_info, *graph.input, *graph.output)
    }
    macs: dict[str, int] = {}
    counts: dict[str, int] = {}
    unknown = False
    for node in graph.node:
        if node.op_type not in _WEIGHTED or len(node.input) < 2 or node.input[1] not in weights:
            continue
        elements = int(np.prod(weights[node.input[1]], dtype=np.int64))
        counts[node.op_type] = counts.get(node.op_type, 0) + elements
        out = shapes.get(node.output[0])
        if not out or not all(out):
            unknown = True
            continue
        uses = int(np.prod(out, dtype=np.int64)) // (out[1] if node.op_type == "Conv" else out[-1])
        macs[node.op_type] = macs.get(node.op_type, 0) + uses * elements
    if unknown or not macs:
        return WorkShares(dict(counts), dict(counts), "weights only")
    return WorkShares(macs, counts, how)


# --------------------------------------------------------------------------------------------
# The plan: what fits this model and this CPU
# --------------------------------------------------------------------------------------------
@dataclass
class Plan:
    """One variant to build: its name, the quantizer (`kind`: dynamic, static, 4-bit) and options;
    `keep_float`: nodes every build of it keeps in float (a static variant's MatMuls of two
    activations), `keep_float_why` says why."""

    name: str
    kind: str
    options: dict[str, Any] = field(default_factory=dict)
    lesson: str = ""
    note: str = ""
    keep_float: list[str] = field(default_factory=list)
    keep_float_why: str = ""


def activation_matmuls(path: str | Path) -> tuple[list[str], int]:
    """The MatMuls (and Gemms) of `path` neither of whose two inputs is a constant (an initializer,
    a Constant node, or computed from constants alone): in a transformer, attention's queries by
    keys and its weights by values. Returns their names, in graph order, and how many have no name
    (`nodes_to_exclude` cannot name those)."""
    graph = onnx.load(str(path), load_external_data=False).graph
    constant = {t.name for t in graph.initializer}
    for node in graph.node:  # graph order is topological: a constant's producers come first
        if node.op_type == "Constant" or (node.input and all(not i or i in constant for i in node.input)):
            constant.update(node.output)
    names, unnamed = [], 0
    for node in graph.node:
        if (
            node.op_type in ("MatMul", "Gemm")
            and len(node.input) >= 2
            and not any(i in constant for i in node.input[:2])
        ):
            if node.name:
                names.append(node.name)
            else:
                unnamed += 1
    return names, unnamed


ACTIVATION_MATMULS_WHY = (
    "{n} MatMul(s) of two activations (attention's queries by keys and weights by values) kept in float "
    "(nodes_to_exclude), as lesson 06b does: they have no weight to store in 8 bits, and quantizing them "
    "calibrates ranges for attention scores and softmax weights, costing accuracy for little speed"
)


@dataclass
class Skipped:
    """A variant not built (or built and then set aside), and why, in the course's words."""

    name: str
    reason: str
    lesson: str


def plan_variants(
    shares: WorkShares,
    *,
    saturates: bool,
    dot_product: bool,
    activation_products: Sequence[str] = (),
    unnamed_products: int = 0,
) -> tuple[list[Plan], list[Skipped]]:
    """The variants that fit: dynamic where MatMul/Gemm do most multiply-adds; static QDQ U8S8
    per-channel and per-tensor (reduce_range where U8S8 can saturate); S8S8 per-channel, kept only
    if its kernels turn out integer here; 4-bit weight-only where MatMuls hold most weights.
    `activation_products`: the MatMuls of two activations (`activation_matmuls`), which every static
    variant keeps in float (`unnamed_products` more could not be named, and are said so)."""
    plans: list[Plan] = []
    skipped: list[Skipped] = []
    if not shares.weights:
        skipped.append(
            Skipped(
                "every INT8 variant",
                "the model has no Conv, MatMul or Gemm with a constant weight: nothing that quantization speeds up",
                "02_dynamic_quantization.ipynb",
            )
        )
        return plans, skipped
    matmul_work = shares.share("MatMul", "Gemm")
    transformer_like = matmul_work >= 0.5
    rr = {"reduce_range": True} if saturates else {}
    rr_name = " reduce_range" if saturates else ""
    if transformer_like:
        plans.append(
            Plan(
                f"dynamic INT8 per-channel{rr_name}",
                "dynamic",
                {"weight_type": "QInt8", "per_channel": True, **rr},
                "02_dynamic_quantization.ipynb",
                f"MatMul/Gemm do {matmul_work:.0%} of the multiply-adds: where dynamic quantization pays"
                + (
                    "; quantize_dynamic leaves MatMuls without a constant weight in float itself "
                    "(its extra option MatMulConstBOnly, on by default)"
                    if activation_products or unnamed_products
                    else ""
                ),
            )
        )
    else:
        skipped.append(
            Skipped(
                "dynamic INT8",
                f"MatMul/Gemm do only {matmul_work:.0%} of the multiply-adds (Conv the rest): quantize_dynamic "
                "turns Convs into ConvInteger, which quantizes every activation at run time and runs no faster "
                "than fp32 on a CNN",
                "02b_dynamic_in_depth.ipynb",
            )
        )
    # Static QDQ. On a MatMul model only the MatMuls/Gemms are quantized and their outputs stay
    # float (lesson 06b): quantizing LayerNorms and the rest costs accuracy and buys nothing.
    static = {"quant_format": "QDQ", "activation_type": "QUInt8", "weight_type": "QInt8"}
    if transformer_like:
        static |= {
            "op_types_to_quantize": ["MatMul", "Gemm"],
            "extra_options": {"OpTypesToExcludeOutputQuantization": ["MatMul", "Gemm"]},
        }
    why_rr = "U8S8 kernels can saturate on this CPU (x86 without VNNI): reduce_range, as ONNX Runtime advises"
    keep = list(activation_products)
    why_keep = ACTIVATION_MATMULS_WHY.format(n=len(keep)) if keep else ""
    if unnamed_products:
        why_keep += (
            ("; " if why_keep else "")
            + f"{unnamed_products} more such MatMul(s) have no name, so nodes_to_exclude cannot keep them in float"
        )

    def static_plan(name: str, options: dict[str, Any], note: str) -> Plan:
        return Plan(name, "static", options, "03_static_qdq.ipynb", note, keep, why_keep)

    plans.append(
        static_plan(
            f"static U8S8 per-channel{rr_name}",
            {**static, "per_channel": True, **rr},
            why_rr if saturates else "",
        )
    )
    plans.append(
        static_plan(
            f"static U8S8 per-tensor{rr_name}",
            {**static, "per_channel": False, **rr},
            why_rr if saturates else "",
        )
    )
    plans.append(
        static_plan(
            "static S8S8 per-channel",
            {**static, "activation_type": "QInt8", "per_channel": True},
            "kept only if its kernels run integer here",
        )
    )
    matmul_weights = shares.share("MatMul", of="weights")
    if matmul_weights >= 0.5:
        level = 4 if dot_product else 0
        plans.append(
            Plan(
                "4-bit weight-only (MatMulNBits, blocks of 32)",
                "4-bit",
                {"bits": 4, "block_size": 32, "is_symmetric": False, "accuracy_level": level},
                "06_past_w8a8.ipynb",
                f"MatMuls hold {matmul_weights:.0%} of the weights; accuracy_level {level}"
                + (
                    " (integer arithmetic: this CPU has an INT8 dot product)"
                    if level
                    else " (float arithmetic)"
                ),
            )
        )
    else:
        skipped.append(
            Skipped(
                "4-bit weight-only",
                f"MatMuls hold only {matmul_weights:.0%} of the weights: MatMulNBits would leave most of the "
                "file in float and change no Conv",
                "06_past_w8a8.ipynb",
            )
        )
    return plans, skipped


# --------------------------------------------------------------------------------------------
# Building
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PreProcessed:
    """What pre-processing did, in words (`note`), and the call that did it (`call`; None when the
    model was quantized as it is)."""

    note: str
    call: Recipe | None


def pre_process(model: Path, out: Path, *, external_data: bool) -> PreProcessed:
    """`quant_pre_process(model, out)`; when symbolic shape inference fails, again with
    `skip_symbolic_shape=True` (lesson 03), and when that fails too, the model as it is.
    Returns what was done, in words, and the call."""
    from onnxruntime.quantization.shape_inference import quant_pre_process

    model, out = Path(model).resolve(), Path(out).resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    # One data file beside the output (quant_pre_process's default writes one file per tensor,
    # named after the tensor, and onnx.save's a random name).
    location = f"{out.name}.data"
    options = (
        {"save_as_external_data": True, "all_tensors_to_one_file": True, "external_data_location": location}
        if external_data
        else {}
    )
    # When symbolic shape inference fails, ONNX Runtime saves what it got in the working directory
    # (sym_shape_infer_temp.onnx and, beside it, all the weights again under a random name: 90 MB
    # for the text encoder). The audit has no use for them: it runs in a folder removed after.
    with (
        tempfile.TemporaryDirectory(prefix=".pre-process-", dir=out.parent) as scratch,
        contextlib.chdir(scratch),
    ):
        try:
            quant_pre_process(str(model), str(out), **options)
            return PreProcessed(
                "pre-processed with quant_pre_process (symbolic shape inference, optimization, ONNX shape inference)",
                Recipe("quant_pre_process", options),
            )
        except Exception as first:  # noqa: BLE001 - any failure of the symbolic step: try without it
            why = f"{type(first).__name__}: {str(first)[:160]}"
        try:
            quant_pre_process(str(model), str(out), skip_symbolic_shape=True, **options)
            return PreProcessed(
                f"pre-processed with quant_pre_process(skip_symbolic_shape=True): symbolic shape inference failed ({why})",
                Recipe("quant_pre_process", {"skip_symbolic_shape": True, **options}),
            )
        except Exception as second:  # noqa: BLE001
            onnx.save(onnx.load(str(model)), str(out), save_as_external_data=external_data, location=location)
            return PreProcessed(
                f"not pre-processed: quant_pre_process failed ({why}) and again without symbolic shapes "
                f"({type(second).__name__}: {str(second)[:160]}); the model is quantized as it is",
                None,
            )


class FeedReader(CalibrationDataReader):
    """ONNX Runtime's CalibrationDataReader over the same rows of every input, `batch` rows at a
    time (the samples were checked when the audit read them)."""

    def __init__(self, samples: Mapping[str, np.ndarray], batch: int = 16):
        self.samples, self.batch = dict(samples), batch
        self.count = len(next(iter(self.samples.values())))
        self.rewind()

    def get_next(self) -> dict[str, np.ndarray] | None:
        if self.start >= self.count:
            return None
        feed = {k: v[self.start : self.start + self.batch] for k, v in self.samples.items()}
        self.start += self.batch
        return feed

    def rewind(self) -> None:
        self.start = 0

    def __len__(self) -> int:
        return -(-self.count // self.batch)


# Where each call lives, and which keyword arguments are ONNX Runtime enums (named in the JSON).
_MODULES = {
    "quant_pre_process": "onnxruntime.quantization.shape_inference",
    "quantize_dynamic": "onnxruntime.quantization",
    "quantize_static": "onnxruntime.quantization",
    "MatMulNBitsQuantizer": "onnxruntime.quantization.matmul_nbits_quantizer",
}
_ENUMS = {"weight_type": "QuantType", "activation_type": "QuantType", "quant_format": "QuantFormat"}


@dataclass
class Recipe:
    """One call that writes a file from another, as plain data: the `function` (quant_pre_process,
    quantize_dynamic, quantize_static, MatMulNBitsQuantizer), its keyword arguments (`kwargs`, JSON:
    enums by name, e.g. "QInt8"), for quantize_static the calibration reader described (`reader`),
    and for MatMulNBitsQuantizer the arguments of its save (`save`). The audit builds each variant by
    `run`ning its recipe, so the recipe is the call that made the file, not a description of it."""

    function: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    reader: dict[str, Any] | None = None
    save: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "function": self.function,
            "module": _MODULES[self.function],
            "kwargs": self.kwargs,
            "enums": {k: _ENUMS[k] for k in self.kwargs if k in _ENUMS},
            "calibration_reader": self.reader,
            "save": self.save or None,
        }

    def run(self, source: Path, target: Path, calibration: Mapping[str, np.ndarray] | None = None) -> Path:
        """Make `target` from `source` with this call (a static one reads `calibration`, the rows the
        reader described, `reader["batch"]` at a time)."""
        from onnxruntime.quantization import quantize_dynamic, quantize_static
        from onnxruntime.quantization.shape_inference import quant_pre_process

        target.parent.mkdir(parents=True, exist_ok=True)
        kwargs = quant_types(self.kwargs)
        with _quiet_quantizer():
            if self.function == "quant_pre_process":
                quant_pre_process(str(source), str(target), **kwargs)
            elif self.function == "quantize_dynamic":
                quantize_dynamic(source, target, **kwargs)
            elif self.function == "quantize_static":
                batch = (self.reader or {}).get("batch", CALIBRATION_MOST_ROWS)
                quantize_static(source, target, FeedReader(calibration or {}, batch=batch), **kwargs)
            elif self.function == "MatMulNBitsQuantizer":
                from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

                quantizer = MatMulNBitsQuantizer(onnx.load(str(source)), **kwargs)
                quantizer.process()
                quantizer.model.save_model_to_file(str(target), **self.save)
            else:
                raise ValueError(
                    f"Unknown quantizer call {self.function!r}; expected one of {', '.join(_MODULES)}."
                )
        return target

    def _arguments(self) -> str:
        def value(key: str, v: Any) -> str:
            return f"{_ENUMS[key]}.{v}" if key in _ENUMS else repr(v)

        return ", ".join(f"{k}={value(k, v)}" for k, v in self.kwargs.items())

    def python(self, source: str, target: str) -> list[str]:
        """The call as lines of Python, from file `source` to file `target` (`reader` stands for the
        calibration reader of a static call, described in a comment above it)."""
        args = [f"{k}={_ENUMS[k]}.{v}" if k in _ENUMS else f"{k}={v!r}" for k, v in self.kwargs.items()]
        if self.function == "MatMulNBitsQuantizer":
            save = [f"{k}={v!r}" for k, v in self.save.items()]
            return [
                *_call("quantizer = MatMulNBitsQuantizer", [f"onnx.load({source!r})", *args]),
                "quantizer.process()",
                *_call("quantizer.model.save_model_to_file", [repr(target), *save]),
            ]
        if self.function == "quantize_static":
            described = (self.reader or {}).get(
                "description", "a CalibrationDataReader over the calibration samples"
            )
            comment = textwrap.wrap(f"reader: {described}", width=96)
            return [
                *(f"# {line}" for line in comment),
                *_call(self.function, [repr(source), repr(target), "reader", *args]),
            ]
        return _call(self.function, [repr(source), repr(target), *args])

    def imports(self) -> list[str]:
        names = [self.function, *sorted({_ENUMS[k] for k in self.kwargs if k in _ENUMS})]
        lines = [f"from {_MODULES[self.function]} import {', '.join(sorted(names))}"]
        return (["import onnx"] if self.function == "MatMulNBitsQuantizer" else []) + lines


def _call(function: str, arguments: list[str], width: int = 100) -> list[str]:
    """`function(arguments)` on one line, or one argument a line when that is wider than `width`."""
    line = f"{function}({', '.join(arguments)})"
    if len(line) <= width:
        return [line]
    return [f"{function}(", *(f"    {a}," for a in arguments), ")"]


def recipe_for(
    plan: Plan,
    *,
    external_data: bool,
    nodes_to_exclude: Sequence[str] | None = None,
    calibration_batch: int = CALIBRATION_MOST_ROWS,
    reader: Mapping[str, Any] | None = None,
) -> Recipe:
    """The quantizer call that builds `plan`: its options, its nodes kept in float (the plan's own
    and `nodes_to_exclude`), the external-data flag; a static call's reader described by `reader`
    (what the rows are) and `calibration_batch`."""
    options = dict(plan.options)
    excluded = list(dict.fromkeys([*plan.keep_float, *(nodes_to_exclude or [])]))
    if plan.kind == "4-bit":
        return Recipe(
            "MatMulNBitsQuantizer",
            options,
            save={"use_external_data_format": external_data},
        )
    if excluded:
        options["nodes_to_exclude"] = excluded
    if external_data:
        options["use_external_data_format"] = True
    if plan.kind == "dynamic":
        return Recipe("quantize_dynamic", options)
    if plan.kind == "static":
        described = {
            "class": "course_machinery.audit.candidates.FeedReader",
            "batch": calibration_batch,
            **(reader or {}),
        }
        described.setdefault(
            "description",
            f"a CalibrationDataReader over the calibration samples, {calibration_batch} at a time "
            f"(course_machinery.audit.candidates.FeedReader(rows, batch={calibration_batch}))",
        )
        return Recipe("quantize_static", options, described)
    raise ValueError(f"Unknown variant kind {plan.kind!r}; expected dynamic, static or 4-bit.")


def build(
    plan: Plan,
    fp32: Path,
    out: Path,
    calibration: Mapping[str, np.ndarray] | None,
    *,
    external_data: bool,
    nodes_to_exclude: list[str] | None = None,
    calibration_batch: int = CALIBRATION_MOST_ROWS,
) -> Path:
    """Write the variant `plan` of the pre-processed `fp32` file to `out` (a static one calibrated
    `calibration_batch` rows at a time): `recipe_for(plan, ...).run(...)`."""
    recipe = recipe_for(
        plan,
        external_data=external_data,
        nodes_to_exclude=nodes_to_exclude,
        calibration_batch=calibration_batch,
    )
    return recipe.run(fp32, out, calibration)


def rebuild_code(model: str | Path, pre: Recipe | None, call: Recipe, target: str) -> str:
    """The Python that rebuilds a variant from the fp32 `model`: the pre-processing call the audit
    made (none when it quantized the model as it is), then the variant's call, writing `target`."""
    model = str(model)
    stem = Path(model).name.removesuffix(".onnx")
    source = model if pre is None else f"{stem}.pre.onnx"
    imports = sorted(
        {line for r in (pre, call) if r is not None for line in r.imports()},
        key=lambda line: (line.startswith("from"), line),
    )
    lines = [*imports, ""]
    if pre is not None:
        kwargs = dict(pre.kwargs)
        if "external_data_location" in kwargs:
            kwargs["external_data_location"] = f"{source}.data"
        lines += Recipe(pre.function, kwargs).python(model, source)
    lines += call.python(source, target)
    return "\n".join(lines) + "\n"


@contextlib.contextmanager
def _quiet_quantizer():
    """The quantizer logs advice and progress through the root logger at INFO/WARNING; an audit
    says what it does itself, so only errors pass while a variant is built."""
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        yield
    finally:
        root.setLevel(level)


# --------------------------------------------------------------------------------------------
# qdq_loss_debug: which layers lose the most
# --------------------------------------------------------------------------------------------
def _row_bytes(augmented: Path, samples: Mapping[str, np.ndarray], original: Path) -> int:
    """The bytes of the tensors `augmented` (a copy of `original` that also outputs its tensors,
    after the original's own outputs) saves for the first sample row."""
    from course_lib.measure import make_session

    own = len(onnx.load(str(original), load_external_data=False).graph.output)
    session = make_session(augmented, threads=1)
    one = {name: array[:1] for name, array in samples.items()}
    return int(sum(np.asarray(out).nbytes for out in session.run(None, one)[own:]))


def _rows(budget: float, per_row: float, most: int, samples: Mapping[str, np.ndarray]) -> int:
    available = len(next(iter(samples.values())))
    return int(max(1, min(most, available, budget // max(1.0, per_row))))


def calibration_batch(
    fp32: Path, samples: Mapping[str, np.ndarray], work: Path, *, external_data: bool = False
) -> int:
    """Rows per calibration batch. ONNX Runtime's calibrator holds about twice a batch's float
    tensors while it runs it (the text encoder: 80 MB of tensors a sentence at 128 tokens, about
    140 MB held), so the batch is ROW_MEMORY over twice one row's tensors, measured by running one
    row through a copy of `fp32` that outputs them all."""
    from onnxruntime.quantization import qdq_loss_debug as qdq_debug

    work.mkdir(parents=True, exist_ok=True)
    # In a folder of its own, removed after: with external data, the copy's weights go to a file
    # with a random name beside it.
    with tempfile.TemporaryDirectory(prefix="rows-probe-", dir=work) as scratch:
        probe = Path(scratch) / "rows.probe.onnx"
        with _quiet_quantizer():
            qdq_debug.modify_model_output_intermediate_tensors(
                str(fp32), str(probe), None, save_as_external_data=external_data
            )
        per_row = _row_bytes(probe, samples, fp32)
    return _rows(ROW_MEMORY, 2 * per_row, CALIBRATION_MOST_ROWS, samples)


def debug_rows(augmented: Path, samples: Mapping[str, np.ndarray], original: Path) -> int:
    """How many sample rows `qdq_loss_debug` can save the tensors of within ROW_MEMORY: one row
    through the fp32 file augmented to output its layers' tensors gives the bytes a row saves; the
    QDQ file saves about 1.5 times that more (each quantized tensor as 8-bit codes and again decoded
    to float)."""
    return _rows(ROW_MEMORY, 2.5 * _row_bytes(augmented, samples, original), DEBUG_MOST_ROWS, samples)


@dataclass
class Sensitivity:
    """qdq_loss_debug's findings for one static variant: per compute layer, its weight SQNR and,
    where its output is quantized, the dB its output lost against its input (both against fp32);
    `proposal`: the layers to keep in float, worst first; `ranked_by`: which measure ranked them."""

    variant: str
    samples: int
    layers: list[dict[str, Any]]
    proposal: list[str]
    ranked_by: str
    first_input_sqnr: float | None

    def to_dict(self) -> dict:
        return {
            "variant": self.variant,
            "samples": self.samples,
            "proposal": self.proposal,
            "ranked_by": self.ranked_by,
            "first_input_sqnr_db": self.first_input_sqnr,
            "worst_layers": self.layers[:8],
        }


def sensitive_layers(
    fp32: Path,
    variant: Path,
    samples: Mapping[str, np.ndarray],
    work: Path,
    *,
    name: str,
    keep: int = 3,
    external_data: bool = False,
) -> Sensitivity:
    """Compare the fp32 and QDQ files tensor by tensor with ONNX Runtime's `qdq_loss_debug`
    (lesson 04): weights against their quantize-dequantize round trip, activations of both models
    on the same samples. Layers are ranked by the SQNR their output loses across them where the
    outputs are quantized, else by their weights' SQNR; the worst `keep` are proposed."""
    from onnxruntime.quantization import qdq_loss_debug as qdq_debug

    work.mkdir(parents=True, exist_ok=True)
    # One run over all the rows, and only the tensors the comparison reads: the compute layers'
    # inputs and outputs in fp32, the Quantize/DequantizeLinear pairs in the QDQ file. Saving every
    # tensor (the debugger's default) took 4 GB on the text encoder.
    # The augmented copies live in a folder removed after (with external data, their weights go to
    # files with random names beside them).
    with tempfile.TemporaryDirectory(prefix="debug-", dir=work) as scratch, _quiet_quantizer():
        aug_fp32, aug_q = Path(scratch) / "debug.fp32.onnx", Path(scratch) / f"debug.{variant.stem}.onnx"
        qdq_debug.modify_model_output_intermediate_tensors(
            str(fp32), str(aug_fp32), list(_WEIGHTED), save_as_external_data=external_data
        )
        count = debug_rows(aug_fp32, samples, fp32)
        samples = {name: array[:count] for name, array in samples.items()}
        reader = FeedReader(samples, batch=count)
        float_acts = qdq_debug.collect_activations(str(aug_fp32), reader)
        qdq_debug.modify_model_output_intermediate_tensors(
            str(variant),
            str(aug_q),
            ["QuantizeLinear", "DequantizeLinear"],
            save_as_external_data=external_data,
        )
        reader.rewind()
        acts = qdq_debug.collect_activations(str(aug_q), reader)
        matched = qdq_debug.create_activation_matching(acts, float_acts)
        # Only the tensors saved on both sides: a quantized tensor between two non-compute ops
        # (a Relu's output before a Flatten) has no fp32 counterpart here.
        matched = {name: pair for name, pair in matched.items() if "float" in pair}
        errors = qdq_debug.compute_activation_error(matched)
        weight_sqnr = qdq_debug.compute_weight_error(
            qdq_debug.create_weight_matching(str(fp32), str(variant))
        )
    del acts, float_acts
    graph = onnx.load(str(fp32), load_external_data=False).graph
    initializers = {t.name for t in graph.initializer}

    def act(tensor: str) -> float | None:
        value = errors.get(tensor, {}).get("xmodel_err")
        return None if value is None or not np.isfinite(value) else float(value)

    layers = []
    for node in graph.node:
        if node.op_type not in _WEIGHTED or len(node.input) < 2 or node.input[1] not in initializers:
            continue
        before, after = act(node.input[0]), act(node.output[0])
        layers.append(
            {
                "node": node.name,
                "op": node.op_type,
                "weight_sqnr_db": weight_sqnr.get(node.input[1]),
                "input_sqnr_db": before,
                "output_sqnr_db": after,
                "loss_db": None if before is None or after is None else before - after,
            }
        )
    # A layer's output is quantized unless the quantizer left it float (a Conv before a Relu, a
    # MatMul with OpTypesToExcludeOutputQuantization): rank by that loss when most layers have one.
    by_loss = [layer for layer in layers if layer["loss_db"] is not None]
    if len(by_loss) >= max(1, len(layers) // 2):
        ranked = sorted(by_loss, key=lambda layer: -layer["loss_db"])
        ranked_by = "output SQNR lost across the layer"
    else:
        ranked = sorted(
            (layer for layer in layers if layer["weight_sqnr_db"] is not None),
            key=lambda layer: layer["weight_sqnr_db"],
        )
        ranked_by = "weight SQNR"
    proposal = [layer["node"] for layer in ranked[:keep] if layer["node"]]
    ranked += [layer for layer in layers if layer not in ranked]  # the rest, unranked, for the table
    first = next((layer["input_sqnr_db"] for layer in layers if layer["input_sqnr_db"] is not None), None)
    count = len(next(iter(samples.values())))
    return Sensitivity(name, count, ranked, proposal, ranked_by, first)
