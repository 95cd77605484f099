"""The lesson 07 NanoGPT: its corpus, vocabulary, model, training, ONNX export, perplexity and cache.

Everything runs with a tiny recipe (a 16-wide, one-block model on 20,000 characters, a few dozen
steps), so the whole file takes seconds; only the parameter count looks at the default model.
"""

from __future__ import annotations

import dataclasses
import json
import math
import socket

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from onnx import TensorProto, helper

import course_machinery.models as models
import course_machinery.nanogpt as ng
from course_lib.files import sha256_file

TINY = ng.NanoGPTRecipe(
    config=ng.GPTConfig(context=16, n_layer=1, n_head=2, n_embd=16),
    max_chars=20_000,
    batch_size=8,
    lr=1e-2,
    warmup_steps=5,
    max_steps=40,
    max_seconds=600.0,
    eval_windows=32,
    threads=1,
)


class Log(list):
    def __call__(self, msg: str) -> None:
        self.append(msg)


@pytest.fixture(scope="module")
def tiny_trained():
    return ng.train(TINY, progress=False, log=Log())


# ---------------------------------------------------------------------------------- the text
def test_corpus_is_the_stdlib_source_read_offline_and_deterministic(monkeypatch):
    def no_network(*args, **kwargs):
        raise AssertionError("the corpus must not touch the network")

    monkeypatch.setattr(socket, "socket", no_network)
    text = ng.corpus(5_000)
    assert len(text) == 5_000 and text == ng.corpus(5_000)
    files = ng.stdlib_files()
    assert files == sorted(files) and not any(f.name.startswith("_sysconfigdata") for f in files)
    joined = "".join(f.read_text(encoding="utf-8") for f in files[:3])
    assert text[: min(len(joined), 5_000)] == joined[:5_000]
    assert ng.corpus(20_000).startswith(text)


def test_corpus_rejects_a_bad_cap():
    with pytest.raises(ValueError, match="max_chars must be a whole number"):
        ng.corpus(0)


def test_vocabulary_round_trip_and_unknown_slot():
    assert ng.VOCAB_SIZE == 97 and len(set(ng.VOCAB)) == ng.VOCAB_SIZE and ng.VOCAB[0] == ng.UNKNOWN
    code = 'def f(x):\n    return {"a": x ** 2}  # ~`|\\\n'
    tokens = ng.encode(code)
    assert tokens.dtype == np.int64 and 0 not in tokens
    assert ng.decode(tokens) == code
    odd = ng.encode("é\tx")
    assert odd.tolist()[:2] == [0, 0] and ng.decode(odd) == "\ufffd\ufffdx"
    with pytest.raises(ValueError, match="Token ids must be in 0..96"):
        ng.decode([97])


def test_split_keeps_the_last_tenth_for_validation():
    tokens = np.arange(1000)
    train, val = ng.split(tokens)
    assert len(val) == 100 and val[0] == 900 and np.array_equal(np.concatenate([train, val]), tokens)


# ---------------------------------------------------------------------------------- the model
def test_default_model_has_about_210k_parameters():
    model = ng.GPT()
    assert models.parameter_count(model) == 210_368
    assert model.head.weight is model.wte.weight  # tied: counted once
    logits = model(torch.zeros((2, 64), dtype=torch.int64))
    assert logits.shape == (2, 64, ng.VOCAB_SIZE)


def test_attention_is_causal():
    torch.manual_seed(0)
    model = ng.GPT(TINY.config).eval()
    a = torch.randint(1, ng.VOCAB_SIZE, (1, 16))
    b = a.clone()
    b[0, 10:] = (b[0, 10:] % 50) + 1  # change only the future of position 9
    with torch.inference_mode():
        assert torch.allclose(model(a)[0, :10], model(b)[0, :10], atol=1e-6)


# ---------------------------------------------------------------------------------- training
def test_training_reduces_the_loss_and_is_seeded(tiny_trained):
    model, record = tiny_trained
    assert record["stopped_by"] == "steps" and record["steps"] == TINY.max_steps
    assert record["train_loss"] < record["first_loss"] - 0.5
    assert record["validation_loss"] < math.log(ng.VOCAB_SIZE) - 0.5
    assert record["validation_perplexity"] == pytest.approx(math.exp(record["validation_loss"]))
    again, _ = ng.train(TINY, progress=False, log=Log())
    for x, y in zip(model.state_dict().values(), again.state_dict().values(), strict=True):
        assert torch.equal(x, y)


