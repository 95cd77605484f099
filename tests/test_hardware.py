"""course_machinery.hardware: which CPUs' INT8 kernels can saturate, and the CPU in one line."""

from __future__ import annotations

import ast
import ctypes
import os
import subprocess
import sys
from pathlib import Path

import pytest

from course_machinery import cpuid, hardware


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


# --------------------------------------------------------------------------------------------
# Each platform's branch, fed the outputs recorded on real machines (tests/fixtures/platforms/,
# each file names its source in its header).
# --------------------------------------------------------------------------------------------
FIXTURES = Path(__file__).parent / "fixtures" / "platforms"


def recorded(name: str) -> str:
    return (FIXTURES / name).read_text()


def registry(name: str) -> dict:
    """A PowerShell listing of a registry key ('Name : value' lines) as winreg's name -> value."""
    lines = [line for line in recorded(name).splitlines() if line and not line.startswith("#")]
    return {key.strip(): value.strip() for key, _, value in (line.partition(":") for line in lines)}


def features_of(flags) -> dict[str, bool]:
    return {feature: flag in flags for feature, (flag, _) in hardware.INT8_FEATURES.items()}


PARSED = {
    ".sysctl": lambda name: hardware.parse_sysctl(recorded(name)),
    ".cpuinfo": lambda name: hardware.parse_proc_cpuinfo(recorded(name)),
    ".registry": lambda name: hardware.parse_windows_arm(registry(name)),
    ".pycpuinfo": lambda name: hardware.parse_pycpuinfo(ast.literal_eval(recorded(name).splitlines()[-1])),
}


@pytest.mark.parametrize(
    "fixture, cpu, dotprod, i8mm, strongest",
    [
        ("darwin-arm64-m1-pro.sysctl", "Apple M1 Pro", True, False, "ARM dot product"),
        ("darwin-arm64-m2.sysctl", "Apple M2", True, True, "ARM i8mm"),
        ("darwin-arm64-m3-max.sysctl", "Apple M3 Max", True, True, "ARM i8mm"),
        ("linux-arm64-asahi-m1.cpuinfo", "Apple M1 (Icestorm)", True, False, "ARM dot product"),
        ("linux-arm64-graviton1-cortex-a72.cpuinfo", "Arm Cortex-A72", False, False, None),
        ("linux-arm64-graviton2-neoverse-n1.cpuinfo", "Arm Neoverse N1", True, False, "ARM dot product"),
        ("linux-arm64-graviton3-neoverse-v1.cpuinfo", "Arm Neoverse V1", True, True, "ARM i8mm"),
        (
            "windows-arm64-snapdragon-8cx-gen3.registry",
            "ARMv8 (64-bit) Family 8 Model D4B Revision 0, Qualcomm Technologies Inc",
            True,
            False,
            "ARM dot product",
        ),
    ],
)
def test_arm_int8_features_are_read_where_each_platform_publishes_them(
    fixture, cpu, dotprod, i8mm, strongest
):
    name, flags = PARSED[Path(fixture).suffix](fixture)
    f = features_of(flags)
    assert name == cpu
    assert (f["ARM dot product"], f["ARM i8mm"]) == (dotprod, i8mm)
    assert not any(f[k] for k in ("AVX2", "AVX-512", "AVX-512 VNNI", "AVX-VNNI", "AMX (INT8)"))
    dot = hardware.int8_dot_product(f)
    assert (dot.feature if dot else None) == strongest
    assert not hardware.saturating_u8s8("arm64", [k for k, on in f.items() if on])


