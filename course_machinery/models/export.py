"""Export to ONNX, the check against PyTorch, and what meta.json records of every export.

- `export_onnx`: a demo model through `torch.onnx.export`, with its preprocessing and class names
  in the file's metadata_props (`onnx_metadata` reads them back).
- `onnx_parity`: how far ONNX Runtime's outputs are from PyTorch's, for any of the course's models.
- `export_record`: the record of one ONNX file (name, SHA-256, size, opset, exporter, parity) that
  `store.check_onnx` verifies before the file is used again; the demo models, the text encoder
  and the NanoGPT all keep theirs in this form.
- `ensure_export`: a demo model's verified export, redone when missing or changed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np
import torch
from torch import nn

from course_lib import data as _data
from course_lib.files import atomic_write, sha256_file
from course_lib.names import RESNET18

from .registry import TrainedModel, spec
from .store import ONNX_EXPORTER, ONNX_OPSET, CacheProblem, check_onnx, meta_path, onnx_path, write_meta

# The largest |ONNX Runtime - PyTorch| an fp32 export may show on real inputs.
PARITY_ATOL = 1e-4


def export_record(
    path: Path,
    parity_max_abs_diff: float,
    parity_samples: int,
    *,
    opset: int = ONNX_OPSET,
    exporter: str = ONNX_EXPORTER,
) -> dict:
    """What meta.json records of an ONNX export, so a later run can verify the file before use:
    its name, SHA-256 and size, the opset and exporter, and how far it was from PyTorch."""
    return {
        "file": path.name,
        "sha256": sha256_file(path),
        "bytes": path.stat().st_size,
        "opset": opset,
        "exporter": exporter,
        "parity_max_abs_diff": parity_max_abs_diff,
        "parity_samples": parity_samples,
    }


def onnx_parity(module: nn.Module, path: str | Path, inputs: np.ndarray | Mapping[str, np.ndarray]) -> float:
    """Max |ONNX Runtime - PyTorch| over the first output, on the same inputs.

    `inputs` is one array (a model with one input) or the feed dict, in the order the module's
    `forward` takes its arguments.
    """
    from course_lib.measure import make_session

    session = make_session(path)
    feed = dict(inputs) if isinstance(inputs, Mapping) else {session.get_inputs()[0].name: inputs}
    ort_out = session.run(None, feed)[0]
    with torch.inference_mode():
        torch_out = module.eval()(*(torch.from_numpy(np.asarray(v)) for v in feed.values())).numpy()
    return float(np.abs(ort_out - torch_out).max())


def onnx_metadata(path: str | Path) -> dict[str, str]:
    """The metadata_props of an ONNX file as a dict (preprocessing, class names, …)."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    return {p.key: p.value for p in model.metadata_props}


def _metadata_props(trained: TrainedModel) -> dict[str, str]:
    entry = spec(trained.name)
    props = {
        "course.model": trained.name,
        "course.description": entry.description,
        "class_names": json.dumps(list(entry.class_names)),
        "input_name": entry.input_name,
        "input_shape": json.dumps(["batch", *entry.example_shape]),
        "weights_sha256": trained.meta["weights_sha256"],
        "test_accuracy": f"{trained.test_accuracy:.4f}",
    }
    prep = trained.preprocessing
    if prep is not None:
        props.update(
            {
                "preprocessing": json.dumps(
                    {
                        **prep.to_dict(),
                        "input": "uint8 28x28 grayscale, zero-padded to size x size",
                        "formula": "(pixel / 255 - mean) / std",
                    }
                ),
                "input_size": str(prep.size),
                "normalization_mean": repr(prep.mean),
                "normalization_std": repr(prep.std),
            }
        )
    else:
        props["preprocessing"] = json.dumps(
            {"input": "raw (x, y) coordinates as float32", "formula": "identity"}
        )
    return props


def _example_input(name: str, n: int = 2) -> torch.Tensor:
    entry = spec(name)
    return torch.zeros((n, *entry.example_shape), dtype=torch.float32)


