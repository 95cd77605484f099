"""What this machine offers INT8 inference: CPU features and ONNX Runtime's providers.

INT8 speed depends on instructions: AVX2 alone multiplies u8 x s8 through 16-bit
intermediate sums (which can saturate); AVX-512 VNNI / AVX-VNNI, ARM's dot product and i8mm,
and Intel AMX add dedicated INT8 dot-product instructions that ONNX Runtime's kernels use.
"""

from __future__ import annotations

import functools
import os
import platform
from pathlib import Path

# Feature name as the course says it -> the CPU flag that reveals it (Linux /proc/cpuinfo and
# py-cpuinfo use the same names).
INT8_FEATURES: dict[str, tuple[str, str]] = {
    "AVX2": ("avx2", "256-bit integer SIMD; INT8 via VPMADDUBSW with 16-bit intermediate sums"),
    "AVX-512": ("avx512f", "512-bit SIMD"),
    "AVX-512 VNNI": ("avx512_vnni", "one-instruction u8 x s8 dot products into int32 (512-bit)"),
    "AVX-VNNI": ("avx_vnni", "the VNNI dot product on 256-bit registers"),
    "AMX (INT8)": ("amx_int8", "tile matrix multiply units for INT8"),
    "ARM dot product": ("asimddp", "SDOT/UDOT: 4-way INT8 dot products into int32"),
    "ARM i8mm": ("i8mm", "INT8 matrix multiply-accumulate (SMMLA/UMMLA)"),
}


@functools.lru_cache(maxsize=1)
def _cpu_flags() -> tuple[str, frozenset[str]]:
    """The CPU's model name and its feature flags, via py-cpuinfo or /proc/cpuinfo (read once)."""
    try:
        import cpuinfo  # py-cpuinfo

        info = cpuinfo.get_cpu_info()
        return info.get("brand_raw", platform.processor() or "unknown"), frozenset(info.get("flags", []))
    except Exception:
        pass
    name, flags = platform.processor() or "unknown", set()
    cpuinfo_path = Path("/proc/cpuinfo")
    if cpuinfo_path.exists():
        for line in cpuinfo_path.read_text().splitlines():
            key, _, value = line.partition(":")
            key = key.strip().lower()
            if key == "model name":
                name = value.strip()
            elif key in ("flags", "features"):
                flags |= set(value.split())
    return name, frozenset(flags)


def cpu_report() -> dict:
    """CPU model, core count and which INT8-relevant features are present."""
    name, flags = _cpu_flags()
    return {
        "cpu": name,
        "machine": platform.machine(),
        "logical_cores": os.cpu_count(),
        "features": {feature: flag in flags for feature, (flag, _) in INT8_FEATURES.items()},
    }


def cpu_name() -> str:
    """The CPU's model name, as the operating system reports it."""
    return _cpu_flags()[0]


def cpu_summary() -> str:
    """The CPU and its INT8-relevant features in one line, e.g. 'AMD EPYC (AVX2, no AVX-512, no VNNI)'."""
    f = cpu_report()["features"]
    if f["ARM dot product"] or f["ARM i8mm"]:
        parts = [name for name in ("ARM dot product", "ARM i8mm") if f[name]]
    else:
        parts = [
            "AVX-512" if f["AVX-512"] else ("AVX2, no AVX-512" if f["AVX2"] else "no AVX2"),
            "VNNI" if f["AVX-512 VNNI"] or f["AVX-VNNI"] else "no VNNI",
            *(["AMX"] if f["AMX (INT8)"] else []),
        ]
    isa = ", ".join(parts)
    return f"{cpu_name()} ({isa})"


def has_vnni() -> bool:
    """True if the CPU has an INT8 dot-product instruction (VNNI, AVX-VNNI, ARM dot product)."""
    f = cpu_report()["features"]
    return f["AVX-512 VNNI"] or f["AVX-VNNI"] or f["ARM dot product"]


VNNI_FEATURES = ("AVX-512 VNNI", "AVX-VNNI", "AMX (INT8)")


def saturating_u8s8(machine: str, features) -> bool:
    """Whether a CPU (its machine name and the INT8_FEATURES it has) runs U8S8 through VPMADDUBSW:
    x86-64 without VNNI. Used for this machine and for the machines recorded in the results store."""
    x86 = machine.lower() in ("x86_64", "amd64", "x64", "i686", "i386")
    return x86 and not set(VNNI_FEATURES) & set(features)


def u8s8_can_saturate() -> bool:
    """True on x86-64 CPUs without VNNI (AVX2 or AVX-512 alone): there ONNX Runtime's U8S8 kernels use
    VPMADDUBSW, which adds each pair of u8 x s8 products into a 16-bit sum that saturates at 32,767.

    ONNX Runtime's advice for these CPUs (its quantization docs, "When and why do I need to try
    U8U8?"): quantize with `reduce_range=True` (7-bit weights) or use U8U8 if accuracy drops.
    With VNNI (or on ARM) the products are added into 32 bits and nothing saturates.
    """
    cpu = cpu_report()
    return saturating_u8s8(cpu["machine"], [name for name, present in cpu["features"].items() if present])


def onnxruntime_providers() -> list[str]:
    """The execution providers this onnxruntime build offers."""
    import onnxruntime as ort

    return list(ort.get_available_providers())
