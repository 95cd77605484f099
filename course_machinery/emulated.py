"""The ARM reference class, measured on emulated ARM CPUs: everything that times nothing.

No ARM machine runs the course's CI, yet learners study on Apple Silicon and deploy on Graviton.
`../shared/tools/arm64` runs one Python process on an emulated 64-bit ARM CPU (qemu-user, with
numpy, onnx and ONNX Runtime's aarch64 wheel). That cannot run a lesson (no PyTorch, no kernel), but
it runs ONNX Runtime's ARM kernels on the files a lesson wrote, which is what decides the lessons'
sentences about kernels, fused ops, agreement, accuracy, saturation and file sizes. So:

    python -m course_lib emulated stage            # host: copy the last run's files and inputs
    ../shared/tools/arm64 --cpu NAME --pip "psutil py-cpuinfo openvino" course_machinery/emulated.py NAME
                                                   # each ARM CPU: replay the sections, save figures
    python -m course_lib emulated record           # host: one ARM reference run from the three

The replay calls the lesson's own figure functions (course_machinery/checks/claimsNN.py) on what ONNX
Runtime computed on the ARM CPU, and the host checks every sentence of every lesson against them:
a sentence about speed reads "not timed" (emulation times nothing), one whose figures no replayed
section gives reads "not measured" with the reason. This file runs on the ARM CPU as a script too,
so it imports only what the emulated root has (numpy, onnx, onnxruntime, psutil, py-cpuinfo).
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

if __name__ == "__main__":  # run as a script on the ARM CPU: the repository is the working directory
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from datetime import UTC

import numpy as np

# The ARM CPUs qemu emulates, as ../shared/tools/arm64's --cpu names them (qemu's -cpu), and the
# learners' machines each stands for.
I8MM = "max,sve=off,sme=off"
ARM_CPUS = {
    "cortex-a72": "Cortex-A72, NEON only (Raspberry Pi 4, AWS Graviton 1)",
    "neoverse-n1": "Neoverse N1, dot product (AWS Graviton 2, Ampere Altra; Apple M1 has it too)",
    I8MM: "qemu max without SVE or SME: dot product and i8mm (Apple M2 and M3; AWS Graviton 3 and 4 add SVE)",
}
# Why not qemu's plain `max`: it also has SME, which ONNX Runtime 1.32 uses (KleidiAI) for the dynamic
# text encoder's DynamicQuantizeMatMul, and under qemu that op's output is wrong there: the worst
# sentence's cosine with fp32 was -0.075 (SVE at 512 bits, all 200 sentences) and -0.056 (128 bits, the
# first 25). With SME off, every DynamicQuantizeMatMul output equals SVE off's to the bit (worst cosine
# 0.987 on the first 25). No Graviton has SME; Apple M4 has. Whether the fault is qemu's emulation of
# SME or the kernel's cannot be told under emulation, so no class claims it either way.
# Why SVE off too: the i8mm kernels ONNX Runtime picks (SMMLA/UMMLA/USDOT) are NEON instructions, which
# Apple M2 and M3, the Macs learners study on, have without SVE; and under qemu SVE code runs several
# times slower (the text encoder's longest batch in fp32: 48.7 s without SVE, over 4.5 minutes with it),
# which had stopped a replay with 256-bit SVE short of lesson 06's end after an hour. The tool's
# /proc/cpuinfo Features line must then drop the sve* features too (ONNX Runtime reads it: see the README).
CPU_CLASS = "arm-emulated"
UNTIMED = "emulated ARM CPU: nothing is timed under emulation"
THREADS = 2
PIP = "psutil py-cpuinfo openvino"  # beside numpy, onnx and onnxruntime, which the emulated root has
# What the replay covers, by lesson and section; every other section's sentences are not measured.
REPLAYED = {"05": ("3", "4", "5"), "05c": ("1", "2"), "06": ("1",)}
NOT_REPLAYED = (
    "not replayed on the emulated ARM CPUs (they run ONNX Runtime and OpenVINO on lessons 05 and 06's "
    "files only: no PyTorch, no training)"
)
IMAGES = 2000  # lesson 05's test images
# OpenVINO's f16 default on qemu's plain `max` ran over 40 minutes for 2,000 images under emulation
# (its f32, 7):
# a run whose first PROBE images project past OPENVINO_MINUTES is not run, and says so.
PROBE, OPENVINO_MINUTES = 100, 15
_START = time.monotonic()


def _write_json(path: Path, content: Any) -> None:
    """Write `content` as JSON in one step: a stopped replay or recording (a replay takes one to two
    hours) leaves the old file or the new one, never half of one that the next recording would read."""
    from course_lib.files import atomic_write

    text = json.dumps(content, indent=1, ensure_ascii=False) + "\n"
    atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def _say(what: str) -> None:
    """A line on stderr with the minutes since the replay began: a replay runs for one to two hours."""
    minutes, seconds = divmod(int(time.monotonic() - _START), 60)
    print(f"[{minutes:02d}:{seconds:02d}] {what}", file=sys.stderr, flush=True)


def stage_dir() -> Path:
    """data/emulated/ in the repository (the emulated root sees the repository only)."""
    return Path(__file__).resolve().parents[1] / "data" / "emulated"


KEPT = "arm-replays"  # beside the ledger, each CPU's replay that `record` used


# --------------------------------------------------------------------------------------------
# Host: the last run's files and the inputs the lessons fed them
# --------------------------------------------------------------------------------------------
def _resnet_file(name: str) -> str:
    return f"resnet18.{name.replace(' ', '_').replace('(', '').replace(')', '')}.onnx"


def stage(folder: Path | None = None) -> Path:
    """Copy lessons 05 and 06's files from the last run (`python -m course_lib run`) with the inputs
    the lessons fed them, into `folder` (default data/emulated/ in the repository: the emulated root
    sees only the repository)."""
    import course_lib as cl
    from course_machinery import text_encoder as te
    from course_machinery import variants
    from course_machinery.checks.claims06 import DYNAMIC, FOUR_BIT

    folder = Path(folder or stage_dir())
    lessons = cl.data_dir() / "lessons"
    wanted = {
        "05": {"fp32": "resnet18.fp32.onnx"} | {n: _resnet_file(n) for n in variants.RESNET_VARIANTS},
        "06": {DYNAMIC: "text_encoder.dynamic_int8.onnx"}
        | {label: f"text_encoder.4bit.{i}.onnx" for i, label in enumerate(FOUR_BIT.values())},
    }
    missing = [f"{lesson}/{f}" for lesson, files in wanted.items() for f in files.values()]
    missing = [m for m in missing if not (lessons / m).is_file()]
    if missing:
        raise FileNotFoundError(
            f"Expected the files lessons 05 and 06 write under {lessons}; missing: {', '.join(missing)}. "
            "Run those lessons first: python -m course_lib run --lessons 05,06"
        )
    if folder.exists():
        shutil.rmtree(folder)
    for lesson, files in wanted.items():
        (folder / lesson).mkdir(parents=True)
        for f in files.values():
            shutil.copy2(lessons / lesson / f, folder / lesson / f)
    shutil.copy2(cl.models.get(te.NAME).onnx_files["optimized"], folder / "06" / "text_encoder.fp32.onnx")

    images, labels = cl.load_split("test")
    np.save(folder / "05" / "x.npy", cl.preprocess(images[:IMAGES]))
    np.save(folder / "05" / "labels.npy", np.asarray(labels[:IMAGES]))
    # lesson 06's held-out sentences, sorted and batched as the lesson does
    held_out = te.load_sentences(300)[100:]
    held_out.sort(key=lambda text: len(te.encode([text], padding="longest")["input_ids"][0]))
    batches = [te.encode(held_out[i : i + 25], padding="longest") for i in range(0, len(held_out), 25)]
    np.savez(
        folder / "06" / "batches.npz", **{f"{i}.{k}": v for i, b in enumerate(batches) for k, v in b.items()}
    )
    from .recording import git_label

    manifest = {
        "commit": git_label(),  # the replays run on these files: a replay carries the commit it replayed
        "05": wanted["05"],
        "06": {"fp32": "text_encoder.fp32.onnx", **wanted["06"]},
        "te_output": te.OUTPUT_NAME,
        "batches": len(batches),
    }
    _write_json(folder / "manifest.json", manifest)
    return folder


# --------------------------------------------------------------------------------------------
# ARM: the replayed sections, through the lessons' own figure functions
# --------------------------------------------------------------------------------------------
def _lesson05(folder: Path, files: dict[str, str], cpu: str) -> dict[str, Any]:
    """Lesson 05's sections 3 (what each graph runs), 4 (accuracy and size) and 5 (saturation)."""
    import onnx

    from course_lib import affine, calibration, integers, kernels, measure
    from course_machinery.checks.claims05 import book

    paths = {name: folder / f for name, f in files.items()}
    work = folder / "optimized"
    work.mkdir(exist_ok=True)
    figures: dict[str, Any] = {}

    # 3. what each graph runs: the optimized graphs ONNX Runtime makes on this CPU
    _say(f"lesson 05: what each of the {len(paths)} files runs on {cpu}")
    ran = {n: kernels.kernels(p, threads=THREADS, folder=work) for n, p in paths.items()}
    s8s8_name = next(n for n in paths if "S8S8" in n)
    s8s8 = onnx.load(str(work / f"{paths[s8s8_name].stem}.optimized.onnx")).graph
    made_by = {out: node for node in s8s8.node for out in node.output}
    readers = Counter(name for node in s8s8.node for name in node.input)

    def quantizer(tensor: str):
        node = made_by.get(tensor)
        while node is not None and node.op_type in ("Transpose", "DequantizeLinear"):
            node = made_by.get(node.input[0])
        return node

    convs = [n for n in s8s8.node if n.op_type in ("Conv", "QLinearConv")]
    floats = [n for n in convs if n.op_type == "Conv"]
    shared = [n for n in convs if (q := quantizer(n.input[0])) is not None and readers[q.output[0]] > 1]
    weights = Counter(getattr(made_by.get(n.input[1]), "op_type", "a constant") for n in floats)
    fp32_graph = onnx.load(str(work / f"{paths['fp32'].stem}.optimized.onnx")).graph
    layouts = {
        "S8S8": Counter(n.domain or "plain" for n in floats),
        "fp32": Counter(n.domain or "plain" for n in fp32_graph.node if n.op_type == "Conv"),
    }
    figures |= book.figure_functions["3"](
        ran=ran, floats=floats, shared=shared, weights=weights, layouts=layouts
    )
    figures["kernels"] = {
        n: {"integer": k.integer, "types": k.types, "float": k.float_compute, "coverage": k.coverage}
        for n, k in ran.items()
    }

    # 4. accuracy and size (peak memory needs a fresh process, which qemu-user cannot start)
    x, labels = np.load(folder / "x.npy"), np.load(folder / "labels.npy")
    # fp32 once: under emulation one fp32 pass over the 2,000 images takes about 15 minutes (int8: 1)
    outputs = _saved_logits(folder / f"logits.{cpu}.npz", paths, len(x))
    for n, p in paths.items():
        if n not in outputs:
            _say(f"lesson 05: {n}, {len(x)} images")
            outputs[n] = measure.logits(p, x, threads=THREADS)
    ref = outputs["fp32"]
    parities = {n: measure.parity(ref, out, labels) for n, out in outputs.items()}
    figures |= book.figure_functions["4"](paths=paths, parities=parities, memory=None, timed=None)
    np.savez(folder / f"logits.{cpu}.npz", **{n: out for n, out in outputs.items()})

    # 5. saturation: the numpy simulation of VPMADDUBSW (the same on every CPU), and this CPU's kernels
    graph = onnx.load(str(paths["fp32"])).graph
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in graph.initializer}
    plain = [n for n in graph.node if n.op_type == "Conv"]
    inputs = calibration.activation_values(
        paths["fp32"], {"input": x[:16]}, sorted({n.input[0] for n in plain})
    )

    def simulate(node, reduce_range):
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        w, act = inits[node.input[1]], inputs[node.input[0]]
        cols = integers.im2col(
            act, tuple(attrs["kernel_shape"]), attrs.get("strides", (1, 1)), attrs.get("pads", (0, 0, 0, 0))
        )
        a_scale, a_zero = affine.scale_zero_point(min(float(act.min()), 0.0), float(act.max()), "uint8")
        m = np.abs(w).reshape(w.shape[0], -1).max(axis=1)
        w_scale, w_zero = affine.scale_zero_point(-m, m, "int8", symmetric=True, reduce_range=reduce_range)
        qw = affine.quantize(w.reshape(w.shape[0], -1), w_scale, w_zero, "int8", axis=0).T
        _, saturated, pairs = integers.vpmaddubsw_matmul(affine.quantize(cols, a_scale, a_zero, "uint8"), qw)
        return saturated, pairs

    _say("lesson 05: saturation")
    sat = {(n.name, r): simulate(n, r) for n in plain for r in (False, True)}
    figures |= book.figure_functions["5"](sat=sat, first=plain[0].name, parities=parities)
    return figures