def test_training_stops_at_the_time_budget_and_says_so():
    log = Log()
    _, record = ng.train(dataclasses.replace(TINY, max_seconds=0.0), progress=False, log=log)
    assert record["stopped_by"] == "time" and record["steps"] == 0
    assert "stopped by the time budget" in log[-1]


def test_a_bar_stopped_by_the_time_budget_ends_finished_not_red():
    """In a notebook, tqdm draws a bar closed short of its total in red ('danger'): a training run
    stopped by its time budget (lesson 07 on a slow CPU) would look failed. It ends at 100 % of the
    steps it ran instead."""
    from tqdm.notebook import tqdm

    from course_machinery.models.training import stop_bar_here

    for stop in (False, True):
        bar = tqdm(total=2000)
        bar.update(513)
        if stop:
            stop_bar_here(bar)
        bar.close()
        progress = bar.container.children[1]
        ended = (progress.value, progress.max, progress.bar_style)
        assert ended == ((513, 513, "success") if stop else (513, 2000, "danger")), ended


# ---------------------------------------------------------------------------------- ONNX
def test_export_matches_pytorch_with_a_dynamic_batch(tiny_trained, tmp_path):
    model, _ = tiny_trained
    path = ng.export_onnx(model, tmp_path / "tiny.onnx")
    proto = onnx.load(str(path))
    (inp,), (out,) = proto.graph.input, proto.graph.output
    assert (inp.name, inp.type.tensor_type.elem_type) == ("tokens", TensorProto.INT64)
    assert (out.name, out.type.tensor_type.elem_type) == ("logits", TensorProto.FLOAT)
    assert inp.type.tensor_type.shape.dim[0].dim_param and inp.type.tensor_type.shape.dim[1].dim_value == 16
    windows = ng.sample_windows(5, seed=3, recipe=TINY)
    assert models.onnx_parity(model, path, windows) < 1e-4
    logits = ort.InferenceSession(str(path)).run(None, {"tokens": windows})[0]
    assert logits.shape == (5, 16, ng.VOCAB_SIZE) and logits.dtype == np.float32
    props = {p.key: p.value for p in proto.metadata_props}
    assert json.loads(props["vocabulary"]) == "".join(ng.VOCAB)


