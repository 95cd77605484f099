"""What ONNX Runtime really runs: the optimized graph, its kernels, a per-op profile, a drawing.

A quantized file is a request. When a session opens it, ONNX Runtime's graph optimizer decides
what runs: it fuses `DequantizeLinear → Conv → QuantizeLinear` into one `QLinearConv` where it
has an integer kernel for those types, may turn signed activations into unsigned ones, and leaves
the rest in float, dequantizing first. So the questions "which layers run in INT8?" and "with
which types?" are answered by the graph the session executes, which
`SessionOptions.optimized_model_filepath` writes out, not by the file we gave it.

    optimized_graph(path)   the graph a CPU session executes, saved next to the file (once per file)
    kernels(path)           what it runs: integer and float compute ops, their types, coverage
    kernel_rows(variants)   one table row per variant, for `measure.markdown_table`
    profile(path, feed)     time per op type from ONNX Runtime's own profiler
    draw(path)              the data flow up to the first residual Add, drawn by Graphviz
    side_by_side(drawings)  several drawings in one row of a notebook
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from .files import sha256_file
from .measure import QUANTIZATION_OPS, make_session, physical_cores, tensor_bytes

# Integer kernels that do a layer's multiply-adds, and where their activation and weight types are
# read: (input index of the activation or its zero point, input index of the weight or its zero
# point). None: the op quantizes its float activation itself (always to uint8).
INTEGER_COMPUTE = {
    "QLinearConv": (2, 5),
    "QLinearMatMul": (2, 5),
    "QGemm": (2, 5),
    "ConvInteger": (0, 1),
    "MatMulInteger": (0, 1),
    "MatMulIntegerToFloat": (0, 1),
    "DynamicQuantizeMatMul": (None, 1),
    "QAttention": (None, 1),
}
# Float ops that do a layer's multiply-adds (any domain: the NCHWc layout's Conv counts too).
FLOAT_COMPUTE = frozenset({"Conv", "MatMul", "Gemm", "FusedConv", "FusedMatMul", "FusedGemm", "Attention"})
# 4-bit weights with float arithmetic (unless `accuracy_level` asks for integer arithmetic).
WEIGHT_ONLY = frozenset({"MatMulNBits"})
# QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear only convert: measure's QUANTIZATION_OPS.
_SHORT = {"UINT8": "U8", "INT8": "S8", "UINT16": "U16", "INT16": "S16", "UINT4": "U4", "INT4": "S4"}


# The graphs optimized so far in this process: saved graph (resolved path) -> (what it was made
# from: the source's resolved path, the SHA-256 of its bytes, the thread count; the saved file's
# size and mtime right after it was written). `optimized_graph` reuses a saved graph only while
# both still match, so a rewritten source, or a saved graph since overwritten, is optimized again.
# (A model's external data files are not part of the key; no lesson asks for their kernels.)
_OPTIMIZED: dict[str, tuple[tuple[str, str, int], tuple[int, int]]] = {}


def _stat(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_size, st.st_mtime_ns


def optimized_graph(
    path: str | Path,
    out: str | Path | None = None,
    threads: int | None = None,
    config: Mapping[str, str] | None = None,
) -> Path:
    """Open `path` in a CPU session with every graph optimization on (ONNX Runtime's default) and
    save the graph it executes: `<name>.optimized.onnx` beside the file unless `out` is given.

    `config`: session configuration entries that change what the optimizer does, e.g.
    {"session.x64quantprecision": "1"}. The saved graph holds this CPU's choices (for example the
    NCHWc layout of AVX2/AVX-512 kernels): read it, do not ship it. Asked again for the same
    unchanged file (same bytes, threads, config and `out`), it returns the graph saved the first
    time instead of optimizing the model again.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"optimized_graph expects an ONNX file; found nothing at {path}.")
    out = Path(out) if out is not None else path.with_name(path.stem + ".optimized.onnx")
    threads = physical_cores() if threads is None else threads
    config = {key: str(value) for key, value in (config or {}).items()}
    made_from = (str(path.resolve()), sha256_file(path), threads, tuple(sorted(config.items())))
    saved = _OPTIMIZED.get(str(out.resolve()))
    if saved is not None and saved[0] == made_from and out.is_file() and _stat(out) == saved[1]:
        return out
    make_session(path, threads, config=config, optimized_to=out)
    _OPTIMIZED[str(out.resolve())] = (made_from, _stat(out))
    return out


