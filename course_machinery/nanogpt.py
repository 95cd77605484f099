"""A character-level GPT of about 210,000 parameters, trained here on text every machine has.

Lesson 07 reproduces a quoted benchmark of a 210,000-parameter NanoGPT under INT8 quantization.
This module makes such a model on the learner's own CPU, in about two minutes:

    corpus           the Python standard library's own source: its top-level .py files, sorted by
                     name, joined, capped in characters (offline everywhere Python is)
    VOCAB, encode,   a fixed character vocabulary (newline and printable ASCII, plus one slot for
    decode           any other character), the same on every machine
    split            the encoded corpus, its last 10 % held out for validation
    GPT, GPTConfig   token and position embeddings, N blocks of causal self-attention and an MLP
                     (each after a LayerNorm, with a residual), a final LayerNorm, a linear head
                     sharing the token embedding's weights (as nanoGPT does)
    train            seeded AdamW, stopped by a step count or a time budget, whichever comes first
    export_onnx      `tokens` int64 [batch, context] -> `logits` float32 [batch, context, vocab]
    perplexity       exp(mean cross-entropy) of an ONNX model on token windows, by ONNX Runtime
    sample_windows   validation windows as int64 inputs (`save_sample_inputs` writes an .npz)
    cached_files     the trained model's verified fp32 ONNX file, as `models.get("nanogpt")`
                     returns it: from the cache, else trained here

The cache is `<data dir>/models/nanogpt/`: weights, ONNX file and a metadata file naming both
files' SHA-256 (`models.export.export_record`), the recipe and the corpus's SHA-256. Every read
checks them (`models.store`); a corrupt or stale entry is rebuilt, with a message saying why. The
corpus depends on the Python version (the standard library changes), so a different Python
trains its own model.
"""

from __future__ import annotations

import contextlib
import json
import math
import sys
import sysconfig
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from course_lib.files import atomic_write, sha256_file
from course_lib.names import NANOGPT
from course_lib.units import format_duration
from course_lib.versions import library_versions

from .models.architectures import parameter_count
from .models.export import PARITY_ATOL, export_record, onnx_parity
from .models.store import (
    ONNX_EXPORTER,
    ONNX_OPSET,
    CacheProblem,
    ModelFiles,
    Origin,
    cache_dir,
    check_entry,
    check_onnx,
    onnx_path,
    training_seed,
    write_meta,
)
from .models.training import device_description, progress_bar, seed_everything, stop_bar_here, torch_threads

NAME = NANOGPT  # the name its cache and results are filed under
INPUT_NAME = "tokens"
OUTPUT_NAME = "logits"
CACHE_FORMAT = 1

# --------------------------------------------------------------------------------------------
# The text and its characters
# --------------------------------------------------------------------------------------------
DEFAULT_MAX_CHARS = 1_000_000
# Generated for this machine (paths, compiler flags): not the same text on every machine.
_SKIPPED_PREFIXES = ("_sysconfigdata",)


