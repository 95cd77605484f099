"""What this machine offers INT8 inference: CPU features and ONNX Runtime's providers.

INT8 speed depends on instructions. On x86, AVX2 alone multiplies u8 x s8 through 16-bit
intermediate sums (which can saturate); AVX-512 VNNI and AVX-VNNI multiply groups of four u8 x s8
pairs into int32 in one instruction, and Intel's AMX multiplies whole INT8 tiles. On ARM, the dot
product extension's SDOT and UDOT multiply groups of four *same-sign* bytes (s8 x s8, u8 x u8) into
int32; the mixed u8 x s8 form, USDOT, and the matrix forms SMMLA/UMMLA/USMMLA come with i8mm.

Each operating system publishes these features in its own place, read here by a small reader
(raw text in, nothing parsed) and a pure parser of that text, so that each platform's branch is
tested with outputs recorded on real machines (tests/fixtures/platforms/):

    Linux (x86 and ARM)  /proc/cpuinfo: "flags" (x86) or "Features" (ARM: asimddp, i8mm)
    macOS                `sysctl hw machdep`: hw.optional.arm.FEAT_DotProd / FEAT_I8MM on Apple
                         Silicon (py-cpuinfo reports no flags there), machdep.cpu.*features on Intel
    Windows on ARM       the processor's registry key (its ID_AA64ISAR0/1_EL1 registers) and
                         IsProcessorFeaturePresent
    elsewhere (Windows x86 ...)  py-cpuinfo, which reads CPUID

On x86-64 the AVX, AVX-512, VNNI and AMX flags then come from CPUID itself (course_machinery.cpuid), which
is what ONNX Runtime's kernels follow: the operating system's report can say otherwise (an emulator
such as `qemu-x86_64 -cpu Haswell`, or the course's CPUID mask, course_machinery.cpumask, change
what CPUID answers and leave /proc/cpuinfo as it was). Two environment variables change the report:
COURSE_CPU_FLAGS (e.g. "avx2 fma") replaces the detected INT8 and half-float flags outright, and
COURSE_CPU_MASK is set by the CPUID mask, which `cpu_report()["source"]` then names.
"""

from __future__ import annotations

import functools
import os
import platform
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from course_machinery import cpuid

# Feature name as the course says it -> the flag that reveals it (Linux's /proc/cpuinfo names; the
# other platforms' answers are translated to these) and what it does for INT8.
INT8_FEATURES: dict[str, tuple[str, str]] = {
    "AVX2": ("avx2", "256-bit integer SIMD; INT8 via VPMADDUBSW with 16-bit intermediate sums"),
    "AVX-512": ("avx512f", "512-bit SIMD"),
    "AVX-512 VNNI": ("avx512_vnni", "one-instruction u8 x s8 dot products into int32 (512-bit)"),
    "AVX-VNNI": ("avx_vnni", "the VNNI dot product on 256-bit registers"),
    "AMX (INT8)": ("amx_int8", "tile matrix multiply units for INT8"),
    "ARM dot product": ("asimddp", "SDOT/UDOT: 4-way s8 x s8 or u8 x u8 dot products into int32"),
    "ARM i8mm": ("i8mm", "USDOT (mixed u8 x s8 dot product) and SMMLA/UMMLA/USMMLA matrix multiply"),
}


class Int8DotProduct(NamedTuple):
    """An INT8 dot-product instruction set of a CPU: its INT8_FEATURES name, its instructions,
    the operand signs they multiply, and what they do."""

    feature: str
    instructions: str
    signs: str
    description: str


# Strongest first: what `int8_dot_product` reports when a CPU has several.
DOT_PRODUCTS: tuple[Int8DotProduct, ...] = (
    Int8DotProduct(
        "AMX (INT8)", "TDPBUSD, TDPBSSD, ...", "u8 x s8, s8 x s8, u8 x u8, s8 x u8", "Intel AMX tiles"
    ),
    Int8DotProduct("AVX-512 VNNI", "VPDPBUSD", "u8 x s8", "4-way dot products into int32, 512-bit"),
    Int8DotProduct("AVX-VNNI", "VPDPBUSD (VEX)", "u8 x s8", "4-way dot products into int32, 256-bit"),
    Int8DotProduct(
        "ARM i8mm",
        "USDOT, SMMLA, UMMLA, USMMLA",
        "u8 x s8, s8 x s8, u8 x u8",
        "mixed-sign dot product, 8-way matrix",
    ),
    Int8DotProduct("ARM dot product", "SDOT, UDOT", "s8 x s8, u8 x u8", "4-way dot products into int32"),
)

