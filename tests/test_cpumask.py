"""course_machinery.cpumask: processes that see a smaller x86 CPU through CPUID, at native speed.

The masked processes run for real here where the CPU can make CPUID fault (cpuid_fault) and gcc
builds the library; elsewhere those tests are skipped and say why. What the masked ONNX Runtime
computes is checked against this CPU unmasked and, where qemu-user is installed, against an emulated
Haswell (`qemu-x86_64 -cpu Haswell`), which is what an AVX2-only CPU computes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from course_machinery import cpuid, cpumask, hardware

UNAVAILABLE = cpumask.supported()
needs_mask = pytest.mark.skipif(UNAVAILABLE is not None, reason=f"CPUID mask unavailable: {UNAVAILABLE}")
QEMU = shutil.which("qemu-x86_64") or shutil.which("qemu-x86_64-static")
needs_qemu = pytest.mark.skipif(
    QEMU is None,
    reason="qemu-user is not installed (apt-get install qemu-user or qemu-user-static, or ../shared/tools/avx2-only)",
)
HOST = hardware.parse_cpuid(*cpuid.read())[1] if UNAVAILABLE is None else frozenset()
VNNI = {"avx512_vnni", "avx_vnni", "amx_int8"}


def python(code: str, mask: str | None = None, qemu: bool = False, args: tuple[str, ...] = ()):
    """Run `code` in a fresh Python: under `mask`, under qemu's Haswell, or plain (no mask inherited)."""
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", cpumask.MASK_ENV)}
    if mask:
        env |= cpumask.environment(mask)
    command = [
        *([QEMU, "-cpu", "Haswell"] if qemu else []),
        sys.executable,
        "-c",
        textwrap.dedent(code),
        *args,
    ]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)


