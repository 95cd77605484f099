"""Node names, checked before a quantizer is told to skip them.

`quantize_dynamic` and `quantize_static` take `nodes_to_exclude`: names of nodes to keep in float.
A name that is not in the graph is ignored without a word (ONNX Runtime only asks, node by node,
whether the node's name is in the list), so a typo quietly quantizes the very layer it was meant to
protect. `checked_node_names` refuses such a name and says which names come close.

    node_names          the node names of an ONNX file, in graph order (op type of each)
    checked_node_names  the names, once each is found in the file; a clear error otherwise
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