def stdlib_files() -> list[Path]:
    """The standard library's top-level .py files, sorted by name (machine-specific ones left out)."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in stdlib.glob("*.py") if not p.name.startswith(_SKIPPED_PREFIXES))
    if not files:
        raise FileNotFoundError(
            f"Expected the Python standard library's .py files in {stdlib}; found none. "
            f"This Python ships its standard library compiled only: run the course with a "
            f"Python that has its sources (python.org, Debian's python3, conda, pyenv)."
        )
    return files


def corpus(max_chars: int = DEFAULT_MAX_CHARS) -> str:
    """The training text: the standard library's files in name order, joined, cut at `max_chars`.

    Read offline, the same on every machine with the same Python version.
    """
    if not isinstance(max_chars, int) or max_chars < 1:
        raise ValueError(f"max_chars must be a whole number >= 1; got {max_chars!r}.")
    parts, total = [], 0
    for path in stdlib_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        parts.append(text)
        total += len(text)
        if total >= max_chars:
            break
    return "".join(parts)[:max_chars]


UNKNOWN = "\x00"  # the slot every character outside the vocabulary maps to
VOCAB: tuple[str, ...] = (UNKNOWN, "\n", *(chr(c) for c in range(32, 127)))
VOCAB_SIZE = len(VOCAB)  # 97
_INDEX = {ch: i for i, ch in enumerate(VOCAB)}


def encode(text: str) -> np.ndarray:
    """Text as int64 token ids; characters outside the vocabulary become the unknown slot (0)."""
    return np.fromiter((_INDEX.get(ch, 0) for ch in text), dtype=np.int64, count=len(text))


def decode(tokens) -> str:
    """Token ids back to text (the unknown slot reads as U+FFFD, the replacement character)."""
    ids = np.asarray(tokens).reshape(-1)
    if ids.size and (ids.min() < 0 or ids.max() >= VOCAB_SIZE):
        raise ValueError(
            f"Token ids must be in 0..{VOCAB_SIZE - 1}; found {int(ids.min())}..{int(ids.max())}. "
            f"Decode what `encode` or the model produced."
        )
    return "".join("\ufffd" if i == 0 else VOCAB[i] for i in ids.tolist())


VALIDATION_FRACTION = 0.1


def split(tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(train, validation): the validation part is the last 10 % of the tokens."""
    cut = int(len(tokens) * (1 - VALIDATION_FRACTION))
    return tokens[:cut], tokens[cut:]


def unigram_perplexity(train: np.ndarray, validation: np.ndarray) -> float:
    """The perplexity on `validation` of character frequencies counted on `train` (add-one smoothed):
    the baseline a model that ignores context reaches."""
    counts = np.bincount(train, minlength=VOCAB_SIZE) + 1.0
    logp = np.log(counts / counts.sum())
    return float(np.exp(-logp[validation].mean()))


