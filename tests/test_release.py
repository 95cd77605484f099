"""Release artifacts: writing a release, and getting models from it, against a real HTTP server on
127.0.0.1 started here. The two-moons MLP stands in for the ResNet18 so that every fallback to
training takes a second, not minutes."""

from __future__ import annotations

import hashlib
import json
import re
import socket
import threading
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

import course_lib.files as files
import course_machinery.bundle as bundle
import course_machinery.models as models
import course_machinery.models.pipeline as pipeline
import course_machinery.models.store as store
import course_machinery.release as release
from course_machinery.publish import write_release

NAME = "moons_mlp"
REPOSITORY = "https://github.com/example/onnx-quant-course"


class Log(list):
    def __call__(self, msg: str) -> None:
        self.append(msg)

    def text(self) -> str:
        return "\n".join(self)


class Server:
    """A real HTTP server on 127.0.0.1: serves `files` at /rel/<name>, misbehaving as told."""

    def __init__(self):
        self.files: dict[str, bytes] = {}
        self.mode = "ok"  # ok | truncated (promises every byte, sends half) | short (honestly sends half)
        self.first: list[str | int] = []  # modes (or HTTP error codes) for the next requests, then `mode`
        self.requests: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                server.requests.append(self.path)
                mode = server.first.pop(0) if server.first else server.mode
                body = server.files.get(self.path.removeprefix("/rel/"))
                if body is None or isinstance(mode, int):
                    self.send_error(404 if body is None else mode)
                    return
                sent = body if mode == "ok" else body[: len(body) // 2]
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(len(sent) if mode == "short" else len(body)))
                self.end_headers()
                self.wfile.write(sent)
                self.wfile.flush()
                if mode == "truncated":
                    self.connection.shutdown(socket.SHUT_RDWR)  # the connection drops mid-file

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/rel"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    s = Server()
    yield s
    s.close()


@pytest.fixture(autouse=True)
def waits(monkeypatch):
    """The download's waits between attempts, recorded instead of slept."""
    slept: list[float] = []
    monkeypatch.setattr(release, "sleep", slept.append)
    return slept


@pytest.fixture
def mlp_release(private_data_dir, tmp_path, monkeypatch):
    """A release of the MLP alone, written from a freshly trained cache, which is then emptied."""
    pipeline.ensure_model(NAME, progress=False, log=Log())
    out = tmp_path / "release"
    package_file = tmp_path / "release.json"
    made = write_release(out, names=[NAME], repository=REPOSITORY, package_file=package_file, log=Log())
    monkeypatch.setattr(release, "RELEASE_FILE", package_file)
    for path in models.model_files(NAME).values():
        path.unlink()
    return made, out / release.ASSET


def leftovers(data_dir: Path) -> list[str]:
    """Anything half-written or left over: temporary, partial or staging files, downloads."""
    return sorted(
        str(p.relative_to(data_dir))
        for p in data_dir.rglob("*")
        if p.name.startswith(".") or p.suffix in (".part", ".tmp") or "downloads" in p.parts
    )


def serve(server: Server, asset: Path, monkeypatch, body: bytes | None = None) -> str:
    server.files[release.ASSET] = asset.read_bytes() if body is None else body
    monkeypatch.setenv(release.URL_ENV, server.url)
    return f"{server.url}/{release.ASSET}"


# ---------------------------------------------------------------------------------- writing
def test_a_release_records_every_file_and_is_reproducible(mlp_release, tmp_path):
    made, asset = mlp_release
    manifest = json.loads((asset.parent / release.MANIFEST_ASSET).read_text())
    assert manifest == json.loads((tmp_path / "release.json").read_text()) == made.to_dict()
    assert (
        made.sha256 == hashlib.sha256(asset.read_bytes()).hexdigest() and made.bytes == asset.stat().st_size
    )
    assert sorted(made.files) == [f"models/{NAME}/{f}" for f in ("meta.json", f"{NAME}.onnx", "weights.pt")]
    assert made.tag == release.release_tag([NAME]) and made.models[NAME]["test_accuracy"] >= 0.95
    assert made.url() == f"{REPOSITORY}/releases/download/{made.tag}/{release.ASSET}"