VNNI_FEATURES = ("AVX-512 VNNI", "AVX-VNNI", "AMX (INT8)")

# Half-precision float arithmetic (feature -> flag, as above). Some runtimes use it by default for a
# float32 model: OpenVINO's CPU plugin picks bf16 on x86 with AVX512_BF16 or AMX, f16 on ARM with
# FP16 arithmetic (lesson 05, "the same file, another runtime").
HALF_FLOAT_FEATURES: dict[str, str] = {
    "AVX-512 BF16": "avx512_bf16",
    "AMX (BF16)": "amx_bf16",
    "ARM fp16": "asimdhp",
    "ARM bf16": "bf16",
}

# Other tools' spellings of the x86 flags above (macOS sysctl, py-cpuinfo's CPUID names).
_FLAG_ALIASES = {
    "avx512vnni": "avx512_vnni",
    "avxvnni": "avx_vnni",
    "amxint8": "amx_int8",
    "amx-int8": "amx_int8",
}

# Apple Silicon's sysctl keys -> the Linux flag names.
_DARWIN_ARM_KEYS = {
    "hw.optional.arm.FEAT_DotProd": "asimddp",
    "hw.optional.arm.FEAT_I8MM": "i8mm",
    "hw.optional.arm.FEAT_BF16": "bf16",
    "hw.optional.arm.FEAT_FP16": "asimdhp",
}

# /proc/cpuinfo on ARM names no model: "CPU implementer" and "CPU part" say which core it is.
_ARM_IMPLEMENTERS = {
    0x41: "Arm",
    0x42: "Broadcom",
    0x46: "Fujitsu",
    0x48: "HiSilicon",
    0x4E: "NVIDIA",
    0x51: "Qualcomm",
    0x61: "Apple",
    0xC0: "Ampere",
}
_ARM_PARTS = {
    (0x41, 0xD03): "Cortex-A53",
    (0x41, 0xD05): "Cortex-A55",
    (0x41, 0xD08): "Cortex-A72",
    (0x41, 0xD0B): "Cortex-A76",
    (0x41, 0xD0C): "Neoverse N1",
    (0x41, 0xD40): "Neoverse V1",
    (0x41, 0xD49): "Neoverse N2",
    (0x41, 0xD4F): "Neoverse V2",
    (0x61, 0x022): "M1 (Icestorm)",
    (0x61, 0x023): "M1 (Firestorm)",
    (0xC0, 0xAC3): "Ampere-1",
    (0xC0, 0xAC4): "Ampere-1a",
}

# Windows on ARM: IsProcessorFeaturePresent's numbers (winnt.h) -> the Linux flag names.
WINDOWS_ARM_FEATURES = {
    43: "asimddp",  # PF_ARM_V82_DP_INSTRUCTIONS_AVAILABLE
    66: "i8mm",  # PF_ARM_V82_I8MM_INSTRUCTIONS_AVAILABLE
    68: "bf16",  # PF_ARM_V86_BF16_INSTRUCTIONS_AVAILABLE
}


# CPUID -> Linux's flag names, for the flags the course reads: (leaf, subleaf, register 0-3 for
# EAX-EDX, bit, flag, the XCR0 bits the operating system must have enabled for it). XCR0 bits 1-2
# save SSE/AVX state (ymm), 5-7 AVX-512's (zmm, opmasks), 17-18 AMX's tiles: without them the
# instructions fault, and MLAS checks them as here (onnxruntime/core/mlas/lib/platform.cpp).
_YMM, _ZMM, _TILES = 0x6, 0xE6, 0x60000
_CPUID_BITS = (
    (1, 0, 2, 28, "avx", _YMM),
    (1, 0, 2, 12, "fma", _YMM),
    (7, 0, 1, 5, "avx2", _YMM),
    (7, 1, 0, 4, "avx_vnni", _YMM),
    (7, 0, 1, 16, "avx512f", _ZMM),
    (7, 0, 1, 17, "avx512dq", _ZMM),
    (7, 0, 1, 30, "avx512bw", _ZMM),
    (7, 0, 1, 31, "avx512vl", _ZMM),
    (7, 0, 2, 11, "avx512_vnni", _ZMM),
    (7, 1, 0, 5, "avx512_bf16", _ZMM),
    (7, 0, 3, 23, "avx512_fp16", _ZMM),
    (7, 0, 3, 24, "amx_tile", _TILES),
    (7, 0, 3, 25, "amx_int8", _TILES),
    (7, 0, 3, 22, "amx_bf16", _TILES),
)
CPUID_FLAGS = frozenset(flag for *_, flag, _ in _CPUID_BITS)

