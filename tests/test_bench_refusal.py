"""The benchmark's OpenVINO runs when OpenVINO refuses a file on this CPU (as 2026.4.1 refused lesson
05c's S8S8 file with its default precision on an Intel Xeon with AMX): the refusal becomes a row that
says so, the file is timed again with f32 pinned, and nothing stops. On any CPU: the refusal is
planted (the real error text), everything else compiles and runs for real, on tiny models."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from onnx import TensorProto
from test_runtimes import RefusingCore, tiny_classifier

from course_lib import measure
from course_machinery import bench, models, results, runtimes

S8S8, RETRY = "OpenVINO S8S8 per-channel", "OpenVINO S8S8 per-channel, f32 pinned (default refused)"


@pytest.fixture(scope="module")
def refused(tmp_path_factory):
    """_bench_openvino's rows where OpenVINO refuses the S8S8 file with its default precision."""
    directory = tmp_path_factory.mktemp("bench-refusal")
    paths = {
        "fp32": tiny_classifier(directory / "fp32.onnx"),
        "static U8S8 per-channel": tiny_classifier(directory / "u8s8.onnx", TensorProto.UINT8),
        "static S8S8 per-channel": tiny_classifier(directory / "s8s8.onnx", TensorProto.INT8),
    }
    real = runtimes.require_openvino()
    openvino = SimpleNamespace(
        Core=lambda: RefusingCore(real.Core(), "s8s8.onnx"), __version__="2026.4.1-1-abc"
    )
    x = np.random.default_rng(5).standard_normal((40, 16)).astype(np.float32)
    ref = measure.logits(str(paths["fp32"]), x, threads=1)
    config = bench.BenchConfig(batch_sizes=(1, 8), runs=3, warmup=1, threads=1)
    said: list[str] = []
    rows = bench._bench_openvino(openvino, config, paths, x, ref.argmax(1), ref, said.append)
    return bench.BenchResult(config={}, environment={}, rows=rows), said


def test_a_refused_run_becomes_a_row_and_its_file_is_timed_again_with_f32_pinned(refused):
    result, said = refused
    (row,) = [r for r in result.rows if not r.timed]
    assert (row.candidate, row.batch, row.speedup, row.runtime) == (
        S8S8,
        None,
        None,
        "OpenVINO 2026.4.1-1-abc",
    )
    assert row.refused == (
        "OpenVINO refused to compile s8s8.onnx with its default settings here: No suitable implementations "
        "(at src/plugins/intel_cpu/src/nodes/executors/executor_factory.hpp:117)."
    )
    timed = {(r.candidate, r.batch): r for r in result.rows if r.timed}
    assert set(timed) == {
        (name, b)
        for name in (
            "OpenVINO fp32, f32 pinned",
            "OpenVINO fp32, default",
            "OpenVINO U8S8 per-channel",
            RETRY,
        )
        for b in (1, 8)
    }
    assert {timed[RETRY, b].precision for b in (1, 8)} == {"f32"} and timed[RETRY, 8].speedup > 0
    assert any(
        line.startswith(f"  {S8S8}") and "refused: No suitable implementations" in line for line in said
    )


def test_the_table_the_plot_and_the_record_take_a_refused_row(refused, tmp_path, private_data_dir):
    result, _ = refused
    lines = bench.table(result).splitlines()
    head, refusal = lines[0], next(line for line in lines if "refused: OpenVINO refused" in line)
    assert refusal.startswith(f"ResNet18{'':<13}{'':>5}  {S8S8}")
    retry = next(line for line in lines if RETRY in line and " 8 " in line)
    assert len(retry) == len(head)  # the candidate's column widened for the retry's longer name
    assert len(lines) == 2 + len(result.rows) + 2  # head, rule, rows, the ratio's note, OpenVINO's note
    assert "refused: OpenVINO would not compile that file with those settings on this CPU" in lines[-1]
    assert bench.plot(result, tmp_path / "bench.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    bench.record_results(result)
    stored = results.load_results("bench")
    assert len(stored) == len(result.rows) - 1 and RETRY + " vs onnxruntime fp32, batch 8" in {
        e["variant"] for e in stored
    }
    assert {e["model"] for e in stored} == {models.RESNET18}
