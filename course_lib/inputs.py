"""The one check for arrays fed to an ONNX model's input, in the spirit of scikit-learn's `check_array`.

Calibration sets (`calibration.ArrayReader`), an audit's samples (`audit.read_samples`) and the rows
a classifier scores (`measure.logits`) all feed numpy arrays to a model's declared inputs, and a wrong
feed rarely fails loudly: float64 or raw uint8 pixels are cast or refused deep inside ONNX Runtime,
a missing channel axis fails on the 50th batch, one NaN makes a calibration range meaningless. So
each array is checked here first, against what the model declares, and every refusal is one
`InputError` whose message says what was expected, what was found and the fix.

    InputError    bad input: the message names expected, found and the fix (a ValueError)
    InputSpec     one declared input: name, dtype, shape (symbolic dims by name); read from an ONNX
                  graph input (`InputSpec.of`) or an open session's input (`InputSpec.of_session_input`)
    check_array   an array against an InputSpec: an array of numbers, its dtype, rank and fixed
                  dimensions, and (optionally) finite values; returns it as a numpy array
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import helper

__all__ = ["Dim", "InputError", "InputSpec", "check_array"]

Dim = int | str | None  # a fixed size, a symbolic name (dim_param, free), or unknown (free)


class InputError(ValueError):
    """Bad input: the message says what was expected, what was found and how to fix it.

    `expected` and `found` hold the same for code that wants them; `sample` is the index of the
    first bad sample (row) when the problem is in the data, else None.
    """

    def __init__(self, message: str, *, expected: Any = None, found: Any = None, sample: int | None = None):
        super().__init__(message)
        self.expected = expected
        self.found = found
        self.sample = sample


def _fmt_shape(shape: Sequence[Dim]) -> str:
    """(N, 1, 32, 32) style: free dims by their name, unknown ones as '?'."""
    parts = ["?" if d is None else str(d) for d in shape]
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


@dataclass(frozen=True)
class InputSpec:
    """One model input as the model declares it; every array fed to it must match.

    `shape` has the batch axis first; each dim is a size (int, fixed), a symbolic name (str, e.g.
    "N" or "sequence": free) or None (unknown: free). `shape` is None when the model declares no
    rank, `dtype` None when it declares a type numpy has no dtype for (neither is then checked).
    """

    name: str
    dtype: np.dtype | None
    shape: tuple[Dim, ...] | None

    @property
    def sample_shape(self) -> tuple[Dim, ...] | None:
        """One sample's shape: the declared shape without its batch axis."""
        return None if self.shape is None else self.shape[1:]

    @property
    def fixed_batch(self) -> int | None:
        """The batch size the model was exported with, or None when the batch axis is free."""
        first = self.shape[0] if self.shape else None
        return first if isinstance(first, int) else None

    def describe(self) -> str:
        """'(N, 1, 32, 32), i.e. samples of shape (1, 32, 32)', as the error messages put it."""
        if self.shape is None:
            return "a tensor of unknown shape"
        return f"{_fmt_shape(self.shape)}, i.e. samples of shape {_fmt_shape(self.sample_shape)}"

    @classmethod
    def of(cls, value: onnx.ValueInfoProto) -> InputSpec:
        """The spec an ONNX graph input declares; InputError when it is not a tensor of numbers."""
        kind = value.type.WhichOneof("value")
        if kind != "tensor_type":
            raise InputError(
                f"Expected a tensor input; the model's input {value.name!r} is a {kind or 'value of unknown type'}. "
                "Arrays can feed tensor inputs only: export the model with tensor inputs, or write the feed by hand.",
                expected="tensor",
                found=kind,
            )
        elem = value.type.tensor_type.elem_type
        type_name = (
            onnx.TensorProto.DataType.Name(elem) if elem in onnx.TensorProto.DataType.values() else str(elem)
        )
        try:
            dtype = np.dtype(helper.tensor_dtype_to_np_dtype(elem))
        except Exception:
            dtype = None
        if dtype is None or dtype.kind not in "biuf":
            raise InputError(
                f"Expected an input of numbers; the model's input {value.name!r} has ONNX element type "
                f"{type_name}, which no numpy array of numbers holds. Export the model with float32 or "
                "int64 inputs.",
                expected="a numeric dtype",
                found=type_name,
            )
        tensor = value.type.tensor_type
        if not tensor.HasField("shape"):
            return cls(value.name, dtype, None)
        dims: list[Dim] = []
        for d in tensor.shape.dim:
            if d.HasField("dim_value") and d.dim_value > 0:
                dims.append(int(d.dim_value))
            else:
                dims.append(d.dim_param or None)
        return cls(value.name, dtype, tuple(dims))

    @classmethod
    def of_session_input(cls, arg: Any) -> InputSpec:
        """The spec of an open session's input (ONNX Runtime's NodeArg, or a runner's look-alike with
        `name`, `type` such as "tensor(float)" and `shape`); an unknown type leaves dtype None."""
        dtype = None
        kind = str(getattr(arg, "type", ""))
        if kind.startswith("tensor(") and kind.endswith(")"):
            elem = getattr(onnx.TensorProto, kind[len("tensor(") : -1].upper(), None)
            try:
                dtype = np.dtype(helper.tensor_dtype_to_np_dtype(elem)) if isinstance(elem, int) else None
            except Exception:
                dtype = None
        shape = getattr(arg, "shape", None)
        dims = (
            None
            if shape is None
            else tuple(d if isinstance(d, int | str) and d != 0 else None for d in shape)
        )
        return cls(arg.name, dtype, dims)