# --------------------------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class GPTConfig:
    """The model's shape. The defaults give 210,368 parameters."""

    vocab_size: int = VOCAB_SIZE
    context: int = 64
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 64


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention in which each position sees only itself and earlier positions."""

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.n_head = cfg.n_head
        self.qkv = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)
        self.proj = nn.Linear(cfg.n_embd, cfg.n_embd)
        mask = torch.tril(torch.ones(cfg.context, cfg.context, dtype=torch.bool))
        self.register_buffer("mask", mask.view(1, 1, cfg.context, cfg.context), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        # (b, t, c) -> (b, heads, t, head size)
        q, k, v = (z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))
        att = att.masked_fill(~self.mask[:, :, :t, :t], float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, c)
        return self.proj(y)


class Block(nn.Module):
    """LayerNorm, attention, residual; LayerNorm, MLP (4x wide, GELU), residual."""

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.n_embd)
        self.attn = CausalSelfAttention(cfg)
        self.ln2 = nn.LayerNorm(cfg.n_embd)
        self.mlp = nn.Sequential(
            nn.Linear(cfg.n_embd, 4 * cfg.n_embd), nn.GELU(), nn.Linear(4 * cfg.n_embd, cfg.n_embd)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """Token ids (batch, t <= context) -> next-character logits (batch, t, vocab)."""

    def __init__(self, cfg: GPTConfig = GPTConfig()):
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.wpe = nn.Embedding(cfg.context, cfg.n_embd)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.n_embd)
        self.head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        self.head.weight = self.wte.weight  # tied, as in nanoGPT: one matrix reads and writes characters
        self.apply(self._init)

    @staticmethod
    def _init(module: nn.Module) -> None:
        if isinstance(module, nn.Linear | nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        t = tokens.shape[1]
        x = self.wte(tokens) + self.wpe(torch.arange(t, device=tokens.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


# --------------------------------------------------------------------------------------------
# Training
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class NanoGPTRecipe:
    """Everything that decides what a training run produces. Changing it invalidates the cache.

    Training stops after `max_steps` or `max_seconds`, whichever comes first. The learning rate
    warms up, then follows a cosine to a tenth of `lr`, driven by the larger of the two fractions
    used (steps, seconds), so that it ends annealed either way. A run stopped by its steps is
    deterministic on the CPU; one stopped by the clock depends on the machine's speed.
    """

    config: GPTConfig = field(default_factory=GPTConfig)
    max_chars: int = DEFAULT_MAX_CHARS
    batch_size: int = 32
    lr: float = 3e-3
    warmup_steps: int = 100
    weight_decay: float = 0.01
    max_steps: int = 2000
    max_seconds: float = 115.0
    seed: int = 0
    threads: int = 2
    eval_windows: int = 256

    def to_dict(self) -> dict:
        return asdict(self)


DEFAULT_RECIPE = NanoGPTRecipe(seed=training_seed())  # $COURSE_TRAINING_SEED, as for the demo models


def _lr(recipe: NanoGPTRecipe, step: int, done: float) -> float:
    if step < recipe.warmup_steps:
        return recipe.lr * (step + 1) / recipe.warmup_steps
    return recipe.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(done, 1.0))))


def validation_windows(tokens: np.ndarray, context: int, n: int | None = None) -> np.ndarray:
    """Non-overlapping windows of context + 1 tokens (input and next-character target), in order."""
    count = (len(tokens) - 1) // context
    if n is not None:
        count = min(count, n)
    if count < 1:
        raise ValueError(
            f"Expected at least {context + 1} validation tokens for one window; found {len(tokens)}. "
            f"Raise max_chars."
        )
    starts = np.arange(count) * context
    return tokens[starts[:, None] + np.arange(context + 1)]


def _torch_loss(model: nn.Module, windows: np.ndarray, batch: int = 64) -> float:
    """Mean cross-entropy (nats per character) of the PyTorch model on windows of context + 1."""
    model.eval()
    total, count = 0.0, 0
    with torch.inference_mode():
        for i in range(0, len(windows), batch):
            w = torch.from_numpy(windows[i : i + batch])
            logits = model(w[:, :-1])
            loss = F.cross_entropy(logits.flatten(0, 1), w[:, 1:].flatten(), reduction="sum")
            total, count = total + float(loss), count + w[:, 1:].numel()
    return total / count


def train(
    recipe: NanoGPTRecipe = DEFAULT_RECIPE, progress: bool = True, log: Callable[[str], None] = print
) -> tuple[GPT, dict]:
    """Train the GPT on the corpus; returns the model and its record (steps, seconds, losses, why
    it stopped, validation perplexity against the unigram baseline)."""
    seed_everything(recipe.seed)
    text = corpus(recipe.max_chars)
    tokens = encode(text)
    train_tokens, val_tokens = split(tokens)
    cfg = recipe.config
    if len(train_tokens) <= cfg.context + 1:
        raise ValueError(
            f"Expected more than {cfg.context + 1} training characters; found {len(train_tokens)} "
            f"(max_chars={recipe.max_chars}). Raise max_chars."
        )
    val_windows = validation_windows(val_tokens, cfg.context, recipe.eval_windows)
    data = torch.from_numpy(train_tokens)
    offsets = torch.arange(cfg.context + 1)

    model = GPT(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=recipe.lr, weight_decay=recipe.weight_decay)
    gen = torch.Generator().manual_seed(recipe.seed)
    losses: list[float] = []
    step, stopped_by = 0, "steps"
    with (
        torch_threads(recipe.threads),
        progress_bar(recipe.max_steps, "NanoGPT on the stdlib", progress) as bar,
    ):
        start = time.perf_counter()
        model.train()
        while step < recipe.max_steps:
            elapsed = time.perf_counter() - start
            if elapsed >= recipe.max_seconds:
                stopped_by = "time"
                stop_bar_here(bar)
                break
            done = max(step / recipe.max_steps, elapsed / recipe.max_seconds)
            for group in opt.param_groups:
                group["lr"] = _lr(recipe, step, done)
            starts = torch.randint(len(data) - cfg.context - 1, (recipe.batch_size,), generator=gen)
            batch = data[starts[:, None] + offsets]
            logits = model(batch[:, :-1])
            loss = F.cross_entropy(logits.flatten(0, 1), batch[:, 1:].flatten())
            opt.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            losses.append(loss.item())
            step += 1
            bar.update()
            if step % 10 == 0 or step == recipe.max_steps:
                per_step = (time.perf_counter() - start) / step
                left = min(
                    per_step * (recipe.max_steps - step), recipe.max_seconds - (time.perf_counter() - start)
                )
                bar.set_postfix(loss=f"{np.mean(losses[-50:]):.3f}", stops_in=format_duration(max(left, 0)))
        seconds = time.perf_counter() - start
        device = device_description(torch.device("cpu"))
        val_loss = _torch_loss(model, val_windows)
    train_loss = float(np.mean(losses[-50:])) if losses else float("nan")
    unigram = unigram_perplexity(train_tokens, val_tokens)
    ppl = math.exp(val_loss)
    record = {
        "parameters": parameter_count(model),
        "steps": step,
        "seconds": seconds,
        "stopped_by": stopped_by,
        "first_loss": losses[0] if losses else float("nan"),
        "train_loss": train_loss,
        "validation_loss": val_loss,
        "validation_perplexity": ppl,
        "unigram_perplexity": unigram,
        # "Clearly below" the baseline: at most three quarters of it (here it reaches about a fifth).
        "beats_unigram": ppl < 0.75 * unigram,
        "corpus_chars": len(text),
        "validation_windows": len(val_windows),
        "device": device,
    }
    say = bar.write if progress else log
    say(
        f"Trained {record['parameters']:,} parameters for {step:,} steps in {format_duration(seconds)} "
        f"(stopped by {'the time budget' if stopped_by == 'time' else 'the step count'}): validation "
        f"perplexity {ppl:.2f} per character, against {unigram:.2f} for character frequencies alone."
    )
    return model.eval(), record


# --------------------------------------------------------------------------------------------
# ONNX: export, perplexity, sample inputs
# --------------------------------------------------------------------------------------------
def export_onnx(model: GPT, path: str | Path, props: dict[str, str] | None = None) -> Path:
    """Export with the dynamo exporter: `tokens` int64 [batch, context] -> `logits` float32
    [batch, context, vocab], dynamic batch, one self-contained file, checked by `onnx.checker`."""
    import onnx

    path = Path(path)
    cfg = model.cfg
    example = torch.zeros((2, cfg.context), dtype=torch.int64)

    def write(tmp: Path) -> None:
        with torch.no_grad():
            torch.onnx.export(
                model.eval(),
                (example,),
                str(tmp),
                input_names=[INPUT_NAME],
                output_names=[OUTPUT_NAME],
                opset_version=ONNX_OPSET,
                dynamo=True,
                external_data=False,
                verbose=False,
                dynamic_shapes=({0: torch.export.Dim("batch")},),
            )
        proto = onnx.load(str(tmp))
        onnx.helper.set_model_props(
            proto,
            {
                "course.model": NAME,
                "vocabulary": json.dumps("".join(VOCAB)),
                "unknown_token": "0",
                "context": str(cfg.context),
                "input": "int64 character ids, [batch, context]",
                **(props or {}),
            },
        )
        proto.producer_name = "onnx-quant-course"
        onnx.checker.check_model(proto, full_check=True)
        onnx.save(proto, str(tmp))

    atomic_write(path, write)
    return path


def _session(session_or_path, threads: int | None = None):
    from course_lib.measure import make_session

    return (
        make_session(session_or_path, threads) if isinstance(session_or_path, str | Path) else session_or_path
    )


def perplexity(session_or_path, tokens_windows: np.ndarray, batch_size: int = 64) -> float:
    """exp(mean cross-entropy) of next-character predictions, run by ONNX Runtime.

    `tokens_windows` is int64 [n, context + 1]: each row's first `context` tokens are the input,
    its last `context` the targets. A model that always predicts the uniform distribution scores
    exactly the vocabulary size: perplexity is the number of equally likely characters the model
    is, on average, choosing between.
    """
    windows = np.asarray(tokens_windows)
    if windows.ndim != 2 or windows.shape[1] < 2 or not np.issubdtype(windows.dtype, np.integer):
        raise ValueError(
            f"tokens_windows must be integer token ids of shape [n, context + 1]; found "
            f"{windows.dtype} {windows.shape}. Use validation_windows(tokens, context)."
        )
    from course_lib.measure.sessions import run_batches

    windows = windows.astype(np.int64)
    runs = run_batches(_session(session_or_path), {INPUT_NAME: windows[:, :-1]}, batch_size, OUTPUT_NAME)
    total, count = 0.0, 0
    for i, out in zip(range(0, len(windows), batch_size), runs, strict=True):
        w = windows[i : i + batch_size]
        logits = out.astype(np.float64)
        peak = logits.max(axis=-1, keepdims=True)
        log_norm = np.log(np.exp(logits - peak).sum(axis=-1)) + peak[..., 0]
        target = np.take_along_axis(logits, w[:, 1:, None], axis=-1)[..., 0]
        total += float((log_norm - target).sum())
        count += target.size
    return math.exp(total / count)


def evaluation_windows(recipe: NanoGPTRecipe = DEFAULT_RECIPE) -> np.ndarray:
    """The fixed validation windows (int64 [n, context + 1]) the record's perplexity is measured on."""
    _, val = split(encode(corpus(recipe.max_chars)))
    return validation_windows(val, recipe.config.context, recipe.eval_windows)