@dataclass
class Kernels:
    """The compute ops of the graph a session executes, and in which arithmetic they run.

    `integer`: op type -> count of integer kernels doing multiply-adds; `types`: activation x
    weight type pairs of those kernels ("U8S8": uint8 activations, int8 weights); `float_compute`:
    op type -> count still multiplying in float (`dequantized` of them read dequantized INT8, i.e.
    quantized in the file but not in what runs); `coverage`: integer / all compute ops.
    """

    model: str
    op_counts: dict[str, int]
    integer: dict[str, int]
    types: dict[str, int]
    float_compute: dict[str, int]
    dequantized: int
    weight_only: int
    other_integer: dict[str, int]  # integer ops that do no multiply-adds (QLinearAdd, pooling)
    qdq_left: dict[str, int]  # QuantizeLinear / DequantizeLinear nodes still in the graph
    integer_weight_bytes: int
    float_weight_bytes: int
    float_nodes: list[str] = field(default_factory=list)  # names of the float compute nodes

    @property
    def integer_count(self) -> int:
        return sum(self.integer.values())

    @property
    def compute_count(self) -> int:
        return self.integer_count + sum(self.float_compute.values()) + self.weight_only

    @property
    def coverage(self) -> float:
        return self.integer_count / self.compute_count if self.compute_count else 0.0

    def to_dict(self) -> dict:
        d = asdict(self)
        d.update(coverage=self.coverage, integer_count=self.integer_count, compute_count=self.compute_count)
        return d


def _dtype_of(name: str, initializers: Mapping[str, onnx.TensorProto], producers: Mapping) -> str:
    if name in initializers:
        return onnx.TensorProto.DataType.Name(initializers[name].data_type)
    node = producers.get(name)
    if node is not None and node.op_type == "DynamicQuantizeLinear":
        return "UINT8"
    if node is not None and node.op_type == "QuantizeLinear" and len(node.input) > 2:
        return _dtype_of(node.input[2], initializers, producers)
    return "?"


def _pair(node: onnx.NodeProto, initializers, producers) -> str:
    act, weight = INTEGER_COMPUTE[node.op_type]
    a = "UINT8" if act is None else _dtype_of(node.input[act], initializers, producers)
    w = _dtype_of(node.input[weight], initializers, producers) if len(node.input) > weight else "?"
    return _SHORT.get(a, a) + _SHORT.get(w, w)


def _read_kernels(model: onnx.ModelProto, name: str = "") -> Kernels:
    """`Kernels` of a graph already optimized (see `kernels` for a file)."""
    graph = model.graph
    initializers = {t.name: t for t in graph.initializer}
    producers = {out: node for node in graph.node for out in node.output}
    op_counts: Counter = Counter()
    integer: Counter = Counter()
    types: Counter = Counter()
    float_compute: Counter = Counter()
    other: Counter = Counter()
    qdq: Counter = Counter()
    dequantized = weight_only = 0
    float_nodes = []
    for node in graph.node:
        op = node.op_type
        op_counts[op if node.domain in ("", "ai.onnx") else f"{op} ({node.domain})"] += 1
        if op in INTEGER_COMPUTE:
            integer[op] += 1
            types[_pair(node, initializers, producers)] += 1
        elif op in FLOAT_COMPUTE:
            float_compute[op] += 1
            float_nodes.append(node.name or op)
            if any(getattr(producers.get(i), "op_type", "") == "DequantizeLinear" for i in node.input[:1]):
                dequantized += 1
        elif op in WEIGHT_ONLY:
            weight_only += 1
        elif op in QUANTIZATION_OPS:
            qdq[op] += 1
        elif op.startswith("QLinear") or op.startswith("NhwcQ"):
            other[op] += 1
    int_bytes = float_bytes = 0
    for tensor in graph.initializer:
        dtype, count, nbytes = tensor_bytes(tensor)
        if count < 16:  # scales, zero points, shapes: not weights
            continue
        if dtype in ("int8", "uint8", "int4", "uint4", "int16", "uint16"):
            int_bytes += nbytes
        elif dtype.startswith("float") or dtype == "bfloat16":
            float_bytes += nbytes
    return Kernels(
        model=name,
        op_counts=dict(op_counts),
        integer=dict(integer),
        types=dict(types),
        float_compute=dict(float_compute),
        dequantized=dequantized,
        weight_only=weight_only,
        other_integer=dict(other),
        qdq_left=dict(qdq),
        integer_weight_bytes=int_bytes,
        float_weight_bytes=float_bytes,
        float_nodes=float_nodes,
    )


def kernels(
    path: str | Path,
    threads: int | None = None,
    folder: str | Path | None = None,
    config: Mapping[str, str] | None = None,
) -> Kernels:
    """What a CPU session runs for the file at `path`: optimizes it (`optimized_graph`, with the
    session `config` entries if given, saved in `folder`, default beside the file; reused while the
    file is unchanged) and reads the compute ops of the result."""
    path = Path(path)
    name = path.stem + (".config" if config else "")  # a configured session's graph has its own file
    out = None if folder is None and not config else Path(folder or path.parent) / f"{name}.optimized.onnx"
    optimized = optimized_graph(path, out, threads=threads, config=config)
    return _read_kernels(onnx.load(str(optimized), load_external_data=False), Path(path).stem)