def ok(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


# --------------------------------------------------------------------------------------------
# The Python side: names, errors, the build. No CPUID faulting needed.
# --------------------------------------------------------------------------------------------
def test_an_unknown_mask_is_refused_with_the_known_ones():
    with pytest.raises(ValueError, match="Unknown CPU mask 'avx512'; expected one of: avx2, avx512-vnni"):
        cpumask.environment("avx512")


def test_without_gcc_or_cpuid_faulting_the_mask_says_why_and_what_to_do(monkeypatch):
    monkeypatch.setattr(cpumask.platform, "system", lambda: "Linux")
    monkeypatch.setattr(cpumask.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(cpumask, "_proc_flags", lambda: ["fpu", "avx2", "cpuid_fault"])
    monkeypatch.setattr(cpumask, "_compiler", lambda: None)
    assert "gcc" in cpumask.supported() and "apt-get install gcc" in cpumask.supported()
    with pytest.raises(cpumask.CpuMaskUnavailable, match="cannot run here: gcc is needed"):
        cpumask.build()
    monkeypatch.setattr(cpumask, "_proc_flags", lambda: ["fpu", "avx2"])  # e.g. most AMD CPUs, many VMs
    assert "no cpuid_fault" in cpumask.supported() and "qemu-x86_64 -cpu Haswell" in cpumask.supported()
    monkeypatch.setattr(cpumask.platform, "machine", lambda: "aarch64")
    assert "needs Linux on x86-64 (this is Linux on aarch64)" in cpumask.supported()


@needs_mask
def test_the_library_is_built_once_and_again_when_its_source_changes(tmp_path, monkeypatch):
    monkeypatch.setattr(cpumask.paths, "BUILD", tmp_path / "build")
    first = cpumask.build()
    assert first.is_file() and first.parent == tmp_path / "build" / "cpumask"
    made = first.stat().st_mtime_ns
    assert cpumask.build() == first and first.stat().st_mtime_ns == made  # cached
    source = tmp_path / "cpumask.c"
    source.write_text(cpumask.SOURCE.read_text() + "\n/* changed */\n")
    monkeypatch.setattr(cpumask, "SOURCE", source)
    second = cpumask.build()
    assert second != first and second.is_file() and not first.exists()  # the stale one is gone
    assert [p.name for p in second.parent.iterdir() if p.suffix == ".tmp"] == []


@needs_mask
def test_the_environment_puts_the_library_first_and_keeps_another_preload(monkeypatch):
    monkeypatch.setenv("LD_PRELOAD", "/usr/lib/libother.so")
    env = cpumask.environment("avx2")
    assert env == {"LD_PRELOAD": f"{cpumask.build()} /usr/lib/libother.so", "COURSE_CPU_MASK": "avx2"}


# --------------------------------------------------------------------------------------------
# Masked processes.
# --------------------------------------------------------------------------------------------
READ = """
    import json
    from course_lib import cpuid, hardware
    from course_machinery import cpumask
    flags = hardware.parse_cpuid(*cpuid.read())[1]
    proc = hardware.parse_proc_cpuinfo(open("/proc/cpuinfo").read())[1] & hardware.CPUID_FLAGS
    print(json.dumps({"cpuid": sorted(flags), "proc": sorted(proc), "source": hardware.cpu_report()["source"],
                      "summary": hardware.cpu_summary()}))
"""


AVX2_HIDES = {f for f in hardware.CPUID_FLAGS if f.startswith(("avx512", "amx"))} | {"avx_vnni"}
ZEN4_HIDES = {"avx_vnni", "avx512_fp16", "amx_tile", "amx_int8", "amx_bf16"}


@needs_mask
@pytest.mark.parametrize(
    "mask, kept, hidden",
    [
        ("avx2", {"avx", "fma", "avx2"}, AVX2_HIDES),
        ("avx512-vnni", {"avx2", "avx512f", "avx512_vnni", "avx512_bf16"}, ZEN4_HIDES),
    ],
)
def test_a_masked_process_reads_the_smaller_cpu_from_cpuid_but_not_from_proc_cpuinfo(mask, kept, hidden):
    if not kept <= HOST:
        pytest.skip(f"this CPU lacks {sorted(kept - HOST)}: the mask {mask} cannot make that CPU here")
    seen = json.loads(ok(python(READ, mask)))
    assert set(seen["cpuid"]) == HOST - hidden
    assert set(seen["proc"]) == HOST  # the kernel's report is the host's: why the course reads CPUID
    assert seen["source"] == f"cpuid (masked: {mask})" and seen["summary"].endswith(
        f"; CPUID masked: {mask})"
    )


@needs_mask
def test_numpy_torch_and_onnxruntime_run_under_the_avx2_mask_and_follow_it():
    code = """
        import numpy as np, onnxruntime as ort, torch
        from onnx import TensorProto, helper
        a = np.arange(64 * 64, dtype=np.float64).reshape(64, 64) % 7
        print(int((a @ a).sum()), torch.backends.cpu.get_cpu_capability())
        g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        print(s.run(None, {"x": np.array([-1, 0, 2], np.float32)})[0].tolist())
    """
    first, relu = ok(python(code, "avx2")).splitlines()
    total, capability = first.split()
    a = np.arange(64 * 64, dtype=np.float64).reshape(64, 64) % 7
    assert int(total) == int((a @ a).sum())
    assert capability == "AVX2"  # PyTorch's own CPUID reading (AVX512 on this CPU unmasked)
    assert relu == "[0.0, 0.0, 2.0]"


# A U8S8 model whose pairs of u8 x s8 products overflow int16: 255 * 127 * 2 = 64,770 > 32,767. AVX2
# (VPMADDUBSW) saturates each pair at 32,767; VNNI and AMX add into int32 (lesson 05).
K = 64


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """MatMulInteger (uint8 x int8 -> int32) and a static U8S8 per-channel QDQ conv and its
    reduce_range twin (ONNX Runtime fuses them into QLinearConv, as in lesson 03's ResNet18)."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    d = tmp_path_factory.mktemp("u8s8")
    b = numpy_helper.from_array(np.full((K, 8), 127, np.int8), "b")
    g = helper.make_graph(
        [helper.make_node("MatMulInteger", ["a", "b"], ["y"])],
        "matmul",
        [helper.make_tensor_value_info("a", TensorProto.UINT8, ["M", K])],
        [helper.make_tensor_value_info("y", TensorProto.INT32, ["M", 8])],
        [b],
    )
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), d / "matmul.onnx")

    rng = np.random.default_rng(0)
    w = rng.uniform(0.2, 1.0, (32, 16, 3, 3)).astype(np.float32)  # positive weights: many pairs near 127
    g = helper.make_graph(
        [helper.make_node("Conv", ["x", "W"], ["y"], pads=[1, 1, 1, 1])],
        "conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16, 10, 10])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 32, 10, 10])],
        [numpy_helper.from_array(w, "W")],
    )
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), d / "conv.fp32.onnx")

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.batches = iter([{"x": rng.random((4, 16, 10, 10), dtype=np.float32)} for _ in range(2)])

        def get_next(self):
            return next(self.batches, None)

    for name, reduce_range in (("conv.u8s8", False), ("conv.u8s8_reduce_range", True)):
        quantize_static(
            d / "conv.fp32.onnx",
            d / f"{name}.onnx",
            Reader(),
            quant_format=QuantFormat.QDQ,
            activation_type=QuantType.QUInt8,
            weight_type=QuantType.QInt8,
            per_channel=True,
            reduce_range=reduce_range,
        )
    return d


RUN = """
    import sys, numpy as np, onnxruntime as ort
    d = sys.argv[1]
    def run(name, feed):
        return ort.InferenceSession(f"{d}/{name}.onnx", providers=["CPUExecutionProvider"]).run(None, feed)[0]
    x = np.random.default_rng(1).random((2, 16, 10, 10), dtype=np.float32)
    np.savez(sys.argv[2], matmul=run("matmul", {"a": np.full((4, 64), 255, np.uint8)}),
             u8s8=run("conv.u8s8", {"x": x}), reduce_range=run("conv.u8s8_reduce_range", {"x": x}))
"""


def outputs(models, tag: str, mask: str | None = None, qemu: bool = False) -> dict[str, np.ndarray]:
    out = models / f"{tag}.npz"
    ok(python(RUN, mask, qemu, args=(str(models), str(out))))
    return dict(np.load(out))


EXACT, SATURATED = 255 * 127 * K, 32_767 * (K // 2)  # 2,072,640 and 1,048,544


@needs_mask
def test_under_the_avx2_mask_u8s8_saturates_as_on_an_avx2_cpu(models):
    masked = outputs(models, "avx2", "avx2")
    assert (masked["matmul"] == SATURATED).all()  # MLAS's AVX2 kernel: VPMADDUBSW
    if VNNI & HOST:
        native = outputs(models, "native")
        assert (native["matmul"] == EXACT).all()
        assert not np.array_equal(masked["u8s8"], native["u8s8"])  # the QLinearConv saturates too
        np.testing.assert_array_equal(masked["reduce_range"], native["reduce_range"])  # 7-bit weights: never


@needs_mask
@needs_qemu
def test_the_avx2_mask_computes_bit_for_bit_what_qemus_haswell_computes(models):
    masked, emulated = outputs(models, "avx2", "avx2"), outputs(models, "haswell", qemu=True)
    for name in ("matmul", "u8s8", "reduce_range"):
        np.testing.assert_array_equal(masked[name], emulated[name], err_msg=name)


@needs_mask
def test_under_the_avx512_vnni_mask_u8s8_adds_into_int32_as_this_cpu_does(models):
    if "avx512_vnni" not in HOST:
        pytest.skip("this CPU has no AVX-512 VNNI to keep")
    masked, native = outputs(models, "avx512-vnni", "avx512-vnni"), outputs(models, "native")
    assert (masked["matmul"] == EXACT).all()
    for name in ("u8s8", "reduce_range"):
        np.testing.assert_array_equal(masked[name], native[name], err_msg=name)


# --------------------------------------------------------------------------------------------
# Other SIGSEGV handlers: a lesson's kernel enables faulthandler; real crashes must still crash.
# --------------------------------------------------------------------------------------------
@needs_mask
def test_a_jupyter_kernel_under_the_mask_survives_faulthandler_and_reads_masked_cpuid():
    from jupyter_client.manager import KernelManager

    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"} | cpumask.environment("avx2")
    manager = KernelManager(kernel_name="python3")
    manager.start_kernel(env=env)
    client = manager.client()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=60)
        code = (
            "import faulthandler; faulthandler.enable()\n"
            "from course_lib import cpuid, hardware\n"
            "print(sorted(hardware.parse_cpuid(*cpuid.read())[1]), hardware.cpu_report()['source'])"
        )
        printed = []
        reply = client.execute_interactive(
            code, timeout=60, output_hook=lambda m: printed.append(m["content"].get("text", ""))
        )
        assert reply["content"]["status"] == "ok", reply["content"]
        assert "".join(printed).strip() == "['avx', 'avx2', 'fma'] cpuid (masked: avx2)"
        assert manager.is_alive()
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


@needs_mask
def test_a_real_segfault_under_the_mask_still_crashes_with_faulthandlers_traceback():
    proc = python("import faulthandler, ctypes; faulthandler.enable(); ctypes.string_at(0)", "avx2")
    assert proc.returncode == -11
    assert "Fatal Python error: Segmentation fault" in proc.stderr and "string_at" in proc.stderr


@needs_mask
def test_the_programs_own_sigsegv_handlers_are_kept_and_chained():
    code = """
        import os, signal
        from course_lib import cpuid
        hits = []
        signal.signal(signal.SIGSEGV, lambda signum, frame: hits.append(signum))
        os.kill(os.getpid(), signal.SIGSEGV)  # a SIGSEGV that is not a CPUID fault: the program's handler
        leaf7 = cpuid.cpuid(7)  # and CPUID still masked after the program installed its handler
        assert signal.getsignal(signal.SIGSEGV).__name__ == "<lambda>"
        signal.signal(signal.SIGSEGV, signal.SIG_IGN)
        os.kill(os.getpid(), signal.SIGSEGV)  # ignored, as without the mask
        print(hits, leaf7[1] >> 16 & 1, flush=True)
        signal.signal(signal.SIGSEGV, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGSEGV)  # the default: death by SIGSEGV
        print("not reached")
    """
    proc = python(code, "avx2")
    assert proc.stdout == "[11] 0\n" and proc.returncode == -11, proc.stderr[-2000:]


@needs_mask
def test_an_unknown_mask_name_stops_a_masked_process_with_the_known_ones():
    env = cpumask.environment("avx2") | {cpumask.MASK_ENV: "zen4"}
    proc = subprocess.run(
        [sys.executable, "-c", "print(1)"], env=os.environ | env, capture_output=True, text=True
    )
    assert (
        proc.returncode == 2
        and "COURSE_CPU_MASK=zen4 is not a mask; expected avx2 or avx512-vnni" in proc.stderr
    )
