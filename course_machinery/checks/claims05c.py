"""Lesson 05c's sentences about its results, and the figures each section's check cell measures.

Each sentence here is written once in the lesson's markdown, with `<!-- claim: name -->` after it.
A run OpenVINO refused, or OpenVINO missing altogether, makes the figures that need it
`not_measured` with the reason: their sentences read "not measured here", never unsettled, and a
retry with f32 pinned never stands in for the run it retried.
"""

from __future__ import annotations

from typing import Any

from ..claims import (
    NOT_SATURATING,
    SATURATING,
    VNNI,
    X86,
    Book,
    Scope,
    all_of,
    at_least,
    below,
    far,
    faster,
    interval,
    not_measured,
)

book = Book("05c")

PINNED_FP32, DEFAULT_FP32 = "OpenVINO fp32, f32 pinned", "OpenVINO fp32, default"
U8S8, S8S8 = "OpenVINO U8S8", "OpenVINO S8S8"
NOT_INSTALLED = "OpenVINO is not installed (pip install openvino)"


def _lowers(cpu: dict) -> bool:
    from course_machinery.hardware import expected_default_precision

    return cpu.get("openvino_default_precision", expected_default_precision()) != "f32"


LOWERS = Scope("CPUs where OpenVINO lowers the float precision (bf16 or f16)", _lowers)


def _unmeasured(run: str, installed: bool, refused: dict) -> dict | None:
    """Why `run` has no figures here (OpenVINO missing, or the run refused), or None when it ran."""
    if not installed:
        return not_measured(NOT_INSTALLED)
    if run in refused:
        r = refused[run]
        return not_measured(f"OpenVINO refused {r.file} with its {r.settings_text} settings here")
    return None


def _integer_convs(layers: list) -> tuple[int, int]:
    """(convolutions on integer kernels, convolutions): a layer counts when its runtime precision is
    u8 or i8 and its kernel's name does not say it computes in a float type."""
    from course_machinery.runtimes import kernel_precision

    convs = [lay for lay in layers if lay.layer_type == "Convolution"]
    integer = [
        lay
        for lay in convs
        if lay.runtime_precision in ("u8", "i8") and kernel_precision(lay.primitive) in ("u8", "i8", "")
    ]
    return len(integer), len(convs)


def _retries(refused: dict, ran: Any, installed: bool) -> list[str] | dict:
    """The f32-pinned retries that ran, of the QDQ files refused with their default settings; where
    there are none, why (a not-measured figure)."""
    qdq = [r for n, r in refused.items() if n in (U8S8, S8S8)]
    if not installed:
        return not_measured(NOT_INSTALLED)
    if not qdq:
        return not_measured("OpenVINO refused no QDQ file's default precision here, so no retry ran")
    retries = [r.retry_run for r in qdq if r.retry_run in ran]
    return retries or not_measured("OpenVINO refused the retry with f32 pinned too")


# 1. What OpenVINO compiles, and what it runs -----------------------------------------------------
@book.figures("1")
def _(compiled: dict, refused: dict, layers: dict, installed: bool) -> dict:
    from course_machinery.hardware import expected_default_precision
    from course_machinery.runtimes import kernel_precision, openvino_or_none, precision_hint

    out: dict[str, Any] = {"expected_hint": expected_default_precision()}
    out["default_hint"] = _unmeasured(DEFAULT_FP32, installed, refused) or precision_hint(
        compiled[DEFAULT_FP32]
    )
    for key, run in (("u8s8", U8S8), ("s8s8", S8S8)):
        missing = _unmeasured(run, installed, refused)
        counts = _integer_convs(layers[run]) if missing is None else (missing, missing)
        out[f"{key}_integer_convs"], out[f"{key}_convs"] = counts
    retries = _retries(refused, compiled, installed)
    out["retry_kernel_types"] = (
        sorted(
            {
                kernel_precision(lay.primitive)
                for r in retries
                for lay in layers[r]
                if lay.layer_type == "Convolution"
            }
        )
        if isinstance(retries, list)
        else retries
    )
    openvino = openvino_or_none() if installed else None
    out["ov_version_short"] = openvino.__version__.split("-")[0] if openvino else "not installed"
    out["ov_default_precision"] = precision_hint(compiled[DEFAULT_FP32]) if DEFAULT_FP32 in compiled else "—"
    out["ov_refused"] = ", ".join(f"{r.file} ({r.settings_text})" for r in refused.values()) or "none"
    return out