def _saved_logits(saved: Path, paths: dict[str, Path], rows: int) -> dict[str, np.ndarray]:
    """The logits an earlier replay on this CPU saved for these staged files, if it saved them all
    (staging again removes them): a replay stopped in lesson 05c or 06 does not run lesson 05's
    2,000-image passes again (under emulation they take 15 to 30 minutes)."""
    if not saved.is_file():
        return {}
    stored = np.load(saved)
    if set(stored.files) != set(paths) or any(stored[n].shape[0] != rows for n in paths):
        return {}
    _say(
        f"lesson 05: the logits of all {len(paths)} files, saved on this CPU by an earlier replay ({saved.name})"
    )
    return {n: stored[n] for n in paths}


def _lesson06(folder: Path, files: dict[str, str], output: str, count: int) -> dict[str, Any]:
    """Lesson 06's section 1: 4-bit weight-only (`MatMulNBits`, each accuracy_level) beside dynamic INT8."""
    import onnx

    from course_lib import measure
    from course_machinery.checks.claims06 import book

    stored = np.load(folder / "batches.npz")
    batches = [
        {k.split(".", 1)[1]: stored[k] for k in stored.files if k.startswith(f"{i}.")} for i in range(count)
    ]

    def embed(path: Path) -> np.ndarray:
        session = measure.make_session(path, threads=THREADS)
        return np.concatenate([session.run([output], batch)[0] for batch in batches])

    paths = {name: folder / f for name, f in files.items()}
    _say(f"lesson 06: fp32 text encoder, {count} batches")
    ref = embed(paths.pop("fp32"))
    quality = {}
    for label, path in paths.items():
        _say(f"lesson 06: {label}")
        cos = (ref * embed(path)).sum(1)
        quality[label] = {"cos_min": float(cos.min()), "cos_mean": float(cos.mean())}
    fp32_graph = onnx.load(str(folder / files["fp32"])).graph
    weights = {t.name: measure.tensor_bytes(t)[2] for t in fp32_graph.initializer if np.prod(t.dims) >= 16}
    bytes_by_op: dict[str, int] = {}
    for node in fp32_graph.node:
        bytes_by_op[node.op_type] = bytes_by_op.get(node.op_type, 0) + sum(
            weights.get(x, 0) for x in node.input
        )
    figures = book.figure_functions["1"](
        bytes_by_op=bytes_by_op, quality=quality, candidates=paths, speed=None, memory=None
    )
    from course_lib import kernels

    figures["ops"] = {
        label: dict(
            Counter(n.op_type for n in onnx.load(str(kernels.optimized_graph(p, threads=THREADS))).graph.node)
        )
        for label, p in paths.items()
    }
    return figures


