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
So these readers check everything once, in `__init__`, against the model's declared input
(dtype, rank, fixed dimensions) and for finite values, and report the first bad sample by
index with what was expected and what was found: `quantize_static` never starts on bad data.

    ArrayReader    samples you already have (a numpy array, first axis = samples, or a list of
                   per-sample arrays), batched for one model input
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

__all__ = ["ArrayReader", "CalibrationError", "DatasetReader"]

Dim = int | str | None  # fixed size, symbolic name (dim_param), or unknown


class CalibrationError(ValueError):
    """Raised for any bad calibration input: the message says what was expected, what was found
    and how to fix it.

    `sample` is the index of the first bad sample when the problem is in the data (None when it
    is an argument or the model); `expected` and `found` describe the mismatch.
    """

    def __init__(self, message: str, *, sample: int | None = None, expected: Any = None, found: Any = None):
        super().__init__(message)
        self.sample = sample
        self.expected = expected
        self.found = found


# --------------------------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------------------------
def _fmt_shape(shape: Sequence[Dim]) -> str:
    """(N, 1, 32, 32) style: free dims by their name, unknown ones as '?'."""
    parts = ["?" if d is None else str(d) for d in shape]
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


def _np_name(dtype: np.dtype) -> str:
    return f"np.{dtype.name}" if hasattr(np, dtype.name) else f"np.dtype({dtype.name!r})"


def _is_int(value: Any) -> bool:
    return isinstance(value, Integral) and not isinstance(value, bool)


def _dim_matches(size: int, dim: Dim) -> bool:
    return not isinstance(dim, int) or size == dim


def _shape_matches(shape: Sequence[int], dims: Sequence[Dim]) -> bool:
    return len(shape) == len(dims) and all(_dim_matches(s, d) for s, d in zip(shape, dims, strict=True))


def _load_model(model: str | os.PathLike | onnx.ModelProto) -> tuple[onnx.ModelProto, Path | None]:
    if isinstance(model, onnx.ModelProto):
        return model, None
    if not isinstance(model, str | os.PathLike):
        raise CalibrationError(
            f"model must be the path of the fp32 ONNX model (str or Path) or an onnx.ModelProto; "
            f"got {type(model).__name__}. Pass the same model you will give quantize_static."
        )
    path = Path(model)
    if not path.is_file():
        raise CalibrationError(
            f"No ONNX model at {path}: expected the path of the fp32 model to calibrate. "
            "Export it first (e.g. course_lib.ensure_onnx(...)) or fix the path."
        )
    try:
        return onnx.load(str(path), load_external_data=False), path
    except Exception as exc:  # DecodeError and friends: not an ONNX file
        raise CalibrationError(
            f"Could not read {path} as an ONNX model ({type(exc).__name__}: {exc}). "
            "Pass the path of the fp32 .onnx file you will give quantize_static."
        ) from exc


def _graph_inputs(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    """The inputs a caller must feed: graph inputs that are not initializers."""
    initializers = {t.name for t in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in initializers]


def _input_spec(value: onnx.ValueInfoProto) -> tuple[np.dtype, tuple[Dim, ...] | None]:
    """Numpy dtype and shape (None when the rank is unknown) of one tensor input."""
    kind = value.type.WhichOneof("value")
    if kind != "tensor_type":
        raise CalibrationError(
            f"The model's input {value.name!r} is a {kind or 'value of unknown type'}, not a tensor; "
            "ArrayReader feeds numpy arrays to tensor inputs only. Write a CalibrationDataReader "
            "for this input by hand."
        )
    tensor = value.type.tensor_type
    try:
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tensor.elem_type))
    except Exception as exc:
        raise CalibrationError(
            f"The model's input {value.name!r} has ONNX element type {tensor.elem_type}, which has no "
            "numpy equivalent (or is undefined). Check the exported model's input type."
        ) from exc
    if not tensor.HasField("shape"):
        return dtype, None
    dims: list[Dim] = []
    for d in tensor.shape.dim:
        if d.HasField("dim_value") and d.dim_value > 0:
            dims.append(int(d.dim_value))
        elif d.HasField("dim_param") and d.dim_param:
            dims.append(d.dim_param)
        else:
            dims.append(None)
    return dtype, tuple(dims)