def _input_of(spec: InputSpec, model: str | None) -> str:
    return f"the model's input {spec.name!r}" if model is None else f"input {spec.name!r} of {model}"


def check_array(
    array: Any,
    spec: InputSpec,
    *,
    what: str = "The array",
    batched: bool = True,
    name: str = "x",
    listed: bool = False,
    finite: bool = False,
    model: str | None = None,
    sample: int | None = None,
) -> np.ndarray:
    """Check `array` against `spec`; return it as a numpy array. Raises InputError naming what was
    expected, what was found and the fix.

    In order: an array of numbers (a list or a tensor converts; a dict, a string or a ragged list
    does not), the declared dtype (no silent cast: a cast can hide missing preprocessing), the rank,
    every fixed dimension past the batch axis, and with `finite` no NaN or infinity.

    `batched`: `array` holds samples along axis 0 (a feed, a calibration set); else it is one sample
    without that axis. `what` begins each message ("Calibration sample 3 of 200"); `name` is the
    variable the fix is written for, and `listed` says it is a list of samples rather than one
    array. `model` names the model in the messages (default "the model's input"); `sample` is the
    index the error carries for a single sample.
    """
    found = _as_array(array, spec, what, name, model, sample)
    target = _input_of(spec, model)
    if spec.dtype is not None and found.dtype != spec.dtype:
        raise InputError(
            f"{what} has dtype {found.dtype}; {target} expects {spec.dtype}. Convert with "
            f"{_astype(spec.dtype, name, listed)}.{_raw_pixels(found.dtype, spec.dtype)}",
            expected=spec.dtype,
            found=found.dtype,
            sample=sample,
        )
    dims = spec.shape if batched else spec.sample_shape
    if dims is not None:
        _check_shape(
            found,
            spec,
            dims,
            what=what,
            target=target,
            batched=batched,
            name=name,
            listed=listed,
            sample=sample,
        )
    if finite and np.issubdtype(found.dtype, np.inexact):
        _check_finite(found, spec, what=what, target=target, batched=batched, sample=sample)
    return found


def _as_array(
    array: Any, spec: InputSpec, what: str, name: str, model: str | None, sample: int | None
) -> np.ndarray:
    """`array` as a numpy array of numbers, or an InputError saying what it was instead."""
    wanted = f"an array of {spec.dtype if spec.dtype is not None else 'numbers'} of shape {_fmt_shape(spec.shape or ())}"
    converted = None
    if not isinstance(array, str | bytes | Mapping) and array is not None:
        try:
            converted = np.asarray(array)
        except Exception:  # a ragged list, an object numpy cannot read
            converted = None
    if converted is None or converted.dtype.kind not in "biuf":
        kind = type(array).__name__
        if isinstance(array, np.ndarray):
            kind = f"numpy array of dtype {array.dtype}"
        elif converted is not None:
            kind = f"{kind} that numpy reads as dtype {converted.dtype}"
        raise InputError(
            f"{what} is a {kind}, not an array of numbers; {_input_of(spec, model)} expects {wanted}. "
            f"Pass a numpy array, e.g. np.asarray({name}, dtype=np.{spec.dtype.name if spec.dtype is not None else 'float32'}) "
            "after the production preprocessing.",
            expected=wanted,
            found=type(array).__name__,
            sample=sample,
        )
    return converted


def _astype(dtype: np.dtype, name: str, listed: bool) -> str:
    target = f"np.{dtype.name}" if hasattr(np, dtype.name) else f"np.dtype({dtype.name!r})"
    return f"[np.asarray(s, dtype={target}) for s in {name}]" if listed else f"{name}.astype({target})"


def _raw_pixels(found: np.dtype, expected: np.dtype) -> str:
    if np.issubdtype(found, np.integer) and np.issubdtype(expected, np.floating):
        return (
            " If these are raw pixels, apply the production preprocessing (scaling and normalisation) "
            "instead of only casting."
        )
    return ""