@pytest.mark.parametrize(
    "fixture, cpu, present, strongest",
    [
        ("linux-x86_64-zen3.cpuinfo", "AMD Ryzen 9 5950X 16-Core Processor", {"AVX2"}, None),
        (
            "linux-x86_64-zen4.cpuinfo",
            "AMD EPYC 9654 96-Core Processor",
            {"AVX2", "AVX-512", "AVX-512 VNNI"},
            "AVX-512 VNNI",
        ),
        (
            "linux-x86_64-sapphirerapids.cpuinfo",
            "Intel(R) Xeon(R) Platinum 8480+",
            {"AVX2", "AVX-512", "AVX-512 VNNI", "AVX-VNNI", "AMX (INT8)"},
            "AMX (INT8)",
        ),
        ("linux-x86_64-arrowlake.cpuinfo", "Intel(R) Core(TM) Ultra 9 285", {"AVX2", "AVX-VNNI"}, "AVX-VNNI"),
        ("darwin-x86_64-skylake.sysctl", "Intel(R) Core(TM) i7-6700K CPU @ 4.00GHz", {"AVX2"}, None),
        ("windows-x86_64-ivybridge.pycpuinfo", "Intel(R) Core(TM) i7-3770K CPU @ 3.50GHz", set(), None),
    ],
)
def test_x86_int8_features_are_read_on_linux_macos_and_windows(fixture, cpu, present, strongest):
    name, flags = PARSED[Path(fixture).suffix](fixture)
    f = features_of(flags)
    assert name == cpu
    assert {k for k, on in f.items() if on} == present
    dot = hardware.int8_dot_product(f)
    assert (dot.feature if dot else None) == strongest
    assert hardware.saturating_u8s8("x86_64", present) is (strongest is None)


def test_the_dot_products_say_which_signs_they_multiply():
    arm = hardware.int8_dot_product(features_of({"asimddp"}))
    assert "u8 x s8" not in arm.signs and {"s8 x s8", "u8 x u8"} <= set(arm.signs.split(", "))
    assert "USDOT" in hardware.int8_dot_product(features_of({"asimddp", "i8mm"})).instructions
    assert hardware.int8_dot_product(features_of({"avx512_vnni"})).signs == "u8 x s8"
    assert hardware.int8_dot_product(features_of({"avx2", "avx512f"})) is None


def test_windows_arm_features_come_from_either_isprocessorfeaturepresent_or_the_id_registers():
    assert hardware.parse_windows_arm({43: True, 66: True})[1] >= {"asimddp", "i8mm"}
    assert hardware.parse_windows_arm({43: False, 66: False})[1] == frozenset()
    # ID_AA64ISAR0_EL1 with DotProd (bits 47:44) = 1, ISAR1 with I8MM (bits 55:52) = 1
    assert hardware.parse_windows_arm({"CP 4030": 1 << 44, "CP 4031": 1 << 52})[1] == {"asimddp", "i8mm"}


READERS = ("_read_proc_cpuinfo", "_read_sysctl", "_read_windows_arm", "_read_pycpuinfo")


@pytest.fixture
def on_platform(monkeypatch):
    """Pretend to be another operating system: its platform answers and its raw reader's answer."""

    def pretend(system: str, machine: str, **readers):
        monkeypatch.setattr(hardware.platform, "system", lambda: system)
        monkeypatch.setattr(hardware.platform, "machine", lambda: machine)
        monkeypatch.setattr(hardware.platform, "processor", lambda: "")
        empty = {"_read_windows_arm": {}, "_read_pycpuinfo": {}, "_read_cpuid": None, "_mask_in_effect": None}
        for reader in (*READERS, "_read_cpuid", "_mask_in_effect"):
            answer = readers.get(reader, empty.get(reader, ""))
            monkeypatch.setattr(hardware, reader, lambda answer=answer: answer)
        for name in (hardware.FLAGS_ENV, hardware.MASK_ENV):
            monkeypatch.delenv(name, raising=False)
        hardware._cpu_flags.cache_clear()

    yield pretend
    hardware._cpu_flags.cache_clear()


def test_cpu_report_on_an_apple_silicon_mac(on_platform):
    on_platform("Darwin", "arm64", _read_sysctl=recorded("darwin-arm64-m2.sysctl"))
    report = hardware.cpu_report()
    assert report["cpu"] == "Apple M2" and report["machine"] == "arm64"
    assert report["features"]["ARM dot product"] and report["features"]["ARM i8mm"]
    assert hardware.has_vnni() and not hardware.u8s8_can_saturate()
    assert hardware.cpu_summary() == "Apple M2 (ARM dot product, ARM i8mm)"


