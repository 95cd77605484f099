from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

import course_lib.data as data
import course_lib.files as files
import course_machinery.models as models
import course_machinery.models.pipeline as pipeline
import course_machinery.models.store as store
import course_machinery.models.training as training


class Log(list):
    def __call__(self, msg: str) -> None:
        self.append(msg)


# ---------------------------------------------------------------------------------- two moons
def test_moons_mlp_trains_caches_and_reloads(private_data_dir):
    log = Log()
    trained = pipeline.load_model("moons_mlp", progress=False, log=log)
    assert any("Training moons_mlp" in m for m in log)
    assert trained.test_accuracy >= 0.95
    meta = json.loads((models.cache_dir("moons_mlp") / "meta.json").read_text())
    assert meta["weights_sha256"] == files.sha256_file(models.cache_dir("moons_mlp") / "weights.pt")
    assert meta["recipe"] == models.MOONS_RECIPE.to_dict() and "torch" in meta["versions"]

    log.clear()
    again = pipeline.load_model("moons_mlp", log=log)
    assert log == []  # served from the cache, nothing retrained
    for a, b in zip(trained.module.state_dict().values(), again.module.state_dict().values(), strict=True):
        assert torch.equal(a, b)


@pytest.fixture
def cached_mlp(private_data_dir):
    pipeline.load_model("moons_mlp", progress=False, log=Log())
    return models.cache_dir("moons_mlp")


