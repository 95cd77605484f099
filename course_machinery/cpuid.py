"""The x86 CPUID instruction and XCR0, read from Python: what ONNX Runtime's kernels follow.

ONNX Runtime's MLAS picks its kernels from CPUID's feature bits and XGETBV's XCR0 (which state the
operating system saves). The operating system's own report (/proc/cpuinfo) can disagree: under an
emulator (`qemu-x86_64 -cpu Haswell`) it shows the host's flags, and under the course's CPUID mask
(course_machinery.cpumask) it shows flags the runtime no longer sees. So `course_machinery.hardware`
reads CPUID itself, with two tiny machine-code stubs run from a page of executable memory through
ctypes. Where that is impossible (not x86-64, executable memory refused by SELinux or a hardened
kernel) `read()` returns None and the caller falls back to the operating system's report.

`python -m course_machinery.cpuid` prints this machine's leaves as JSON (the fixtures in
tests/fixtures/cpuid/ were recorded with it).
"""

from __future__ import annotations

import ctypes
import json
import mmap
import platform
import sys
from collections.abc import Mapping
from typing import Any

Leaves = dict[tuple[int, int], tuple[int, int, int, int]]

# CPUID(leaf, subleaf) -> the four registers stored at a pointer. rbx is callee-saved in both ABIs.
# System V (Linux, macOS): rdi = leaf, rsi = subleaf, rdx = pointer to 4 uint32.
_CPUID_SYSV = bytes(
    [0x53]  # push rbx
    + [0x49, 0x89, 0xD0]  # mov r8, rdx        (the pointer)
    + [0x89, 0xF8]  # mov eax, edi                (leaf)
    + [0x89, 0xF1]  # mov ecx, esi                (subleaf)
    + [0x0F, 0xA2]  # cpuid
    + [0x41, 0x89, 0x00]  # mov [r8], eax
    + [0x41, 0x89, 0x58, 0x04]  # mov [r8+4], ebx
    + [0x41, 0x89, 0x48, 0x08]  # mov [r8+8], ecx
    + [0x41, 0x89, 0x50, 0x0C]  # mov [r8+12], edx
    + [0x5B, 0xC3]  # pop rbx; ret
)
# Windows x64: rcx = leaf, rdx = subleaf, r8 = pointer (already where the stores want it).
_CPUID_WIN64 = bytes(
    [0x53]  # push rbx
    + [0x89, 0xC8]  # mov eax, ecx                (leaf)
    + [0x89, 0xD1]  # mov ecx, edx                (subleaf)
    + [0x0F, 0xA2]  # cpuid
    + [0x41, 0x89, 0x00]  # mov [r8], eax
    + [0x41, 0x89, 0x58, 0x04]  # mov [r8+4], ebx
    + [0x41, 0x89, 0x48, 0x08]  # mov [r8+8], ecx
    + [0x41, 0x89, 0x50, 0x0C]  # mov [r8+12], edx
    + [0x5B, 0xC3]  # pop rbx; ret
)
# XGETBV(0) -> XCR0 in rax (no arguments: the same in both ABIs).
_XGETBV0 = bytes(
    [0x31, 0xC9]  # xor ecx, ecx
    + [0x0F, 0x01, 0xD0]  # xgetbv             (edx:eax = XCR0)
    + [0x48, 0xC1, 0xE2, 0x20]  # shl rdx, 32
    + [0x48, 0x09, 0xD0]  # or rax, rdx
    + [0xC3]  # ret
)

_CPUID_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_uint32, ctypes.c_uint32, ctypes.POINTER(ctypes.c_uint32))
_XGETBV_TYPE = ctypes.CFUNCTYPE(ctypes.c_uint64)

# The leaves the course reads: vendor and highest leaf, leaf 1 (AVX, FMA, OSXSAVE), leaf 7 subleaves
# 0 and 1 (AVX2, AVX-512, VNNI, AMX, BF16), the highest extended leaf and the brand string.
BASIC_LEAVES = ((0, 0), (1, 0), (7, 0), (7, 1))
EXTENDED_LEAVES = ((0x80000000, 0), (0x80000002, 0), (0x80000003, 0), (0x80000004, 0))

_stubs: tuple[Any, Any, Any] | None = None  # (memory, cpuid function, xgetbv function), made once


def is_x86_64() -> bool:
    """True in a 64-bit process on an x86-64 CPU, the only place the stubs can run."""
    machine = platform.machine().lower()
    return machine in ("x86_64", "amd64", "x64") and ctypes.sizeof(ctypes.c_void_p) == 8


