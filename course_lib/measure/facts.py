"""Model facts: what an ONNX file holds, read from the file itself without running it.

    model_facts    file size, initializer bytes by dtype, op counts, and which nodes run in INT8
    tensor_bytes   one initializer's dtype, element count and bytes, however it is stored

The op tables (INTEGER_OPS, QUANTIZATION_OPS, STRUCTURAL_OPS) say how each op type counts; the
kernels module reads the same QUANTIZATION_OPS when it looks at the graph a session runs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import onnx

from ..files import sha256_file

# Ops that run as integer kernels: the QOperator format (QLinear*), dynamic quantization
# (MatMulInteger, ConvInteger) and ONNX Runtime's contrib ops. Any op named QLinear* counts too.
INTEGER_OPS = frozenset(
    {
        "MatMulInteger",
        "ConvInteger",
        "QGemm",
        "QAttention",
        "QEmbedLayerNormalization",
        "DynamicQuantizeMatMul",
        "DynamicQuantizeLSTM",
        "MatMulIntegerToFloat",
        "MatMulNBits",
    }
)
# Ops that only convert between float and integer: the plumbing around quantized ops.
QUANTIZATION_OPS = frozenset({"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear"})
# Ops that only move or reshape data: not counted among the "float ops left".
STRUCTURAL_OPS = frozenset(
    {"Constant", "ConstantOfShape", "Flatten", "Identity", "Reshape", "Shape", "Size", "Squeeze", "Unsqueeze"}
)
# Element types stored more than one to a byte.
_SUB_BYTE_BITS = {
    getattr(onnx.TensorProto, name): bits
    for name, bits in (("INT4", 4), ("UINT4", 4), ("FLOAT4E2M1", 4), ("INT2", 2), ("UINT2", 2))
    if hasattr(onnx.TensorProto, name)
}


@dataclass
class ModelFacts:
    """What an ONNX file holds. Sizes in bytes; `initializer_bytes` maps dtype name -> bytes."""

    path: str
    file_bytes: int  # the .onnx file itself
    external_data_bytes: int  # files holding external initializer data, if any
    sha256: str
    initializer_bytes: dict[str, int]
    parameter_count: int  # elements in all initializers except int64 ones (shapes and axes)
    op_counts: dict[str, int]
    quant_format: str  # "float", "QDQ", "QOperator", "dynamic", "weight-only QDQ" or a "+" mix
    quantized_nodes: list[dict[str, str]]  # name, op_type and how: "integer kernel" or "QDQ"
    float_ops: dict[str, int]  # op type -> count of nodes still computing in float

    @property
    def quantized_count(self) -> int:
        return len(self.quantized_nodes)

    @property
    def float_op_count(self) -> int:
        return sum(self.float_ops.values())

    @property
    def total_initializer_bytes(self) -> int:
        return sum(self.initializer_bytes.values())

    def to_dict(self) -> dict:
        d = asdict(self)
        d.update(
            quantized_count=self.quantized_count,
            float_op_count=self.float_op_count,
            total_initializer_bytes=self.total_initializer_bytes,
        )
        return d


def _graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    """The graph and every subgraph inside it (If / Loop / Scan bodies), depth first."""
    yield graph
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from _graphs(attr.g)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for g in attr.graphs:
                    yield from _graphs(g)


def tensor_bytes(tensor: onnx.TensorProto) -> tuple[str, int, int]:
    """(dtype name, element count, bytes) of an initializer, whether its values are stored in
    raw_data, in the typed fields (float_data, int32_data …) or in an external file.

    Computed from the shape and element type, so the answer does not depend on how it is stored.
    """
    count = int(np.prod(tensor.dims, dtype=np.int64))
    dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type)
    if tensor.data_type == onnx.TensorProto.STRING:
        return "string", count, sum(len(s) for s in tensor.string_data)
    bits = _SUB_BYTE_BITS.get(tensor.data_type, 8 * dtype.itemsize)
    return dtype.name, count, (count * bits + 7) // 8


def _external_data_bytes(model: onnx.ModelProto, directory: Path) -> int:
    locations = set()
    for graph in _graphs(model.graph):
        for tensor in graph.initializer:
            if tensor.data_location == onnx.TensorProto.EXTERNAL:
                locations |= {e.value for e in tensor.external_data if e.key == "location"}
    return sum((directory / loc).stat().st_size for loc in locations if (directory / loc).is_file())


def _quantized_nodes(model: onnx.ModelProto) -> list[dict[str, str]]:
    """Nodes that run in INT8: integer-kernel ops, and in QDQ graphs the float ops whose data
    input (their first input) comes out of a DequantizeLinear, which ONNX Runtime fuses with the
    surrounding DequantizeLinear / QuantizeLinear into an integer kernel.

    A float op fed only by a dequantized *weight* (weight-only QDQ) still computes in float.
    """
    producer = {out: node.op_type for g in _graphs(model.graph) for node in g.node for out in node.output}
    found = []
    for graph in _graphs(model.graph):
        for node in graph.node:
            if node.op_type in QUANTIZATION_OPS:
                continue
            if node.op_type in INTEGER_OPS or node.op_type.startswith("QLinear"):
                how = "integer kernel"
            elif node.input and producer.get(node.input[0]) == "DequantizeLinear":
                how = "QDQ"
            else:
                continue
            found.append({"name": node.name, "op_type": node.op_type, "how": how})
    return found


def _quant_format(op_counts: Counter, quantized: list[dict[str, str]]) -> str:
    kinds = []
    if any(q["how"] == "QDQ" for q in quantized):
        kinds.append("QDQ")
    if any(
        q["how"] == "integer kernel" and q["op_type"] not in ("MatMulInteger", "ConvInteger")
        for q in quantized
    ):
        kinds.append("QOperator")
    if op_counts["DynamicQuantizeLinear"] or any(
        q["op_type"] in ("MatMulInteger", "ConvInteger") for q in quantized
    ):
        kinds.append("dynamic")
    if not kinds and op_counts["DequantizeLinear"]:
        kinds.append("weight-only QDQ")
    return "+".join(kinds) or "float"


def model_facts(path: str | Path) -> ModelFacts:
    """File size, initializer bytes by dtype, op counts and the quantized nodes of an ONNX file.

    Reads the graph without loading external data, so it is quick even for large models.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"model_facts expects an ONNX file; found nothing at {path}. "
            "Export or quantize the model first, or check the path."
        )
    model = onnx.load(str(path), load_external_data=False)

    by_dtype: Counter = Counter()
    parameters = 0
    for graph in _graphs(model.graph):
        for tensor in graph.initializer:
            dtype, count, nbytes = tensor_bytes(tensor)
            by_dtype[dtype] += nbytes
            if dtype != "int64":
                parameters += count

    op_counts = Counter(node.op_type for g in _graphs(model.graph) for node in g.node)
    quantized = _quantized_nodes(model)
    quantized_names = Counter(q["op_type"] for q in quantized)
    float_ops = Counter(
        {
            op: n - quantized_names[op]
            for op, n in op_counts.items()
            if op not in QUANTIZATION_OPS and op not in STRUCTURAL_OPS and n > quantized_names[op]
        }
    )
    return ModelFacts(
        path=str(path),
        file_bytes=path.stat().st_size,
        external_data_bytes=_external_data_bytes(model, path.parent),
        sha256=sha256_file(path),
        initializer_bytes=dict(sorted(by_dtype.items())),
        parameter_count=parameters,
        op_counts=dict(sorted(op_counts.items())),
        quant_format=_quant_format(op_counts, quantized),
        quantized_nodes=quantized,
        float_ops=dict(sorted(float_ops.items())),
    )