def _empty_message(name: str, sample_shape: str) -> str:
    return (
        f"The calibration set is empty (0 samples); the model's input {name!r} needs samples of shape "
        f"{sample_shape}. A calibration set needs samples: 100-500 representative production inputs, "
        "preprocessed exactly as in production, is the usual advice. Calibrating on nothing would give "
        "quantization ranges that mean nothing."
    )


# --------------------------------------------------------------------------------------------
# Readers
# --------------------------------------------------------------------------------------------
class ArrayReader(CalibrationDataReader):
    """Feed `samples` to one input of `model` in batches of `batch_size`, validated once up front.

    `samples` is a numpy array whose first axis is the sample axis (e.g. (N, 1, 32, 32)) or a
    list of per-sample arrays (each e.g. (1, 32, 32)). `model` is the fp32 ONNX model to be
    calibrated (path or ModelProto): its declared input fixes the dtype, rank and fixed dims every
    sample must have. Any mismatch, NaN/inf or an empty set raises CalibrationError naming the
    first bad sample. The reader feeds one input; a model with several required inputs needs a
    reader that feeds them all.
    """

    def __init__(
        self,
        samples: np.ndarray | Sequence[Any],
        model: str | os.PathLike | onnx.ModelProto,
        *,
        input_name: str | None = None,
        batch_size: int = 1,
    ):
        if not _is_int(batch_size) or batch_size < 1:
            raise CalibrationError(
                f"batch_size must be an int >= 1 (samples per get_next() call); got {batch_size!r}. "
                "Use batch_size=1, or a larger int to calibrate in fewer, bigger runs.",
                expected="int >= 1",
                found=batch_size,
            )
        self.batch_size = int(batch_size)
        proto, self.model_path = _load_model(model)
        self.input_name = self._pick_input(proto, input_name)
        value = next(i for i in _graph_inputs(proto) if i.name == self.input_name)
        self.dtype, self.input_shape = _input_spec(value)
        # How to convert in fix-it hints: "samples" for one array, a comprehension for a list.
        self._stacked_input = isinstance(samples, np.ndarray) or hasattr(samples, "__array__")

        self._data: np.ndarray | None = None  # all samples in one array (equal shapes) ...
        self._list: list[np.ndarray] | None = None  # ... or per-sample arrays (free dims differ)
        self.sample_shape: tuple[int, ...] | None = None  # None when free dims differ between samples
        if self._stacked_input:
            self._init_array(samples)
        else:
            self._init_list(samples)
        self._check_batch_dim()
        self._start, self._stop = 0, self._n
        self._pos = 0

    # ---------------------------------------------------------------------------- the protocol
    def get_next(self) -> dict[str, np.ndarray] | None:
        """The next `{input_name: batch}` (batch shape (b, *sample_shape)), or None when exhausted."""
        if self._pos >= self._stop:
            return None
        end = min(self._pos + self.batch_size, self._stop)
        batch = (
            self._data[self._pos : end] if self._data is not None else np.stack(self._list[self._pos : end])
        )
        self._pos = end
        return {self.input_name: batch}

    def rewind(self) -> None:
        """Start again from the first sample (and drop any set_range), so the reader can be reused."""
        self._start, self._stop = 0, self._n
        self._pos = 0

    def set_range(self, start_index: int, end_index: int) -> None:
        """Feed only samples [start_index, end_index) (used by quantize_static's CalibStridedMinMax)."""
        if not (_is_int(start_index) and _is_int(end_index) and 0 <= start_index < end_index):
            raise CalibrationError(
                f"set_range expects ints 0 <= start_index < end_index; got {start_index!r}, {end_index!r}."
            )
        self._start, self._stop = int(start_index), min(int(end_index), self._n)
        self._pos = self._start

    def __len__(self) -> int:
        """The number of samples (not batches; see num_batches)."""
        return self._n

    @property
    def num_batches(self) -> int:
        """How many get_next() feeds one pass over all samples takes."""
        return math.ceil(self._n / self.batch_size)

    def __repr__(self) -> str:
        shape = _fmt_shape(self.sample_shape) if self.sample_shape is not None else "(varying)"
        return (
            f"{type(self).__name__}({self._n} samples of shape {shape}, {self.dtype.name}, "
            f"input={self.input_name!r}, batch_size={self.batch_size}, num_batches={self.num_batches})"
        )

    # ---------------------------------------------------------------------------- validation
    def _pick_input(self, proto: onnx.ModelProto, input_name: str | None) -> str:
        names = [i.name for i in _graph_inputs(proto)]
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
            return names[0]
        if input_name not in names:
            raise CalibrationError(
                f"The model has no input named {input_name!r}; its inputs are {listed}. "
                f"Pass one of them as input_name.",
                expected=names,
                found=input_name,
            )
        return input_name

    @property
    def _expected_sample_dims(self) -> tuple[Dim, ...] | None:
        return None if self.input_shape is None else self.input_shape[1:]

    def _expected(self) -> str:
        """'(N, 1, 32, 32), i.e. samples of shape (1, 32, 32)' for the messages."""
        if self.input_shape is None:
            return "a tensor of unknown shape"
        return (
            f"{_fmt_shape(self.input_shape)}, i.e. samples of shape {_fmt_shape(self._expected_sample_dims)}"
        )

    def _prefix(self, i: int) -> str:
        return f"Calibration sample {i} of {self._n}"

    def _init_array(self, samples: Any) -> None:
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
                f"{_fmt_shape(self._expected_sample_dims or ())}.",
                expected="an array with a sample axis",
                found=array.shape,
            )
        self._n = len(array)
        if self._n == 0:
            raise CalibrationError(
                _empty_message(self.input_name, _fmt_shape(self._expected_sample_dims or ())),
                expected="at least one sample",
                found=0,
            )
        # One array: dtype and shape are the same for every sample, so sample 0 speaks for all.
        self._check_sample(0, array[0])
        self._check_finite_array(array)
        self._data = np.array(array, copy=True, order="C")  # our own copy: validated data stays valid
        self._data.setflags(write=False)
        self.sample_shape = tuple(array.shape[1:])

    def _init_list(self, samples: Any) -> None:
        if isinstance(samples, str | bytes | dict) or not isinstance(samples, Sequence):
            raise CalibrationError(
                f"samples must be a numpy array (first axis = samples) or a list of per-sample arrays; "
                f"got {type(samples).__name__}. Materialise it with list(...) or np.stack(...).",
                expected="numpy array or list of arrays",
                found=type(samples).__name__,
            )
        self._n = len(samples)
        if self._n == 0:
            raise CalibrationError(
                _empty_message(self.input_name, _fmt_shape(self._expected_sample_dims or ())),
                expected="at least one sample",
                found=0,
            )
        arrays = []
        for i, sample in enumerate(samples):
            try:
                a = np.asarray(sample)
            except Exception as exc:
                raise CalibrationError(
                    f"{self._prefix(i)} could not be read as a numpy array ({type(exc).__name__}: {exc}); "
                    "expected one array per sample.",
                    sample=i,
                ) from exc
            self._check_sample(i, a)
            self._check_finite_sample(i, a)
            arrays.append(a)
        shapes = [a.shape for a in arrays]
        if len(set(shapes)) == 1:
            self._data = np.stack(arrays)
            self._data.setflags(write=False)
            self.sample_shape = shapes[0]
            return
        # Free dims (e.g. sequence length) may differ between samples, but not inside one batch.
        for first in range(0, self._n, self.batch_size):
            for i in range(first + 1, min(first + self.batch_size, self._n)):
                if shapes[i] != shapes[first]:
                    raise CalibrationError(
                        f"{self._prefix(i)} has shape {_fmt_shape(shapes[i])} but sample {first}, in the "
                        f"same batch of {self.batch_size}, has shape {_fmt_shape(shapes[first])}; "
                        "expected equal shapes within a batch, since a batch is one stacked array. "
                        "Use batch_size=1 or pad the samples to a common shape.",
                        sample=i,
                        expected=shapes[first],
                        found=shapes[i],
                    )
        self._list = [a.copy() for a in arrays]
        for a in self._list:
            a.setflags(write=False)
        self.sample_shape = None

    def _check_sample(self, i: int, sample: np.ndarray) -> None:
        """dtype, rank and fixed dims of one sample against the model's input."""
        name = self.input_name
        if sample.dtype != self.dtype:
            target = _np_name(self.dtype)
            how = (
                f"samples.astype({target})"
                if self._stacked_input
                else f"[np.asarray(s, dtype={target}) for s in samples]"
            )
            raw = ""
            if np.issubdtype(sample.dtype, np.integer) and np.issubdtype(self.dtype, np.floating):
                raw = (
                    " If these are raw pixels, apply the production preprocessing (scaling and "
                    "normalisation) instead of only casting."
                )
            raise CalibrationError(
                f"{self._prefix(i)} has dtype {sample.dtype}; the model's input {name!r} expects "
                f"{self.dtype}. Convert with {how}.{raw}",
                sample=i,
                expected=self.dtype,
                found=sample.dtype,
            )
        dims = self._expected_sample_dims
        if dims is None:
            return
        shape = sample.shape
        if len(shape) != len(dims):
            raise CalibrationError(
                f"{self._prefix(i)} has shape {_fmt_shape(shape)} (rank {len(shape)}), so a batch of "
                f"it has rank {len(shape) + 1}; the model's input {name!r} expects rank "
                f"{len(self.input_shape)}: {self._expected()}. {self._rank_hint(shape, dims)}",
                sample=i,
                expected=self.input_shape,
                found=shape,
            )
        for axis, (size, dim) in enumerate(zip(shape, dims, strict=True)):
            if not _dim_matches(size, dim):
                raise CalibrationError(
                    f"{self._prefix(i)} has shape {_fmt_shape(shape)}; the model's input {name!r} expects "
                    f"{self._expected()} (axis {axis} of the sample is {size}, not {dim}). Resize, pad or "
                    f"reorder the data the way production does so that each sample has shape "
                    f"{_fmt_shape(dims)}.",
                    sample=i,
                    expected=self.input_shape,
                    found=shape,
                )

    def _rank_hint(self, shape: tuple[int, ...], dims: tuple[Dim, ...]) -> str:
        """Suggest the one-axis fix when there is one; else restate the layout."""
        offset = 1 if self._stacked_input else 0  # the sample axis comes first in one array
        what = "samples" if self._stacked_input else "sample"
        if len(shape) + 1 == len(dims):
            for k in range(len(dims)):
                if _shape_matches(shape[:k] + (1,) + shape[k:], dims):
                    return f"An axis is missing: add it with np.expand_dims({what}, {k + offset})."
        if len(shape) == len(dims) + 1:
            for k in range(len(shape)):
                if shape[k] == 1 and _shape_matches(shape[:k] + shape[k + 1 :], dims):
                    if k == 0 and not self._stacked_input:
                        return (
                            "Each sample seems to carry its own batch axis: pass np.concatenate(samples) "
                            "or [s[0] for s in samples]."
                        )
                    return f"There is an extra axis of size 1: drop it with np.squeeze({what}, {k + offset})."
        if self._stacked_input:
            return f"The first axis of samples is the sample axis; each sample's shape is {_fmt_shape(dims)}."
        return f"Each sample must have shape {_fmt_shape(dims)}."

    def _non_finite(self, i: int, sample: np.ndarray, bad_samples: int | None) -> CalibrationError:
        nan, inf = int(np.isnan(sample).sum()), int(np.isinf(sample).sum())
        found = " and ".join(w for w, c in (("NaN", nan), ("inf", inf)) if c)
        where = tuple(int(j) for j in np.argwhere(~np.isfinite(sample))[0])
        total = "" if bad_samples is None else f" {bad_samples} of the {self._n} samples are not finite."
        return CalibrationError(
            f"{self._prefix(i)} contains {found} ({nan + inf} of its {sample.size} values, the first at "
            f"index {where}); the model's input {self.input_name!r} expects finite values.{total} "
            "Ranges calibrated on NaN/inf are meaningless: fix the source of the bad values or drop "
            "those samples.",
            sample=i,
            expected="finite values",
            found=found,
        )

    def _check_finite_array(self, array: np.ndarray) -> None:
        if not np.issubdtype(array.dtype, np.inexact):
            return
        finite = np.isfinite(array.reshape(self._n, -1)).all(axis=1)
        if not finite.all():
            i = int(np.argmin(finite))
            raise self._non_finite(i, array[i], int((~finite).sum()))

    def _check_finite_sample(self, i: int, sample: np.ndarray) -> None:
        if np.issubdtype(sample.dtype, np.inexact) and not np.isfinite(sample).all():
            raise self._non_finite(i, sample, None)

    def _check_batch_dim(self) -> None:
        """A model exported with a fixed batch size accepts only batches of exactly that size."""
        fixed = self.input_shape[0] if self.input_shape else None
        if not isinstance(fixed, int):
            return
        if self.batch_size != fixed:
            raise CalibrationError(
                f"The model's input {self.input_name!r} has a fixed batch dimension of {fixed} "
                f"(shape {_fmt_shape(self.input_shape)}); batch_size={self.batch_size} would feed batches "
                f"of {self.batch_size}. Use batch_size={fixed}.",
                expected=fixed,
                found=self.batch_size,
            )
        if self._n % fixed:
            raise CalibrationError(
                f"{self._n} samples do not split into batches of {fixed}: the last would hold "
                f"{self._n % fixed}, but the model's input {self.input_name!r} has a fixed batch "
                f"dimension of {fixed}. Use a multiple of {fixed} samples (e.g. the first "
                f"{self._n - self._n % fixed}).",
                expected=f"a multiple of {fixed} samples",
                found=self._n,
            )


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
        self.split, self.count, self.seed = split, int(count), seed
        self.transform = data.preprocess if transform is None else transform
        self.transform_name = getattr(self.transform, "__name__", None) or repr(self.transform)

        images, _ = data.load_split(split)
        if self.count > len(images):
            raise CalibrationError(
                f"count={self.count} asks for more images than the {split!r} split holds ({len(images)}). "
                f"Use count <= {len(images)}, or another split.",
                expected=f"count <= {len(images)}",
                found=self.count,
            )
        if seed is None:
            self.indices = np.arange(self.count)
        else:
            self.indices = np.sort(np.random.default_rng(seed).choice(len(images), self.count, replace=False))
        raw = images[self.indices]
        try:
            samples = self.transform(raw)
        except Exception as exc:
            exc.add_note(
                f"Raised by transform={self.transform_name} applied to {self.count} raw {split!r} images "
                f"(uint8, shape {_fmt_shape(raw.shape)})."
            )
            raise
        if hasattr(samples, "__len__") and len(samples) != self.count:
            raise CalibrationError(
                f"transform={self.transform_name} returned {len(samples)} samples for {self.count} images; "
                "expected one sample per image (first axis = samples).",
                expected=self.count,
                found=len(samples),
            )
        try:
            super().__init__(samples, model, batch_size=batch_size)
        except CalibrationError as exc:
            if exc.sample is None:
                raise
            raise CalibrationError(
                f"{exc} These samples are the output of transform={self.transform_name} on {self.count} "
                f"raw {split!r} images: fix the transform itself rather than converting its output, so "
                "that calibration sees exactly what production feeds the model (course_lib.data.preprocess "
                "is the production preprocessing: uint8 (n, 28, 28) -> float32 (n, 1, 32, 32)).",
                sample=exc.sample,
                expected=exc.expected,
                found=exc.found,
            ) from None

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
    import onnxruntime as ort

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
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    values = dict(zip(computed, session.run(computed, feed), strict=True)) if computed else {}
    return {t: np.asarray(feed[t]) if t in inputs else values[t] for t in tensors}