@book.sentence(
    "1",
    "default-precision",
    "By default OpenVINO computes the fp32 file's float layers in the CPU's fast float type: bf16 with "
    "AVX512_BF16 or AMX, f16 on ARM with FP16, else f32",
    shows="hint {default_hint}, expected {expected_hint} from the CPU's flags",
    depends=("cpu", "runtime"),
)
def _(f):
    return f["default_hint"] == f["expected_hint"]


@book.sentence(
    "1",
    "u8s8-integer",
    "OpenVINO runs every convolution of the U8S8 file on an integer kernel",
    shows="{u8s8_integer_convs} of {u8s8_convs}",
    scope=X86,
    depends=("cpu", "runtime"),
)
def _(f):
    return f["u8s8_convs"] > 0 and f["u8s8_integer_convs"] == f["u8s8_convs"]


@book.sentence(
    "1",
    "s8s8-integer",
    "Where OpenVINO compiles the S8S8 file with its defaults, every convolution runs on an integer kernel",
    shows="{s8s8_integer_convs} of {s8s8_convs}",
    scope=X86,
    depends=("cpu", "runtime"),
)
def _(f):
    return f["s8s8_convs"] > 0 and f["s8s8_integer_convs"] == f["s8s8_convs"]


@book.sentence(
    "1",
    "retry-on-f32",
    "Where OpenVINO refused a QDQ file's default precision, its f32-pinned retry ran the file's "
    "convolutions on f32 kernels",
    shows="the retry's convolution kernels compute in {retry_kernel_types}",
    depends=("cpu", "runtime"),
    example={"retry_kernel_types": ["f32"]},  # as the Intel Xeon AMX run's retry ran (brgconv_avx512_f32)
)
def _(f):
    return f["retry_kernel_types"] == ["f32"]


# 2. Parity -------------------------------------------------------------------------------------------
@book.figures("2")
def _(ov_parity: dict, installed: bool) -> dict:
    from course_lib.measure import acceptance

    def drift(run: str) -> Any:
        return ov_parity[run].max_abs_drift if run in ov_parity else not_measured(_why(run, installed))

    pinned = ov_parity.get(PINNED_FP32)
    return {
        "pinned_agreement": 100 * pinned.agreement if pinned else not_measured(_why(PINNED_FP32, installed)),
        "pinned_drift": drift(PINNED_FP32),
        "default_drift": drift(DEFAULT_FP32),
        "u8s8_drift": drift(U8S8),
        "runs_scored": len(ov_parity) if installed else not_measured(NOT_INSTALLED),
        "runs_passing": sum(bool(acceptance(p).passes) for p in ov_parity.values()),
    }


def _why(run: str, installed: bool) -> str:
    return NOT_INSTALLED if not installed else f"OpenVINO refused the run '{run}' here"


@book.sentence(
    "2",
    "pinned-same",
    "Pinned to f32, OpenVINO gives every image ONNX Runtime's fp32 class, and no logit moves by a thousandth",
    shows="agreement {pinned_agreement:.2f} %, largest change {pinned_drift:.1e}",
    depends=("cpu", "runtime"),
)
def _(f):
    return f["pinned_agreement"] == 100 and f["pinned_drift"] < 1e-3


@book.sentence(
    "2",
    "default-moves",
    "By default the fp32 file's logits move further than pinned, and less than the U8S8 file's",
    shows="largest change: pinned {pinned_drift:.4f}, default {default_drift:.4f}, U8S8 {u8s8_drift:.4f}",
    scope=LOWERS,
    depends=("cpu", "runtime", "weights"),
)
def _(f):
    return f["pinned_drift"] < f["default_drift"] < f["u8s8_drift"]


@book.sentence(
    "2",
    "every-run-passes",
    "Every OpenVINO run passes lesson 04's rule against ONNX Runtime's fp32",
    shows="{runs_passing} of {runs_scored} runs pass",
    scope=NOT_SATURATING,
    depends=("cpu", "runtime", "weights"),
)
def _(f):
    return f["runs_scored"] > 0 and f["runs_passing"] == f["runs_scored"]


