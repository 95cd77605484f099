"""Lesson 05b's sentences about its results, and the figures each section's check cell measures.

Each sentence here is written once in the lesson's markdown, with `<!-- claim: name -->` after it.
"""

from __future__ import annotations

import math
from typing import Any

from course_machinery import claims

from ..claims import (
    X86,
    Book,
    Scope,
    all_of,
    apart,
    at_least,
    below,
    faster,
    interval,
    nearly_all,
    several_times,
    slower,
    speed,
)

book = Book("05b")


def _more_than_one_core(cpu: dict) -> bool:
    from course_lib.measure import physical_cores

    return cpu.get("physical_cores", physical_cores()) > 1


# With one physical core the lessons run one intra-op thread: ONNX Runtime starts no worker thread,
# and nothing spins.
MANY_CORES = Scope("CPUs with more than one physical core (with one, no thread spins)", _more_than_one_core)


def _unless_disturbed(verdict: bool | None, disturbed: bool) -> bool | None:
    """A verdict, or None (unsettled) when other processes used more than a tenth of the CPU while it
    was measured (`measure.other_load`): a timing that needs free cores cannot tell then."""
    return None if disturbed else verdict


def _ratio(a: Any, b: Any) -> dict:
    """Median of a's runs over b's, with the paired-bootstrap interval: how much faster b ran."""
    from course_lib.measure import bootstrap_ratio_interval

    low, high = bootstrap_ratio_interval(a.samples_ms, b.samples_ms)
    return interval(a.median_ms / b.median_ms, low, high, "x")


# 1. Measuring traps -----------------------------------------------------------------------------
@book.figures("1")
def _(careless: float, careful: Any, loaded: Any, alone: dict, elsewhere: Any) -> dict:
    fp32, int8 = dict.fromkeys(name for name, _ in alone)
    return {
        "careless_loaded_ratio": float(careless),
        "careful": speed(careful),
        "loaded": speed(loaded),
        # off over on: how much faster spinning made each lone session's runs
        "spin_fp32_gain": _ratio(alone[fp32, False], alone[fp32, True]),
        "spin_int8_gain": _ratio(alone[int8, False], alone[int8, True]),
        "spin_on": _ratio(alone[fp32, True], alone[int8, True]),
        "spin_off": _ratio(alone[fp32, False], alone[int8, False]),
        "spin_others_busy": bool(elsewhere.busy),
        "spin_other_load": elsewhere.describe(),
    }


@book.sentence(
    "1",
    "careless-above",
    "The careless loop's ratio lands above the careful loop's interval",
    shows="careless {careless_loaded_ratio:.2f}x, careful {careful}",
    depends="speed",
)
def _(f):
    return f["careless_loaded_ratio"] > f["careful"].high


@book.sentence(
    "1",
    "in-turn-closer",
    "Timed in turn under the same load, the ratio lands closer to the quiet one than the careless loop's",
    shows="quiet {careful}; in turn under the load {loaded}; careless {careless_loaded_ratio:.2f}x",
    depends="speed",
)
def _(f):
    quiet = f["careful"].value
    return abs(math.log(f["loaded"].value / quiet)) < abs(math.log(f["careless_loaded_ratio"] / quiet))


@book.sentence(
    "1",
    "spin-helps-fp32-more",
    "Spinning makes a lone fp32 session's batch-1 runs faster, and helps INT8's less",
    shows="off over on: fp32 {spin_fp32_gain}, INT8 {spin_int8_gain}; {spin_other_load}",
    scope=MANY_CORES,
    depends="speed",
)
def _(f):
    busy = f["spin_others_busy"]  # spinning's gain needs free cores
    return _unless_disturbed(
        all_of(faster(f["spin_fp32_gain"]), apart(f["spin_fp32_gain"], f["spin_int8_gain"])), busy
    )


@book.sentence(
    "1",
    "spin-moves-ratio",
    "The ratio of the lone medians is larger with spinning off, by more than its interval",
    shows="{spin_off} off, {spin_on} on",
    scope=MANY_CORES,
    depends="speed",
)
def _(f):
    busy = f["spin_others_busy"]
    return _unless_disturbed(apart(f["spin_off"], f["spin_on"]), busy)


# 2. Where the time goes ---------------------------------------------------------------------------
@book.figures("2")
def _(profiles: dict, profiled: dict) -> dict:
    names = dict(zip(("fp32", "int8", "dynamic"), profiled, strict=True))  # int8: the production variant
    out = {}
    for key, name in names.items():
        op = profiled[name][0]
        out[f"profile_{key}_ms"] = profiles[name].total_ms
        out[f"profile_{key}_share"] = 100 * profiles[name].ms_per_run.get(op, 0.0) / profiles[name].total_ms
    out["conv_integer_ms"] = profiles[names["dynamic"]].ms_per_run.get("ConvInteger", 0.0)
    out["fp32_conv_ms"] = profiles[names["fp32"]].ms_per_run.get("Conv", 0.0)
    return out


@book.sentence(
    "2",
    "convs-nearly-all",
    "In all three profiles the convolutions take nearly all the kernel time",
    shows="Conv {profile_fp32_share:.0f} %, QLinearConv {profile_int8_share:.0f} %, "
    "ConvInteger {profile_dynamic_share:.0f} %",
    depends="speed",
)
def _(f):
    return nearly_all(min(f[f"profile_{k}_share"] for k in ("fp32", "int8", "dynamic")) / 100)


