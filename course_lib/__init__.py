"""course_lib: the helper library of the onnx-quant-course notebooks.

It does the plumbing (data, training, caching, timing, plotting, widgets) so that the lessons
can keep the quantization calls themselves in plain sight. One module per idea, each readable
top to bottom. `_MODULES` below lists them, with what each holds (the list that follows is
written from it); each is reached as `cl.<name>` after `import course_lib as cl`.

The course's own machinery (the sentences' claims and their check cells, the exercises' checks,
the reference runs, the audit, Colab's setup, the command line and everything that makes the
course, and where the models come from: their training, export, cache and release) lives in the
package `course_machinery`, beside this one: it is not lesson material. The few of its modules a
lesson calls are reached from here as well (`cl.verify`, `cl.models.get`, listed in `_MACHINERY`),
so a lesson imports one library; nothing in course_lib imports it otherwise.
"""

import importlib

# The one list of the library's modules: `cl.<name>`, `__all__` and the docstring's list are made
# from it (tests/test_layout.py checks that every module file is here, and that each is reachable).
# Modules are imported when first used (PEP 562), so `import course_lib` stays light: a process that
# needs only ONNX Runtime (a lesson without PyTorch, a calibration run in a spawned process) never
# pays the 0.5 GB that importing torch costs here. Binder gives a notebook about 2 GB.
_MODULES = {
    "data": "Fashion-MNIST (sources, checksums, one preprocessing, splits), two moons, data directory",
    "affine": "the INT8 encoding itself: scale, zero point, rounding as ONNX Runtime does it, error bounds",
    "integers": "the codes after encoding: int4 packed two per byte, an integer matmul as QLinearMatMul "
    "computes it, AVX2's 16-bit pair sums, im2col",
    "inputs": "the one check of arrays fed to a model (names, dtype, shape), and its InputError",
    "calibration": "CalibrationDataReaders that check what they feed (ArrayReader, DatasetReader), ranges",
    "pre_process": "`quant_pre_process` step by step, and a model its shape inference cannot read",
    "scoring": "one quantized classifier against fp32 on a test set: parity, size, speed, saturation",
    "measure": "model facts, sessions and logits, latency, peak memory, parity, the results store (a package)",
    "kernels": "what ONNX Runtime really runs: the optimized graph, its kernels, a profile, drawings",
    "nodes": "node names, checked before `nodes_to_exclude` (where a typo is silently ignored)",
    "qat": "quantization-aware training's plumbing: BatchNorm folding, fake-quantized twins, export",
    "explorers": "the lessons' interactive explorers (imported by notebooks, never by the modules above)",
    "units": "quantities in words: durations, speed ratios with their interval, sizes in MB",
    "files": "a file's SHA-256, writes that never leave half a file (imports no torch)",
    "versions": "the installed versions of Python and the course's libraries (imports no torch)",
    "names": "the names models and results are filed under (imports no torch)",
}
# The machinery's modules a lesson calls, reached as `cl.<name>` (`from course_lib import colab`):
# their code is in course_machinery/, which says it is not lesson material: the check cells and the
# exercises' checks, the audit, Colab's setup, and where the models come from (their registry,
# training, export and verified cache, the release download, the text encoder's published weights,
# the NanoGPT, the ResNet18's INT8 variants built in one call), reading the CPU (its features on every
# platform, CPUID), the results store, and OpenVINO's adapter (lesson 05c's second runtime).
_MACHINERY = {
    "checks": "the exercises' self-checks: each says whether an answer is right and, if not, why",
    "claims": "a lesson's sentence about a result, and the rule that checks it on a run's figures",
    "verdicts": "the check cell (`verify`): a section's sentences checked here, beside the reference CPUs",
    "audit": "the course's method on any ONNX model (`python -m course_lib audit`, lesson 07)",
    "colab": "a lesson's setup on Colab: Drive, the install beside Colab's own PyTorch, the lesson's models",
    "models": "every model by name, `models.get(name)`: the demo models, the text encoder, the NanoGPT; "
    "their verified cache (readable without torch), training, export (a package)",
    "release": "a published release: its archive's download and reading, each file checked by SHA-256",
    "text_encoder": "all-MiniLM-L6-v2: its published weights, the ONNX export, tokenized sentences, embeddings",
    "nanogpt": "lesson 07's character-level GPT on the stdlib's source: trained here, cached, exported",
    "variants": "the ResNet18's INT8 variants (lessons 02-03's quantizer settings), built in one call",
    "hardware": "the CPU features that matter for INT8, read on every platform; ONNX Runtime's providers",
    "cpuid": "the CPUID instruction itself (x86-64), which the runtimes' kernels follow",
    "results": "the results store the lessons' check cells fill and the course report reads",
    "runtimes": "the same file on a second runtime: OpenVINO beside ONNX Runtime, the precision it ran",
}
# Names re-exported at the top (`cl.load_split`), by the module that defines them.
_NAMES = {
    "calibration": ("ArrayReader", "CalibrationError", "DatasetReader"),
    "verdicts": ("end_lesson", "verify"),
    "inputs": ("InputError",),
    "nodes": ("checked_node_names",),
    "pre_process": ("quiet_quantizer_hints",),
    "data": (
        "CLASS_NAMES",
        "ChecksumError",
        "DataNotFoundError",
        "Preprocessing",
        "data_dir",
        "default_preprocessing",
        "find_fashion_mnist",
        "lesson_folder",
        "load_fashion_mnist",
        "load_moons",
        "load_split",
        "preprocess",
    ),
    "hardware": ("cpu_report", "has_vnni", "onnxruntime_providers", "u8s8_can_saturate"),
    # Every model's verified files: `models.get(name)` (on a demo model's verified cache it imports no
    # PyTorch); the PyTorch module of a demo model: `load_model` (cache, archive, release, training).
    "models": (
        "MODELS",
        "TrainedModel",
        "ensure_model",
        "ensure_models",
        "export_onnx",
        "export_trained",
        "load_model",
        "onnx_metadata",
        "onnx_path",
    ),
}
_HOME = {name: module for module, names in _NAMES.items() for name in names}

_LISTED = "\n".join(f"    {name:<13} {what}" for name, what in _MODULES.items())
_REACHED = "\n".join(f"    {name:<13} {what}" for name, what in _MACHINERY.items())
__doc__ = (  # (`or ''`: `python -OO` drops docstrings)
    f"{__doc__ or ''}\nThe modules:\n\n{_LISTED}\n\nFrom course_machinery:\n\n{_REACHED}\n"
)
__all__ = sorted(_MODULES) + sorted(_MACHINERY) + sorted(_HOME)


def _module(name: str):
    where = f"course_machinery.{name}" if name in _MACHINERY else f"{__name__}.{name}"
    return importlib.import_module(where)


def __getattr__(name: str):
    if name in _MODULES or name in _MACHINERY:
        return _module(name)
    if name in _HOME:
        value = getattr(_module(_HOME[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'course_lib' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