# 3. Speed, timed in turn -------------------------------------------------------------------------------
def _over(speed_of: dict, slower_run: str, faster_run: str) -> dict:
    """How much faster `faster_run` ran than `slower_run`, from the same rounds (paired)."""
    from course_lib.measure import bootstrap_ratio_interval

    a, b = speed_of[slower_run].latency[slower_run], speed_of[faster_run].latency[faster_run]
    low, high = bootstrap_ratio_interval(a.samples_ms, b.samples_ms)
    return interval(a.median_ms / b.median_ms, low, high, "x")


@book.figures("3")
def _(speed: dict, refused: dict, installed: bool) -> dict:
    from course_machinery import claims

    out: dict[str, Any] = {
        "ort_u8s8_b64": claims.speed(speed["ONNX Runtime U8S8"]),
        "ort_s8s8_b64": claims.speed(speed["ONNX Runtime S8S8"]),
    }
    for key, run in (
        ("ov_fp32_f32_b64", PINNED_FP32),
        ("ov_fp32_default_b64", DEFAULT_FP32),
        ("ov_u8s8_b64", U8S8),
        ("ov_s8s8_b64", S8S8),
    ):
        out[key] = _unmeasured(run, installed, refused) or claims.speed(speed[run])
    out["ov_over_ort_u8s8"] = _unmeasured(U8S8, installed, refused) or _over(speed, "ONNX Runtime U8S8", U8S8)
    out["ov_over_ort_s8s8"] = _unmeasured(S8S8, installed, refused) or _over(speed, "ONNX Runtime S8S8", S8S8)
    out["u8s8_over_pinned"] = (
        _unmeasured(U8S8, installed, refused)
        or _unmeasured(PINNED_FP32, installed, refused)
        or _over(speed, PINNED_FP32, U8S8)
    )
    retries = _retries(refused, speed, installed)
    out["retry_b64"] = claims.speed(speed[retries[0]]) if isinstance(retries, list) else retries
    return out


@book.sentence(
    "3",
    "ov-u8s8-faster",
    "At batch 64 OpenVINO runs the U8S8 file faster than ONNX Runtime does",
    shows="OpenVINO {ov_u8s8_b64}, ONNX Runtime {ort_u8s8_b64} fp32's speed; OpenVINO over ONNX Runtime "
    "{ov_over_ort_u8s8}",
    scope=X86,
    depends="speed",
)
def _(f):
    return faster(f["ov_over_ort_u8s8"])


@book.sentence(
    "3",
    "ov-s8s8-far-faster",
    "Where OpenVINO compiles the S8S8 file with its defaults, it runs it far faster than ONNX Runtime does",
    shows="OpenVINO {ov_s8s8_b64}, ONNX Runtime {ort_s8s8_b64} fp32's speed; OpenVINO over ONNX Runtime "
    "{ov_over_ort_s8s8}",
    scope=X86,
    depends="speed",
)
def _(f):
    return far(f["ov_over_ort_s8s8"])


@book.sentence(
    "3",
    "int8-carries",
    "OpenVINO's U8S8 run gains more over ONNX Runtime's fp32 than its f32-pinned fp32 run does",
    shows="U8S8 {ov_u8s8_b64}, fp32 pinned {ov_fp32_f32_b64}; U8S8 over pinned {u8s8_over_pinned}",
    scope=X86,
    depends="speed",
)
def _(f):
    return faster(f["u8s8_over_pinned"])


@book.sentence(
    "3",
    "retry-no-faster",
    "A refused file's f32-pinned retry runs no faster than ONNX Runtime's fp32",
    shows="{retry_b64}",
    depends="speed",
    example={"retry_b64": {"value": 0.92, "low": 0.9, "high": 0.94, "unit": "x"}},  # the Xeon AMX run's retry
)
def _(f):
    return faster(f["retry_b64"]) is not True


