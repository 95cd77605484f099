"""`get(name)`: every model of the course, by name, as its verified files.

    moons_mlp, fashion_resnet18   the demo models: cache, else release archive or download, else
                                  trained here (`pipeline`), then exported (`export`)
    text_encoder                  all-MiniLM-L6-v2's published weights, exported and optimized here
                                  (`course_machinery.text_encoder`)
    nanogpt                       lesson 07's character-level GPT, trained here (`course_machinery.nanogpt`)

Each returns one `store.ModelFiles` (the fp32 ONNX file, every verified ONNX file by role, the
entry's meta.json, where it came from), and each cached ONNX file passes the same check before use
(`store.check_onnx`: its SHA-256 against the record `export.export_record` wrote). A demo model's
verified cache is read without importing PyTorch.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from course_lib.names import NANOGPT, TEXT_ENCODER

from .store import RECIPES, CacheProblem, ModelFiles, check_demo, known, onnx_path


def get(
    name: str,
    *,
    train: bool = True,
    progress: bool = True,
    log: Callable[[str], None] = print,
    archive: str | Path | None = None,
    recipe=None,
) -> ModelFiles:
    """The model `name`'s verified files (`KNOWN` lists the names); made first when missing or corrupt.

    A cache entry is used only when every recorded SHA-256 matches; otherwise the model is fetched,
    trained or exported again, with a message saying why. train=False: a demo model that is neither
    cached nor in a release raises FileNotFoundError saying how to get it. `archive`: a release
    archive or workshop bundle to install the demo models from. `recipe`: the NanoGPT's training
    recipe (`nanogpt.NanoGPTRecipe`), for tests and experiments.
    """
    known(name)
    if recipe is not None and name != NANOGPT:
        raise ValueError(
            f"recipe= applies to {NANOGPT!r} only; found it for {name!r}, whose recipe is fixed "
            f"(`models.store.RECIPES`). Leave recipe out."
        )
    if name == TEXT_ENCODER:
        from course_machinery import text_encoder

        return text_encoder.cached_files(log=log)
    if name == NANOGPT:
        from course_machinery import nanogpt

        return nanogpt.cached_files(progress=progress, log=log, recipe=recipe or nanogpt.DEFAULT_RECIPE)
    try:
        path, meta = check_demo(name)
    except CacheProblem:
        from .pipeline import ensure_model

        trained = ensure_model(name, train=train, progress=progress, log=log, archive=archive)
        return ModelFiles(name, onnx_path(name), trained.meta, trained.origin)
    return ModelFiles(name, path, meta)


def status(name: str) -> str:
    """'ok' when `get(name)` would use the cache as it is, else the reason it would not (for `doctor`)."""
    known(name)
    try:
        if name in RECIPES:
            check_demo(name)
        elif name == TEXT_ENCODER:
            from course_machinery import text_encoder

            text_encoder.check_cache()
        else:
            from course_machinery import nanogpt

            nanogpt.check_cache()
    except CacheProblem as exc:
        return str(exc)
    return "ok"