def _lesson05c(folder: Path, files: dict[str, str], cpu: str) -> dict[str, Any]:
    """Lesson 05c's sections 1 (what OpenVINO compiles, at which precision) and 2 (parity), on
    lesson 05's fp32, U8S8 and S8S8 per-channel files, as the lesson runs them; the reference is
    ONNX Runtime's fp32 logits on this CPU, which lesson 05's replay saved."""
    from course_lib import measure
    from course_machinery import runtimes
    from course_machinery.checks.claims05c import DEFAULT_FP32, PINNED_FP32, S8S8, U8S8, book
    from course_machinery.claims import not_measured

    openvino = runtimes.openvino_or_none()
    compiled: dict[str, Any] = {}
    refused: dict[str, Any] = {}
    if openvino is not None:
        pinned = {"INFERENCE_PRECISION_HINT": "f32"}
        fp32 = folder / files["fp32"]
        pending = [
            (PINNED_FP32, fp32, pinned),
            (DEFAULT_FP32, fp32, {}),
            (U8S8, folder / files["static U8S8 per-channel"], {}),
            (S8S8, folder / files["static S8S8 per-channel"], {}),
        ]
        core = openvino.Core()
        while pending:
            name, file, settings = pending.pop(0)
            _say(f"lesson 05c: OpenVINO compiles {name}")
            try:
                compiled[name] = core.compile_model(
                    str(file), "CPU", {"INFERENCE_NUM_THREADS": THREADS} | settings
                )
            except RuntimeError as exc:  # as the lesson does: keep the refusal, retry with f32 pinned
                refused[name] = runtimes.Refusal.from_exception(exc, file, settings, run=name)
                if settings != pinned:
                    pending.append((refused[name].retry_run, file, pinned))
    layers = {n: runtimes.runtime_layers(c) for n, c in compiled.items()}
    installed = openvino is not None
    figures = book.figure_functions["1"](
        compiled=compiled, refused=refused, layers=layers, installed=installed
    )
    x, labels = np.load(folder / "x.npy"), np.load(folder / "labels.npy")
    ov_parity, stopped, slow = {}, {}, {}
    if compiled:
        paths = {n: folder / f for n, f in files.items()}
        ref = _saved_logits(folder / f"logits.{cpu}.npz", paths, len(x)).get("fp32")
        if ref is None:  # 05c replayed without lesson 05's logits for these images
            ref = measure.logits(paths["fp32"], x, threads=THREADS)
        for n, c in compiled.items():
            _say(f"lesson 05c: OpenVINO runs {n}, {len(x)} images")
            runner = runtimes.OpenVINORunner(c, threads=THREADS, name=n)
            try:
                start = time.monotonic()
                first = measure.logits(runner, x[:PROBE], batch=PROBE)
                minutes = (time.monotonic() - start) * len(x) / PROBE / 60
                if minutes > OPENVINO_MINUTES:
                    slow[n] = f"{minutes:.0f} minutes for {len(x)} images projected from the first {PROBE}"
                    continue
                rest = measure.logits(runner, x[PROBE:], batch=PROBE)
                ov_parity[n] = measure.parity(ref, np.concatenate([first, rest]), labels)
            except RuntimeError as exc:  # compiled, then stopped at inference (seen on cortex-a72)
                stopped[n] = " ".join(line for line in str(exc).splitlines() if "[CPU]" in line) or str(exc)
    figures |= book.figure_functions["2"](ov_parity=ov_parity, installed=installed)
    if stopped or slow:
        why = "; ".join(
            [f"stopped at inference: '{n}': {m}" for n, m in stopped.items()]
            + [f"'{n}' not run, too slow under emulation ({m})" for n, m in slow.items()]
        )
        reason = not_measured(f"OpenVINO compiled the file on this emulated ARM CPU; {why}")
        stopped |= slow
        figures |= {"runs_scored": reason, "runs_passing": reason, "openvino_stopped": stopped}
        for key, run in (
            ("pinned_agreement", PINNED_FP32),
            ("pinned_drift", PINNED_FP32),
            ("default_drift", DEFAULT_FP32),
            ("u8s8_drift", U8S8),
        ):
            if run in stopped:
                figures[key] = reason
    figures["openvino"] = openvino.__version__ if openvino else "not installed"
    return figures