# --------------------------------------------------------------------------------------------
# Arithmetic intensity: how much work each weight does in one run
# --------------------------------------------------------------------------------------------
# Ops whose second input is a weight that multiplies the data: Conv, Gemm, MatMul, and ONNX
# Runtime's fused Attention (its input projection; the attention scores multiply activations
# by activations and carry no weight).
_WEIGHT_MULTIPLYING_OPS = ("Conv", "Gemm", "MatMul", "Attention")


@dataclass
class WeightWork:
    """The weights that multiply data in one run of a float graph, and the multiply-adds they do.

    `weights`: elements of the weight tensors of Conv, Gemm, MatMul and Attention nodes (not
    embedding tables, which are only looked up, nor biases); `multiply_adds`: the multiply-adds
    those weights take part in for one run on the given input shapes. `uses_per_weight` is how
    many times one weight is used per run on average (the batch for a dense layer, batch x
    tokens for a transformer, batch x output positions for a convolution)."""

    model: str
    input_shapes: dict[str, tuple[int, ...]]
    weights: int
    multiply_adds: int

    @property
    def uses_per_weight(self) -> float:
        return self.multiply_adds / self.weights

    def weight_bytes(self, bits: int = 32) -> int:
        """The weights' bytes at `bits` per weight (32 for fp32, 8 for INT8), scales not counted."""
        return self.weights * bits // 8

    def intensity(self, bits: int = 32) -> float:
        """Arithmetic intensity: multiply-adds per byte of weights read, at `bits` per weight."""
        return self.multiply_adds / self.weight_bytes(bits)

    def to_dict(self) -> dict:
        d = asdict(self)
        d.update(uses_per_weight=self.uses_per_weight)
        return d


