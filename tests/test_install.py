"""`make`'s first step: which PyTorch build it installs, decided against a real index on 127.0.0.1."""

from __future__ import annotations

import http.server
import socket
import threading

import pytest

from course_machinery import install


@pytest.fixture
def index_server(tmp_path):
    """A PEP 503-style index on 127.0.0.1 with a torch/ page, as PyTorch's CPU index has."""
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "index.html").write_text('<a href="torch-9.9.9+cpu-py3-none-any.whl">torch</a>')

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, directory=str(tmp_path), **kwargs)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def _closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def test_a_reachable_index_is_used_for_torch_and_torchvision(index_server):
    choice = install.choose_torch_index(index_server)
    assert choice.index == index_server
    command = install.pip_command(choice, python="py")
    assert command[:3] == ["py", "-m", "pip"] and {"torch", "torchvision"} <= set(command)
    assert command[command.index("--index-url") + 1] == index_server


def test_an_index_without_torch_or_not_answering_falls_back_to_pip_and_says_why(index_server):
    missing = install.choose_torch_index(index_server + "/nothing-here")
    assert missing.index is None and "HTTP 404" in missing.reason and "TORCH_INDEX" in missing.reason
    closed = install.choose_torch_index(_closed_port_url())
    assert closed.index is None and "did not answer" in closed.reason
    assert install.pip_command(closed) is None


def test_auto_takes_the_cpu_index_on_linux_without_a_driver_and_pypi_elsewhere():
    asked = []

    def probe(url):
        asked.append(url)
        return None

    linux = install.choose_torch_index("auto", system="Linux", nvidia=False, probe=probe)
    assert linux.index == install.CPU_INDEX and asked == [install.CPU_INDEX]
    gpu = install.choose_torch_index("auto", system="Linux", nvidia=True, probe=probe)
    assert gpu.index is None and "NVIDIA" in gpu.reason
    for system in ("Darwin", "Windows"):
        assert install.choose_torch_index("auto", system=system, probe=probe).index is None
    assert asked == [install.CPU_INDEX]  # nothing probed where the choice needs no index
    assert install.choose_torch_index("pypi", probe=probe).index is None


def test_a_driver_is_found_by_nvidia_smi():
    assert install.has_nvidia_driver("Darwin", which=lambda name: "/usr/bin/nvidia-smi")
    assert not install.has_nvidia_driver("Darwin", which=lambda name: None)


def test_a_misspelt_torch_index_names_the_values_it_takes():
    with pytest.raises(SystemExit, match="auto, pypi or an index URL"):
        install.choose_torch_index("cpu-please")


def test_the_summary_names_the_installed_torch_build_and_the_largest_packages():
    rows = install.installed_sizes()
    names = [name.lower() for name, _, _ in rows]
    assert "torch" in names and "onnxruntime" in names
    sizes = [size for _, _, size in rows]
    assert sizes == sorted(sizes, reverse=True) and sizes[0] > 10_000_000
    text = install.summary()
    assert "CUDA build" in text or "CPU build" in text
    assert f"{rows[0][0]} {rows[0][1]}" in text