def _cpu() -> str:
    return sys.argv[1] if len(sys.argv) > 1 else "arm"


def replay(name: str, folder: Path | None = None) -> Path:
    """On an emulated ARM CPU: the replayed sections' figures, with the CPU's facts, saved as
    `<folder>/<name>.json` for `record`."""
    from course_machinery import claims, hardware
    from course_machinery.reference import _plain

    folder = Path(folder or stage_dir())
    manifest = json.loads((folder / "manifest.json").read_text())
    figures = {
        "05": _lesson05(folder / "05", manifest["05"], name),
        "06": _lesson06(folder / "06", manifest["06"], manifest["te_output"], manifest["batches"]),
    }
    if "05c" in REPLAYED:
        figures["05c"] = _lesson05c(folder / "05", manifest["05"], name)
    import onnxruntime as ort

    found = {
        "cpu": name,
        "commit": manifest.get("commit"),
        "report": hardware.cpu_report(),
        "facts": claims.cpu_facts(),
        "onnxruntime": ort.__version__,
        "figures": _plain(figures),
    }
    target = folder / f"{name}.json"
    _write_json(target, found)
    return target


# --------------------------------------------------------------------------------------------
# Host: every sentence checked against the three CPUs' figures, as one reference run
# --------------------------------------------------------------------------------------------
def _verdict(sentence, figures: dict | None, facts: dict) -> dict:
    """One sentence's ledger record on one emulated CPU."""
    from course_machinery.claims import Claim, MissingFigure

    base = sentence.identity()
    if sentence.scope and not sentence.scope.applies(facts):
        return Claim(holds=None, applies=False, **base).to_record()
    if "speed" in sentence.depends:
        return Claim(holds=None, untimed=UNTIMED, **base).to_record()
    if figures is None or sentence.section not in REPLAYED.get(sentence.lesson, ()):
        return Claim(holds=None, unmeasured=NOT_REPLAYED, **base).to_record()
    try:
        return sentence.check(figures, facts).to_record()
    except MissingFigure as missing:
        return Claim(
            holds=None, unmeasured=f"the figure {missing} is not taken under emulation", **base
        ).to_record()