def kernel_rows(variants: Mapping[str, Kernels]) -> list[dict[str, str]]:
    """One row per variant: the integer and float compute ops that run, their types, coverage."""

    def counts(d: Mapping[str, int]) -> str:
        return ", ".join(f"{n} {op}" for op, n in sorted(d.items(), key=lambda kv: -kv[1])) or "none"

    rows = []
    for name, k in variants.items():
        weights = k.integer_weight_bytes + k.float_weight_bytes
        rows.append(
            {
                "variant": name,
                "integer compute": counts(k.integer),
                "types": counts(k.types),
                "float compute": counts(k.float_compute)
                + (f" ({k.dequantized} reading dequantized INT8)" if k.dequantized else ""),
                "coverage": f"{k.integer_count}/{k.compute_count} ({k.coverage:.0%})",
                "other integer ops": counts(k.other_integer),
                "weights held as integers": f"{k.integer_weight_bytes / weights:.0%}" if weights else "-",
            }
        )
    return rows


# --------------------------------------------------------------------------------------------
# Profile: time per op type, from ONNX Runtime's profiler
# --------------------------------------------------------------------------------------------
@dataclass
class Profile:
    """Kernel time per op type, in milliseconds per run, over `runs` timed runs (warm-up runs
    excluded). `total_ms` is the sum of kernel times; the run itself also pays for scheduling."""

    model: str
    runs: int
    ms_per_run: dict[str, float]  # op type -> kernel milliseconds per run
    nodes: dict[str, int]  # op type -> nodes of that type that ran

    @property
    def total_ms(self) -> float:
        return sum(self.ms_per_run.values())

    def rows(self, top: int = 8) -> list[dict[str, str]]:
        """The `top` op types by time, with their share of the kernel time."""
        ranked = sorted(self.ms_per_run.items(), key=lambda kv: -kv[1])
        return [
            {
                "op type": op,
                "nodes": str(self.nodes[op]),
                "ms per run": f"{ms:.2f}",
                "share": f"{ms / self.total_ms:.0%}",
            }
            for op, ms in ranked[:top]
        ]


def profile(
    path: str | Path,
    feed: Mapping[str, np.ndarray],
    *,
    runs: int = 20,
    warmup: int = 3,
    threads: int | None = None,
    folder: str | Path | None = None,
) -> Profile:
    """Run `path` on `feed` with ONNX Runtime's profiler on and add up kernel time per op type.

    The profiler records every run from the session's start; the first `warmup` runs (buffer
    allocation, weight pre-packing) are dropped by their `model_run` window. The JSON trace is
    written to `folder` (default: beside the model) and can be opened in chrome://tracing.
    """
    if runs < 1 or warmup < 0:
        raise ValueError(f"profile needs runs >= 1 and warmup >= 0; got runs={runs}, warmup={warmup}.")
    path = Path(path)
    prefix = str(Path(folder or path.parent) / f"{path.stem}.profile")
    session = make_session(path, threads, profile_prefix=prefix)
    for _ in range(warmup + runs):
        session.run(None, dict(feed))
    trace = Path(session.end_profiling())
    events = json.loads(trace.read_text())
    windows = sorted(
        (e["ts"], e["ts"] + e["dur"])
        for e in events
        if e.get("cat") == "Session" and e.get("name") == "model_run"
    )
    if len(windows) < warmup + runs:
        raise RuntimeError(f"the profile of {path.name} holds {len(windows)} runs, expected {warmup + runs}.")
    start = windows[warmup][0]
    time_us: Counter = Counter()
    nodes: dict[str, set] = {}
    for e in events:
        if e.get("cat") != "Node" or not e.get("name", "").endswith("_kernel_time") or e["ts"] < start:
            continue
        op = e.get("args", {}).get("op_name", "?")
        time_us[op] += e["dur"]
        nodes.setdefault(op, set()).add(e["name"])
    return Profile(
        model=path.stem,
        runs=runs,
        ms_per_run={op: us / 1000 / runs for op, us in time_us.items()},
        nodes={op: len(names) for op, names in nodes.items()},
    )


# --------------------------------------------------------------------------------------------
# Drawing: Graphviz, in data-flow order
# --------------------------------------------------------------------------------------------
_COLOURS = {"integer": "#b7e4c7", "qdq": "#ffe8a3", "float": "#f4b6b6", "other": "#e9ecef"}