# Where the flags of `cpu_report()` come from, when not from this machine: the environment variables.
FLAGS_ENV = "COURSE_CPU_FLAGS"  # e.g. "avx2 fma": replaces the detected INT8 and half-float flags
MASK_ENV = "COURSE_CPU_MASK"  # set by course_machinery.cpumask.environment() with the mask it applies
# The flags COURSE_CPU_FLAGS can name (and replaces): the INT8 and half-float ones, and those CPUID gives.
OVERRIDE_FLAGS = frozenset(
    [flag for flag, _ in INT8_FEATURES.values()] + list(HALF_FLOAT_FEATURES.values()) + list(CPUID_FLAGS)
)


def _norm(flags) -> set[str]:
    return {_FLAG_ALIASES.get(f.lower(), f.lower()) for f in flags}


# --------------------------------------------------------------------------------------------
# Parsers: one platform's raw answer in, (CPU name, flags in Linux's names) out. Pure functions.
# --------------------------------------------------------------------------------------------
def parse_proc_cpuinfo(text: str) -> tuple[str, frozenset[str]]:
    """The CPU of Linux's /proc/cpuinfo: its first processor's model name and flags ("flags" on
    x86, "Features" on ARM). ARM kernels often give no model name; then the core is named from
    "CPU implementer" and "CPU part", e.g. 'Arm Neoverse N1'."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        key, sep, value = line.partition(":")
        key = key.strip().lower()
        if not sep:
            continue
        if key == "processor" and "processor" in fields and ("flags" in fields or "features" in fields):
            break  # the first processor is enough
        fields.setdefault(key, value.strip())
    flags = _norm((fields.get("flags") or fields.get("features") or "").split())
    name = fields.get("model name") or _arm_core_name(fields.get("cpu implementer"), fields.get("cpu part"))
    return name, frozenset(flags)


def _arm_core_name(implementer: str | None, part: str | None) -> str:
    try:
        imp, prt = int(implementer or "", 16), int(part or "", 16)
    except ValueError:
        return ""
    vendor = _ARM_IMPLEMENTERS.get(imp, f"ARM implementer {imp:#x}")
    return f"{vendor} {_ARM_PARTS.get((imp, prt), f'part {prt:#x}')}"


def parse_sysctl(text: str) -> tuple[str, frozenset[str]]:
    """The CPU of macOS's `sysctl hw machdep` output: machdep.cpu.brand_string, and the features
    Apple Silicon publishes as hw.optional.arm.FEAT_* = 1 (Intel Macs: machdep.cpu.features and
    leaf7_features, e.g. AVX2, AVX512VNNI)."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and not line.startswith("#"):
            values[key.strip()] = value.strip()
    flags = {flag for key, flag in _DARWIN_ARM_KEYS.items() if values.get(key) == "1"}
    for key in ("machdep.cpu.features", "machdep.cpu.leaf7_features", "machdep.cpu.extfeatures"):
        flags |= _norm(f.replace(".", "_") for f in values.get(key, "").split())
    if "avx1_0" in flags:
        flags.add("avx")
    return values.get("machdep.cpu.brand_string", ""), frozenset(flags)