def clipped_fraction(values: np.ndarray, low: float, high: float) -> float:
    """The fraction of `values` outside [low, high]: what a quantizer with that range saturates."""
    v = np.asarray(values)
    return float(((v < low) | (v > high)).mean()) if v.size else 0.0


def quantized_ranges(qdq_model: str | os.PathLike) -> dict[str, tuple[float, float]]:
    """The float values each per-tensor QuantizeLinear of a QDQ model stores without clipping:
    {tensor: (low, high)}.

    low = (qmin - zero_point - 0.5) * scale and high = (qmax - zero_point + 0.5) * scale, for
    uint8 or int8: a value inside rounds to a level within its half step; a value outside is
    stored as the end level, with a larger error: it saturates. (The half step matters: the zero
    point is rounded to an integer, so the calibrated minimum itself may sit a fraction of a step
    outside the levels, and on images that minimum, the background, is most of the pixels.)
    """
    from onnx import numpy_helper

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
        dtype = zero.dtype if zero is not None else np.dtype(np.uint8)
        info = np.iinfo(dtype)
        z = int(zero.reshape(-1)[0]) if zero is not None else 0
        s = float(scale.reshape(-1)[0])
        ranges[node.input[0]] = ((info.min - z - 0.5) * s, (info.max - z + 0.5) * s)
    return ranges


def saturation(ranges: dict[str, tuple[float, float]], values: dict[str, np.ndarray]) -> dict[str, float]:
    """For each tensor in both: the fraction of its real `values` outside its quantized range."""
    return {name: clipped_fraction(values[name], *ranges[name]) for name in ranges if name in values}