def _executable(code: bytes) -> tuple[Any, int] | None:
    """A page of executable memory holding `code`: (the object keeping it alive, its address)."""
    if sys.platform == "win32":
        kernel32 = ctypes.windll.kernel32  # type: ignore[attr-defined]
        kernel32.VirtualAlloc.restype = ctypes.c_void_p
        kernel32.VirtualAlloc.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint32, ctypes.c_uint32]
        # MEM_COMMIT | MEM_RESERVE, PAGE_EXECUTE_READWRITE; never freed (one page per process)
        address = kernel32.VirtualAlloc(None, len(code), 0x3000, 0x40)
        if not address:
            return None
        ctypes.memmove(address, code, len(code))
        return None, address
    # Written while writable, then made read + execute (never both writable and executable: W^X
    # policies such as PaX MPROTECT and OpenBSD refuse such pages, where SELinux execmem refuses both).
    try:
        memory = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        memory.write(code)
        address = ctypes.addressof(ctypes.c_char.from_buffer(memory))
        mprotect = ctypes.CDLL(None).mprotect
        mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        if mprotect(address, mmap.PAGESIZE, mmap.PROT_READ | mmap.PROT_EXEC) != 0:
            return None  # refused: SELinux execmem, hardened kernels, macOS's hardened runtime
    except (OSError, ValueError, AttributeError, TypeError):
        return None
    return memory, address


def _load() -> tuple[Any, Any, Any] | None:
    global _stubs
    if _stubs is None and is_x86_64():
        code = (_CPUID_WIN64 if sys.platform == "win32" else _CPUID_SYSV) + _XGETBV0
        placed = _executable(code)
        if placed is not None:
            memory, address = placed
            cpuid_len = len(code) - len(_XGETBV0)
            _stubs = (memory, _CPUID_TYPE(address), _XGETBV_TYPE(address + cpuid_len))
    return _stubs


def cpuid(leaf: int, subleaf: int = 0) -> tuple[int, int, int, int] | None:
    """EAX, EBX, ECX, EDX of CPUID(leaf, subleaf), or None where CPUID cannot be run from here."""
    stubs = _load()
    if stubs is None:
        return None
    out = (ctypes.c_uint32 * 4)()
    stubs[1](leaf, subleaf, out)
    return out[0], out[1], out[2], out[3]


def read() -> tuple[Leaves, int] | None:
    """The leaves the course reads (those this CPU has) and XCR0, or None where CPUID cannot be run.

    XCR0 is 0 when the operating system has not enabled XSAVE (CPUID.1:ECX bit 27, OSXSAVE): XGETBV
    would fault there.
    """
    first = cpuid(0)
    if first is None:
        return None
    highest = first[0]
    leaves: Leaves = {(0, 0): first}
    for leaf, subleaf in BASIC_LEAVES[1:]:
        if leaf <= highest:
            leaves[(leaf, subleaf)] = cpuid(leaf, subleaf) or (0, 0, 0, 0)
    top = cpuid(0x80000000) or (0, 0, 0, 0)
    leaves[(0x80000000, 0)] = top
    for leaf, subleaf in EXTENDED_LEAVES[1:]:
        if leaf <= top[0]:
            leaves[(leaf, subleaf)] = cpuid(leaf, subleaf) or (0, 0, 0, 0)
    osxsave = bool(leaves.get((1, 0), (0, 0, 0, 0))[2] >> 27 & 1)
    stubs = _load()
    xcr0 = int(stubs[2]()) if osxsave and stubs is not None else 0
    return leaves, xcr0


def to_json(leaves: Mapping[tuple[int, int], tuple[int, int, int, int]], xcr0: int, **about: str) -> str:
    """Leaves and XCR0 as readable JSON (hex strings), with any notes (`machine=`, `command=`) first."""
    rows = [
        {"leaf": f"{leaf:#x}", "subleaf": f"{subleaf:#x}"}
        | dict(zip(("eax", "ebx", "ecx", "edx"), (f"{r:#010x}" for r in regs), strict=True))
        for (leaf, subleaf), regs in sorted(leaves.items())
    ]
    return json.dumps({**about, "xcr0": f"{xcr0:#x}", "leaves": rows}, indent=1) + "\n"


def from_json(text: str) -> tuple[Leaves, int]:
    """What `to_json` wrote: the leaves and XCR0."""
    data = json.loads(text)
    leaves = {
        (int(row["leaf"], 16), int(row["subleaf"], 16)): tuple(
            int(row[r], 16) for r in ("eax", "ebx", "ecx", "edx")
        )
        for row in data["leaves"]
    }
    return leaves, int(data["xcr0"], 16)  # type: ignore[return-value]


if __name__ == "__main__":
    found = read()
    if found is None:
        sys.exit(f"CPUID cannot be read here ({platform.machine()}, {sys.platform}).")
    sys.stdout.write(to_json(*found, machine=platform.machine(), python=sys.version.split()[0]))