def test_corrupt_weights_are_rebuilt_with_a_message(cached_mlp):
    weights = cached_mlp / "weights.pt"
    raw = bytearray(weights.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    weights.write_bytes(bytes(raw))
    assert models.cache_status("moons_mlp").startswith("corrupt")
    log = Log()
    rebuilt = pipeline.load_model("moons_mlp", progress=False, log=log)
    assert "cannot be used (corrupt" in log[0]
    assert models.cache_status("moons_mlp") == "ok" and rebuilt.test_accuracy >= 0.95


def test_unreadable_metadata_is_rebuilt(cached_mlp):
    (cached_mlp / "meta.json").write_text("{not json")
    log = Log()
    pipeline.load_model("moons_mlp", progress=False, log=log)
    assert "metadata unreadable" in log[0]


def test_weights_that_do_not_load_are_rebuilt(cached_mlp):
    # A file whose hash is recorded but which is not a state dict of this architecture.
    weights = cached_mlp / "weights.pt"
    torch.save({"something": torch.zeros(3)}, weights)
    meta = json.loads((cached_mlp / "meta.json").read_text())
    meta["weights_sha256"] = files.sha256_file(weights)
    (cached_mlp / "meta.json").write_text(json.dumps(meta))
    assert "do not load" in models.cache_status("moons_mlp")


def test_stale_recipe_is_rebuilt(cached_mlp, monkeypatch):
    spec = models.MODELS["moons_mlp"]
    changed = models.Recipe(**{**spec.recipe.to_dict(), "augment": (), "epochs": spec.recipe.epochs + 1})
    monkeypatch.setitem(models.MODELS, "moons_mlp", models.ModelSpec(**{**spec.__dict__, "recipe": changed}))
    assert models.cache_status("moons_mlp") == "stale: trained with a different recipe"
    with pytest.raises(FileNotFoundError, match=r"python -m course_lib prepare"):
        pipeline.load_model("moons_mlp", train=False)


def test_atomic_write_keeps_the_old_file_when_writing_fails(tmp_path):
    target = tmp_path / "file.bin"
    target.write_bytes(b"old and complete")

    def broken(path):
        path.write_bytes(b"half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        files.atomic_write(target, broken)
    assert target.read_bytes() == b"old and complete"
    assert [p.name for p in tmp_path.iterdir()] == ["file.bin"]  # no temporary left behind


@pytest.mark.skipif(os.name == "nt", reason="Windows keeps no POSIX modes")
def test_atomic_write_gives_a_new_file_the_mode_a_plain_write_would_and_keeps_an_old_ones(tmp_path):
    plain = tmp_path / "plain.txt"
    plain.write_text("x")  # what open() gives under this umask
    new = tmp_path / "new.txt"
    files.atomic_write(new, lambda tmp: tmp.write_text("y"))
    assert new.stat().st_mode & 0o777 == plain.stat().st_mode & 0o777 != 0o600
    plain.chmod(0o640)  # a file's own mode survives being written again
    files.atomic_write(plain, lambda tmp: tmp.write_text("z"))
    assert plain.stat().st_mode & 0o777 == 0o640 and plain.read_text() == "z"


def test_onnx_file_that_changed_is_exported_again(cached_mlp):
    path = models.get("moons_mlp", log=Log()).onnx
    first = files.sha256_file(path)
    model = onnx.load(path)
    model.producer_name = "tampered"
    onnx.save(model, path)
    log = Log()
    path = models.get("moons_mlp", log=log).onnx
    assert "exporting again" in log[0] and files.sha256_file(path) == first


def test_a_verified_onnx_file_is_found_without_importing_torch(cached_mlp):
    # Lessons that need only the ONNX file must not pay torch's half gigabyte (Binder: 2 GB).
    path = models.get("moons_mlp", log=Log()).onnx
    code = (
        "import sys, course_lib as cl\n"
        "path = cl.models.get('moons_mlp', train=False).onnx\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
        "print(path)\n"
    )
    env = {**os.environ, "COURSE_DATA_DIR": str(data.data_dir())}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(path)


def test_the_torch_free_check_refuses_what_the_full_check_refuses(cached_mlp, monkeypatch):
    path = models.get("moons_mlp", log=Log()).onnx
    assert store.check_demo("moons_mlp")[0] == path
    model = onnx.load(path)
    model.producer_name = "tampered"
    onnx.save(model, path)
    with pytest.raises(store.CacheProblem, match="does not match its export record"):
        store.check_demo("moons_mlp")[0]
    log = Log()
    assert models.get("moons_mlp", log=log).onnx == path and "exporting again" in log[0]
    assert store.check_demo("moons_mlp")[0] == path  # the new export is recorded
    recipe = store.RECIPES["moons_mlp"]
    changed = store.Recipe(**{**recipe.to_dict(), "augment": (), "epochs": recipe.epochs + 1})
    monkeypatch.setitem(store.RECIPES, "moons_mlp", changed)
    with pytest.raises(store.CacheProblem, match="stale: trained with a different recipe"):
        store.check_demo("moons_mlp")[0]


def test_a_model_is_exported_by_name_in_a_fresh_process(cached_mlp, tmp_path):
    from course_lib import measure

    out, memory = measure.peak_memory_of(pipeline.export_trained, "moons_mlp", tmp_path / "m.onnx")
    assert out == tmp_path / "m.onnx" and onnx.load(out).graph.input[0].name == "input"
    assert memory.peak_bytes > 100e6  # the child imported torch, not this test's process
    x = np.random.default_rng(0).normal(size=(5, 2)).astype(np.float32)
    fresh = ort.InferenceSession(str(out)).run(None, {"input": x})[0]
    cached = ort.InferenceSession(str(models.get("moons_mlp", log=Log()).onnx)).run(None, {"input": x})[0]
    np.testing.assert_allclose(fresh, cached, atol=1e-6)


# ---------------------------------------------------------------------------------- ResNet18
@pytest.fixture(scope="module")
def resnet():
    """The prepared ResNet18 (trained by `python -m course_lib prepare` if not yet cached)."""
    return pipeline.load_model("fashion_resnet18")


def test_resnet18_is_torchvision_resnet18_with_a_one_channel_stem(resnet):
    from torchvision.models import resnet18

    m = resnet.module
    assert m.conv1.in_channels == 1 and m.fc.out_features == 10
    reference = {k: v.shape for k, v in resnet18(num_classes=10).state_dict().items() if k != "conv1.weight"}
    assert {k: v.shape for k, v in m.state_dict().items() if k != "conv1.weight"} == reference


def test_resnet18_cache_records_what_made_it(resnet):
    meta = resnet.meta
    assert meta["recipe"] == models.RESNET_RECIPE.to_dict()
    assert meta["data_checksums"] == {k: v[1] for k, v in data.FASHION_FILES.items()}
    assert meta["preprocessing"] == data.default_preprocessing().to_dict()
    assert {"torch", "torchvision", "onnxruntime", "numpy"} <= set(meta["versions"])
    assert meta["train_seconds"] > 0 and meta["parameters"] == sum(
        p.numel() for p in resnet.module.parameters()
    )


def test_resnet18_reaches_the_course_accuracy(resnet):
    # Re-measured here, not read from the cache: PyTorch on the full 10,000-image test set.
    images, labels = data.load_split("test")
    x = torch.from_numpy(data.preprocess(images))
    with torch.inference_mode():
        preds = torch.cat([resnet.module(x[i : i + 1000]).argmax(1) for i in range(0, len(x), 1000)]).numpy()
    accuracy = (preds == labels).mean()
    assert accuracy == pytest.approx(resnet.test_accuracy, abs=1e-4)
    assert accuracy >= 0.91


@pytest.fixture(scope="module")
def resnet_cache(resnet):
    """The real cache folder of the prepared ResNet18 (resolved before any test swaps data dirs)."""
    return models.cache_dir("fashion_resnet18")


def test_resnet18_corrupt_cache_is_detected_without_retraining(resnet_cache, private_data_dir):
    import shutil

    shutil.copytree(resnet_cache, private_data_dir / "models" / "fashion_resnet18")
    assert models.cache_status("fashion_resnet18") == "ok"
    weights = models.cache_dir("fashion_resnet18") / "weights.pt"
    with open(weights, "r+b") as f:
        f.seek(1000)
        f.write(b"\x00" * 16)
    assert models.cache_status("fashion_resnet18").startswith("corrupt")
    with pytest.raises(FileNotFoundError, match="corrupt"):
        pipeline.load_model("fashion_resnet18", train=False)


@pytest.mark.parametrize("name", ["moons_mlp", "fashion_resnet18"])
def test_onnx_export_is_checked_self_contained_and_matches_pytorch(name):
    path = models.get(name).onnx
    model = onnx.load(path)
    onnx.checker.check_model(model, full_check=True)
    assert not any(t.data_location == onnx.TensorProto.EXTERNAL for t in model.graph.initializer)
    assert [i.name for i in model.graph.input] == ["input"] and [o.name for o in model.graph.output] == [
        "logits"
    ]
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_param  # dynamic batch axis

    trained = pipeline.load_model(name, train=False)
    inputs = models.parity_inputs(name, n=256)
    assert models.onnx_parity(trained.module, path, inputs) <= 1e-4
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    for batch in (1, 7):
        assert session.run(None, {"input": inputs[:batch]})[0].shape == (
            batch,
            len(trained.meta["class_names"]),
        )


def test_resnet_onnx_carries_its_preprocessing_and_class_names():
    props = models.onnx_metadata(models.get("fashion_resnet18").onnx)
    prep = data.default_preprocessing()
    assert json.loads(props["class_names"]) == list(data.CLASS_NAMES)
    assert int(props["input_size"]) == 32
    assert float(props["normalization_mean"]) == prep.mean and float(props["normalization_std"]) == prep.std
    # A client with only the file can preprocess: rebuild the pipeline from the metadata alone.
    rebuilt = data.Preprocessing.from_dict(json.loads(props["preprocessing"]))
    images, _ = data.load_split("validation")
    assert np.array_equal(rebuilt(images[:4]), data.preprocess(images[:4]))


def test_a_torchscript_export_can_keep_its_batchnorms_and_still_match_pytorch(tmp_path):
    trained = pipeline.load_model("fashion_resnet18", train=False)
    path = models.export_onnx(trained, tmp_path / "legacy.onnx", exporter="torchscript", keep_batchnorm=True)
    ops = [n.op_type for n in onnx.load(path).graph.node]
    assert ops.count("BatchNormalization") == 20  # one after each of ResNet18's 20 convolutions
    assert models.onnx_parity(trained.module, path, models.parity_inputs("fashion_resnet18", n=64)) <= 1e-4
    folded = models.export_onnx(trained, tmp_path / "folded.onnx", exporter="torchscript")
    assert "BatchNormalization" not in [n.op_type for n in onnx.load(folded).graph.node]
    with pytest.raises(ValueError, match="needs exporter='torchscript'"):
        models.export_onnx(trained, tmp_path / "x.onnx", keep_batchnorm=True)
    with pytest.raises(ValueError, match="exporter must be"):
        models.export_onnx(trained, tmp_path / "x.onnx", exporter="tf2onnx")


# ---------------------------------------------------------------------------------- training
def test_skipping_dead_taps_computes_the_same_convolution_and_gradients():
    # Every shape the ResNet18's convolutions meet at 32 px, and odd ones (taps cut on one side only).
    torch.manual_seed(0)
    shapes = [
        (1, 3, 1, 1),
        (1, 3, 2, 1),
        (2, 3, 2, 1),
        (2, 1, 2, 0),
        (4, 3, 1, 1),
        (7, 7, 2, 3),
        (3, 5, 2, 2),
    ]
    cropped = 0
    for size, kernel, stride, padding in shapes:
        conv = torch.nn.Conv2d(4, 6, kernel, stride, padding, bias=False)
        x = torch.randn(3, 4, size, size + 1, requires_grad=True)
        full = conv._conv_forward(x, conv.weight, conv.bias)
        fast = training._conv_without_dead_taps(conv, x)
        assert fast.shape == full.shape
        torch.testing.assert_close(fast, full, rtol=1e-5, atol=1e-5)
        g = torch.randn_like(full)
        grads_full = torch.autograd.grad(full, [x, conv.weight], g)
        grads_fast = torch.autograd.grad(fast, [x, conv.weight], g)
        for a, b in zip(grads_full, grads_fast, strict=True):
            torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-5)
        cropped += training._live_taps(size, kernel, stride, padding) != (0, kernel - 1)
    assert cropped == 3  # the first three shapes really take the shortcut
    # A 3x3 kernel on a 1x1 map uses its centre tap only; the dead taps get exactly zero gradient.
    assert training._live_taps(1, 3, 1, 1) == (1, 1)
    conv = torch.nn.Conv2d(2, 2, 3, 1, 1)
    training._conv_without_dead_taps(conv, torch.randn(1, 2, 1, 1)).sum().backward()
    assert (
        conv.weight.grad[:, :, 1, 1].abs().sum() > 0
        and conv.weight.grad.abs().sum() == conv.weight.grad[:, :, 1, 1].abs().sum()
    )


def test_skipping_dead_taps_is_undone_after_training():
    model = models.build_resnet18()
    keys = list(model.state_dict())
    with training._skipping_dead_taps(model):
        assert all("forward" in vars(m) for m in model.modules() if isinstance(m, torch.nn.Conv2d))
    assert not any("forward" in vars(m) for m in model.modules())
    assert list(model.state_dict()) == keys  # same parameters, same names: exports as before


def test_training_device_prefers_cuda_and_can_be_told(monkeypatch):
    monkeypatch.delenv(models.TRAIN_DEVICE_ENV, raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert models.training_device().type == "cpu"  # this machine, CI's, a Colab CPU runtime
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert models.training_device().type == "cuda"  # Colab's GPU runtime
    monkeypatch.setenv(models.TRAIN_DEVICE_ENV, "cpu")
    assert models.training_device().type == "cpu"
    monkeypatch.setenv(models.TRAIN_DEVICE_ENV, "gpu")
    with pytest.raises(ValueError, match="must be 'auto', 'cpu' or 'cuda'; found 'gpu'"):
        models.training_device()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv(models.TRAIN_DEVICE_ENV, "cuda")
    with pytest.raises(RuntimeError, match="sees no CUDA device"):
        models.training_device()


def test_resnet_training_reports_every_epoch_and_its_estimate_holds(monkeypatch):
    # The real training loop on a slice of the data: 4 steps an epoch, 2 epochs.
    monkeypatch.delenv(models.TRAIN_DEVICE_ENV, raising=False)
    real = data.load_split
    sizes = {"train": 1024, "validation": 64, "test": 256}
    monkeypatch.setattr(data, "load_split", lambda name: tuple(a[: sizes[name]] for a in real(name)))
    recipe = models.Recipe(**{**models.RESNET_RECIPE.to_dict(), "epochs": 2, "augment": models.AUGMENTATIONS})
    spec = models.MODELS["fashion_resnet18"]
    monkeypatch.setitem(
        models.MODELS, "fashion_resnet18", models.ModelSpec(**{**spec.__dict__, "recipe": recipe})
    )
    estimate = models.estimate_training("fashion_resnet18", steps=2)
    log = Log()
    module, record = models.train_resnet18(recipe, progress=False, log=log)
    assert [m.split(":")[0] for m in log] == ["ResNet18 epoch 1/2", "ResNet18 epoch 2/2"]
    assert all("images/s" in m and "validation accuracy" in m for m in log)
    assert "about" in log[0] and "left" in log[0] and "done in" in log[1]
    assert [row["epoch"] for row in record["history"]] == [1, 2] and record["device"].startswith("CPU (")
    assert 0.5 < estimate.seconds / record["train_seconds"] < 2  # the projection is a measurement
    assert "samples/s over 2 training steps" in str(estimate) and estimate.device == record["device"]
    with pytest.raises(ValueError, match=r"Unknown augmentation \['shift3'\]"):
        models.train_resnet18(models.Recipe(**{**recipe.to_dict(), "augment": ("shift3",)}), progress=False)


def test_per_image_shift_moves_each_image_by_its_own_offset_within_the_border():
    recipe = models.Recipe(epochs=1, batch_size=64, lr=0.1, weight_decay=0.0, augment=("shift2-each",))
    images, _ = data.load_split("validation")
    x = torch.from_numpy(data.preprocess(images[:64]))  # 28x28 inside a 2-pixel zero border
    shifted = training._augment(x, recipe, torch.Generator().manual_seed(1))
    offsets = set()
    for before, after in zip(x[:, 0], shifted[:, 0], strict=True):
        found = [
            (dy, dx)
            for dy in range(-2, 3)
            for dx in range(-2, 3)
            if torch.equal(torch.roll(before, (dy, dx), (0, 1)), after)
        ]
        assert len(found) == 1  # one shift of at most 2 pixels; the zero border is what wraps round
        offsets.add(found[0])
    assert len(offsets) > 10  # images get their own shifts, not one for the batch