def sample_windows(n: int = 100, seed: int = 0, recipe: NanoGPTRecipe = DEFAULT_RECIPE) -> np.ndarray:
    """`n` model inputs (int64 [n, context]) cut at seeded random places in the validation text:
    calibration data, or sample inputs for the audit."""
    _, val = split(encode(corpus(recipe.max_chars)))
    context = recipe.config.context
    if len(val) < context:
        raise ValueError(f"Expected at least {context} validation tokens; found {len(val)}. Raise max_chars.")
    starts = np.random.default_rng(seed).integers(0, len(val) - context + 1, size=n)
    return val[starts[:, None] + np.arange(context)].astype(np.int64)


def save_sample_inputs(
    path: str | Path, n: int = 100, seed: int = 0, recipe: NanoGPTRecipe = DEFAULT_RECIPE
) -> Path:
    """Write `sample_windows(n, seed)` as an .npz keyed by the model's input name ('tokens')."""
    path = Path(path)
    windows = sample_windows(n, seed, recipe)

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as f:
            np.savez(f, **{INPUT_NAME: windows})

    atomic_write(path, write)
    return path


# --------------------------------------------------------------------------------------------
# The cache: atomic writes, verified reads
# --------------------------------------------------------------------------------------------
def corpus_fingerprint(recipe: NanoGPTRecipe = DEFAULT_RECIPE) -> str:
    """The SHA-256 of the corpus's UTF-8 bytes (it changes with the Python version)."""
    import hashlib

    return hashlib.sha256(corpus(recipe.max_chars).encode("utf-8")).hexdigest()