def test_the_same_cache_gives_the_same_archive_bytes(private_data_dir, tmp_path):
    pipeline.ensure_model(NAME, progress=False, log=Log())
    first = write_release(tmp_path / "a", names=[NAME], repository=REPOSITORY, package_file=None)
    second = write_release(tmp_path / "b", names=[NAME], repository=REPOSITORY, package_file=None)
    assert first.sha256 == second.sha256  # the archive carries no timestamps or owners
    assert not (tmp_path / "no-release.json").exists()  # package_file=None writes no package file


def test_the_tag_follows_the_recipe(monkeypatch):
    before = release.release_tag([NAME])
    spec = models.MODELS[NAME]
    changed = models.Recipe(**{**spec.recipe.to_dict(), "augment": (), "epochs": spec.recipe.epochs + 1})
    monkeypatch.setitem(models.MODELS, NAME, models.ModelSpec(**{**spec.__dict__, "recipe": changed}))
    monkeypatch.setitem(store.RECIPES, NAME, changed)  # where the torch-free side reads the recipe
    assert release.release_tag([NAME]) != before


def test_the_mirror_variable_replaces_the_github_address(monkeypatch):
    r = release.Release("models-x", REPOSITORY, "0" * 64, 1, {}, {})
    monkeypatch.setenv(release.URL_ENV, "http://10.0.0.5:8000/course/")
    assert r.url() == f"http://10.0.0.5:8000/course/{release.ASSET}"


# ---------------------------------------------------------------------------------- downloading
def test_a_good_download_is_verified_installed_and_recorded(
    mlp_release, server, monkeypatch, private_data_dir
):
    made, asset = mlp_release
    url = serve(server, asset, monkeypatch)
    log = Log()
    trained = pipeline.ensure_model(NAME, progress=False, log=log)
    assert trained.origin == models.Origin.DOWNLOAD and not trained.exported
    assert server.requests == [f"/rel/{release.ASSET}"]
    assert f"Downloading the trained models: {url}" in log.text() and "Training" not in log.text()
    source = trained.meta["source"]
    assert source["kind"] == "release download" and source["url"] == url and source["sha256"] == made.sha256
    assert source["parity_max_abs_diff"] <= models.PARITY_ATOL
    for path in models.model_files(NAME).values():  # the bytes in the cache are the release's
        if path.name != "meta.json":
            assert files.sha256_file(path) == made.files[f"models/{NAME}/{path.name}"]["sha256"]
    assert models.cache_status(NAME) == "ok" and leftovers(private_data_dir) == []
    log.clear()
    assert pipeline.load_model(NAME, log=log).origin == models.Origin.CACHE and log == []


