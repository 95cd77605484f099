"""What an audit reads: the model, its sample inputs and labels, checked before anything runs.

Every check raises `AuditError` (the course's one `inputs.InputError`), whose message says what was
expected, what was found and what to do; the sample arrays go through the same check as calibration
sets and scored rows (`course_lib.inputs.check_array`, after scikit-learn's).
Then the samples are split, once and the same way every time, into a calibration part and a
disjoint evaluation part: a model is never judged on the samples it was calibrated on.

    AuditError      a bad model, bad samples or bad labels: expected, found, fix (= inputs.InputError)
    read_model      the ONNX file checked: readable, its external data present, an opset the quantizer takes
    read_samples    an .npz (or arrays) checked against the model's inputs: names, dtypes, shapes, rows
    read_labels     an .npy (or array) of class indices, one per sample
    split_samples   the calibration / evaluation split (`Split`), seeded
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from course_lib.inputs import InputError, InputSpec, check_array

# The fewest samples an audit takes: a calibration part and an evaluation part large enough for
# the acceptance rule to mean something (one disagreement in 80 is already 1.25 %).
MIN_SAMPLES = 100
MIN_CALIBRATION = 20
MAX_CALIBRATION = 200  # lesson 03b: ranges settle well before 200 samples; more only costs time
CALIBRATION_SHARE = 0.2
SPLIT_SEED = 0
# ONNX Runtime's quantizer upgrades opsets below 10 itself, through ONNX's version converter, which
# fails on many old files; below 7 it has no converter at all. Above the installed onnx's newest
# opset, nothing here can read the file's operators.
MIN_OPSET = 10

# Bad input to an audit is the course's one input error; the name stays for the code that catches it
# (the `audit` command does).
AuditError = InputError


# --------------------------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ModelInfo:
    """The checked model: path, inputs, outputs (name -> rank), opset, and whether its weights
    live in external data files."""

    path: Path
    inputs: tuple[InputSpec, ...]
    outputs: dict[str, int | None]
    float_outputs: tuple[str, ...]
    opset: int
    external_data: bool

    @property
    def input_names(self) -> list[str]:
        return [i.name for i in self.inputs]

    @property
    def fixed_batch(self) -> int | None:
        """The batch size every input was exported with, or None when the batch axis is free."""
        fixed = {i.shape[0] for i in self.inputs if i.shape and isinstance(i.shape[0], int)}
        return fixed.pop() if len(fixed) == 1 else None


def read_model(path: str | os.PathLike) -> ModelInfo:
    """Check that `path` is an ONNX model an audit can quantize, and describe it."""
    path = Path(path)
    if not path.is_file():
        raise AuditError(
            f"Expected the path of an ONNX model (.onnx); found nothing at {path}. "
            "Check the path, or export the model first (torch.onnx.export, skl2onnx, ...).",
            expected="an .onnx file",
            found=str(path),
        )
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # DecodeError and friends: not a protobuf ONNX file
        raise AuditError(
            f"Expected an ONNX model in {path.name}; found a file ONNX cannot read "
            f"({type(exc).__name__}: {str(exc)[:120]}). Pass the .onnx file itself (not a PyTorch "
            "checkpoint, a zip or the external-data file).",
            expected="an ONNX model",
            found=f"{path.stat().st_size:,} bytes that are not one",
        ) from exc
    if not model.graph.node:
        raise AuditError(
            f"Expected an ONNX model with a graph; {path.name} has no nodes. Export the model again.",
            expected="nodes",
            found="an empty graph",
        )
    missing = sorted(
        {
            entry.value
            for tensor in model.graph.initializer
            if tensor.data_location == onnx.TensorProto.EXTERNAL
            for entry in tensor.external_data
            if entry.key == "location" and not (path.parent / entry.value).is_file()
        }
    )
    if missing:
        raise AuditError(
            f"{path.name} keeps its weights in external data files; expected them beside it, in "
            f"{path.parent}, but {', '.join(missing)} is not there. Copy the data file(s) next to the model.",
            expected=missing,
            found="missing",
        )
    external = any(t.data_location == onnx.TensorProto.EXTERNAL for t in model.graph.initializer)
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
    newest = onnx.defs.onnx_opset_version()
    if opset is None or opset < MIN_OPSET or opset > newest:
        found = "no ai.onnx opset" if opset is None else f"opset {opset}"
        fix = (
            f"Export again with opset_version={min(17, newest)} (torch.onnx.export), or convert: "
            f"onnx.save(onnx.version_converter.convert_version(onnx.load(path), {min(17, newest)}), new_path)."
            if opset is None or opset < MIN_OPSET
            else f"Export with an older opset (e.g. {min(17, newest)}) or upgrade onnx and onnxruntime."
        )
        raise AuditError(
            f"ONNX Runtime's quantizer takes ai.onnx opsets {MIN_OPSET} to {newest} here; {path.name} "
            f"declares {found}. {fix}",
            expected=(MIN_OPSET, newest),
            found=opset,
        )
    initializers = {t.name for t in model.graph.initializer}
    inputs = [InputSpec.of(value) for value in model.graph.input if value.name not in initializers]
    outputs = {}
    float_outputs = []
    for value in model.graph.output:
        if value.type.WhichOneof("value") != "tensor_type":
            outputs[value.name] = None
            continue
        outputs[value.name] = len(value.type.tensor_type.shape.dim)
        if value.type.tensor_type.elem_type in (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16):
            float_outputs.append(value.name)
    if not float_outputs:
        raise AuditError(
            f"Expected at least one float output to compare with fp32; {path.name}'s outputs are "
            f"{', '.join(outputs)} and none is a float tensor (a classifier exported with ZipMap "
            "returns a sequence of maps). Export the scores as a tensor (skl2onnx: options={'zipmap': False}).",
            expected="a float32 output",
            found=list(outputs),
        )
    return ModelInfo(path.resolve(), tuple(inputs), outputs, tuple(float_outputs), opset, external)


# --------------------------------------------------------------------------------------------
# The samples
# --------------------------------------------------------------------------------------------
def _np_load(path: Path, what: str, expected: str, holding: str, fix: str) -> Any:
    """np.load without pickles; an AuditError naming what was expected, what was found and the fix."""
    if not path.is_file():
        raise AuditError(
            f"Expected {what} as {expected} ({holding}); found nothing at {path}. {fix}",
            expected=expected,
            found=str(path),
        )
    try:
        return np.load(path, allow_pickle=False)
    except Exception as exc:
        raise AuditError(
            f"Expected {what} as {expected} ({holding}); could not read {path.name} ({type(exc).__name__}: "
            f"{str(exc)[:120]}). {fix}",
            expected=expected,
            found=path.name,
        ) from exc


def _load_arrays(inputs: Any) -> tuple[dict[str, np.ndarray], str]:
    """{name: array} and where they came from, from a path (.npz or .npy), an array or a mapping."""
    if isinstance(inputs, str | os.PathLike):
        path = Path(inputs)
        loaded = _np_load(
            path,
            "the sample inputs",
            "an .npz file",
            "one array per model input",
            "Save them with np.savez(path, **{input_name: array}).",
        )
        if isinstance(loaded, np.ndarray):  # a plain .npy: one array
            return {"": loaded}, path.name
        with loaded:
            return {name: loaded[name] for name in loaded.files}, path.name
    if isinstance(inputs, Mapping):
        return {str(k): np.asarray(v) for k, v in inputs.items()}, "the arrays given"
    if isinstance(inputs, np.ndarray):
        return {"": inputs}, "the array given"
    raise AuditError(
        f"Expected the sample inputs as an .npz path, a dict {{input name: array}} or one array; got "
        f"{type(inputs).__name__}. Pass e.g. inputs='samples.npz'.",
        expected="path, dict or array",
        found=type(inputs).__name__,
    )


def read_samples(inputs: Any, model: ModelInfo, *, minimum: int = MIN_SAMPLES) -> dict[str, np.ndarray]:
    """The sample arrays, checked against the model's inputs: one per input (by name; a single
    unnamed array is allowed for a one-input model), the dtype it declares, its rank and fixed
    dimensions, the same number of rows in each, finite values, and at least `minimum` rows."""
    arrays, source = _load_arrays(inputs)
    names = model.input_names
    if len(arrays) == 1 and len(names) == 1 and next(iter(arrays)) not in names:
        arrays = {names[0]: next(iter(arrays.values()))}  # one array for a one-input model
    if set(arrays) != set(names):
        missing, extra = sorted(set(names) - set(arrays)), sorted(set(arrays) - set(names))
        found = ", ".join(repr(n) if n else "one unnamed array" for n in arrays) or "nothing"
        raise AuditError(
            f"Expected one array per model input, named {', '.join(map(repr, names))}; {source} holds "
            f"{found}"
            + (f" (missing {', '.join(map(repr, missing))})" if missing else "")
            + (f" (not inputs of the model: {', '.join(map(repr, extra))})" if extra and any(extra) else "")
            + f". Save them as np.savez(path, {', '.join(f'{n}=...' for n in names)}).",
            expected=names,
            found=sorted(arrays),
        )
    rows = {}
    for spec in model.inputs:
        array = check_array(
            arrays[spec.name],
            spec,
            what=f"The array for {spec.name!r} (from {source})",
            name="array",
            finite=True,
        )
        rows[spec.name] = len(array) if array.ndim else 1
    if len(set(rows.values())) > 1:
        raise AuditError(
            f"Expected the same number of samples (rows) in every input; found {rows}. "
            "Save the inputs of the same samples, row i of each array belonging to sample i.",
            expected="equal row counts",
            found=rows,
        )
    count = next(iter(rows.values()))
    if count < minimum:
        raise AuditError(
            f"Expected at least {minimum} samples (at least {MIN_CALIBRATION} to calibrate and the rest "
            f"to evaluate on); found {count}. Save more representative inputs: a few hundred to a "
            "thousand production samples.",
            expected=minimum,
            found=count,
        )
    fixed = model.fixed_batch
    if fixed is not None and fixed != 1:
        raise AuditError(
            f"Expected a model whose batch axis is free (or 1); {model.path.name} was exported with a fixed "
            f"batch of {fixed}. Export it with a dynamic batch axis (torch.onnx.export(..., "
            "dynamic_axes={'input': {0: 'batch'}})).",
            expected="free batch axis",
            found=fixed,
        )
    return {name: np.ascontiguousarray(arrays[name]) for name in names}


def read_labels(labels: Any, count: int, model: ModelInfo, output: str) -> np.ndarray:
    """Class indices, one per sample (-1 for a sample without ground truth), for a model whose
    compared output is (N, classes)."""
    if isinstance(labels, str | os.PathLike):
        path = Path(labels)
        labels = _np_load(
            path,
            "the labels",
            "an .npy file",
            "one class index per sample",
            "Save them with np.save(path, labels).",
        )
        if not isinstance(labels, np.ndarray):  # an .npz
            raise AuditError(
                f"Expected one array of labels (.npy); {path.name} holds several (.npz). "
                "Save the labels alone with np.save(path, labels).",
                expected=".npy",
                found=".npz",
            )
    y = np.asarray(labels)
    if y.ndim != 1 or len(y) != count or not np.issubdtype(y.dtype, np.integer):
        raise AuditError(
            f"Expected {count} integer class indices, one per sample, shape ({count},); got an array of "
            f"shape {y.shape} and dtype {y.dtype.name}. Save the labels of the same samples, in the same "
            "order, as integers (one-hot labels: labels.argmax(1)).",
            expected=(count,),
            found=(y.shape, y.dtype.name),
        )
    if model.outputs.get(output) != 2:
        raise AuditError(
            f"Expected a classifier's scores of shape (N, classes) to compare with labels; the model's "
            f"output {output!r} has rank {model.outputs.get(output)}. Leave out the labels: outputs that are "
            "not class scores are compared with fp32 by cosine and relative error.",
            expected="rank 2",
            found=model.outputs.get(output),
        )
    return y.astype(np.int64)


# --------------------------------------------------------------------------------------------
# The split
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Split:
    """Row indices of the calibration and evaluation parts; disjoint, sorted, seeded."""

    calibration: np.ndarray
    evaluation: np.ndarray
    seed: int

    def describe(self) -> str:
        total = len(self.calibration) + len(self.evaluation)
        return (
            f"{total:,} samples: {len(self.calibration):,} calibrate the static variants, "
            f"{len(self.evaluation):,} evaluate every variant (a seeded random split, seed {self.seed}; "
            "no sample is in both)"
        )

    def to_dict(self) -> dict:
        return {
            "calibration": len(self.calibration),
            "evaluation": len(self.evaluation),
            "seed": self.seed,
            "description": self.describe(),
        }


def split_samples(count: int, *, seed: int = SPLIT_SEED) -> Split:
    """A fifth of the samples (at least 20, at most 200) to calibrate, the rest to evaluate.

    The same count and seed give the same split. Evaluating on calibration samples would flatter
    static quantization: its ranges were fitted to them (lesson 03)."""
    if count < MIN_SAMPLES:
        raise AuditError(
            f"Expected at least {MIN_SAMPLES} samples to split; found {count}. Save more samples.",
            expected=MIN_SAMPLES,
            found=count,
        )
    calibration = min(MAX_CALIBRATION, max(MIN_CALIBRATION, round(CALIBRATION_SHARE * count)))
    order = np.random.default_rng(seed).permutation(count)
    return Split(np.sort(order[:calibration]), np.sort(order[calibration:]), seed)


def rows(samples: Mapping[str, np.ndarray], index: np.ndarray) -> dict[str, np.ndarray]:
    """The same rows of every input."""
    return {name: np.ascontiguousarray(array[index]) for name, array in samples.items()}