def parse_windows_arm(values: Mapping[str, Any]) -> tuple[str, frozenset[str]]:
    """The CPU of Windows on ARM, from its processor registry key
    (HKLM\\HARDWARE\\DESCRIPTION\\System\\CentralProcessor\\0) and IsProcessorFeaturePresent.

    `values` maps registry value names to their values, and IsProcessorFeaturePresent's feature
    numbers (43, 66, 68) to its answers. "CP 4030" and "CP 4031" hold the ID_AA64ISAR0_EL1 and
    ID_AA64ISAR1_EL1 registers: DotProd is ISAR0 bits 47:44, I8MM ISAR1 bits 55:52, BF16 ISAR1
    bits 47:44 (Arm's register descriptions); either source showing a feature is enough.
    """
    flags = {flag for number, flag in WINDOWS_ARM_FEATURES.items() if values.get(number)}

    def field(name: str, shift: int) -> int:
        try:
            return (int(str(values[name]).strip(), 0) >> shift) & 0xF
        except (KeyError, ValueError):
            return 0

    flags |= {flag for on, flag in ((field("CP 4030", 44), "asimddp"), (field("CP 4031", 52), "i8mm")) if on}
    if field("CP 4031", 44):
        flags.add("bf16")
    name = str(values.get("ProcessorNameString") or "").strip()
    if not name:
        name = ", ".join(str(values[k]).strip() for k in ("Identifier", "VendorIdentifier") if values.get(k))
    return " ".join(name.split()), frozenset(flags)


def parse_pycpuinfo(info: Mapping[str, Any]) -> tuple[str, frozenset[str]]:
    """The CPU of py-cpuinfo's `get_cpu_info()` dict (Windows x86 and anything else): brand_raw and flags."""
    return str(info.get("brand_raw") or ""), frozenset(_norm(info.get("flags") or ()))


def parse_cpuid(
    leaves: Mapping[tuple[int, int], tuple[int, int, int, int]], xcr0: int
) -> tuple[str, frozenset[str]]:
    """The CPU that CPUID describes: the brand string (leaves 0x80000002-4) and the flags, in
    Linux's names, of the features the course reads (`CPUID_FLAGS`).

    `leaves` maps (leaf, subleaf) to EAX, EBX, ECX, EDX; missing leaves read as zeros. A feature
    counts only where XCR0 shows that the operating system saves its registers, as MLAS checks
    before it picks a kernel; the AVX-512 extensions also need AVX512F, and AMX-INT8/BF16 AMX-TILE.
    """
    flags = set()
    for leaf, subleaf, register, bit, flag, state in _CPUID_BITS:
        if leaves.get((leaf, subleaf), (0, 0, 0, 0))[register] >> bit & 1 and xcr0 & state == state:
            flags.add(flag)
    if "avx512f" not in flags:
        flags -= {f for f in flags if f.startswith("avx512")}
    if "amx_tile" not in flags:
        flags -= {f for f in flags if f.startswith("amx")}
    brand = b"".join(
        int(r).to_bytes(4, "little")
        for leaf in (0x80000002, 0x80000003, 0x80000004)
        for r in leaves.get((leaf, 0), ())
    )
    return brand.split(b"\0")[0].decode("ascii", "replace").strip(), frozenset(flags)


def _parse_flags_override(text: str) -> frozenset[str]:
    """The flags of a COURSE_CPU_FLAGS value: Linux flag names separated by spaces or commas."""
    flags = frozenset(_norm(text.replace(",", " ").split()))
    unknown = sorted(flags - OVERRIDE_FLAGS)
    if unknown:
        raise ValueError(
            f"{FLAGS_ENV} names {', '.join(unknown)}, which the course does not know; expected Linux flag "
            f"names separated by spaces or commas, from: {' '.join(sorted(OVERRIDE_FLAGS))}. "
            f"Correct it (e.g. {FLAGS_ENV}='avx2 fma' for an AVX2-only CPU), or unset it to detect this CPU."
        )
    return flags


# --------------------------------------------------------------------------------------------
# Readers: the raw answer of this machine, or an empty one. They never raise.
# --------------------------------------------------------------------------------------------
def _read_proc_cpuinfo() -> str:
    try:
        return Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return ""


