"""Node names, checked before a quantizer is told to skip them.

`quantize_dynamic` and `quantize_static` take `nodes_to_exclude`: names of nodes to keep in float.
A name that is not in the graph is ignored without a word (ONNX Runtime only asks, node by node,
whether the node's name is in the list), so a typo quietly quantizes the very layer it was meant to
protect. `checked_node_names` refuses such a name and says which names come close.

    node_names          the node names of an ONNX file, in graph order (op type of each)
    checked_node_names  the names, once each is found in the file; a clear error otherwise
    dynamic_node_names  the same check, then the names quantize_dynamic looks for (a Gemm's `_MatMul`)
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from pathlib import Path


def node_names(model: str | Path) -> dict[str, str]:
    """{node name: op type} of the file's graph, in graph order (weights are not loaded)."""
    import onnx

    graph = onnx.load(str(model), load_external_data=False).graph
    return {node.name: node.op_type for node in graph.node}


def checked_node_names(model: str | Path, names: Iterable[str]) -> list[str]:
    """`names` as a list, after checking that every one is a node of `model`.

    Raises ValueError naming each missing name with the closest names the graph has, so the
    quantizer is never handed a list it would silently ignore part of."""
    if not isinstance(names, str):
        names = list(names)
    if isinstance(names, str) or any(not isinstance(n, str) for n in names):
        raise TypeError(f"nodes_to_exclude is a list of node names (strings); got {names!r:.80}.")
    known = node_names(model)
    missing = [n for n in names if n not in known]
    if missing:
        lines = []
        for name in missing:
            close = difflib.get_close_matches(name, list(known), n=3, cutoff=0.6)
            lines.append(
                f"  {name!r}: "
                + (f"did you mean {', '.join(map(repr, close))}?" if close else "no close name")
            )
        raise ValueError(
            f"{len(missing)} of the {len(names)} names are not nodes of {Path(model).name}, and ONNX Runtime's "
            "quantizer would ignore them without a word (quantizing those layers after all):\n"
            + "\n".join(lines)
            + "\nCopy the names from course_lib.nodes.node_names(path) (or Netron), and pass the same file "
            "you quantize: pre-processing renames nodes."
        )
    return names


def dynamic_node_names(model: str | Path, names: Iterable[str]) -> list[str]:
    """`names` checked as `checked_node_names` does, then as `quantize_dynamic` will look for them.

    Before it reads `nodes_to_exclude`, ONNX Runtime's dynamic quantizer rewrites each plain Gemm
    (alpha = beta = 1, no transA) as a MatMul named `<name>_MatMul` plus an Add
    (`ONNXModel.replace_gemm_with_matmul` in onnxruntime/quantization/onnx_model.py) and matches the
    names against that graph, so a Gemm's own name matches nothing and the layer is quantized after
    all. For such a Gemm this passes both names (the `_MatMul` one, and the Gemm's own, which does no
    harm where it matches nothing); every other name as it is."""
    import onnx

    names = checked_node_names(model, names)
    graph = onnx.load(str(model), load_external_data=False).graph
    rewritten = set()
    for node in graph.node:
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        scaled = attrs.get("alpha", 1.0) != 1.0 or attrs.get("beta", 1.0) != 1.0
        if node.op_type == "Gemm" and node.name and not scaled and not attrs.get("transA", 0):
            rewritten.add(node.name)
    return [alias for name in names for alias in ((name, name + "_MatMul") if name in rewritten else (name,))]