def weight_work(path: str | Path, input_shapes: dict[str, tuple[int, ...]]) -> WeightWork:
    """Weights and multiply-adds of one run of the float graph at `path` on inputs of these shapes.

    The shapes of every tensor come from ONNX Runtime's symbolic shape inference (the one
    `quant_pre_process` runs), which knows its fused ops such as Attention. Per node: a MatMul,
    Gemm or Attention does (output elements / N) x K x N multiply-adds with its K x N weight; a Conv
    does (output elements / output channels) x its weight's elements."""
    from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference

    model = onnx.load(str(path))
    known = {i.name for i in model.graph.input}
    unknown = sorted(set(input_shapes) - known)
    if unknown:
        raise ValueError(f"{Path(path).name} has no input named {unknown}; its inputs are {sorted(known)}.")
    for graph_input in model.graph.input:
        if graph_input.name in input_shapes:
            for dim, size in zip(
                graph_input.type.tensor_type.shape.dim, input_shapes[graph_input.name], strict=True
            ):
                dim.Clear()
                dim.dim_value = int(size)
    graph = SymbolicShapeInference.infer_shapes(model, auto_merge=True).graph
    shapes = {
        v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
        for v in (*graph.value_info, *graph.input, *graph.output)
    }
    weights = {t.name: tuple(t.dims) for t in graph.initializer}
    total_weights = total_macs = 0
    for node in graph.node:
        if node.op_type not in _WEIGHT_MULTIPLYING_OPS or len(node.input) < 2 or node.input[1] not in weights:
            continue
        w = weights[node.input[1]]
        out = shapes.get(node.output[0])
        if not out or not all(out):
            raise ValueError(
                f"The shape of {node.name or node.op_type}'s output is unknown; give every input's shape."
            )
        elements = int(np.prod(w, dtype=np.int64))
        out_elements = int(np.prod(out, dtype=np.int64))
        # A Conv uses its whole weight once per output position (output elements / channels); a
        # MatMul, Gemm or Attention once per row of its output (output elements / last dimension).
        uses = out_elements // (out[1] if node.op_type == "Conv" else out[-1])
        total_macs += uses * elements
        total_weights += elements
    if not total_weights:
        raise ValueError(f"{Path(path).name} has no Conv, Gemm, MatMul or Attention node with a weight.")
    return WeightWork(
        Path(path).stem, {k: tuple(v) for k, v in input_shapes.items()}, total_weights, total_macs
    )