def _uniform_model(path, context: int) -> None:
    """An ONNX model whose logits are all zero: every character equally likely."""
    graph = helper.make_graph(
        [
            helper.make_node("Cast", ["tokens"], ["f"], to=TensorProto.FLOAT),
            helper.make_node("Unsqueeze", ["f", "axis"], ["f3"]),
            helper.make_node("Mul", ["f3", "zeros"], ["logits"]),
        ],
        "uniform",
        [helper.make_tensor_value_info("tokens", TensorProto.INT64, ["batch", context])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", context, ng.VOCAB_SIZE])],
        [
            helper.make_tensor("axis", TensorProto.INT64, [1], [-1]),
            helper.make_tensor("zeros", TensorProto.FLOAT, [ng.VOCAB_SIZE], [0.0] * ng.VOCAB_SIZE),
        ],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(path))


def test_perplexity_of_a_uniform_model_is_the_vocabulary_size(tmp_path):
    path = tmp_path / "uniform.onnx"
    _uniform_model(path, 16)
    windows = ng.evaluation_windows(TINY)
    assert ng.perplexity(path, windows) == pytest.approx(ng.VOCAB_SIZE, rel=1e-9)
    session = ort.InferenceSession(str(path))
    assert ng.perplexity(session, windows, batch_size=7) == pytest.approx(ng.VOCAB_SIZE, rel=1e-9)


def test_trained_perplexity_by_onnx_matches_the_training_record(tiny_trained, tmp_path):
    model, record = tiny_trained
    path = ng.export_onnx(model, tmp_path / "tiny.onnx")
    ppl = ng.perplexity(path, ng.evaluation_windows(TINY))
    assert ppl == pytest.approx(record["validation_perplexity"], rel=1e-4)
    assert ppl < record["unigram_perplexity"] * 1.2  # 40 steps: about what character counts give


def test_perplexity_rejects_inputs_without_targets(tmp_path):
    with pytest.raises(ValueError, match=r"\[n, context \+ 1\]"):
        ng.perplexity(tmp_path / "unused.onnx", np.zeros((4,), dtype=np.int64))


def test_sample_windows_are_seeded_validation_inputs(tmp_path):
    a = ng.sample_windows(10, seed=1, recipe=TINY)
    assert a.shape == (10, 16) and a.dtype == np.int64 and a.max() < ng.VOCAB_SIZE
    assert np.array_equal(a, ng.sample_windows(10, seed=1, recipe=TINY))
    assert not np.array_equal(a, ng.sample_windows(10, seed=2, recipe=TINY))
    _, val = ng.split(ng.encode(ng.corpus(TINY.max_chars)))
    assert ng.decode(a[0]) in ng.decode(val)
    path = ng.save_sample_inputs(tmp_path / "samples.npz", 10, seed=1, recipe=TINY)
    with np.load(path) as saved:
        assert list(saved) == ["tokens"] and np.array_equal(saved["tokens"], a)


# ---------------------------------------------------------------------------------- the cache
def test_cache_is_verified_and_a_corrupt_entry_is_rebuilt(private_data_dir, monkeypatch):
    log = Log()
    first = models.get("nanogpt", progress=False, log=log, recipe=TINY)
    assert first.trained and first.onnx.parent == private_data_dir / "models" / "nanogpt"
    assert first.meta["onnx"]["sha256"] == sha256_file(first.onnx)
    assert first.meta["onnx"]["parity_max_abs_diff"] < 1e-4
    assert first.meta["onnx"]["validation_perplexity"] == pytest.approx(
        first.meta["validation_perplexity"], rel=1e-4
    )

    def must_not_train(*args, **kwargs):
        raise AssertionError("a verified cache must not be retrained")

    with monkeypatch.context() as patched:
        patched.setattr(ng, "train", must_not_train)
        log.clear()
        again = models.get("nanogpt", progress=False, log=log, recipe=TINY)
        assert log == [] and not again.trained and again.onnx == first.onnx

        # A damaged ONNX file is exported again from the verified weights, not retrained.
        first.onnx.write_bytes(first.onnx.read_bytes()[:-10])
        log.clear()
        fixed = models.get("nanogpt", progress=False, log=log, recipe=TINY)
        assert any("ONNX file cannot be used (corrupt" in m for m in log) and not fixed.trained
        assert sha256_file(fixed.onnx) == fixed.meta["onnx"]["sha256"]

    # Damaged weights are trained again.
    weights = first.weights.read_bytes()
    first.weights.write_bytes(weights[:100] + bytes([weights[100] ^ 1]) + weights[101:])
    log.clear()
    rebuilt = models.get("nanogpt", progress=False, log=log, recipe=TINY)
    assert any("cannot be used (corrupt: weights file" in m for m in log) and rebuilt.trained
    assert sha256_file(rebuilt.weights) == rebuilt.meta["weights_sha256"]


def test_cache_with_another_recipe_is_stale(private_data_dir):
    models.get("nanogpt", progress=False, log=Log(), recipe=TINY)
    log = Log()
    other = dataclasses.replace(TINY, max_steps=5)
    assert models.get("nanogpt", progress=False, log=log, recipe=other).trained
    assert any("stale: trained with a different recipe" in m for m in log)


def test_cache_trained_on_another_corpus_is_stale(private_data_dir, monkeypatch):
    """The corpus is this Python's standard library: another Python version reads other text."""
    models.get("nanogpt", progress=False, log=Log(), recipe=TINY)
    monkeypatch.setattr(ng, "corpus_fingerprint", lambda recipe=None: "0" * 64)
    log = Log()
    assert models.get("nanogpt", progress=False, log=log, recipe=TINY).trained
    assert any("stale: trained on a different corpus (another Python version?)" in m for m in log), log