def label_for(runs: dict) -> str:
    """The class's label, naming the emulated CPUs whose replays it holds."""
    names = {"cortex-a72": "Cortex-A72", "neoverse-n1": "Neoverse N1", I8MM: "i8mm without SVE or SME"}
    return f"ARM, emulated ({', '.join(names[n] for n in runs)}): not timed"


def _figures_cpu(runs: dict) -> str:
    """Whose figures the lessons quote: Neoverse N1 (Graviton 2, like Apple M1) where replayed."""
    return "neoverse-n1" if "neoverse-n1" in runs else next(iter(runs))


WORST = ("contradicted", "unsettled", "not measured", "not timed", "held", "not for this CPU")


def merge(records: dict[str, dict]) -> dict:
    """One record from each CPU's record of a sentence: the worst verdict (a contradiction on any of
    them stands), with every CPU's evidence."""
    verdict = min((r["verdict"] for r in records.values()), key=WORST.index)
    first = next(iter(records.values()))
    evidence = {r.get("evidence", "") for r in records.values()}
    merged = {k: first[k] for k in ("statement", "fingerprint", "scope") if k in first} | {"verdict": verdict}
    if len(evidence) == 1:
        merged["evidence"] = evidence.pop()
    else:
        merged["evidence"] = "; ".join(f"{cpu}: {r.get('evidence', '')}" for cpu, r in records.items())
    reasons = {r["reason"] for r in records.values() if r.get("reason")}
    if verdict == "not measured" and reasons:
        merged["reason"] = "; ".join(sorted(reasons))
    if verdict == "not timed":
        merged["reason"] = UNTIMED
    return merged