def _upstream(graph: onnx.GraphProto, until: Sequence[str]) -> list[onnx.NodeProto]:
    """The nodes that compute the first node of a type in `until`, that node included, in the
    graph's (topological) order. Falls back to the whole graph when there is no such node."""
    producers = {out: i for i, node in enumerate(graph.node) for out in node.output}
    target = next((i for i, node in enumerate(graph.node) if node.op_type in until), None)
    if target is None:
        return list(graph.node)
    keep, stack = set(), [target]
    while stack:
        i = stack.pop()
        if i in keep:
            continue
        keep.add(i)
        stack.extend(producers[name] for name in graph.node[i].input if name in producers)
    return [node for i, node in enumerate(graph.node) if i in keep]


def _label(node: onnx.NodeProto, initializers: Mapping[str, onnx.TensorProto]) -> str:
    """The op type, and the largest constant it reads (a weight or a bias) with its type and shape."""
    tensors = [
        initializers[n] for n in node.input if n in initializers and int(np.prod(initializers[n].dims)) > 1
    ]
    if not tensors:
        return node.op_type
    w = max(tensors, key=lambda t: int(np.prod(t.dims)))
    dtype = onnx.TensorProto.DataType.Name(w.data_type).lower()
    return f"{node.op_type}\n{dtype} {'×'.join(str(d) for d in w.dims)}"


def _kind(op: str) -> str:
    if op in INTEGER_COMPUTE or op.startswith("QLinear") or op.startswith("NhwcQ"):
        return "integer"
    if op in QUANTIZATION_OPS:
        return "qdq"
    if op in FLOAT_COMPUTE or op in WEIGHT_ONLY:
        return "float"
    return "other"


def draw(path: str | Path, *, until: Sequence[str] = ("Add", "QLinearAdd"), title: str = ""):
    """A Graphviz drawing of the data flow from the input to the first node of a type in `until`
    (by default the first residual Add of a ResNet): every node that computes it, joined by the
    tensors they pass. Integer ops green, Quantize/DequantizeLinear yellow, ops that multiply-add
    in float red (in a QDQ file every Conv is red, wrapped in yellow: the runtime decides whether
    it fuses them into an integer kernel), the rest grey. Each label names the largest constant
    the node reads (its weight or bias) with type and shape.

    Returns a `graphviz.Digraph`; a notebook shows it as SVG (needs Graphviz's `dot` program).
    """
    import graphviz

    model = onnx.load(str(path), load_external_data=False)
    graph = model.graph
    initializers = {t.name: t for t in graph.initializer}
    nodes = _upstream(graph, until)
    dot = graphviz.Digraph(graph_attr={"rankdir": "TB", "label": title, "labelloc": "t", "fontsize": "16"})
    dot.attr("node", shape="box", style="rounded,filled", fontname="Helvetica", fontsize="11")
    made = {}
    for i, node in enumerate(nodes):
        key = f"n{i}"
        dot.node(key, _label(node, initializers), fillcolor=_COLOURS[_kind(node.op_type)])
        made.update({out: key for out in node.output})
    inputs = {i.name: f"input{j}" for j, i in enumerate(graph.input) if i.name not in initializers}
    for key, name in ((key, name) for name, key in inputs.items()):
        dot.node(key, name, shape="ellipse", fillcolor="white")
    for node_i, node in enumerate(nodes):
        for name in node.input:
            if name in made:
                dot.edge(made[name], f"n{node_i}")
            elif name in inputs:
                dot.edge(inputs[name], f"n{node_i}")
    return dot


def side_by_side(drawings: Mapping[str, Any]):
    """Several `draw` results in one row of a notebook (an IPython HTML object).

    Without Graphviz's `dot` program, says how to install it instead.
    """
    import graphviz
    from IPython.display import HTML

    cells = []
    for name, dot in drawings.items():
        try:
            svg = dot.pipe(format="svg").decode()
        except graphviz.ExecutableNotFound:
            return HTML(
                "<p>Drawing needs Graphviz's <code>dot</code> program, which was not found. Install it "
                "(<code>apt-get install graphviz</code> on Debian, Ubuntu and Colab; "
                "<code>conda install graphviz</code>; <code>brew install graphviz</code>) and run the cell "
                "again.</p>"
            )
        svg = svg[svg.index("<svg ") :]  # the element alone, without the XML prolog of a standalone file
        svg = svg.replace("<svg ", '<svg style="max-width:100%;height:auto" ', 1)  # shrink only to fit
        cells.append(f"<div style='flex:1;min-width:0'><b>{name}</b><br>{svg}</div>")
    # A flex row, not a <table>: these are pictures side by side, not tabular data.
    return HTML(f"<div style='display:flex;gap:1em;align-items:flex-start'>{''.join(cells)}</div>")