def _read_sysctl() -> str:
    try:
        return subprocess.run(["sysctl", "hw", "machdep"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def _read_windows_arm() -> dict[Any, Any]:
    values: dict[Any, Any] = {}
    try:
        import winreg

        key_path = r"HARDWARE\DESCRIPTION\System\CentralProcessor\0"
        with winreg.OpenKey(winreg.HKEY_LOCAL_MACHINE, key_path) as key:
            i = 0
            while True:
                try:
                    name, value, _ = winreg.EnumValue(key, i)
                except OSError:
                    break
                values[name] = value
                i += 1
    except (ImportError, OSError):
        pass
    try:
        import ctypes

        kernel32 = ctypes.windll.kernel32  # type: ignore[attr-defined]
        for number in WINDOWS_ARM_FEATURES:
            values[number] = bool(kernel32.IsProcessorFeaturePresent(number))
    except (ImportError, AttributeError, OSError):
        pass
    return values


def _read_pycpuinfo() -> dict[str, Any]:
    try:
        import cpuinfo  # py-cpuinfo

        return dict(cpuinfo.get_cpu_info())
    except Exception:  # it raises a bare Exception on CPUs it does not know
        return {}


def _read_cpuid() -> tuple[dict[tuple[int, int], tuple[int, int, int, int]], int] | None:
    return cpuid.read()  # None where CPUID cannot be run (not x86-64, no executable memory)


def _mask_in_effect() -> str | None:
    """The name of the CPUID mask this process runs under (cpumask.c, loaded by LD_PRELOAD), or None."""
    if platform.system() != "Linux":
        return None
    try:
        import ctypes

        active = ctypes.CDLL(None).course_cpumask_active
    except (AttributeError, OSError, TypeError):
        return None
    active.restype = ctypes.c_char_p
    name = active()
    return name.decode() if name else None


class CpuRead(NamedTuple):
    """What was read about this CPU: its name, its flags (Linux's names) and where they came from."""

    name: str
    flags: frozenset[str]
    source: str


@functools.lru_cache(maxsize=1)
def _cpu_flags() -> CpuRead:
    """This CPU's model name and feature flags, read where its operating system publishes them, and
    on x86-64 the AVX/AVX-512/VNNI/AMX ones from CPUID (once: `_cpu_flags.cache_clear()` reads again).

    On Linux, CPUID and XCR0 saying AMX means the CPU has it and the kernel saves its tiles; a process
    must still ask for them (arch_prctl(ARCH_REQ_XCOMP_PERM)), which MLAS does and Linux grants.
    """
    system, machine = platform.system(), platform.machine().lower()
    name, flags, source = "", frozenset(), ""
    if system == "Linux":
        (name, flags), source = parse_proc_cpuinfo(_read_proc_cpuinfo()), "/proc/cpuinfo"
    elif system == "Darwin":
        (name, flags), source = parse_sysctl(_read_sysctl()), "sysctl"
    elif system == "Windows" and machine in ("arm64", "aarch64"):
        (name, flags), source = parse_windows_arm(_read_windows_arm()), "registry"
    if not flags:  # Windows x86, other systems, or a reader that found nothing
        name2, flags = parse_pycpuinfo(_read_pycpuinfo())
        name, source = name or name2, "py-cpuinfo"
    found = _read_cpuid() if machine in ("x86_64", "amd64", "x64") else None
    if found is not None:
        brand, cpuid_flags = parse_cpuid(*found)
        # Every AVX and AMX flag is CPUID's: the OS's list may describe another CPU (an emulator's host).
        flags = frozenset(f for f in flags if f not in CPUID_FLAGS and not f.startswith(("avx", "amx")))
        name, flags, source = brand or name, flags | cpuid_flags, "cpuid"
    mask, requested = _mask_in_effect(), os.environ.get(MASK_ENV, "")
    if mask and found is not None:
        source = f"cpuid (masked: {mask})"
    elif mask:
        source += f" (the host's flags: the CPUID mask {mask} is in effect but CPUID could not be read; set {FLAGS_ENV})"
    elif requested:
        source += f" ({MASK_ENV}={requested} is set but no mask is in effect: start the process with cpumask.environment())"
    return CpuRead(name or platform.processor() or "unknown", flags, source)


def _cpu() -> CpuRead:
    """`_cpu_flags()`, with COURSE_CPU_FLAGS (read at each call) in place of the detected flags."""
    read = _cpu_flags()
    override = os.environ.get(FLAGS_ENV, "").strip()
    if not override:
        return read
    return CpuRead(
        read.name, (read.flags - OVERRIDE_FLAGS) | _parse_flags_override(override), f"override {FLAGS_ENV}"
    )


def cpu_report() -> dict:
    """CPU model, core count, which INT8-relevant features are present, and where they were read
    ("source": "cpuid", "cpuid (masked: avx2)", "/proc/cpuinfo", "sysctl", "override COURSE_CPU_FLAGS" ...)."""
    name, flags, source = _cpu()
    return {
        "cpu": name,
        "machine": platform.machine(),
        "logical_cores": os.cpu_count(),
        "features": {feature: flag in flags for feature, (flag, _) in INT8_FEATURES.items()},
        "source": source,
    }


def half_float_features(flags: frozenset[str] | None = None) -> dict[str, bool]:
    """Which half-precision float features this CPU (or the Linux-style `flags` given) has."""
    found = _cpu().flags if flags is None else flags
    return {feature: flag in found for feature, flag in HALF_FLOAT_FEATURES.items()}


def expected_default_precision(features: Mapping[str, bool] | None = None, machine: str | None = None) -> str:
    """The precision OpenVINO's CPU plugin documents as its default for a float32 model's float
    parts on this CPU (or on `features`, a `half_float_features()` dict, and `machine`):
    'bf16' on x86 with AVX512_BF16 or AMX, 'f16' on ARM with FP16 arithmetic, else 'f32'."""
    import platform

    f = half_float_features() if features is None else features
    arm = (machine or platform.machine()).lower() in ("arm64", "aarch64")
    if arm:
        return "f16" if f.get("ARM fp16") else "f32"
    return "bf16" if f.get("AVX-512 BF16") or f.get("AMX (BF16)") else "f32"


def cpu_name() -> str:
    """The CPU's model name: CPUID's brand string on x86-64, else as the operating system reports it."""
    return _cpu().name


def cpu_summary() -> str:
    """The CPU and its INT8-relevant features in one line, e.g. 'AMD EPYC (AVX2, no AVX-512, no VNNI)';
    a CPUID mask or COURSE_CPU_FLAGS is named, e.g. 'Intel Xeon (AVX2, no AVX-512, no VNNI; CPUID masked: avx2)'."""
    report = cpu_report()
    f = report["features"]
    if f["ARM dot product"] or f["ARM i8mm"]:
        parts = [name for name in ("ARM dot product", "ARM i8mm") if f[name]]
    else:
        parts = [
            "AVX-512" if f["AVX-512"] else ("AVX2, no AVX-512" if f["AVX2"] else "no AVX2"),
            "VNNI" if f["AVX-512 VNNI"] or f["AVX-VNNI"] else "no VNNI",
            *(["AMX"] if f["AMX (INT8)"] else []),
        ]
    isa = ", ".join(parts)
    source = report.get("source", "")
    if source.startswith("override"):
        isa += f"; flags from {FLAGS_ENV}"
    elif "masked: " in source:
        isa += f"; CPUID masked: {source.split('masked: ')[1].rstrip(')')}"
    elif "CPUID could not be read" in source:
        isa += "; CPUID masked, but these are the host's flags"
    elif "no mask is in effect" in source:
        isa += f"; {MASK_ENV} set but not in effect"
    return f"{cpu_name()} ({isa})"


def int8_dot_product(features: Mapping[str, bool] | None = None) -> Int8DotProduct | None:
    """The strongest INT8 dot-product instruction set of this CPU (or of `features`, a
    `cpu_report()["features"]` dict), or None: x86 AMX, AVX-512 VNNI, AVX-VNNI; ARM i8mm, dot product.

    Which operand signs it multiplies matters: VNNI multiplies u8 x s8 only, ARM's SDOT/UDOT
    same-sign bytes only (u8 x s8 needs i8mm's USDOT). ONNX Runtime's kernels are written around
    that (lesson 05).
    """
    f = cpu_report()["features"] if features is None else features
    return next((dot for dot in DOT_PRODUCTS if f.get(dot.feature)), None)


def has_vnni() -> bool:
    """True if the CPU has an INT8 dot-product instruction (VNNI, AVX-VNNI, AMX, ARM dot product or i8mm)."""
    return int8_dot_product() is not None


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
    With VNNI the products are added into 32 bits. VPMADDUBSW is x86's: on ARM with the dot
    product, MLAS runs U8S8 on its UDOT kernel after shifting the int8 weights by 128 into uint8
    (and the zero point with them), adding into 32 bits.
    """
    cpu = cpu_report()
    return saturating_u8s8(cpu["machine"], [name for name, present in cpu["features"].items() if present])


def onnxruntime_providers() -> list[str]:
    """The execution providers this onnxruntime build offers."""
    import onnxruntime as ort

    return list(ort.get_available_providers())
