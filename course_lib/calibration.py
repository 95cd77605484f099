"""Calibration data readers for `onnxruntime.quantization.quantize_static`, validated up front.

Static quantization fixes a scale and zero point for every activation from the value ranges it
sees while running the fp32 model on calibration data. ONNX Runtime asks for that data through
a `CalibrationDataReader`: it calls `get_next()` again and again, runs the model on each
`{input_name: batch}` dict it gets, and stops at the first `None`. (Readers are consumed, so
`rewind()` starts one again when a notebook calibrates twice with the same reader.)

The ranges are only as good as the data: the reader must feed exactly what production feeds
the model, i.e. representative inputs through the *production* preprocessing, with the same
dtype, layout and normalisation. A wrong feed rarely fails loudly. float64 data or raw uint8
pixels may be cast or rejected deep inside onnxruntime, an unpadded image may fail on the 50th
batch, and one NaN makes a range meaningless and yields a model that runs but is quietly wrong.
So every sample is checked once, before calibration starts, by the course's one input check
(`course_lib.inputs.check_array`, after scikit-learn's): against the model's declared input (dtype,
rank, fixed dimensions) and for finite values. The first bad sample is reported by index, with what
was expected, what was found and the fix: `quantize_static` never starts on bad data.

    _input_spec     what the model declares for one input: an `inputs.InputSpec` (name, dtype, shape)
    _check_samples  a calibration set checked against an InputSpec; returns a read-only copy
    ArrayReader    samples you already have (a numpy array, first axis = samples, or a list of
                   per-sample arrays), checked, then fed in batches to one model input
    DatasetReader  Fashion-MNIST images from one of the course's splits, through the course's
                   preprocessing (course_lib.data.preprocess) or a transform you pass
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from numbers import Integral
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import helper
from onnxruntime.quantization import CalibrationDataReader

from . import data
from .inputs import Dim, InputError, InputSpec, check_array
from .inputs import _fmt_shape as _fmt_shape

__all__ = [
    "ArrayReader",
    "CalibrationError",
    "DatasetReader",
    "InputSpec",
]

# A bad calibration input is the course's one input error (course_lib.inputs); the name stays for
# the code that catches it (lesson 03 does).
CalibrationError = InputError


def _is_int(value: Any) -> bool:
    return isinstance(value, Integral) and not isinstance(value, bool)


# --------------------------------------------------------------------------------------------
# What the model declares: one input's name, dtype and shape
# --------------------------------------------------------------------------------------------
def _input_spec(model: str | os.PathLike | onnx.ModelProto, input_name: str | None = None) -> InputSpec:
    """The declared name, dtype and shape of the input of `model` that calibration feeds.

    `model` is the fp32 model to calibrate (a path or an onnx.ModelProto; its weights are not
    loaded). `input_name` may be left out when the model has one input to feed.
    """
    return InputSpec.of(_pick_input(_load_model(model), input_name))


def _load_model(model: str | os.PathLike | onnx.ModelProto) -> onnx.ModelProto:
    if isinstance(model, onnx.ModelProto):
        return model
    if not isinstance(model, str | os.PathLike):
        raise CalibrationError(
            f"model must be the path of the fp32 ONNX model (str or Path) or an onnx.ModelProto; "
            f"got {type(model).__name__}. Pass the same model you will give quantize_static."
        )
    path = Path(model)
    if not path.is_file():
        raise CalibrationError(
            f"No ONNX model at {path}: expected the path of the fp32 model to calibrate. "
            "Export it first (e.g. course_lib.models.get(...).onnx) or fix the path."
        )
    try:
        return onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # DecodeError and friends: not an ONNX file
        raise CalibrationError(
            f"Could not read {path} as an ONNX model ({type(exc).__name__}: {exc}). "
            "Pass the path of the fp32 .onnx file you will give quantize_static."
        ) from exc


def _pick_input(model: onnx.ModelProto, input_name: str | None) -> onnx.ValueInfoProto:
    """The input to feed: graph inputs that are initializers (IR < 4 style) are weights, not inputs."""
    initializers = {t.name for t in model.graph.initializer}
    inputs = {i.name: i for i in model.graph.input if i.name not in initializers}
    names = list(inputs)
    listed = ", ".join(repr(n) for n in names)
    if not names:
        raise CalibrationError(
            "The model has no inputs to feed (every graph input is an initializer), so there is "
            "nothing to calibrate. Check that this is the fp32 model you meant to quantize."
        )
    if input_name is None:
        if len(names) > 1:
            raise CalibrationError(
                f"The model has {len(names)} inputs ({listed}); expected one, or input_name to say "
                f"which one these samples feed. Pass e.g. input_name={names[0]!r}.",
                expected="input_name",
                found=names,
            )
        return inputs[names[0]]
    if input_name not in inputs:
        raise CalibrationError(
            f"The model has no input named {input_name!r}; its inputs are {listed}. "
            f"Pass one of them as input_name.",
            expected=names,
            found=input_name,
        )
    return inputs[input_name]


# --------------------------------------------------------------------------------------------
# Checking samples against it
# --------------------------------------------------------------------------------------------
def _check_samples(
    samples: np.ndarray | Sequence[Any], spec: InputSpec, *, batch_size: int = 1
) -> np.ndarray | list[np.ndarray]:
    """Check a calibration set against `spec`; return a read-only copy of it.

    `samples` is one array whose first axis is the sample axis (e.g. (N, 1, 32, 32)) or a list
    of per-sample arrays (each e.g. (1, 32, 32)). The copy is one array (N, *sample_shape) when
    every sample has the same shape, else a list: free dims (a sequence length) may differ
    between batches of `batch_size`, not within one. Any mismatch, NaN/inf or an empty set
    raises CalibrationError naming the first bad sample. The copy is the caller's guarantee:
    editing `samples` afterwards cannot un-check it.
    """
    _check_batch_size(batch_size)
    stacked = isinstance(samples, np.ndarray) or hasattr(samples, "__array__")
    checked = _check_array(samples, spec) if stacked else _check_list(samples, spec, batch_size)
    _check_fixed_batch(spec, batch_size, len(checked))
    return checked


def _check_batch_size(batch_size: Any) -> None:
    if not _is_int(batch_size) or batch_size < 1:
        raise CalibrationError(
            f"batch_size must be an int >= 1 (samples per get_next() call); got {batch_size!r}. "
            "Use batch_size=1, or a larger int to calibrate in fewer, bigger runs.",
            expected="int >= 1",
            found=batch_size,
        )


def _check_not_empty(count: int, spec: InputSpec) -> None:
    if count == 0:
        raise CalibrationError(
            f"The calibration set is empty (0 samples); the model's input {spec.name!r} needs samples of "
            f"shape {_fmt_shape(spec.sample_shape or ())}. A calibration set needs samples: 100-500 "
            "representative production inputs, preprocessed exactly as in production, is the usual "
            "advice. Calibrating on nothing would give quantization ranges that mean nothing.",
            expected="at least one sample",
            found=0,
        )


def _check_array(samples: Any, spec: InputSpec) -> np.ndarray:
    """All samples in one array: one dtype and one shape for all, so sample 0 speaks for every one."""
    try:
        array = np.asarray(samples)
    except Exception as exc:
        raise CalibrationError(
            f"Could not read samples as a numpy array ({type(exc).__name__}: {exc}); expected a numpy "
            "array whose first axis is the sample axis. Convert them with np.asarray(...) first."
        ) from exc
    if array.ndim == 0:
        raise CalibrationError(
            f"samples is a 0-d array (a single value of type {array.dtype}); expected an array whose "
            f"first axis is the sample axis, shape (N, *sample_shape) with sample shape "
            f"{_fmt_shape(spec.sample_shape or ())}.",
            expected="an array with a sample axis",
            found=array.shape,
        )
    count = len(array)
    _check_not_empty(count, spec)
    check_array(
        array[0], spec, what=f"Calibration sample 0 of {count}", batched=False, name="samples", sample=0
    )
    check_array(array, spec, what="The calibration set", name="samples", finite=True)
    copy = np.array(array, copy=True, order="C")
    copy.setflags(write=False)
    return copy


def _check_list(samples: Any, spec: InputSpec, batch_size: int) -> np.ndarray | list[np.ndarray]:
    """Per-sample arrays, each checked in turn; equal shapes within every batch."""
    if isinstance(samples, str | bytes | dict) or not isinstance(samples, Sequence):
        raise CalibrationError(
            f"samples must be a numpy array (first axis = samples) or a list of per-sample arrays; "
            f"got {type(samples).__name__}. Materialise it with list(...) or np.stack(...).",
            expected="numpy array or list of arrays",
            found=type(samples).__name__,
        )
    count = len(samples)
    _check_not_empty(count, spec)
    arrays = [
        check_array(
            sample,
            spec,
            what=f"Calibration sample {i} of {count}",
            batched=False,
            name="samples",
            listed=True,
            finite=True,
            sample=i,
        )
        for i, sample in enumerate(samples)
    ]
    shapes = [a.shape for a in arrays]
    if len(set(shapes)) == 1:
        stacked = np.stack(arrays)
        stacked.setflags(write=False)
        return stacked
    # Free dims (e.g. sequence length) may differ between samples, but not inside one batch.
    for first in range(0, count, batch_size):
        for i in range(first + 1, min(first + batch_size, count)):
            if shapes[i] != shapes[first]:
                raise CalibrationError(
                    f"Calibration sample {i} of {count} has shape {_fmt_shape(shapes[i])} but sample "
                    f"{first}, in the same batch of {batch_size}, has shape {_fmt_shape(shapes[first])}; "
                    "expected equal shapes within a batch, since a batch is one stacked array. "
                    "Use batch_size=1 or pad the samples to a common shape.",
                    sample=i,
                    expected=shapes[first],
                    found=shapes[i],
                )
    copies = [a.copy() for a in arrays]
    for a in copies:
        a.setflags(write=False)
    return copies


def _check_fixed_batch(spec: InputSpec, batch_size: int, count: int) -> None:
    """A model exported with a fixed batch size accepts only batches of exactly that size."""
    fixed = spec.fixed_batch
    if fixed is None:
        return
    if batch_size != fixed:
        raise CalibrationError(
            f"The model's input {spec.name!r} has a fixed batch dimension of {fixed} "
            f"(shape {_fmt_shape(spec.shape)}); batch_size={batch_size} would feed batches "
            f"of {batch_size}. Use batch_size={fixed}.",
            expected=fixed,
            found=batch_size,
        )
    if count % fixed:
        raise CalibrationError(
            f"{count} samples do not split into batches of {fixed}: the last would hold "
            f"{count % fixed}, but the model's input {spec.name!r} has a fixed batch "
            f"dimension of {fixed}. Use a multiple of {fixed} samples (e.g. the first "
            f"{count - count % fixed}).",
            expected=f"a multiple of {fixed} samples",
            found=count,
        )


# --------------------------------------------------------------------------------------------
# Readers: checked samples, fed through ONNX Runtime's protocol
# --------------------------------------------------------------------------------------------
class ArrayReader(CalibrationDataReader):
    """Feed `samples` to one input of `model` in batches of `batch_size`, checked once up front.

    `samples` is a numpy array whose first axis is the sample axis (e.g. (N, 1, 32, 32)) or a
    list of per-sample arrays (each e.g. (1, 32, 32)). `model` is the fp32 ONNX model to be
    calibrated (path or ModelProto): its declared input (`_input_spec`) fixes the dtype, rank and
    fixed dims every sample must have, and `_check_samples` raises CalibrationError at the first
    bad sample. The reader feeds one input; a model with several required inputs needs a reader
    that feeds them all.
    """

    def __init__(
        self,
        samples: np.ndarray | Sequence[Any],
        model: str | os.PathLike | onnx.ModelProto,
        *,
        input_name: str | None = None,
        batch_size: int = 1,
    ):
        _check_batch_size(batch_size)  # before the model is read: the cheapest mistake first
        self.batch_size = int(batch_size)
        self.spec = _input_spec(model, input_name)
        self.model_path = None if isinstance(model, onnx.ModelProto) else Path(model)
        self._samples = _check_samples(samples, self.spec, batch_size=self.batch_size)
        # None when free dims differ between samples (then _samples is a list of arrays).
        self.sample_shape = self._samples.shape[1:] if isinstance(self._samples, np.ndarray) else None
        self.rewind()

    @property
    def input_name(self) -> str:
        return self.spec.name

    @property
    def dtype(self) -> np.dtype:
        return self.spec.dtype

    @property
    def input_shape(self) -> tuple[Dim, ...] | None:
        return self.spec.shape

    # ---------------------------------------------------------------------------- the protocol
    def get_next(self) -> dict[str, np.ndarray] | None:
        """The next `{input_name: batch}` (batch shape (b, *sample_shape)), or None when exhausted."""
        if self._pos >= self._stop:
            return None
        end = min(self._pos + self.batch_size, self._stop)
        batch = self._samples[self._pos : end]
        self._pos = end
        return {self.spec.name: batch if isinstance(batch, np.ndarray) else np.stack(batch)}

    def rewind(self) -> None:
        """Start again from the first sample (and drop any set_range), so the reader can be reused."""
        self._start, self._stop = 0, len(self)
        self._pos = 0

    def set_range(self, start_index: int, end_index: int) -> None:
        """Feed only samples [start_index, end_index) (used by quantize_static's CalibStridedMinMax)."""
        if not (_is_int(start_index) and _is_int(end_index) and 0 <= start_index < end_index):
            raise CalibrationError(
                f"set_range expects ints 0 <= start_index < end_index; got {start_index!r}, {end_index!r}."
            )
        self._start, self._stop = int(start_index), min(int(end_index), len(self))
        self._pos = self._start

    def __len__(self) -> int:
        """The number of samples (not batches; see num_batches)."""
        return len(self._samples)

    @property
    def num_batches(self) -> int:
        """How many get_next() feeds one pass over all samples takes."""
        return math.ceil(len(self) / self.batch_size)

    def __repr__(self) -> str:
        shape = _fmt_shape(self.sample_shape) if self.sample_shape is not None else "(varying)"
        return (
            f"{type(self).__name__}({len(self)} samples of shape {shape}, {self.dtype.name}, "
            f"input={self.input_name!r}, batch_size={self.batch_size}, num_batches={self.num_batches})"
        )


def _check_selection(split: str, count: object, seed: object) -> None:
    """DatasetReader's arguments: a course split, a whole count >= 1, a whole seed or None."""
    if split not in data.SPLITS:
        raise CalibrationError(
            f"Unknown split {split!r}; expected one of {', '.join(data.SPLITS)}. The calibration "
            "pool ('calibration') is held apart for exactly this.",
            expected=data.SPLITS,
            found=split,
        )
    if not _is_int(count):
        raise CalibrationError(
            f"count must be an int (how many images to calibrate on); got {count!r}. "
            "100-500 is the usual advice.",
            expected="int >= 1",
            found=count,
        )
    if count < 1:
        raise CalibrationError(
            f"count={count} would make the calibration set empty; a calibration set needs samples: "
            "100-500 representative production inputs is the usual advice. Use e.g. count=200.",
            expected="count >= 1",
            found=count,
        )
    if seed is not None and not _is_int(seed):
        raise CalibrationError(
            f"seed must be an int (a reproducible random selection) or None (the first count "
            f"images); got {seed!r}.",
            expected="int or None",
            found=seed,
        )


def _pick(available: int, count: int, seed: int | None, split: str) -> np.ndarray:
    """Which images to take: the first `count`, or `count` drawn without replacement with `seed`."""
    if count > available:
        raise CalibrationError(
            f"count={count} asks for more images than the {split!r} split holds ({available}). "
            f"Use count <= {available}, or another split.",
            expected=f"count <= {available}",
            found=count,
        )
    if seed is None:
        return np.arange(count)
    return np.sort(np.random.default_rng(seed).choice(available, count, replace=False))


class DatasetReader(ArrayReader):
    """Fashion-MNIST images from one course split, through the production preprocessing.

    Takes the first `count` raw images of `split` (or `count` drawn without replacement with
    `seed`), applies `transform` (default: course_lib.data.preprocess, uint8 (n, 28, 28) ->
    float32 (n, 1, 32, 32)) and validates the result against `model` like ArrayReader.
    """

    def __init__(
        self,
        model: str | os.PathLike | onnx.ModelProto,
        *,
        split: str = "calibration",
        count: int = 200,
        transform: Callable[[np.ndarray], np.ndarray] | None = None,
        batch_size: int = 1,
        seed: int | None = None,
    ):
        _check_selection(split, count, seed)
        self.split, self.count, self.seed = split, int(count), seed
        self.transform = data.preprocess if transform is None else transform
        self.transform_name = getattr(self.transform, "__name__", None) or repr(self.transform)

        images, _ = data.load_split(split)
        self.indices = _pick(len(images), self.count, seed, split)
        samples = self._transformed(images[self.indices])
        try:
            super().__init__(samples, model, batch_size=batch_size)
        except CalibrationError as exc:
            raise self._blame_transform(exc) from None

    def _transformed(self, raw: np.ndarray) -> np.ndarray:
        """`transform` applied to the raw images, with one sample per image."""
        try:
            samples = self.transform(raw)
        except Exception as exc:
            exc.add_note(
                f"Raised by transform={self.transform_name} applied to {self.count} raw {self.split!r} "
                f"images (uint8, shape {_fmt_shape(raw.shape)})."
            )
            raise
        if hasattr(samples, "__len__") and len(samples) != self.count:
            raise CalibrationError(
                f"transform={self.transform_name} returned {len(samples)} samples for {self.count} images; "
                "expected one sample per image (first axis = samples).",
                expected=self.count,
                found=len(samples),
            )
        return samples

    def _blame_transform(self, exc: CalibrationError) -> CalibrationError:
        """A sample refused by ArrayReader's check came out of `transform`: say to fix the transform."""
        if exc.sample is None:
            return exc
        return CalibrationError(
            f"{exc} These samples are the output of transform={self.transform_name} on {self.count} "
            f"raw {self.split!r} images: fix the transform itself rather than converting its output, so "
            "that calibration sees exactly what production feeds the model (course_lib.data.preprocess "
            "is the production preprocessing: uint8 (n, 28, 28) -> float32 (n, 1, 32, 32)).",
            sample=exc.sample,
            expected=exc.expected,
            found=exc.found,
        )

    def __repr__(self) -> str:
        return f"{super().__repr__()[:-1]}, split={self.split!r}, transform={self.transform_name})"


# --------------------------------------------------------------------------------------------
# What calibration decides: the ranges, and what they clip
# --------------------------------------------------------------------------------------------
METHODS = ("MinMax", "Entropy", "Percentile")
# The calibrator options quantize_static passes on (its extra_options key -> the calibrator's).
QUANTIZE_STATIC_KEYS = {
    "CalibTensorRangeSymmetric": "symmetric",
    "CalibMovingAverage": "moving_average",
    "CalibMovingAverageConstant": "averaging_constant",
    "CalibMaxIntermediateOutputs": "max_intermediate_outputs",
    "CalibPercentile": "percentile",
}


def calibration_ranges(
    model: str | os.PathLike,
    reader: CalibrationDataReader,
    methods: Sequence[str] = METHODS,
    extra_options: dict | None = None,
    tensors: Sequence[str] | None = None,
) -> dict[str, dict[str, tuple[float, float]]]:
    """The activation range each calibration method picks: {tensor: {method: (low, high)}}.

    Runs ONNX Runtime's own calibrators (the ones `quantize_static` uses) on `reader`, which is
    rewound before each method. `extra_options` takes `quantize_static`'s keys (e.g.
    {"CalibPercentile": 99.99}, translated as quantize_static translates them) and the
    calibrators' own keys, which quantize_static cannot pass on (e.g. {"num_bins": 2048} for
    Entropy). `tensors` keeps only those names (default: every tensor ONNX Runtime calibrates).
    """
    import tempfile

    from onnxruntime.quantization.calibrate import CalibrationMethod, create_calibrator

    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise ValueError(f"Unknown calibration method(s) {unknown}; choose from {', '.join(METHODS)}.")
    if not hasattr(reader, "rewind"):
        raise TypeError("calibration_ranges reads the data once per method: pass a reader with rewind().")
    found: dict[str, dict[str, tuple[float, float]]] = {}
    for method in methods:
        reader.rewind()
        with tempfile.TemporaryDirectory(prefix="calibration-") as tmp:
            calibrator = create_calibrator(
                Path(model),
                augmented_model_path=str(Path(tmp) / "augmented.onnx"),
                calibrate_method=CalibrationMethod[method],
                extra_options={QUANTIZE_STATIC_KEYS.get(k, k): v for k, v in (extra_options or {}).items()},
            )
            calibrator.collect_data(reader)
            computed = calibrator.compute_data()
        for name, value in computed.data.items():
            if tensors is not None and name not in tensors:
                continue
            low, high = (float(np.asarray(v).reshape(-1)[0]) for v in value.range_value)
            found.setdefault(name, {})[method] = (low, high)
    reader.rewind()
    return found


def activation_values(model: str | os.PathLike, feed: dict[str, np.ndarray], tensors: Sequence[str]):
    """The float values of named intermediate tensors when `model` runs on `feed`: {name: array}.

    A copy of the model gets those tensors as extra outputs (the file itself is not changed).
    """
    from .measure import make_session

    proto = onnx.load(str(model))
    names = {v.name for v in proto.graph.output}
    inputs = {v.name for v in proto.graph.input}
    known = inputs | {o for n in proto.graph.node for o in n.output}
    missing = [t for t in tensors if t not in known]
    if missing:
        raise ValueError(f"No tensor named {missing} in {Path(model).name}; pick from the node outputs.")
    computed = [t for t in tensors if t not in inputs]
    for t in computed:
        if t not in names:
            proto.graph.output.append(helper.make_tensor_value_info(t, onnx.TensorProto.FLOAT, None))
    session = make_session(proto.SerializeToString())
    values = dict(zip(computed, session.run(computed, feed), strict=True)) if computed else {}
    return {t: np.asarray(feed[t]) if t in inputs else values[t] for t in tensors}


def clipped_fraction(values: np.ndarray, low: float, high: float) -> float:
    """The fraction of `values` outside [low, high]: what a quantizer with that range saturates."""
    v = np.asarray(values)
    return float(((v < low) | (v > high)).mean()) if v.size else 0.0


def quantized_ranges(qdq_model: str | os.PathLike) -> dict[str, tuple[float, float]]:
    """The float values each per-tensor QuantizeLinear of a QDQ model stores without clipping:
    {tensor: (low, high)}.

    affine._clipping_range of the node's scale and zero point: the end levels widened by half a
    step, (qmin - zero_point - 0.5) * scale to (qmax - zero_point + 0.5) * scale. A value inside
    rounds to a level within half a step; a value outside is stored as the end level, with a larger
    error: it saturates (is clipped).
    """
    from onnx import numpy_helper

    from . import affine

    proto = onnx.load(str(qdq_model))
    init = {t.name: numpy_helper.to_array(t) for t in proto.graph.initializer}
    ranges = {}
    for node in proto.graph.node:
        if node.op_type != "QuantizeLinear" or node.input[1] not in init or node.input[0] in init:
            continue
        scale = init[node.input[1]]
        zero = init.get(node.input[2]) if len(node.input) > 2 else None
        if scale.size != 1:
            continue  # per-axis: a weight, not an activation
        dtype = zero.dtype.name if zero is not None else "uint8"  # ONNX's default zero point: uint8 0
        z = int(zero.reshape(-1)[0]) if zero is not None else 0
        low, high = affine._clipping_range(scale.reshape(-1)[0], z, dtype)
        ranges[node.input[0]] = (float(low), float(high))
    return ranges


def saturation(ranges: dict[str, tuple[float, float]], values: dict[str, np.ndarray]) -> dict[str, float]:
    """For each tensor in both: the fraction of its real `values` outside its quantized range."""
    return {name: clipped_fraction(values[name], *ranges[name]) for name in ranges if name in values}
