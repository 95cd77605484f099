from __future__ import annotations

import gzip

import numpy as np
import pytest

import course_lib.data as data


def test_fashion_mnist_loads_verified_with_published_shapes():
    ds = data.load_fashion_mnist(download=False)
    assert ds.train_images.shape == (60000, 28, 28) and ds.train_images.dtype == np.uint8
    assert ds.test_images.shape == (10000, 28, 28)
    assert set(np.unique(ds.train_labels)) == set(range(10))
    # Fashion-MNIST is balanced: 6,000 training and 1,000 test images per class.
    assert (np.bincount(ds.train_labels) == 6000).all()
    assert (np.bincount(ds.test_labels) == 1000).all()


def test_course_data_directory_is_tried_first(fashion_copy):
    src = data.find_fashion_mnist(download=False)
    assert src.kind == "course data directory" and src.directory == fashion_copy
    ds = data.load_fashion_mnist(download=False)
    assert ds.train_images.shape == (60000, 28, 28)


def test_debian_package_is_the_second_source(private_data_dir):
    if not data._complete(data.DEBIAN_DIR):
        pytest.skip(f"the Debian package {data.DEBIAN_PACKAGE} is not installed")
    src = data.find_fashion_mnist(download=False)
    assert src.kind == "Debian package"


def test_corrupt_content_is_rejected_with_the_fix(fashion_copy):
    path = fashion_copy / "t10k-labels-idx1-ubyte"
    raw = bytearray(path.read_bytes())
    raw[100] = (raw[100] + 1) % 10  # one label changed: still a valid IDX file, wrong data
    path.write_bytes(bytes(raw))
    with pytest.raises(data.ChecksumError) as err:
        data.load_fashion_mnist(download=False)
    msg = str(err.value)
    assert "t10k-labels-idx1-ubyte" in msg and "SHA-256" in msg and "prepare" in msg


def test_truncated_gzip_is_rejected(fashion_copy):
    stem = "t10k-images-idx3-ubyte"
    full = (fashion_copy / stem).read_bytes()
    (fashion_copy / stem).unlink()
    (fashion_copy / f"{stem}.gz").write_bytes(gzip.compress(full)[:5000])
    with pytest.raises(data.ChecksumError, match="Could not read"):
        data.load_fashion_mnist(download=False)