def export_onnx(
    trained: TrainedModel,
    path: Path | None = None,
    exporter: str = ONNX_EXPORTER,
    keep_batchnorm: bool = False,
) -> Path:
    """Export with `torch.onnx.export`: named input/output, dynamic batch, one self-contained file.

    The file carries the preprocessing and class names in metadata_props and is checked with
    `onnx.checker` before it replaces any earlier export. `exporter` is "dynamo" (the course's
    default) or "torchscript" (the older exporter); with "torchscript", `keep_batchnorm=True`
    turns off constant folding so that BatchNormalization nodes stay in the graph, as many
    exports found in the wild have them (lesson 03 shows `quant_pre_process` fusing them).
    """
    if exporter not in ("dynamo", "torchscript"):
        raise ValueError(f"exporter must be 'dynamo' or 'torchscript'; got {exporter!r}.")
    if keep_batchnorm and exporter != "torchscript":
        raise ValueError(
            "keep_batchnorm=True needs exporter='torchscript' (the dynamo exporter always folds)."
        )
    import onnx

    entry = spec(trained.name)
    path = Path(path or onnx_path(trained.name))

    def write(tmp: Path) -> None:
        kwargs: dict = {
            "input_names": [entry.input_name],
            "output_names": [entry.output_name],
            "opset_version": ONNX_OPSET,
        }
        if exporter == "dynamo":
            kwargs.update(
                dynamo=True,
                external_data=False,
                verbose=False,
                dynamic_shapes=({0: torch.export.Dim("batch")},),
            )
        else:
            kwargs.update(
                dynamo=False,
                dynamic_axes={entry.input_name: {0: "batch"}, entry.output_name: {0: "batch"}},
            )
            if keep_batchnorm:
                kwargs.update(do_constant_folding=False, training=torch.onnx.TrainingMode.PRESERVE)
        with torch.no_grad():
            torch.onnx.export(trained.module.eval(), (_example_input(trained.name),), str(tmp), **kwargs)
        model = onnx.load(str(tmp))
        onnx.helper.set_model_props(model, _metadata_props(trained))
        model.producer_name = "onnx-quant-course"
        onnx.checker.check_model(model, full_check=True)
        onnx.save(model, str(tmp))

    atomic_write(path, write)
    return path


def parity_inputs(name: str, n: int = 256) -> np.ndarray:
    """Real test inputs for a parity check: preprocessed test images, or two-moons test points."""
    if name == RESNET18:
        images, _ = _data.load_split("test")
        return _data.preprocess(images[:n]).astype(np.float32)
    return _data.load_moons().x_test[:n].astype(np.float32)


def ensure_export(trained: TrainedModel, log: Callable[[str], None] = print) -> TrainedModel:
    """`trained` with a verified ONNX export: redone (and parity-checked against PyTorch) when the
    file is missing, does not match the hash recorded with the weights, or was made by another
    exporter; the export's record is then written into the cache entry's metadata."""
    name = trained.name
    path = onnx_path(name)
    recorded = trained.meta.get("onnx", {})
    try:
        check_onnx(path, recorded, exporter=ONNX_EXPORTER, opset=ONNX_OPSET)
    except CacheProblem as exc:
        if recorded or path.exists():
            log(f"The cached {name}'s ONNX file cannot be used ({exc}); exporting again.")
    else:
        return trained
    export_onnx(trained, path)
    trained.exported = True
    inputs = parity_inputs(name)
    diff = onnx_parity(trained.module, path, inputs)
    if diff > PARITY_ATOL:
        raise RuntimeError(
            f"The ONNX export of {name} disagrees with PyTorch: expected max |diff| <= {PARITY_ATOL:.0e}, "
            f"found {diff:.2e}. Report it with `python -m course_lib doctor`'s output."
        )
    trained.meta["onnx"] = export_record(path, diff, len(inputs))
    write_meta(meta_path(name), trained.meta)
    return trained