def _check_weights(directory: Path, recipe: NanoGPTRecipe) -> dict:
    return check_entry(
        directory,
        recipe,
        corpus_fingerprint(recipe),
        fingerprint_key="corpus_sha256",
        stale_data="trained on a different corpus (another Python version?)",
        cache_format=CACHE_FORMAT,
    )


def _load_weights(directory: Path, recipe: NanoGPTRecipe) -> GPT:
    try:
        state = torch.load(directory / "weights.pt", map_location="cpu", weights_only=True)
        model = GPT(recipe.config)
        model.load_state_dict(state, strict=True)
    except Exception as exc:
        raise CacheProblem(f"corrupt: weights do not load ({type(exc).__name__}: {exc})") from exc
    return model.eval()


def _export_and_record(model: GPT, directory: Path, meta: dict, recipe: NanoGPTRecipe) -> Path:
    path = export_onnx(model, directory / f"{NAME}.onnx", {"weights_sha256": meta["weights_sha256"]})
    inputs = sample_windows(64, seed=1, recipe=recipe)
    diff = onnx_parity(model, path, inputs)
    if diff > PARITY_ATOL:
        raise RuntimeError(
            f"The ONNX export of the NanoGPT disagrees with PyTorch: expected max |diff| <= "
            f"{PARITY_ATOL:.0e}, found {diff:.2e}. Report it with `python -m course_lib doctor`'s output."
        )
    meta["onnx"] = {
        **export_record(path, diff, len(inputs)),
        "validation_perplexity": perplexity(path, evaluation_windows(recipe)),
    }
    write_meta(directory / "meta.json", meta)
    return path


