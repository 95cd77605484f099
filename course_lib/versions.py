"""Which versions of Python and the course's libraries are installed, without importing them.

    package_version    an installed distribution's version, as pip reports it
    library_versions   Python, PyTorch, torchvision, NumPy, ONNX and ONNX Runtime, for metadata
                       and for the results store's environment fingerprint

PyTorch is read from its `version.py` file rather than imported: importing torch costs about
0.5 GB, which a process that only measures ONNX files should not pay to write one string.
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import platform
from pathlib import Path


def package_version(dist: str, missing: str = "not installed") -> str:
    """The installed version of a distribution (pip's view), or `missing`."""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return missing


def _version_file(package: str) -> str | None:
    """`__version__` as `<package>/version.py` sets it, read without importing the package.

    PyTorch's wheels write their build there (e.g. 2.14.1+cpu or +cu130), which pip's version
    (2.14.1) leaves out; this is the string `torch.__version__` gives once torch is imported.
    """
    spec = importlib.util.find_spec(package)  # for a top-level package this imports nothing
    if spec is None or not spec.submodule_search_locations:
        return None
    file = Path(next(iter(spec.submodule_search_locations))) / "version.py"
    try:
        tree = ast.parse(file.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return None
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if any(isinstance(t, ast.Name) and t.id == "__version__" for t in targets) and (
            isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
        ):
            return node.value.value
    return None


def library_versions() -> dict[str, str]:
    """The versions that decide what a model or a measurement gives, as each library reports itself."""
    import numpy as np
    import onnx
    import onnxruntime

    return {
        "python": platform.python_version(),
        "torch": _version_file("torch") or package_version("torch"),
        "torchvision": _version_file("torchvision") or package_version("torchvision"),
        "numpy": np.__version__,
        "onnx": onnx.__version__,
        "onnxruntime": onnxruntime.__version__,
    }