@book.sentence(
    "2",
    "convinteger-several-times",
    "The dynamic file's ConvInteger kernels take several times fp32's Conv time",
    shows="ConvInteger {conv_integer_ms:.1f} ms, Conv {fp32_conv_ms:.1f} ms",
    depends="speed",
)
def _(f):
    return several_times(f["conv_integer_ms"] / f["fp32_conv_ms"])


# 3. The text encoder over sequence lengths -----------------------------------------------------------
@book.figures("3")
def _(seq_speed: dict, te_load: Any) -> dict:
    out = {f"te_{n}": speed(c) for n, c in seq_speed.items()}
    return out | {"te_others_busy": bool(te_load.busy), "te_other_load": te_load.describe()}


@book.sentence(
    "3",
    "te-faster-long",
    "Dynamic INT8 runs the text encoder faster than fp32 at 128 and 256 tokens",
    shows="128 tokens {te_128}; 256 tokens {te_256}",
    depends="speed",
)
def _(f):
    return all_of(faster(f["te_128"]), faster(f["te_256"]))


# 4. Memory-bound against compute-bound -----------------------------------------------------------------
CASES = ("lever_mlp", "lever_resnet_b1", "lever_resnet_b64", "te_16", "te_256")


@book.figures("4")
def _(cases: dict, te_load: Any) -> dict:
    comparisons = [c for _, _, c in cases.values()]
    mlp, resnet_b1, resnet_b64 = comparisons[:3]
    return {
        "lever_mlp": speed(mlp),
        "lever_resnet_b1": speed(resnet_b1),
        "lever_resnet_b64": speed(resnet_b64),
        "highest_high": max(c.speedup_high for c in comparisons),
    }


@book.sentence(
    "4",
    "under-fourfold",
    "INT8's ratio stays under three and a half in every case of the table",
    shows="the highest upper end {highest_high:.2f}x; while the text encoder was timed, {te_other_load}",
    depends="speed",
)
def _(f):
    # another process's load can swell the short runs' ratios
    busy = f["te_others_busy"]
    return _unless_disturbed(all_of(below(f[k], 3.5) for k in CASES), busy)


# 5. Saturation's remedies ------------------------------------------------------------------------------
REMEDIES = {
    "U8S8, full-range weights": "full",
    "U8S8, reduce_range": "rr",
    "U8U8": "u8u8",
    "U8S8 + session.x64quantprecision": "x64",
}


@book.figures("5")
def _(speed: dict, parity: dict, precise: Any, load: Any) -> dict:
    from course_machinery.hardware import u8s8_can_saturate

    # this CPU's production variant, lesson 03's choice: reduce_range where U8S8 can saturate
    production = "U8S8, reduce_range" if u8s8_can_saturate() else "U8S8, full-range weights"
    base = speed[production].latency[production]
    out: dict[str, Any] = {"production_remedy": REMEDIES[production], "remedy_others_busy": bool(load.busy)}
    for name, key in REMEDIES.items():
        out[f"remedy_{key}_b64"] = claims.speed(speed[name])
        out[f"agreement_{key}"] = 100 * parity[name].agreement
        out[f"vs_production_{key}"] = _ratio(base, speed[name].latency[name])
    out["x64_kernel_types"] = sorted(precise.types)
    return out


@book.sentence(
    "5",
    "pick-production",
    "No remedy that keeps agreement at 99% or more runs at least 5% faster than this CPU's production "
    "variant over its whole interval",
    shows="against the production variant: full range {vs_production_full}, reduce_range "
    "{vs_production_rr}, U8U8 {vs_production_u8u8}, x64quantprecision {vs_production_x64}",
    depends=("speed", "weights"),
)
def _(f):
    busy = f["remedy_others_busy"]
    others = [k for k in REMEDIES.values() if k != f["production_remedy"] and f[f"agreement_{k}"] >= 99]
    verdict = all_of(
        f[f"agreement_{f['production_remedy']}"] >= 99,
        [at_least(f[f"vs_production_{k}"], 1.05) is not True for k in others],
    )
    return _unless_disturbed(verdict, busy)


@book.sentence(
    "5",
    "u8u8-x64-slower",
    "U8U8 and session.x64quantprecision run slower than the production variant",
    shows="U8U8 {vs_production_u8u8}, x64quantprecision {vs_production_x64} of its speed",
    scope=X86,
    depends="speed",
)
def _(f):
    busy = f["remedy_others_busy"]
    return _unless_disturbed(all_of(slower(f["vs_production_u8u8"]), slower(f["vs_production_x64"])), busy)


@book.sentence(
    "5",
    "x64-u8u8-kernels",
    "session.x64quantprecision moves the full-range file to U8U8 kernels",
    shows="{x64_kernel_types}",
    scope=X86,
    depends=("cpu", "runtime"),
)
def _(f):
    return f["x64_kernel_types"] == ["U8U8"]


@book.end
def _(seq_speed: dict, te_int8: Any, threads: int) -> None:
    """The text encoder's ratios, for the course's report (keys.SPEED_05B)."""
    from course_machinery import results

    for length, c in seq_speed.items():
        metrics = {
            "speedup": c.speedup,
            "speedup_low": c.speedup_low,
            "speedup_high": c.speedup_high,
            "fp32_ms": c.latency["fp32"].median_ms,
        }
        results.record(
            lesson="05b",
            model="text_encoder",
            variant=f"dynamic int8 per-channel, seq {length}",
            path=te_int8,
            metrics=metrics,
            options={"threads": threads, "batch": 1},
        )