def _train_and_cache(directory: Path, recipe: NanoGPTRecipe, progress: bool, log) -> tuple[GPT, dict]:
    model, record = train(recipe, progress=progress, log=log)
    weights = directory / "weights.pt"
    atomic_write(weights, lambda p: torch.save(model.state_dict(), p))
    meta = {
        "format": CACHE_FORMAT,
        "name": NAME,
        "recipe": json.loads(json.dumps(recipe.to_dict())),
        "corpus_sha256": corpus_fingerprint(recipe),
        "python": sys.version.split()[0],
        "versions": library_versions(),
        "trained_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "weights_sha256": sha256_file(weights),
        **record,
    }
    # The metadata names the weights' hash, so it is written second: a crash in between leaves an
    # entry whose hash does not match, which the next read rebuilds.
    write_meta(directory / "meta.json", meta)
    with contextlib.suppress(FileNotFoundError):
        (directory / f"{NAME}.onnx").unlink()  # an older export belongs to older weights
    return model, meta


def check_cache(recipe: NanoGPTRecipe = DEFAULT_RECIPE) -> dict:
    """The cache entry's metadata when its weights and ONNX file match their records and `recipe`;
    CacheProblem with the reason otherwise."""
    meta = _check_weights(cache_dir(NAME), recipe)
    check_onnx(onnx_path(NAME), meta.get("onnx", {}), exporter=ONNX_EXPORTER, opset=ONNX_OPSET)
    return meta


def cached_files(
    progress: bool = True, log: Callable[[str], None] = print, recipe: NanoGPTRecipe = DEFAULT_RECIPE
) -> ModelFiles:
    """The trained NanoGPT's verified fp32 ONNX file and its record, as `models.get("nanogpt")`
    returns them (`meta["onnx"]["validation_perplexity"]`: the export's perplexity).

    From the cache when every recorded SHA-256 matches; else exported again from verified weights,
    else trained here (about two minutes on 2 cores), each time with a message saying why.
    """
    directory = cache_dir(NAME)
    origin = Origin.CACHE
    try:
        meta = _check_weights(directory, recipe)
    except CacheProblem as exc:
        if str(exc) != "not trained yet":
            log(f"The NanoGPT cache in {directory} cannot be used ({exc}); training it again.")
        else:
            log(f"Training the NanoGPT here (at most {format_duration(recipe.max_seconds)}).")
        model, meta = _train_and_cache(directory, recipe, progress, log)
        origin = Origin.TRAINED
    try:
        path = check_onnx(onnx_path(NAME), meta.get("onnx", {}), exporter=ONNX_EXPORTER, opset=ONNX_OPSET)
    except CacheProblem as exc:
        if origin is not Origin.TRAINED:
            log(f"The NanoGPT's ONNX file cannot be used ({exc}); exporting it again.")
            origin = Origin.EXPORTED
            try:
                model = _load_weights(directory, recipe)
            except CacheProblem as problem:
                log(f"The NanoGPT cache in {directory} cannot be used ({problem}); training it again.")
                model, meta = _train_and_cache(directory, recipe, progress, log)
                origin = Origin.TRAINED
        path = _export_and_record(model, directory, meta, recipe)
    return ModelFiles(NAME, path, meta, origin)