def _check_shape(
    found: np.ndarray,
    spec: InputSpec,
    dims: tuple[Dim, ...],
    *,
    what: str,
    target: str,
    batched: bool,
    name: str,
    listed: bool,
    sample: int | None,
) -> None:
    shape = found.shape
    if len(shape) != len(dims):
        batch = "" if batched else f", so a batch of it has rank {len(shape) + 1}"
        raise InputError(
            f"{what} has shape {_fmt_shape(shape)} (rank {len(shape)}){batch}; {target} expects rank "
            f"{len(spec.shape)}: {spec.describe()}. {_rank_hint(shape, dims, batched, name, listed)}",
            expected=spec.shape,
            found=shape,
            sample=sample,
        )
    first = 1 if batched else 0  # the batch axis may be anything here: batches are cut by the caller
    for axis in range(first, len(dims)):
        if isinstance(dims[axis], int) and shape[axis] != dims[axis]:
            where = f"axis {axis}" if batched else f"axis {axis} of the sample"
            raise InputError(
                f"{what} has shape {_fmt_shape(shape)}; {target} expects {spec.describe()} ({where} is "
                f"{shape[axis]}, not {dims[axis]}). Resize, pad or reorder the data the way production "
                f"does so that each sample has shape {_fmt_shape(spec.sample_shape)}.",
                expected=spec.shape,
                found=shape,
                sample=sample,
            )


def _rank_hint(shape: tuple[int, ...], dims: tuple[Dim, ...], batched: bool, name: str, listed: bool) -> str:
    """The one-axis fix when there is one; else the layout restated."""

    def fits(candidate: tuple[int, ...]) -> bool:
        return len(candidate) == len(dims) and all(
            not isinstance(d, int) or s == d
            for i, (s, d) in enumerate(zip(candidate, dims, strict=True))
            if i or not batched
        )

    offset = 1 if not batched and not listed else 0  # one sample of a stacked array: the fix is on the array
    if len(shape) + 1 == len(dims):
        for k in range(len(dims)):
            if fits(shape[:k] + (1,) + shape[k:]):
                if batched and k == 0:
                    return (
                        f"This looks like one sample without its batch axis: pass np.expand_dims({name}, 0)."
                    )
                if listed:
                    return f"An axis is missing: add it with [np.expand_dims(s, {k}) for s in {name}]."
                return f"An axis is missing: add it with np.expand_dims({name}, {k + offset})."
    if len(shape) == len(dims) + 1:
        for k in range(len(shape)):
            if shape[k] == 1 and fits(shape[:k] + shape[k + 1 :]):
                if k == 0 and listed:
                    return (
                        f"Each sample seems to carry its own batch axis: pass np.concatenate({name}) "
                        f"or [s[0] for s in {name}]."
                    )
                if listed:
                    return f"There is an extra axis of size 1: drop it with [np.squeeze(s, {k}) for s in {name}]."
                return f"There is an extra axis of size 1: drop it with np.squeeze({name}, {k + offset})."
    sample_shape = _fmt_shape(dims[1:] if batched else dims)
    if batched or not listed:
        return f"The first axis of {name} is the sample axis; each sample's shape is {sample_shape}."
    return f"Each sample must have shape {sample_shape}."


def _check_finite(
    found: np.ndarray, spec: InputSpec, *, what: str, target: str, batched: bool, sample: int | None
) -> None:
    rows = found.reshape(len(found), -1) if batched and found.ndim else found.reshape(1, -1)
    good = np.isfinite(rows).all(axis=1)
    if good.all():
        return
    first = int(np.argmin(good))
    bad = found[first] if batched and found.ndim else found
    nan, inf = int(np.isnan(bad).sum()), int(np.isinf(bad).sum())
    kinds = " and ".join(word for word, count in (("NaN", nan), ("inf", inf)) if count)
    at = tuple(int(j) for j in np.argwhere(~np.isfinite(bad))[0])
    if batched and found.ndim:
        where = (
            f"holds NaN or inf in {int((~good).sum())} of its {len(found)} samples; the first is sample "
            f"{first}, with {kinds} in {nan + inf} of its {bad.size} values (the first at index {at})"
        )
    else:
        where = f"contains {kinds} ({nan + inf} of its {bad.size} values, the first at index {at})"
    raise InputError(
        f"{what} {where}; {target} expects finite values. Fix the source of the bad values or drop those "
        "samples: one NaN makes a calibration range meaningless and a comparison with fp32 undefined.",
        expected="finite values",
        found=kinds,
        sample=first if batched and found.ndim else sample,
    )
