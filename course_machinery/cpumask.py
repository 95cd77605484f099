"""Run a process as another CPU class at native speed: the x86 CPUID mask (cpumask.c, LD_PRELOAD).

The course must be right on AVX2-only CPUs (AMD Zen 3, most Colab runtimes), on AVX-512 VNNI
without AMX (AMD Zen 4) and on Intel Xeons with AMX. ONNX Runtime's MLAS picks its kernels from the
CPUID instruction, so a process whose CPUID answers as a smaller CPU runs that CPU's kernels: the
same integer arithmetic (U8S8 saturation included), on this machine, at its speed. An emulator
(`qemu-x86_64 -cpu Haswell`) gives the same answers about 2,900 times slower.

The mask needs Linux on an x86-64 CPU with CPUID faulting (`cpuid_fault` in /proc/cpuinfo: Intel
since Ivy Bridge, some AMD) and gcc, which builds cpumask.c once (cached under build/cpumask/).

    import os, subprocess
    from course_machinery import cpumask
    subprocess.run([...], env=os.environ | cpumask.environment("avx2"))

The child's CPUID then reports the masked features (course_machinery.hardware reads and says so); the
operating system's /proc/cpuinfo does not change. Masks hide features, they cannot add any.
"""

from __future__ import annotations

import functools
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from . import paths

SOURCE = Path(__file__).with_name("cpumask.c")
MASK_ENV = "COURSE_CPU_MASK"

# Mask name (as COURSE_CPU_MASK takes it) -> what it hides, in words. cpumask.c holds the bits.
MASKS: dict[str, str] = {
    "avx2": (
        "an AVX2 + FMA CPU like Haswell or AMD Zen 3: hides every AVX-512 (F, BW, DQ, VL, VNNI, BF16, FP16, ...),"
        " AVX-VNNI, AVX-VNNI-INT8/INT16, AVX-IFMA, AVX-NE-CONVERT, AVX10, AMX, GFNI, VAES and VPCLMULQDQ"
    ),
    "avx512-vnni": (
        "AVX-512 with VNNI and BF16 but no AMX, like AMD Zen 4: hides AMX (TILE, INT8, BF16, FP16, COMPLEX),"
        " AVX512-FP16, AVX-VNNI, AVX-VNNI-INT8/INT16, AVX-IFMA, AVX-NE-CONVERT and AVX10"
    ),
}


class CpuMaskUnavailable(RuntimeError):
    """The CPUID mask cannot work on this machine (the message says why and what to do)."""


def _check_mask(mask: str) -> None:
    if mask not in MASKS:
        raise ValueError(f"Unknown CPU mask {mask!r}; expected one of: {', '.join(MASKS)}.")


def _compiler() -> str | None:
    return shutil.which(os.environ.get("CC") or "gcc")


def _proc_flags() -> list[str] | None:
    """The first processor's flags in /proc/cpuinfo (cpuid_fault says CPUID can be made to fault)."""
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return None
    return next(
        (line.split(":", 1)[1].split() for line in cpuinfo.splitlines() if line.startswith("flags")), []
    )


def supported() -> str | None:
    """None when the mask works here, else the reason (and the fix) in one sentence."""
    system, machine = platform.system(), platform.machine().lower()
    if system != "Linux" or machine not in ("x86_64", "amd64"):
        return (
            f"the CPUID mask needs Linux on x86-64 (this is {system} on {machine}); "
            "set COURSE_CPU_FLAGS to change what the course reports, or use an x86-64 Linux machine"
        )
    flags = _proc_flags()
    if flags is None:
        return "/proc/cpuinfo cannot be read, so CPUID faulting (its cpuid_fault flag) cannot be checked"
    if "cpuid_fault" not in flags:
        return (
            "this CPU or kernel cannot make CPUID fault (no cpuid_fault in /proc/cpuinfo's flags); "
            "use an Intel CPU since Ivy Bridge (or a VM that passes CPUID faulting on), or, for functional "
            "checks only, qemu-x86_64 -cpu Haswell (about 2,900x slower)"
        )
    if _compiler() is None:
        return "gcc is needed to build the mask (cpumask.c) and was not found: apt-get install gcc, or set CC"
    return None


def library_path() -> Path:
    """Where `build()` puts the library: build/cpumask/, named after the source's hash (so a changed
    source is rebuilt, and an old library is never loaded)."""
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:12]
    return paths.BUILD / "cpumask" / f"cpumask-{digest}.so"


def build() -> Path:
    """The mask's shared library, compiled from cpumask.c with the system's gcc when missing or stale."""
    reason = supported()
    if reason:
        raise CpuMaskUnavailable(f"The CPUID mask cannot run here: {reason}.")
    target = library_path()
    if target.is_file():
        return target
    if any(c in str(target) for c in " :"):
        raise CpuMaskUnavailable(
            f"LD_PRELOAD cannot name {target} (a space or colon in the path); "
            "move the checkout to a path without them."
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, suffix=".so.tmp")
    os.close(fd)
    command = [_compiler() or "gcc", "-O2", "-Wall", "-shared", "-fPIC", "-o", tmp, str(SOURCE), "-ldl"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise CpuMaskUnavailable(
                f"gcc could not build the CPUID mask ({' '.join(command)}):\n{done.stderr.strip()}\n"
                "Install the C library headers (apt-get install libc6-dev) and try again."
            )
        os.replace(tmp, target)  # whole or not at all: another process may build it at the same time
    finally:
        Path(tmp).unlink(missing_ok=True)
    for old in target.parent.glob("cpumask-*.so"):
        if old != target:
            old.unlink(missing_ok=True)  # built from an older source (processes using it keep their copy)
    return target


@functools.cache
def _probe(library: str, mask: str) -> None:
    """Start one small program under the mask (once per process): the library refuses to run where
    arch_prctl is blocked (a seccomp filter) or CPUID faulting fails, and says why on stderr."""
    program = shutil.which("true") or "/bin/true"
    env = os.environ | {"LD_PRELOAD": library, MASK_ENV: mask}
    done = subprocess.run([program], env=env, capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise CpuMaskUnavailable(f"The CPUID mask {mask} does not start here: {done.stderr.strip()}")


def environment(mask: str) -> dict[str, str]:
    """The environment variables that run a process under `mask` (LD_PRELOAD, COURSE_CPU_MASK), to add
    to os.environ: `subprocess.run(cmd, env=os.environ | environment("avx2"))`. Builds the library
    first; an LD_PRELOAD already set is kept after it."""
    _check_mask(mask)
    library = str(build())
    _probe(library, mask)
    preload = [p for p in os.environ.get("LD_PRELOAD", "").replace(":", " ").split() if p != library]
    return {"LD_PRELOAD": " ".join([library, *preload]), MASK_ENV: mask}


def run(mask: str, command: Sequence[str]) -> int:
    """Run `command` under `mask` and return its exit status (a command-line hook)."""
    return subprocess.run(list(command), env=os.environ | environment(mask), check=False).returncode