def record(folder: Path | None = None, commit: str | None = None, directory: Path | None = None) -> Path:
    """The ARM reference run, from the three CPUs' replays: every lesson's sentences, checked at this
    commit, written into `directory` (the ledger's). Each replay used is kept there, in arm-replays/,
    with the commit it replayed: a replay takes one to two hours under emulation, so a CPU with no
    replay in `folder` counts with the one kept from an earlier recording."""
    from datetime import datetime

    from course_machinery.claims import book_of, lessons_with_claims
    from course_machinery.reference import REFERENCE_DIR, ReferenceRun

    from .recording import git_label

    folder = Path(folder or stage_dir())
    directory = Path(directory or REFERENCE_DIR)
    kept = directory / KEPT
    found_files = [p for place in (folder, kept) if place.is_dir() for p in place.glob("*.json")]
    strays = sorted(p.name for p in found_files if p.stem not in ARM_CPUS and p.name != "manifest.json")
    if strays:
        raise ValueError(
            f"Expected replays of {', '.join(ARM_CPUS)} only; found {', '.join(strays)} in {folder} or {kept}. "
            f"The i8mm CPU is replayed as --cpu {I8MM} (plain `max` has SME, whose DynamicQuantizeMatMul "
            "gives wrong values under qemu; with SVE on, lesson 06 runs for hours: see ARM_CPUS): "
            "replay with it, or move the file out of the way."
        )
    runs = {}
    for n in ARM_CPUS:  # a replay staged now, else the one kept from an earlier recording
        found = [f / f"{n}.json" for f in (folder, kept) if (f / f"{n}.json").is_file()]
        if found:
            runs[n] = json.loads(found[0].read_text())
    if not runs:
        raise FileNotFoundError(
            f"Expected the replays of {', '.join(ARM_CPUS)} in {folder} (or kept in {kept}); found none. "
            f"Run on each: ../shared/tools/arm64 --cpu NAME --pip '{PIP}' course_machinery/emulated.py NAME"
        )
    missing = [n for n in ARM_CPUS if n not in runs]
    label = commit or git_label()
    replayed_at = {n: r.get("commit") or label for n, r in runs.items()}
    sentences: dict[str, dict[str, dict]] = {}
    for lesson in lessons_with_claims():
        for sentence in book_of(lesson).sentences.values():
            records = {
                name: _verdict(sentence, run["figures"].get(lesson), run["facts"])
                for name, run in runs.items()
            }
            sentences.setdefault(lesson, {})[sentence.name] = merge(records)
    first = next(iter(runs.values()))
    run = ReferenceRun(
        cpu_class=CPU_CLASS,
        label=label_for(runs),
        machine="aarch64 (emulated: " + ", ".join(runs) + ")",
        commit=label,
        date=datetime.now(UTC).isoformat(timespec="seconds"),
        source="python -m course_lib emulated stage; ../shared/tools/arm64 --cpu NAME "
        "course_machinery/emulated.py NAME, for "
        + ", ".join(f"{n} (replayed at {c})" for n, c in replayed_at.items())
        + "; python -m course_lib emulated record"
        + (f" (not replayed: {', '.join(missing)})" if missing else ""),
        figures={lesson: runs[_figures_cpu(runs)]["figures"].get(lesson, {}) for lesson in REPLAYED},
        versions={"onnxruntime": first["onnxruntime"]},
        claims_commit=label,
        claims_source="emulated: not timed",
        sentences=sentences,
        sentences_commit=label,
    )
    target = directory / f"{CPU_CLASS}.json"
    _write_json(target, run.to_dict())
    for n, r in runs.items():
        _write_json(kept / f"{n}.json", r | {"commit": replayed_at[n]})
    return target


if __name__ == "__main__":
    from course_machinery.emulated import replay as replay_here  # the package's module, not __main__

    print(f"replayed on {_cpu()}: {replay_here(_cpu())}")