# 4. What OpenVINO fuses, and where its time goes ---------------------------------------------------------
@book.figures("4")
def _(adds: set, nodes: Any, profile: Any, holds: dict, ov_ms: Any, refused: dict) -> dict:
    # OpenVINO's counters need the U8S8 file compiled: without them, it was refused or not installed
    missing = _unmeasured(U8S8, bool(ov_ms) or U8S8 in refused, refused)
    ran = missing is None
    return {
        "adds": len(adds),
        "ort_qlinearadd": nodes.get("QLinearAdd", 0),
        "adds_in_convs": len(holds.get("Convolution", ())) if ran else missing,
        "ort_qlinearconv_ms": profile.ms_per_run.get("QLinearConv", 0.0),
        "ort_qlinearadd_ms": profile.ms_per_run.get("QLinearAdd", 0.0),
        "ort_kernel_ms": profile.total_ms,
        "ov_conv_ms": ov_ms["Convolution"] if ran else missing,
    }


@book.sentence(
    "4",
    "adds-folded",
    "OpenVINO folds every residual Add of the U8S8 file into a convolution layer; ONNX Runtime runs each "
    "as a QLinearAdd node",
    shows="{adds} Add nodes; inside OpenVINO's convolution layers {adds_in_convs}; ONNX Runtime's "
    "QLinearAdd nodes {ort_qlinearadd}",
    scope=X86,
    depends=("cpu", "runtime"),
)
def _(f):
    return f["adds"] > 0 and f["adds_in_convs"] == f["adds"] == f["ort_qlinearadd"]


@book.sentence(
    "4",
    "qlinearadd-small",
    "ONNX Runtime's QLinearAdd nodes take under a twentieth of its kernel time on the U8S8 file",
    shows="QLinearAdd {ort_qlinearadd_ms:.2f} ms of {ort_kernel_ms:.1f} ms",
    scope=X86,
    depends="speed",
)
def _(f):
    return f["ort_qlinearadd_ms"] < f["ort_kernel_ms"] / 20


@book.sentence(
    "4",
    "ov-conv-less",
    "OpenVINO's convolution layers take less kernel time than ONNX Runtime's QLinearConv nodes on the U8S8 "
    "file at batch 64",
    shows="OpenVINO {ov_conv_ms:.1f} ms, ONNX Runtime {ort_qlinearconv_ms:.1f} ms",
    scope=X86,
    depends="speed",
)
def _(f):
    return f["ov_conv_ms"] < f["ort_qlinearconv_ms"]


# 5. The seed's hardware table (reads section 3's figures) ----------------------------------------------
@book.sentence(
    "5",
    "ort-below-row",
    "With VNNI, ONNX Runtime's U8S8 ratio at batch 64 stays below the low end of the row's 2–4x",
    shows="{ort_u8s8_b64}",
    scope=VNNI,
    depends="speed",
)
def _(f):
    return below(f["ort_u8s8_b64"], 2.0)


@book.sentence(
    "5",
    "ov-reaches-row",
    "With VNNI, OpenVINO's U8S8 ratio at batch 64 reaches the row's 2–4x",
    shows="{ov_u8s8_b64}",
    scope=VNNI,
    depends="speed",
)
def _(f):
    return at_least(f["ov_u8s8_b64"], 2.0)


@book.sentence(
    "5",
    "older-both-faster",
    "Without VNNI, both runtimes run the U8S8 file faster than fp32 at batch 64",
    shows="ONNX Runtime {ort_u8s8_b64}, OpenVINO {ov_u8s8_b64}",
    scope=SATURATING,
    depends="speed",
)
def _(f):
    return all_of(faster(f["ort_u8s8_b64"]), faster(f["ov_u8s8_b64"]))


@book.end
def _(speed: dict, ov_parity: dict, files: dict, compiled: dict, threads: int) -> None:
    """Each OpenVINO run's ratio at batch 64 and its parity, for the course's report."""
    from course_machinery import results
    from course_machinery.runtimes import openvino_or_none, precision_hint

    openvino = openvino_or_none()
    for name, model in compiled.items():
        c, p = speed[name], ov_parity[name]
        metrics = {
            "speedup": c.speedup,
            "speedup_low": c.speedup_low,
            "speedup_high": c.speedup_high,
            "speedup_b64": c.speedup,
            "agreement": p.agreement,
            "accuracy": p.candidate_accuracy,
        }
        options = {
            "threads": threads,
            "batch": 64,
            "runtime": f"OpenVINO {openvino.__version__}",
            "precision": precision_hint(model),
        }
        results.record(
            lesson="05c",
            model="fashion_resnet18",
            variant=name,
            path=files[name],
            metrics=metrics,
            options=options,
        )
