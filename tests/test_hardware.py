"""course_lib.hardware: which CPUs' INT8 kernels can saturate, and the CPU in one line."""

from __future__ import annotations

import pytest

from course_lib import hardware


def fake_cpu(monkeypatch, machine: str, *flags: str, name: str = "Some CPU") -> None:
    features = {feature: flag in flags for feature, (flag, _) in hardware.INT8_FEATURES.items()}
    report = {"cpu": name, "machine": machine, "logical_cores": 2, "features": features}
    monkeypatch.setattr(hardware, "cpu_report", lambda: report)
    monkeypatch.setattr(hardware, "cpu_name", lambda: name)


@pytest.mark.parametrize(
    "machine, flags, saturates",
    [
        ("x86_64", ("avx2",), True),  # AMD Zen 2/3, many Colab runtimes: VPMADDUBSW
        ("x86_64", ("avx2", "avx512f"), True),  # Skylake-X: AVX-512 without VNNI
        ("x86_64", ("avx2", "avx512f", "avx512_vnni"), False),  # Cascade Lake and later
        ("x86_64", ("avx2", "avx_vnni"), False),  # Alder Lake: AVX-VNNI on 256-bit registers
        ("x86_64", ("avx2", "avx512f", "avx512_vnni", "amx_int8"), False),  # Sapphire Rapids
        ("aarch64", ("asimddp",), False),  # ARM: no 16-bit pair sums
        ("aarch64", (), False),
    ],
)
def test_u8s8_can_saturate_only_on_x86_without_vnni(monkeypatch, machine, flags, saturates):
    fake_cpu(monkeypatch, machine, *flags)
    assert hardware.u8s8_can_saturate() is saturates


def test_cpu_summary_names_the_int8_features(monkeypatch):
    fake_cpu(monkeypatch, "x86_64", "avx2", name="AMD EPYC")
    assert hardware.cpu_summary() == "AMD EPYC (AVX2, no AVX-512, no VNNI)"
    fake_cpu(monkeypatch, "x86_64", "avx2", "avx512f", "avx512_vnni", "amx_int8", name="Intel Xeon")
    assert hardware.cpu_summary() == "Intel Xeon (AVX-512, VNNI, AMX)"
    fake_cpu(monkeypatch, "aarch64", "asimddp", name="Neoverse")
    assert hardware.cpu_summary() == "Neoverse (ARM dot product)"