def test_no_source_names_the_three_fixes(private_data_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(data, "DEBIAN_DIR", tmp_path / "no-debian-package")

    def offline(target):  # what torchvision's downloader does on a machine without internet
        raise OSError("[Errno -3] Temporary failure in name resolution")

    monkeypatch.setattr(data, "_torchvision_download", offline)
    with pytest.raises(data.DataNotFoundError) as err:
        data.find_fashion_mnist(download=True)
    msg = str(err.value)
    assert str(private_data_dir / "fashion-mnist") in msg  # fix 1: put the files here
    assert "apt-get install -y dataset-fashion-mnist" in msg  # fix 2: the Debian package
    assert "torchvision downloads it" in msg  # fix 3: go online once
    assert "name resolution" in msg  # and why the download failed


def test_download_false_says_it_did_not_try(private_data_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(data, "DEBIAN_DIR", tmp_path / "no-debian-package")
    with pytest.raises(data.DataNotFoundError, match="not attempted"):
        data.find_fashion_mnist(download=False)


def test_preprocessing_constants_come_from_the_training_set():
    prep = data.default_preprocessing()
    # Published Fashion-MNIST statistics: mean 0.2860, std 0.3530 (pixels scaled to [0, 1]).
    assert prep.mean == pytest.approx(0.2860, abs=5e-4)
    assert prep.std == pytest.approx(0.3530, abs=5e-4)
    assert prep.size == 32


def test_preprocessing_constants_equal_numpys_float64_mean_and_std():
    rng = np.random.default_rng(3)
    images = rng.integers(0, 256, size=(12_345, 28, 28), dtype=np.uint8)
    x = images.astype(np.float64) / 255.0
    fitted = data._fit_preprocessing(images)
    assert (fitted.mean, fitted.std) == (round(float(x.mean()), 6), round(float(x.std()), 6))


def test_preprocess_layout_dtype_and_values():
    images, _ = data.load_split("validation")
    x = data.preprocess(images[:5])
    prep = data.default_preprocessing()
    assert x.shape == (5, 1, 32, 32) and x.dtype == np.float32
    background = (0 - prep.mean) / prep.std
    assert np.allclose(x[:, :, :2, :], background) and np.allclose(x[:, :, :, -2:], background)
    expected = (images[3, 10, 12] / 255 - prep.mean) / prep.std
    assert x[3, 0, 12, 14] == pytest.approx(expected, rel=1e-6)  # 2-pixel pad shifts by 2
    assert data.preprocess(images[0]).shape == (1, 1, 32, 32)  # one image


@pytest.mark.parametrize(
    "bad",
    [np.zeros((2, 28, 28), np.float32), np.zeros((2, 32, 32), np.uint8), np.zeros((2, 1, 28, 28), np.uint8)],
)
def test_preprocess_rejects_wrong_input_naming_the_fix(bad):
    with pytest.raises(ValueError, match=r"uint8 with shape \(N, 28, 28\).*load_split"):
        data.preprocess(bad)


def test_preprocessing_round_trips_through_a_dict():
    prep = data.default_preprocessing()
    assert data.Preprocessing.from_dict(prep.to_dict()) == prep


def test_splits_are_fixed_disjoint_and_sized():
    idx = data._split_indices()
    assert len(idx["train"]) == 59500 and len(idx["validation"]) == 500 and len(idx["calibration"]) == 1000
    assert not set(idx["train"]) & set(idx["validation"])
    assert set(idx["calibration"]) <= set(idx["train"])
    data._split_indices.cache_clear()
    again = data._split_indices()
    for k in idx:
        assert np.array_equal(idx[k], again[k])
    images, labels = data.load_split("test")
    assert images.shape == (10000, 28, 28)
    with pytest.raises(ValueError, match="choose one of train, calibration, validation, test"):
        data.load_split("holdout")


def test_a_caller_cannot_corrupt_the_cached_splits():
    idx = data._split_indices()
    first = idx["validation"][:5].copy()
    with pytest.raises(ValueError, match="read-only"):
        idx["validation"][0] = -1
    with pytest.raises(TypeError):
        idx["validation"] = np.arange(5)
    again = data._split_indices()
    assert again is idx and np.array_equal(again["validation"][:5], first)
    mine = idx["train"].copy()  # a copy is the caller's own to edit
    mine[0] = -1
    assert data._split_indices()["train"][0] != -1
    images, _ = data.load_split("validation")
    assert len(images) == len(idx["validation"])  # load_split still indexes with the read-only arrays


def test_moons_are_seeded_with_an_edge_set():
    a, b = data.load_moons(), data.load_moons()
    assert np.array_equal(a.x_train, b.x_train) and np.array_equal(a.x_edge, b.x_edge)
    assert a.x_train.shape == (1000, 2) and a.x_test.shape == (500, 2) and a.x_edge.shape == (400, 2)
    outside = a.x_edge[a.edge_kind == "outside"]
    lo, hi = a.x_train.min(0), a.x_train.max(0)
    assert (((outside < lo) | (outside > hi)).any(axis=1)).all()  # every one beyond the training range
    assert (a.y_edge[a.edge_kind == "outside"] == -1).all()
    boundary = a.edge_kind == "boundary"
    assert boundary.sum() == 200 and set(a.y_edge[boundary]) == {0, 1}
    assert not np.array_equal(data.load_moons(seed=1).x_train, a.x_train)


def test_a_lesson_folder_is_under_the_data_directory_and_emptied_on_each_run(private_data_dir):
    first = data.lesson_folder("03")
    assert first == private_data_dir / "lessons" / "03" and list(first.iterdir()) == []
    (first / "int8.onnx").write_bytes(b"from the last run")
    (first / "nested").mkdir()
    (first / "nested" / "profile.json").write_text("{}")
    other = data.lesson_folder("04")
    (other / "keep.onnx").write_bytes(b"another lesson's file")
    again = data.lesson_folder("03")
    assert again == first and list(again.iterdir()) == []  # the last run's files are gone
    assert (other / "keep.onnx").read_bytes() == b"another lesson's file"  # other lessons untouched


@pytest.mark.parametrize("bad", ["", "  ", "..", "../models", "a/b", "a\\b"])
def test_a_lesson_folder_name_that_would_leave_its_place_is_refused(private_data_dir, bad):
    sentinel = private_data_dir / "models" / "weights.pt"  # ".." would otherwise empty the data directory
    sentinel.parent.mkdir()
    sentinel.write_bytes(b"trained")
    with pytest.raises(ValueError, match="plain name such as '03'"):
        data.lesson_folder(bad)
    assert sentinel.read_bytes() == b"trained"