def test_cpu_report_on_windows(on_platform):
    info = ast.literal_eval(recorded("windows-x86_64-ivybridge.pycpuinfo").splitlines()[-1])
    on_platform("Windows", "AMD64", _read_pycpuinfo=info)
    assert hardware.cpu_report()["cpu"] == "Intel(R) Core(TM) i7-3770K CPU @ 3.50GHz"
    assert not hardware.has_vnni() and hardware.u8s8_can_saturate()

    on_platform("Windows", "ARM64", _read_windows_arm=registry("windows-arm64-snapdragon-8cx-gen3.registry"))
    assert hardware.cpu_report()["features"]["ARM dot product"] and hardware.has_vnni()

    on_platform("Windows", "AMD64")  # every reader came back empty: still an answer, never an error
    assert hardware.cpu_report()["cpu"] == "unknown" and not any(hardware.cpu_report()["features"].values())


def test_the_windows_reader_answers_empty_where_there_is_no_registry():
    assert hardware._read_windows_arm() == {}  # no winreg, no ctypes.windll on this machine


def test_the_library_imports_and_reports_where_resource_and_fcntl_do_not_exist():
    """As on Windows: importing resource or fcntl fails there (None in sys.modules makes it fail here;
    psutil, whose Linux backend needs resource and whose Windows one does not, is imported first)."""
    code = (
        "import sys, psutil; sys.modules['resource'] = None; sys.modules['fcntl'] = None\n"
        "import course_lib\n"
        "from course_lib import hardware\n"
        "from course_lib.measure import memory\n"
        "from course_machinery import results\n"
        "print(hardware.cpu_summary()); print(results.environment_fingerprint()['hash'])\n"
        "with results._locked(results.results_path()): pass\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]


# --------------------------------------------------------------------------------------------
# CPUID: what ONNX Runtime's kernels follow. Dumps recorded with `python -m course_machinery.cpuid` on a
# Sapphire Rapids-class Xeon natively, under qemu-x86_64 -cpu Haswell and under the two CPUID masks
# (tests/fixtures/cpuid/README.md).
# --------------------------------------------------------------------------------------------
CPUID_FIXTURES = Path(__file__).parent / "fixtures" / "cpuid"
XEON = "Intel(R) Xeon(R) Processor"


def dump(name: str) -> tuple[dict, int]:
    return cpuid.from_json((CPUID_FIXTURES / name).read_text())


@pytest.mark.parametrize(
    "fixture, cpu, flags",
    [
        (
            "linux-x86_64-xeon-amx.json",
            XEON,
            {"avx", "fma", "avx2", "avx_vnni", "avx512f", "avx512dq", "avx512bw", "avx512vl", "avx512_vnni"}
            | {"avx512_bf16", "avx512_fp16", "amx_tile", "amx_int8", "amx_bf16"},
        ),
        ("qemu-haswell.json", "Intel Core Processor (Haswell)", {"avx", "fma", "avx2"}),
        ("linux-x86_64-xeon-mask-avx2.json", XEON, {"avx", "fma", "avx2"}),
        (
            "linux-x86_64-xeon-mask-avx512-vnni.json",
            XEON,
            {
                "avx",
                "fma",
                "avx2",
                "avx512f",
                "avx512dq",
                "avx512bw",
                "avx512vl",
                "avx512_vnni",
                "avx512_bf16",
            },
        ),
    ],
)
def test_cpuid_dumps_are_read_as_linux_flags(fixture, cpu, flags):
    name, found = hardware.parse_cpuid(*dump(fixture))
    assert name == cpu
    assert found == flags


def test_the_recorded_xeon_agrees_with_its_proc_cpuinfo():
    """The machine the dumps come from: CPUID read by the course and by the kernel say the same."""
    name, flags = hardware.parse_proc_cpuinfo((CPUID_FIXTURES / "linux-x86_64-xeon-amx.cpuinfo").read_text())
    assert hardware.parse_cpuid(*dump("linux-x86_64-xeon-amx.json")) == (name, flags & hardware.CPUID_FLAGS)


def test_a_feature_counts_only_where_the_operating_system_saves_its_registers():
    leaves, xcr0 = dump("linux-x86_64-xeon-amx.json")
    no_tiles = hardware.parse_cpuid(leaves, xcr0 & ~0x60000)[1]  # a kernel before 5.16: no AMX state
    assert not {f for f in no_tiles if f.startswith("amx")} and "avx512_vnni" in no_tiles
    no_zmm = hardware.parse_cpuid(leaves, 0x7 | 0x60000)[1]  # AVX-512 state off (macOS until first use)
    assert not {f for f in no_zmm if f.startswith("avx512")} and {"avx2", "avx_vnni", "amx_int8"} <= no_zmm
    assert hardware.parse_cpuid(leaves, 0)[1] == frozenset()  # no OSXSAVE: no AVX at all


def test_under_an_emulator_cpuid_wins_over_the_hosts_proc_cpuinfo(on_platform):
    """qemu-x86_64 -cpu Haswell on the Xeon: /proc/cpuinfo lists the host's AMX, CPUID says Haswell,
    and ONNX Runtime follows CPUID (its U8S8 kernels saturate there)."""
    host = recorded("linux-x86_64-sapphirerapids.cpuinfo")
    on_platform("Linux", "x86_64", _read_proc_cpuinfo=host, _read_cpuid=dump("qemu-haswell.json"))
    report = hardware.cpu_report()
    assert report["source"] == "cpuid" and report["cpu"] == "Intel Core Processor (Haswell)"
    assert {k for k, on in report["features"].items() if on} == {"AVX2"}
    assert hardware.u8s8_can_saturate() and not any(hardware.half_float_features().values())
    assert hardware.cpu_summary() == "Intel Core Processor (Haswell) (AVX2, no AVX-512, no VNNI)"

    on_platform("Linux", "x86_64", _read_proc_cpuinfo=host)  # CPUID unreadable: the OS's report
    report = hardware.cpu_report()
    assert report["source"] == "/proc/cpuinfo" and report["features"]["AMX (INT8)"]


def test_a_cpuid_mask_is_named_in_the_report(on_platform, monkeypatch):
    host = (CPUID_FIXTURES / "linux-x86_64-xeon-amx.cpuinfo").read_text()
    masked = dump("linux-x86_64-xeon-mask-avx512-vnni.json")
    on_platform("Linux", "x86_64", _read_proc_cpuinfo=host, _read_cpuid=masked, _mask_in_effect="avx512-vnni")
    assert hardware.cpu_report()["source"] == "cpuid (masked: avx512-vnni)"
    assert hardware.int8_dot_product().feature == "AVX-512 VNNI"
    assert hardware.half_float_features() == {
        "AVX-512 BF16": True,
        "AMX (BF16)": False,
        "ARM fp16": False,
        "ARM bf16": False,
    }
    assert hardware.cpu_summary() == f"{XEON} (AVX-512, VNNI; CPUID masked: avx512-vnni)"

    # COURSE_CPU_MASK set by hand, without the library: CPUID is the host's, and the report says so.
    on_platform("Linux", "x86_64", _read_proc_cpuinfo=host, _read_cpuid=dump("linux-x86_64-xeon-amx.json"))
    monkeypatch.setenv(hardware.MASK_ENV, "avx2")
    hardware._cpu_flags.cache_clear()
    assert "COURSE_CPU_MASK=avx2 is set but no mask is in effect" in hardware.cpu_report()["source"]
    assert hardware.cpu_summary().endswith("(AVX-512, VNNI, AMX; COURSE_CPU_MASK set but not in effect)")


def test_course_cpu_flags_replaces_the_detected_flags(on_platform, monkeypatch):
    on_platform("Linux", "x86_64", _read_proc_cpuinfo=recorded("linux-x86_64-sapphirerapids.cpuinfo"))
    assert hardware.has_vnni()
    monkeypatch.setenv(hardware.FLAGS_ENV, "avx2, fma")  # read at each call: no cache to clear
    report = hardware.cpu_report()
    assert report["source"] == "override COURSE_CPU_FLAGS"
    assert {k for k, on in report["features"].items() if on} == {"AVX2"}
    assert hardware.u8s8_can_saturate() and not hardware.half_float_features()["AVX-512 BF16"]
    assert (
        hardware.cpu_summary()
        == "Intel(R) Xeon(R) Platinum 8480+ (AVX2, no AVX-512, no VNNI; flags from COURSE_CPU_FLAGS)"
    )
    monkeypatch.setenv(hardware.FLAGS_ENV, "avx2 avx512f avx512vnni")  # py-cpuinfo's spelling is taken too
    assert hardware.int8_dot_product().feature == "AVX-512 VNNI"

    monkeypatch.setenv(hardware.FLAGS_ENV, "avx2 avx-512")
    with pytest.raises(ValueError, match="names avx-512.*from: amx_bf16 amx_int8 .*avx2 .*unset it"):
        hardware.cpu_report()
    monkeypatch.setenv(hardware.FLAGS_ENV, " ")  # empty: detect as usual
    assert hardware.cpu_report()["source"] == "/proc/cpuinfo"


# CPUID on this machine, through the stubs (Linux or macOS on x86-64 only).
needs_x86 = pytest.mark.skipif(
    not cpuid.is_x86_64() or sys.platform == "win32",
    reason="runs the System V CPUID stub: x86-64 Linux/macOS",
)


@needs_x86
@pytest.mark.skipif(sys.platform != "linux", reason="compares with Linux's /proc/cpuinfo")
def test_this_machines_cpuid_agrees_with_its_kernel():
    """Unless an emulator or a CPUID mask stands between them, the stub reads what the kernel read."""
    name, flags = hardware.parse_proc_cpuinfo(Path("/proc/cpuinfo").read_text())
    brand, found = hardware.parse_cpuid(*cpuid.read())
    if os.environ.get(hardware.MASK_ENV) or brand != name:
        pytest.skip("under a CPUID mask or an emulator, CPUID and /proc/cpuinfo differ by design")
    assert found == flags & hardware.CPUID_FLAGS


@needs_x86
def test_the_windows_stub_reads_what_the_system_v_stub_reads():
    """The Windows x64 stub (leaf in rcx, subleaf in rdx, pointer in r8) run here behind a System V shim
    that moves rdi, rsi, rdx there: every leaf reads the same as through the System V stub."""
    shim = bytes([0x49, 0x89, 0xD0, 0x89, 0xF9, 0x89, 0xF2])  # mov r8, rdx; mov ecx, edi; mov edx, esi
    memory, address = cpuid._executable(shim + cpuid._CPUID_WIN64)
    windows = cpuid._CPUID_TYPE(address)
    for leaf, subleaf in cpuid.BASIC_LEAVES + cpuid.EXTENDED_LEAVES:
        out = (ctypes.c_uint32 * 4)()
        windows(leaf, subleaf, out)
        assert tuple(out) == cpuid.cpuid(leaf, subleaf), (hex(leaf), subleaf)


def test_without_executable_memory_or_off_x86_there_is_no_cpuid_and_the_os_report_stays(monkeypatch):
    def refused(*args, **kwargs):
        raise PermissionError(13, "Permission denied")  # SELinux's execmem denial

    monkeypatch.setattr(cpuid, "_stubs", None)
    monkeypatch.setattr(cpuid, "is_x86_64", lambda: True)
    monkeypatch.setattr(cpuid.sys, "platform", "linux")
    monkeypatch.setattr(cpuid.mmap, "mmap", refused)
    assert cpuid.read() is None and cpuid.cpuid(7) is None
    monkeypatch.setattr(cpuid, "is_x86_64", lambda: False)  # ARM, or a 32-bit Python
    assert cpuid.read() is None
    hardware._cpu_flags.cache_clear()
    try:
        assert hardware.cpu_report()["source"] in ("/proc/cpuinfo", "sysctl", "registry", "py-cpuinfo")
    finally:
        hardware._cpu_flags.cache_clear()
