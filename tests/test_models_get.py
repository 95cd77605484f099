"""`models.get(name)`: one call for every model of the course, one record, one cache check.

The demo models and the text encoder come from the prepared course data directory; the NanoGPT
is trained with a tiny recipe, and the two-moons MLP again, in a private data directory, where
they can be broken.
"""

from __future__ import annotations

import json

import onnxruntime as ort
import pytest

import course_machinery.models as models
import course_machinery.nanogpt as ng
from course_lib.files import sha256_file
from course_machinery.models import store

TINY = ng.NanoGPTRecipe(
    config=ng.GPTConfig(context=16, n_layer=1, n_head=2, n_embd=16),
    max_chars=20_000,
    batch_size=8,
    max_steps=20,
    warmup_steps=5,
    eval_windows=16,
    threads=1,
)


class Log(list):
    def __call__(self, msg: str) -> None:
        self.append(msg)


def _check_record(record: models.ModelFiles, name: str) -> None:
    """The record names its model, its files are in the model's cache entry, every ONNX file is the
    one its meta.json records, and ONNX Runtime loads it."""
    assert isinstance(record, models.ModelFiles) and record.name == name
    assert record.onnx == models.onnx_path(name) and record.directory == models.cache_dir(name)
    on_disk = json.loads(models.meta_path(name).read_text())
    assert on_disk == json.loads(json.dumps(record.meta))  # the record is what meta.json holds
    assert record.onnx in record.onnx_files.values()
    for path in record.onnx_files.values():
        assert path.is_file() and path.parent == record.directory
        recorded = next(
            r
            for r in [on_disk.get("onnx"), *on_disk.get("files", {}).values()]
            if r and r["file"] == path.name
        )
        assert recorded["sha256"] == sha256_file(path)
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        assert session.get_inputs() and session.get_outputs()
    assert record.parameters > 0


@pytest.mark.parametrize("name", ["fashion_resnet18", "text_encoder"])
def test_get_gives_the_prepared_models_verified_files(name):
    log = Log()
    record = models.get(name, train=False, log=log)
    _check_record(record, name)
    again = models.get(name, train=False, log=log)
    assert again.origin is models.Origin.CACHE and again.onnx == record.onnx
    assert models.status(name) == "ok"


def test_the_text_encoder_records_its_files_as_every_model_does():
    record = models.get("text_encoder", log=Log())
    assert set(record.onnx_files) == {"raw", "optimized"} and record.onnx == record.onnx_files["raw"]
    for kind, path in record.onnx_files.items():
        expected = models.export_record(path, 0.0, 0, opset=record.meta["opset"], exporter="x")
        assert set(record.meta["files"][kind]) == set(expected), kind
        assert record.meta["files"][kind]["sha256"] == expected["sha256"]


def test_the_models_trained_here_come_from_the_same_call(private_data_dir):
    log = Log()
    mlp = models.get("moons_mlp", progress=False, log=log)
    assert mlp.origin is models.Origin.TRAINED and mlp.trained and mlp.weights is not None
    _check_record(mlp, "moons_mlp")
    gpt = models.get("nanogpt", progress=False, log=log, recipe=TINY)
    assert gpt.trained and gpt.weights is not None and set(gpt.onnx_files) == {"fp32"}
    _check_record(gpt, "nanogpt")
    assert models.status("moons_mlp") == "ok"
    log.clear()
    assert not models.get("moons_mlp", log=log).trained and log == []  # the verified cache, silently


def test_a_corrupted_onnx_file_is_refused_with_what_was_expected_and_found_then_rebuilt(private_data_dir):
    record = models.get("moons_mlp", progress=False, log=Log())
    expected = record.meta["onnx"]["sha256"]
    raw = bytearray(record.onnx.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    record.onnx.write_bytes(bytes(raw))
    found = sha256_file(record.onnx)

    with pytest.raises(store.CacheProblem) as refused:
        store.check_onnx(record.onnx, record.meta["onnx"])
    message = str(refused.value)
    assert message.startswith("corrupt: moons_mlp.onnx does not match its export record")
    assert expected[:12] in message and found[:12] in message  # what meta.json expected, what is there
    assert models.status("moons_mlp") == message

    log = Log()
    rebuilt = models.get("moons_mlp", train=False, log=log)  # from the verified weights: no training
    assert log == [f"The cached moons_mlp's ONNX file cannot be used ({message}); exporting again."]
    assert sha256_file(rebuilt.onnx) == rebuilt.meta["onnx"]["sha256"] != found
    assert not rebuilt.trained and models.status("moons_mlp") == "ok"


def test_a_model_that_cannot_be_rebuilt_is_reported_with_the_fix(private_data_dir):
    record = models.get("moons_mlp", progress=False, log=Log())
    weights = record.weights
    weights.write_bytes(weights.read_bytes()[:-10])
    assert models.status("moons_mlp").startswith("corrupt: weights file does not match")
    with pytest.raises(FileNotFoundError) as refused:
        models.get("moons_mlp", train=False, log=Log())
    message = str(refused.value)
    assert "corrupt" in message and "python -m course_lib prepare" in message


def test_an_unknown_name_is_refused_with_the_known_names():
    with pytest.raises(KeyError) as refused:
        models.get("resnet50")
    message = str(refused.value)
    assert "'resnet50'" in message
    assert all(name in message for name in ("moons_mlp", "fashion_resnet18", "text_encoder", "nanogpt"))
    with pytest.raises(KeyError, match="expected one of moons_mlp"):
        models.status("gpt2")
    with pytest.raises(ValueError, match="recipe= applies to 'nanogpt' only"):
        models.get("moons_mlp", recipe=TINY)
