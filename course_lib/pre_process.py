"""`quant_pre_process` looked at step by step, and a model it cannot pre-process as it stands.

ONNX Runtime's `quant_pre_process` runs three steps, each with a flag that turns it off:
symbolic shape inference (`skip_symbolic_shape`), the basic graph optimizations
(`skip_optimization`) and ONNX's own shape inference (`skip_onnx_shape`). Its symbolic step
imports PyTorch when PyTorch is installed (through `onnxruntime.tools`), so lessons call it in a
fresh process (`measure.peak_memory_of`); the functions here are module-level so that such a
process can run them.

    graph_summary       nodes, op counts and tensors with a known shape, for one file
    tensors_of          the output tensors of the nodes of some op types, in graph order
    pre_process_steps   quant_pre_process once per set of flags, in one process: what each step adds
    pre_process_tries   the same, but each failure is kept as its message instead of raised
    contrib_op_model    a small model with an op symbolic shape inference does not know
    quiet_quantizer_hints  drop the quantizer's advice lines ("run pre-processing ...") from the log
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def graph_summary(path: str | Path) -> dict[str, Any]:
    """{"nodes": n, "ops": {op type: count}, "shapes": tensors with a known shape (value_info)}."""
    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    ops: dict[str, int] = {}
    for node in graph.node:
        ops[node.op_type] = ops.get(node.op_type, 0) + 1
    return {"nodes": len(graph.node), "ops": dict(sorted(ops.items())), "shapes": len(graph.value_info)}


def tensors_of(path: str | Path, op_types: tuple[str, ...]) -> list[str]:
    """The first output of every node whose op type is in `op_types`, in graph order."""
    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    return [node.output[0] for node in graph.node if node.op_type in op_types]


def pre_process_steps(
    model: str | Path, folder: str | Path, steps: Mapping[str, Mapping[str, bool]]
) -> dict[str, Path]:
    """Run `quant_pre_process(model, ...)` once per entry of `steps` ({label: its skip_* flags}),
    writing `<folder>/<model stem>.step<i>.onnx`; return {label: path}, in order."""
    from onnxruntime.quantization.shape_inference import quant_pre_process

    model, folder = Path(model), Path(folder)
    written = {}
    for i, (label, flags) in enumerate(steps.items(), start=1):
        unknown = set(flags) - {"skip_symbolic_shape", "skip_optimization", "skip_onnx_shape"}
        if unknown:
            raise ValueError(
                f"Step {label!r} has flags {sorted(unknown)} that quant_pre_process does not take; "
                "use skip_symbolic_shape, skip_optimization and skip_onnx_shape."
            )
        out = folder / f"{model.stem}.step{i}.onnx"
        quant_pre_process(str(model), str(out), **flags)
        written[label] = out
    return written


def pre_process_tries(
    model: str | Path, folder: str | Path, steps: Mapping[str, Mapping[str, bool]]
) -> dict[str, str]:
    """Like `pre_process_steps`, but never raises: {label: "written <file name>" or the error,
    as "<exception type>: <message>"}, so that one fresh process can show a failure and its fix.

    It runs inside `folder`: when symbolic shape inference fails, ONNX Runtime saves what it got
    as `sym_shape_infer_temp.onnx` in the working directory, and that file belongs with the rest."""
    from contextlib import chdir

    from onnxruntime.quantization.shape_inference import quant_pre_process

    model, folder = Path(model).resolve(), Path(folder).resolve()
    outcome = {}
    with chdir(folder):
        for i, (label, flags) in enumerate(steps.items(), start=1):
            out = folder / f"{model.stem}.try{i}.onnx"
            try:
                quant_pre_process(str(model), str(out), **flags)
                outcome[label] = f"written {out.name}"
            except Exception as err:  # noqa: BLE001 - the lesson shows whatever quant_pre_process raised
                outcome[label] = f"{type(err).__name__}: {err}"
    return outcome


def contrib_op_model(path: str | Path, seed: int = 0) -> Path:
    """Write a two-node model: `com.microsoft::Inverse` (the op PyTorch's `torch.linalg.inv`
    exports to through `onnxruntime.tools.pytorch_export_contrib_ops`), then a MatMul by a 4x8
    weight. Input "x" (N, 4, 4), output "y" (N, 4, 8). ONNX Runtime runs it; its symbolic shape
    inference does not know the op, and ONNX has no schema for it, so the shape of its output
    stays unknown."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    weight = np.random.default_rng(seed).standard_normal((4, 8)).astype(np.float32)
    nodes = [
        helper.make_node("Inverse", ["x"], ["x_inverse"], domain="com.microsoft", name="inverse"),
        helper.make_node("MatMul", ["x_inverse", "w"], ["y"], name="matmul"),
    ]
    graph = helper.make_graph(
        nodes,
        "contrib_op",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4, 8])],
        [numpy_helper.from_array(weight, "w")],
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    model = helper.make_model(graph, opset_imports=opsets)
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return Path(path)


class _QuietHints(logging.Filter):
    """Drops the log records whose message contains one of `phrases`."""

    def __init__(self) -> None:
        super().__init__()
        self.phrases: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not any(phrase in message for phrase in self.phrases)


def quiet_quantizer_hints(*phrases: str) -> tuple[str, ...]:
    """Drop the root logger's lines that contain any of `phrases` (default: "pre-process", the
    quantizer's "Please consider to run pre-processing before quantization"); return every phrase
    now dropped.

    ONNX Runtime's quantizer logs its advice through the root logger, once per model. A lesson that
    quantizes un-pre-processed graphs on purpose silences that one advice and nothing else:
    warnings and errors with other words still show. Calling it again adds phrases to the same
    filter, never a second filter.
    """
    if not all(isinstance(p, str) and p for p in phrases):
        raise ValueError(f"quiet_quantizer_hints expects non-empty strings; got {phrases!r}.")
    root = logging.getLogger()
    quiet = next((f for f in root.filters if type(f).__name__ == _QuietHints.__name__), None)
    if quiet is None:
        quiet = _QuietHints()
        root.addFilter(quiet)
    quiet.phrases.update(phrases or ("pre-process",))
    return tuple(sorted(quiet.phrases))
