"""The benchmark (a small configuration: it must run and its figures must agree with each other)
and the course report (built from given results)."""

from __future__ import annotations

import json

import pytest

from course_lib import bench, measure, report


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    import logging

    out = tmp_path_factory.mktemp("bench")
    level = logging.getLogger().level
    result = bench.run(bench.QUICK, out, log=lambda _: None)
    assert logging.getLogger().level == level  # the caller's logging is left as it was
    return result, out


def test_quick_bench_compares_every_variant_at_every_batch_size(quick):
    result, _ = quick
    onnx_rows = [r for r in result.rows if r.baseline == "onnxruntime fp32"]
    assert {(r.candidate, r.batch) for r in onnx_rows} == {
        (v, b) for v in bench.QUICK.variants for b in bench.QUICK.batch_sizes
    }
    torch_rows = [r for r in result.rows if r.baseline.startswith("pytorch")]
    assert {r.baseline for r in torch_rows} == {"pytorch fp32", "pytorch dynamic int8"}
    for r in onnx_rows:
        assert 0 < r.accuracy <= 1 and 0 < r.agreement <= 1 and r.size_mb > 0 and r.runs == bench.QUICK.runs


def test_bench_ratios_come_from_the_medians_it_prints(quick):
    result, out = quick
    for r in result.rows:
        assert r.speedup == pytest.approx(r.baseline_ms / r.candidate_ms)
        assert r.speedup_low <= r.speedup <= r.speedup_high
        assert r.candidate_p10_ms <= r.candidate_ms <= r.candidate_p90_ms
    saved = json.loads((out / "bench.json").read_text())
    assert [row["speedup"] for row in saved["rows"]] == [r.speedup for r in result.rows]
    assert saved["environment"]["hash"] == measure.environment_fingerprint()["hash"]
    assert (out / "bench.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = bench.table(result)
    for r in result.rows:
        assert f"{r.speedup:>5.2f}x" in text


def test_unknown_variants_are_refused(tmp_path):
    with pytest.raises(ValueError, match="Unknown variant"):
        bench.build_resnet_variants(tmp_path, ("static U4S4",))


def _entry(lesson, model, variant, metrics, timestamp="2026-01-01T00:00:00+00:00", file_bytes=None):
    e = {"lesson": lesson, "model": model, "variant": variant, "metrics": metrics, "timestamp": timestamp}
    if file_bytes:
        e["file"] = {"bytes": file_bytes}
    return e


ENV = {
    "hash": "abc",
    "cpu": "Test <CPU>",
    "machine": "x86_64",
    "os": "Linux",
    "physical_cores": 2,
    "logical_cores": 2,
    "int8_features": ["AVX2"],
    "versions": {"onnxruntime": "1.0"},
}


def test_report_sets_measured_figures_beside_the_quoted_claims():
    entries = [
        _entry(
            "02",
            "text_encoder",
            "dynamic int8 per-channel",
            {"speedup_vs_optimized_b16": 1.234, "cos_min": 0.98},
            file_bytes=22_800_000,
        ),
        _entry(
            "04",
            "fashion_resnet18",
            "per-channel",
            {"accuracy": 0.91, "fp32_accuracy": 0.92, "agreement": 0.995},
        ),
        _entry(
            "04",
            "fashion_resnet18",
            "per-channel",
            {"accuracy": 0.919, "fp32_accuracy": 0.92, "agreement": 0.997},
            timestamp="2026-02-01T00:00:00+00:00",
        ),  # a later run: the one reported
    ]
    built = report.build(entries, ENV)
    sections = {s["lesson"]: s for s in built["sections"]}
    claims02 = {c["quoted claim"]: c["measured here"] for c in sections["02"]["claims"]}
    text_claim = next(v for k, v in claims02.items() if "Text encoder" in k)
    assert text_claim == "1.23x the optimized fp32 graph at batch 16, seq 128; worst cosine 0.9800; 22.8 MB"
    assert any("not measured yet" in v for v in claims02.values())  # the MLP claim: no entry given
    (accept,) = sections["04"]["claims"]
    assert (
        accept["measured here"]
        == "per-channel static ResNet18: +0.10 points, agreement 99.70% (10,000 test images)"
    )
    assert len(sections["04"]["figures"]) == 1
    markdown = report.to_markdown(built)
    assert "# onnx-quant-course" in markdown and "`abc`" in markdown and "“Text encoder" in markdown
    page = report.to_html(built)
    assert "Test &lt;CPU&gt;" in page and "<table>" in page


def test_report_writes_both_files(tmp_path):
    paths = report.write(tmp_path, entries=[])
    assert paths["markdown"].read_text().startswith("# onnx-quant-course")
    assert "<html>" in paths["html"].read_text()
    assert "not measured yet" in paths["markdown"].read_text()


def test_the_hardware_claim_takes_the_best_lower_end_of_int8_against_fp32():
    def speed(median, low, high):
        return {"speedup": median, "speedup_low": low, "speedup_high": high}

    entries = [
        _entry(
            "bench", "ResNet18", "static U8S8 per-channel vs onnxruntime fp32, batch 64", speed(1.5, 1.4, 1.6)
        ),
        _entry(
            "bench", "ResNet18", "onnxruntime static U8S8 vs pytorch dynamic int8, batch 1", speed(5.4, 5, 6)
        ),
        _entry("05", "text_encoder", "dynamic int8 per-channel, seq 256", speed(1.9, 1.7, 2.0)),
        _entry("05", "text_encoder", "dynamic int8 per-channel, seq 16", speed(2.6, 1.1, 3.9)),  # noisy
        _entry("05", "fashion_resnet18", "static U8S8 per-channel", {"speedup": 3.0}),  # no interval
    ]
    (claim,) = {s["lesson"]: s for s in report.build(entries, ENV)["sections"]}["05"]["claims"]
    assert claim["measured here"] == (
        "best INT8/fp32 ratio measured: 1.90x (90% interval 1.70–2.00; text_encoder, "
        "dynamic int8 per-channel, seq 256)"
    )


@pytest.mark.parametrize(
    "features, shipped", [(["AVX2"], "per-channel, reduce_range"), (["AVX2", "AVX-512 VNNI"], "per-channel")]
)
def test_the_acceptance_claim_reads_the_variant_shipped_on_the_machine_that_ran_it(features, shipped):
    env = {**ENV, "machine": "x86_64", "int8_features": features}
    full = {"accuracy": 0.90, "fp32_accuracy": 0.92, "agreement": 0.98}
    reduced = {"accuracy": 0.919, "fp32_accuracy": 0.92, "agreement": 0.997}
    entries = [
        {**_entry("04", "fashion_resnet18", "per-channel", full), "environment": env},
        {**_entry("04", "fashion_resnet18", "per-channel, reduce_range", reduced), "environment": env},
    ]
    (claim,) = {s["lesson"]: s for s in report.build(entries, ENV)["sections"]}["04"]["claims"]
    assert claim["measured here"].startswith(f"{shipped} static ResNet18: ")