def test_a_corrupted_asset_is_refused_and_nothing_is_kept(mlp_release, server, monkeypatch, private_data_dir):
    made, asset = mlp_release
    body = bytearray(asset.read_bytes())
    body[len(body) // 2] ^= 0x01  # one bit, same size
    url = serve(server, asset, monkeypatch, bytes(body))
    log = Log()
    fetched = pipeline.fetch([NAME], log=log, progress=False)
    assert fetched.installed == {}
    refusal = next(m for m in log if m.startswith("Refused"))
    assert url in refusal and made.sha256 in refusal and hashlib.sha256(body).hexdigest() in refusal
    assert not models.cache_dir(NAME).exists() or not any(models.cache_dir(NAME).iterdir())
    assert leftovers(private_data_dir) == []


@pytest.mark.parametrize("mode", ["truncated", "short"])
def test_an_interrupted_download_leaves_nothing_behind(
    mlp_release, server, monkeypatch, private_data_dir, mode
):
    made, asset = mlp_release
    serve(server, asset, monkeypatch)
    server.mode = mode  # the connection drops halfway, or the server sends only half
    log = Log()
    assert pipeline.fetch([NAME], log=log, progress=False).installed == {}
    half = f"{made.bytes // 2:,}"
    assert re.search(rf"(stopped|failed) after {half}( of {made.bytes:,})? bytes", log.text()), log.text()
    assert "nothing was kept" in log.text()
    assert models.cache_status(NAME) == "not trained yet" and leftovers(private_data_dir) == []


def test_a_404_falls_back_to_training_after_a_measured_estimate(
    mlp_release, server, monkeypatch, private_data_dir
):
    _, asset = mlp_release
    monkeypatch.setenv(release.URL_ENV, server.url)  # the server has no such file
    log = Log()
    trained = pipeline.load_model(NAME, progress=False, log=log)
    assert trained.origin == models.Origin.TRAINED and trained.meta["source"]["kind"] == "trained here"
    text = log.text()
    assert "answered HTTP 404" in text
    training = next(m for m in log if m.startswith(f"Training {NAME}"))
    assert "samples/s over" in training
    # the MLP's seconds of training need no way around them (the ResNet18's minutes get them)
    assert "To skip training next time" not in training
    assert leftovers(private_data_dir) == []


def test_no_server_at_all_falls_back_to_training(mlp_release, monkeypatch, private_data_dir):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv(release.URL_ENV, f"http://127.0.0.1:{port}/rel")
    log = Log()
    trained = pipeline.load_model(NAME, progress=False, log=log)
    assert trained.origin == models.Origin.TRAINED and trained.test_accuracy >= 0.95
    assert "could not be reached" in log.text() and "Connection refused" in log.text()
    assert leftovers(private_data_dir) == []


def test_a_release_for_another_recipe_is_not_downloaded(mlp_release, server, monkeypatch):
    _, asset = mlp_release
    serve(server, asset, monkeypatch)
    spec = models.MODELS[NAME]
    changed = models.Recipe(**{**spec.recipe.to_dict(), "epochs": spec.recipe.epochs + 1})
    monkeypatch.setitem(models.MODELS, NAME, models.ModelSpec(**{**spec.__dict__, "recipe": changed}))
    monkeypatch.setitem(store.RECIPES, NAME, changed)  # where the torch-free side reads the recipe
    fetched = pipeline.fetch([NAME], log=Log(), progress=False)
    assert fetched.installed == {} and server.requests == []
    assert "other recipes or data" in fetched.reasons[0]


def test_no_published_release_says_so(private_data_dir):
    fetched = pipeline.fetch([NAME], log=Log(), progress=False)
    assert fetched.installed == {} and "no release is published" in fetched.reasons[0]
    with pytest.raises(FileNotFoundError, match="no release is published"):
        pipeline.load_model(NAME, train=False, log=Log())


# ---------------------------------------------------------------------------------- local archives
def test_a_local_archive_installs_without_any_network(mlp_release, monkeypatch, private_data_dir):
    _, asset = mlp_release
    monkeypatch.setenv(release.URL_ENV, "http://127.0.0.1:9/unreachable")
    log = Log()
    trained = pipeline.load_model(NAME, log=log, archive=asset)
    assert trained.origin == models.Origin.ARCHIVE
    assert trained.meta["source"] == {**trained.meta["source"], "kind": "release archive", "path": str(asset)}
    assert "Downloading" not in log.text() and leftovers(private_data_dir) == []


def test_a_corrupted_local_archive_is_refused(mlp_release, monkeypatch, tmp_path, private_data_dir):
    _, asset = mlp_release
    import tarfile

    with tarfile.open(asset) as tf:
        member = tf.getmember(f"models/{NAME}/{NAME}.onnx")
    raw = bytearray(asset.read_bytes())
    raw[member.offset_data + member.size // 2] ^= 0x01  # one bit inside the ONNX file
    bad = tmp_path / "bad.tar"
    bad.write_bytes(bytes(raw))
    monkeypatch.setenv(release.ARCHIVE_ENV, str(bad))
    log = Log()
    fetched = pipeline.fetch([NAME], log=log, progress=False)
    assert fetched.installed == {}
    refusal = next(m for m in log if m.startswith("Refused"))
    assert f"models/{NAME}/{NAME}.onnx" in refusal and str(bad) in refusal and "expected" in refusal
    assert models.cache_status(NAME) == "not trained yet" and leftovers(private_data_dir) == []


def test_a_workshop_bundle_zip_is_an_archive_too(mlp_release, tmp_path, private_data_dir):
    made, asset = mlp_release
    import tarfile

    with tarfile.open(asset) as tf:
        members = {m.name: tf.extractfile(m).read() for m in tf.getmembers() if m.name.startswith("models/")}
    zipped = tmp_path / "bundle.zip"
    files = {
        "data/" + name: {"sha256": hashlib.sha256(b).hexdigest(), "bytes": len(b)}
        for name, b in members.items()
    }
    with zipfile.ZipFile(zipped, "w") as zf:
        zf.writestr(f"{bundle.TOP}/{bundle.MANIFEST}", json.dumps({"files": files}))
        for name, b in members.items():
            zf.writestr(f"{bundle.TOP}/data/{name}", b)
    trained = pipeline.load_model(NAME, log=Log(), archive=zipped)
    assert trained.origin == models.Origin.BUNDLE and trained.meta["source"]["path"] == str(zipped)


def test_a_missing_archive_names_what_was_expected(private_data_dir, tmp_path):
    log = Log()
    fetched = pipeline.fetch([NAME], log=log, progress=False, archive=tmp_path / "nowhere.tar")
    assert "No release archive at" in fetched.reasons[0] and release.ASSET in fetched.reasons[0]


# ---------------------------------------------------------------------------------- retries
BODY = bytes(range(256)) * 4096  # 1 MiB


def _download(server: Server, target: Path, **kw) -> Path:
    server.files["blob"] = BODY
    sha = hashlib.sha256(BODY).hexdigest()
    return release.download(f"{server.url}/blob", target / "blob", sha, len(BODY), progress=False, **kw)


def test_a_dropped_connection_is_retried_with_growing_waits(server, tmp_path, waits):
    server.first = ["truncated", "truncated"]  # headers and half the body, then the connection drops
    log = Log()
    path = _download(server, tmp_path / "dl", log=log)
    assert path.read_bytes() == BODY and sorted(p.name for p in path.parent.iterdir()) == ["blob"]
    assert len(server.requests) == 3 and waits == [1.0, 2.0]
    assert "attempt 1: stopped after 524,288 of 1,048,576 bytes" in log[0] and "trying again in 1 s" in log[0]


def test_an_overloaded_server_is_retried(server, tmp_path, waits):
    server.first = [503, 429]
    assert _download(server, tmp_path / "dl").read_bytes() == BODY
    assert len(server.requests) == 3 and waits == [1.0, 2.0]


def test_too_many_drops_give_up_naming_every_attempt_and_keep_nothing(server, tmp_path, waits):
    server.mode = "truncated"
    with pytest.raises(release.ReleaseError) as err:
        _download(server, tmp_path / "dl", attempts=3)
    message = str(err.value)
    assert "failed 3 times" in message and "nothing was kept" in message and release.ARCHIVE_ENV in message
    assert [f"attempt {i}: stopped after 524,288" in message for i in (1, 2, 3)] == [True] * 3
    assert len(server.requests) == 3 and waits == [1.0, 2.0]  # no wait after the last attempt
    assert list((tmp_path / "dl").iterdir()) == []


def test_the_waits_are_capped(server, tmp_path, waits):
    server.mode = 500
    with pytest.raises(release.ReleaseError, match="failed 5 times.*attempt 5: answered HTTP 500"):
        _download(server, tmp_path / "dl", attempts=5)
    assert waits == [1.0, 2.0, 4.0, release.BACKOFF_CAP_SECONDS]


@pytest.mark.parametrize("answer", [404, 403])
def test_a_missing_file_is_not_retried(server, tmp_path, waits, answer):
    server.first = [answer]
    with pytest.raises(release.ReleaseError, match=f"answered HTTP {answer}"):
        _download(server, tmp_path / "dl")
    assert len(server.requests) == 1 and waits == [] and list((tmp_path / "dl").iterdir()) == []


def test_another_file_is_refused_at_once_not_retried(server, tmp_path, waits):
    server.files["blob"] = BODY
    with pytest.raises(release.ReleaseError, match="Refused the download"):
        release.download(f"{server.url}/blob", tmp_path / "blob", "0" * 64, len(BODY), progress=False)
    with pytest.raises(release.ReleaseError, match="larger than the 1,000 bytes"):
        release.download(f"{server.url}/blob", tmp_path / "blob", "0" * 64, 1000, progress=False)
    assert len(server.requests) == 2 and waits == [] and list(tmp_path.iterdir()) == []


def test_on_colab_the_way_to_skip_training_starts_with_keeping_the_models_on_drive():
    on_colab, elsewhere = release.alternatives(colab=True), release.alternatives(colab=False)
    assert on_colab.startswith("on Colab, tick KEEP_ON_DRIVE") and on_colab.endswith(elsewhere)
    assert "KEEP_ON_DRIVE" not in elsewhere and "release archive" in elsewhere
