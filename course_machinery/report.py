"""The course report: what the seed documents claim (quoted), beside what this machine measured.

`python -m course_lib report` reads the results store that the lessons fill (`results.record`),
keeps this environment's entries (same fingerprint) and the latest entry per lesson, model and
variant, and writes one page: the environment on top, then per lesson its claims and a table of
its measured figures (named columns with units, tooling/keys.py's COLUMNS), and a plot of every
INT8 variant's speed against fp32 on a log axis. A claim whose lesson has not run yet says so
instead of showing a number.

The markdown (`build/report.md`, with the plot beside it as `report-speedups.png`) is the only
renderer: `build/report.html` is that markdown rendered by markdown-it-py into a small page, the
plot embedded in it, so the two cannot say different things.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from course_lib import measure
from course_lib.names import MOONS_MLP, RESNET18, TEXT_ENCODER
from course_lib.units import format_bytes, megabytes
from course_machinery import hardware, html_page, results

from . import keys
from .paths import BUILD

LESSON_TITLES = {
    "02": "02 · dynamic quantization",
    "02b": "02b · dynamic quantization in depth (optional)",
    "03": "03 · static QDQ and calibration",
    "03b": "03b · calibration deep dive (optional)",
    "04": "04 · parity",
    "04b": "04b · where errors gather (optional)",
    "05": "05 · hardware and speed",
    "05b": "05b · measuring traps (optional)",
    "05c": "05c · a second runtime: OpenVINO (optional)",
    "06": "06 · past W8A8",
    "06b": "06b · past W8A8 in depth: 4-bit bytes, static INT8 on the text encoder (optional)",
    "06c": "06c · quantization-aware training (optional)",
    keys.BENCH: "the benchmark (python -m course_lib bench)",
}

MODEL_TITLES = {
    RESNET18: "ResNet18 (Fashion-MNIST)",
    TEXT_ENCODER: "text encoder (all-MiniLM-L6-v2)",
    MOONS_MLP: "two-moons MLP",
}
FIGURE = "report-speedups.png"  # the plot, next to report.md
DASH = "—"
ABSENT_NOTE = (
    f"{DASH}: the lesson recorded no value for this variant (it times or measures this figure only on "
    "the variants it compares, or the figure does not apply)."
)
SPEED_NOTE = (
    "a speed-up is the baseline's median time divided by the variant's, from interleaved runs (above "
    "1: the variant is faster); the baseline is fp32 unless the heading or the variant names another; "
    "in brackets, the 90% interval."
)

RUNTIME, PRECISION = "runtime", "float precision (OpenVINO's hint)"  # columns where two runtimes ran
RUNTIME_NOTE = (
    f"{RUNTIME}: what ran the variant, OpenVINO's runs each timed in turn against ONNX Runtime's fp32 "
    f"session; {PRECISION}: what OpenVINO computed the float layers in (INFERENCE_PRECISION_HINT: by "
    "default bf16 on x86 CPUs with AVX512_BF16 or AMX, f16 on ARM CPUs with FP16 arithmetic, else f32; "
    "ONNX Runtime's CPU kernels keep them in float32)."
)

Latest = dict[tuple[str, str, str], dict]  # (lesson, model, variant) -> entry


def _entry(latest: Latest, read: keys.Read, variant: str | None = None) -> dict | None:
    """The newest entry for one of `read`'s variants (default: its first)."""
    variant = read.variants[0] if variant is None else variant
    if variant not in read.variants:
        raise ValueError(
            f"The report reads {read} but asked for the variant {variant!r}; declare it in keys.py."
        )
    return latest.get((read.lesson, read.model, variant))


def _metric(latest: Latest, read: keys.Read, key: str, variant: str | None = None):
    if key not in read.metrics:
        raise ValueError(f"The report reads {read} but asked for the metric {key!r}; declare it in keys.py.")
    entry = _entry(latest, read, variant)
    return None if entry is None else entry.get("metrics", {}).get(key)


def _fmt(value, spec: str, suffix: str = "") -> str | None:
    return None if value is None else f"{value:{spec}}{suffix}"


def accuracy_change(accuracy: float, reference: float, reference_name: str = "fp32") -> str:
    """How far `accuracy` lies from `reference` (both fractions), in percentage points, with its
    direction named: "0.02 points below fp32", "0.10 points above fp32", "equal to fp32".

    A sign alone is easy to read backwards (is +0.02 a gain or a drop?); the words are not.
    Differences under 0.005 points (below the 0.01-point step of 10,000 images) are equal."""
    points = round(100 * (accuracy - reference), 2)
    if points == 0:
        return f"equal to {reference_name}"
    return f"{abs(points):.2f} points {'above' if points > 0 else 'below'} {reference_name}"


@dataclass(frozen=True)
class Claim:
    """A figure quoted from a seed document, and how to read this machine's counterpart."""

    lesson: str
    quote: str
    source: str
    measured: Callable[[Latest], str | None]


def _text_encoder(latest: Latest) -> str | None:
    read = keys.TEXT_ENCODER_DYNAMIC
    speed = _metric(latest, read, "speedup_vs_optimized_b16")
    cos = _metric(latest, read, "cos_min")
    size = ((_entry(latest, read) or {}).get("file") or {}).get("bytes")
    if speed is None:
        return None
    return f"{speed:.2f}x the optimized fp32 graph at batch 16, seq 128; worst cosine {cos:.4f}" + (
        f"; {format_bytes(size)}" if size else ""
    )


def _resnet_dynamic(latest: Latest) -> str | None:
    read = keys.RESNET_DYNAMIC
    speed = _metric(latest, read, "speedup_b32")
    fp, q = (_metric(latest, read, k) for k in ("fp32_accuracy", "int8_accuracy"))
    if speed is None:
        return None
    return f"{speed:.2f}x fp32 at batch 32; accuracy {fp:.2%} → {q:.2%} (500 validation images)"


def _nanogpt_dynamic(latest: Latest) -> str | None:
    read = keys.NANOGPT_DYNAMIC
    m = {k: _metric(latest, read, k) for k in read.metrics}
    if any(v is None for v in m.values()):
        return None
    return (
        f"the same size of NanoGPT trained here: {format_bytes(m['fp32_bytes'], 2, unit=False)} → {format_bytes(m['int8_bytes'], 2)}; "
        f"{m['speedup_b1']:.2f}x fp32 (90% interval {m['speedup_b1_low']:.2f}–{m['speedup_b1_high']:.2f}) "
        f"at batch 1 (64 characters); perplexity {m['fp32_perplexity']:.3f} → {m['perplexity']:.3f}"
    )


def _production(latest: Latest, read: keys.Read) -> str:
    """The variant a lesson shipped on the machine that ran it: `read`'s second variant (reduce_range)
    where that machine's U8S8 kernels can saturate (x86 without VNNI), else its first."""
    full, reduced = read.variants
    entry = _entry(latest, read, full) or _entry(latest, read, reduced)
    env = (entry or {}).get("environment")
    if env is None:
        return full
    return reduced if hardware.saturating_u8s8(env.get("machine", ""), env.get("int8_features", [])) else full


def _static_resnet(latest: Latest) -> str | None:
    read = keys.RESNET_STATIC
    variant = _production(latest, read)
    speed = _metric(latest, read, "speedup_b64", variant)
    size = _metric(latest, read, "size_ratio", variant)
    if speed is None:
        return None
    return f"static {variant} per-channel ResNet18: {speed:.2f}x fp32 at batch 64, file {size:.3f} of fp32"


def _acceptance(latest: Latest) -> str | None:
    read = keys.RESNET_ACCEPTED
    variant = _production(latest, read)
    acc, fp, agree = (_metric(latest, read, k, variant) for k in ("accuracy", "fp32_accuracy", "agreement"))
    if acc is None:
        return None
    return (
        f"{variant} static ResNet18: accuracy {acc:.2%}, {accuracy_change(acc, fp)} ({fp:.2%}), "
        f"agreement {agree:.2%} (10,000 test images)"
    )


def _four_bit(latest: Latest) -> str | None:
    read = keys.FOUR_BIT
    fp32_bytes, cos = _metric(latest, read, "fp32_bytes"), _metric(latest, read, "cos_min")
    size = ((_entry(latest, read) or {}).get("file") or {}).get("bytes")
    if fp32_bytes is None or size is None:
        return None
    return (
        f"4-bit text encoder (blocks of 32, asymmetric): {format_bytes(size)}, {size / fp32_bytes:.0%} of the "
        f"fp32 file's {format_bytes(fp32_bytes)} (an ideal 4-bit payload is 12.5 %); worst cosine {cos:.4f}"
    )


def _static_text_encoder(latest: Latest) -> str | None:
    read = keys.STATIC_TEXT_ENCODER
    static, dynamic = read.variants
    figures = {
        v: (_metric(latest, read, "cos_min", v), _metric(latest, read, "speedup_b16", v))
        for v in read.variants
    }
    if None in figures[static] or None in figures[dynamic]:
        return None
    (s_cos, s_speed), (d_cos, d_speed) = figures[static], figures[dynamic]
    return (
        f"text encoder, 200 held-out sentences: static INT8 worst cosine {s_cos:.4f} at {s_speed:.2f}x fp32 "
        f"(batch 16); dynamic INT8 {d_cos:.4f} at {d_speed:.2f}x"
    )


def _qat(latest: Latest) -> str | None:
    read = keys.QAT
    trained, after = read.variants
    acc, fp32, seconds, differ, codes = (_metric(latest, read, k, trained) for k in read.metrics)
    ptq = _metric(latest, read, "accuracy", after)
    if None in (acc, fp32, seconds, differ, codes, ptq):
        return None
    return (
        f"4-bit ResNet18: QAT ({seconds:.1f} s of training) {acc:.2%}, PTQ {ptq:.2%}, fp32 {fp32:.2%}; "
        f"the file's INT4 codes differ from the training's in {differ:,} of {codes:,} weights"
    )


def runtime_of(entry: dict) -> str | None:
    """The runtime an entry's candidate ran on when the lesson or the bench named one (OpenVINO's
    runs: options["runtime"], "OpenVINO 2026.4.1-…"), shortened to name and version; else None
    (ONNX Runtime, the course's runtime)."""
    runtime = (entry.get("options") or {}).get("runtime")
    if not runtime:
        return None
    name, _, version = str(runtime).rpartition(" ")
    return f"{name} {version.split('-')[0]}" if name else str(runtime)


def _openvino(entry: dict) -> bool:
    return (runtime_of(entry) or "").startswith("OpenVINO")


def _ran_int8_file(key: tuple[str, str, str]) -> bool:
    """An OpenVINO run of a QDQ file, not of the fp32 file ("OpenVINO fp32, default", whose float
    layers ran in OpenVINO's default precision): the runs are named by the file they ran."""
    return "fp32" not in key[2].split(" vs ")[0]


def _at_batch_64(key: tuple[str, str, str], entry: dict) -> bool:
    """Timed at batch 64: a bench row of batch 64, or a lesson-05 entry whose ratio is its batch-64 one."""
    m = entry.get("metrics", {})
    if key[0] == keys.SPEED_BENCH.lesson:
        return (entry.get("options") or {}).get("batch", _bench_batch(key[2])) == 64
    return m.get("speedup_b64") is not None and m.get("speedup_b64") == m.get(keys.SPEED[0])


def _bench_batch(variant: str) -> int | None:
    """The batch of a bench entry from its variant ("… vs onnxruntime fp32, batch 64, seq 128")."""
    found = re.search(r", batch (\d+)", variant)
    return int(found.group(1)) if found else None


def _ratio(m: dict) -> str:
    speedup, low, high = keys.SPEED
    return f"{m[speedup]:.2f}x (90% interval {m[low]:.2f}–{m[high]:.2f}"


def _best(found: list[tuple[tuple[str, str, str], dict]]):
    """The entry whose ratio's interval has the highest lower end, or None."""
    return max(found, key=lambda kv: kv[1]["metrics"][keys.SPEED[1]]) if found else None


def _cpu_speedup(latest: Latest) -> str | None:
    """Seed 000's INT8 speed-up beside both runtimes: ONNX Runtime's best INT8/fp32 ratio on the
    ResNet18 at batch 64 and OpenVINO's (its QDQ files, with the precision its float layers ran
    in), then ONNX Runtime's best with the text encoder included, when that is another one.

    Best: the highest lower end of a ratio's interval. The largest median would pick whichever
    comparison was luckiest: on 2 shared cores one noisy comparison can double a ratio. Ratios
    recorded without an interval cannot be claimed. As lesson 05 claims, the ResNet18 counts at
    batch 64 only: its batch-1 ratios, timed with spinning off, overstate what a server sees."""
    speedup, low, _ = keys.SPEED
    found = [  # INT8 against fp32 only: the bench also sets ONNX Runtime against PyTorch
        (key, e)
        for key, e in latest.items()
        if (
            key[0] in (keys.SPEED_05.lesson, keys.SPEED_05B.lesson, keys.SPEED_05C.lesson)
            or (key[0] == keys.SPEED_BENCH.lesson and f"vs {keys.FP32_BASELINE}" in key[2])
        )
        and e.get("metrics", {}).get(speedup) is not None
        and e["metrics"].get(low) is not None
    ]
    onnxruntime = [(k, e) for k, e in found if not _openvino(e)]
    openvino = [(k, e) for k, e in found if _openvino(e) and _ran_int8_file(k) and _at_batch_64(k, e)]
    if not onnxruntime and not openvino:
        return None
    where = {
        keys.SPEED_05.lesson: "lesson 05",
        keys.SPEED_05B.lesson: "lesson 05b",
        keys.SPEED_05C.lesson: "lesson 05c",
        keys.SPEED_BENCH.lesson: "the benchmark",
    }

    def case(key: tuple[str, str, str], e: dict, model: bool = False) -> str:
        variant = re.sub(f" vs {keys.FP32_BASELINE}(?=,|$)", "", key[2])  # the bench's plain fp32 baseline
        return f"{_ratio(e['metrics'])}; {f'{key[1]}, ' if model else ''}{variant}, {where[key[0]]})"

    parts = []
    ort64 = _best([(k, e) for k, e in onnxruntime if k[1] == RESNET18 and _at_batch_64(k, e)])
    parts.append(f"ONNX Runtime: {case(*ort64)}" if ort64 else "ONNX Runtime: not measured at batch 64 yet")
    ov64 = _best(openvino)
    if ov64:
        hint = (ov64[1].get("options") or {}).get("precision")
        float_layers = f", float layers in {hint}" if hint else ""
        parts.append(f"{runtime_of(ov64[1])}{float_layers}: {case(*ov64)}")
    else:
        parts.append(
            "OpenVINO: not measured yet (lesson 05c or the benchmark, with the openvino package installed)"
        )
    text = f"best INT8/fp32 ratio on the ResNet18 at batch 64, {parts[0]}; {parts[1]}"
    overall = _best([(k, e) for k, e in onnxruntime if k[1] != RESNET18 or _at_batch_64(k, e)])
    if overall and (ort64 is None or overall[0] != ort64[0]):
        text += f"; with the text encoder, ONNX Runtime's best: {case(*overall, model=True)}"
    return text


CLAIMS = (
    Claim(
        "02",
        "Text encoder, dynamic INT8: 120 → 31 MB, 2.5–3x faster on CPU, about 0.3 % top-1 drop",
        "seed 000",
        _text_encoder,
    ),
    Claim(
        "02b",
        "ResNet18, dynamic INT8: 45 → 12 MB, 1.2x faster, about 0.1 % top-1 drop",
        "seed 000",
        _resnet_dynamic,
    ),
    Claim(
        "07",
        "NanoGPT, dynamic INT8: 0.84 → 0.03 MB, 1,292.2 → 1,877.0 ms (0.69x)",
        "seed 003",
        _nanogpt_dynamic,
    ),
    Claim(
        "03",
        "Static quantization: more speedup than dynamic, especially on convolutions; the file shrinks "
        "roughly 4x",
        "seed 000",
        _static_resnet,
    ),
    Claim(
        "04",
        "Acceptable: INT8 accuracy within 0.5 points of fp32, agreement above 99 %",
        "seed 000",
        _acceptance,
    ),
    Claim(
        "05",
        "Modern Intel CPU with VNNI: 2–4x INT8 speedup; older CPUs without VNNI: marginal",
        "seed 000",
        _cpu_speedup,
    ),
    Claim(
        "06",
        "Ideally packed 4-bit payload occupies 500,000 bytes [per million weights]; scale metadata, padding, "
        "unconverted tensors, and the container add to the file",
        "seed 004",
        _four_bit,
    ),
    Claim(
        "06b",
        "Static parameters avoid that runtime range calculation but can mismatch new inputs. [...] Neither "
        "method has a universal accuracy or latency advantage",
        "seed 004",
        _static_text_encoder,
    ),
    Claim(
        "06c",
        "Quantization-aware training [...] does not guarantee that the final runtime implements every "
        "simulated operation identically",
        "seed 004",
        _qat,
    ),
)


def latest_entries(entries: list[dict]) -> Latest:
    """The newest entry per (lesson, model, variant)."""
    latest: Latest = {}
    for e in entries:
        latest[(str(e.get("lesson")), str(e.get("model")), str(e.get("variant")))] = e
    return latest


def _significant(value: float, digits: int = 3) -> str:
    """`value` to `digits` significant figures, without exponent: 0.0657, 1.42, 21.5, 2,152."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(value))))
    return f"{value:,.{decimals}f}"


def format_value(value, kind: str) -> str:
    """One table cell, as keys.Column's `kind` reads it (None: the dash)."""
    if value is None:
        return DASH
    if kind == "yes/no" or isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str):
        return value
    if kind == "percent":
        return f"{100 * value:.2f}"
    if kind == "percent3":
        return _significant(100 * value)
    if kind == "megabytes":
        return _significant(megabytes(value))
    if kind == "cosine":
        return f"{value:.4f}"
    if kind == "count":
        return f"{value:,}"
    return _significant(value)  # ratio, ms, seconds, and metrics no Column names


def _columns(entries: list[dict]) -> list[tuple[str, keys.Column]]:
    """The columns of one table: the metrics some entry holds a value for, in COLUMNS' order (then
    any metric COLUMNS does not know, by name). A speed-up recorded twice under two names (lesson
    05's "speedup" is its "speedup_b64") is one column, under the later's (more specific) heading."""
    present = {k for e in entries for k, v in e.get("metrics", {}).items() if v is not None}
    known = [k for k in keys.COLUMNS if k in present]
    unknown = sorted(present - set(keys.COLUMNS) - keys.INTERVAL_METRICS)
    columns: list[tuple[str, keys.Column]] = []
    for key in known + unknown:
        column = keys.COLUMNS.get(key) or keys.Column(key.replace("_", " "), "number")
        values = [e.get("metrics", {}).get(key) for e in entries]
        twin = next(
            (
                i
                for i, (k, c) in enumerate(columns)
                if c.kind == column.kind == "ratio"
                and [e.get("metrics", {}).get(k) for e in entries] == values
            ),
            None,
        )
        if twin is None:
            columns.append((key, column))
        else:
            k, first = columns[twin]
            columns[twin] = (k, keys.Column(column.heading, first.kind, first.interval or column.interval))
    return columns


def _cell(metrics: dict, key: str, column: keys.Column) -> str:
    value = metrics.get(key)
    text = format_value(value, column.kind)
    if value is not None and column.interval:
        low, high = (metrics.get(k) for k in column.interval)
        if low is not None and high is not None:
            text += f" ({format_value(low, column.kind)}–{format_value(high, column.kind)})"
    return text


def figures_table(entries: list[dict]) -> tuple[list[dict], list[str]]:
    """One lesson's entries for one model as table rows (variant, then named columns with units,
    the file's size, and the accuracy's distance from fp32 in words) and the notes the table needs."""
    columns = _columns(entries)
    two_runtimes = any(runtime_of(e) for e in entries)
    rows = []
    for e in entries:
        m = e.get("metrics", {})
        row = {"variant": e.get("variant", "")}
        if two_runtimes:  # OpenVINO's runs beside ONNX Runtime's: which ran, and in what float precision
            version = ((e.get("environment") or {}).get("versions") or {}).get("onnxruntime")
            row[RUNTIME] = runtime_of(e) or ("ONNX Runtime" + (f" {version}" if version else ""))
            row[PRECISION] = (e.get("options") or {}).get("precision") or DASH
        for key, column in columns:
            row[column.heading] = _cell(m, key, column)
            if key == "fp32_accuracy":  # right after the two accuracies it compares
                acc = m.get("accuracy", m.get("int8_accuracy"))
                fp = m.get("fp32_accuracy")
                row["accuracy vs fp32"] = DASH if None in (acc, fp) else accuracy_change(acc, fp)
        if any((x.get("file") or {}).get("bytes") for x in entries):
            size = (e.get("file") or {}).get("bytes")
            row["file (MB)"] = DASH if not size else _significant(megabytes(size))
        rows.append(row)
    notes = [RUNTIME_NOTE] if two_runtimes else []
    if any(v == DASH or v.startswith(f"{DASH} ") for r in rows for v in r.values()):
        notes.append(ABSENT_NOTE)
    return rows, notes


def _primary_speedup(entry: dict) -> tuple[str, float, float | None, float | None] | None:
    """The one speed-up against fp32 to plot for an entry: (its case, ratio, low, high), or None.
    The case is the column heading's ("batch 64"); a bare "speedup" recorded again under a named
    case (lesson 05: "speedup" is "speedup_b64") takes that name."""
    m = entry.get("metrics", {})
    if entry.get("lesson") == keys.BENCH and f"vs {keys.FP32_BASELINE}" not in str(entry.get("variant")):
        return None  # ONNX Runtime against PyTorch: not an INT8 variant against fp32
    named = [k for k, c in keys.COLUMNS.items() if c.kind == "ratio" and k != "speedup"]
    for key in (
        "speedup",
        "speedup_b64",
        "speedup_b32",
        "speedup_b16",
        "speedup_vs_optimized_b16",
        "speedup_b1",
    ):
        value = m.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
            column = keys.COLUMNS[key]
            low, high = (m.get(k) for k in column.interval) if column.interval else (None, None)
            same = next((k for k in named if key == "speedup" and m.get(k) == value), key)
            case = keys.COLUMNS[same].heading.removeprefix("speed-up").removesuffix("(×)").strip(" ,")
            return case, float(value), low, high
    return None


def speedup_figure(report: dict):
    """Every variant's speed against fp32, per lesson, as a bar from 1x on a base-2 log axis
    (a variant 7x slower is as long a bar as one 7x faster); None when nothing was timed."""
    bars = []
    for s in report["sections"]:
        for e in s["entries"]:
            found = _primary_speedup(e)
            if found:
                which, ratio, low, high = found
                model = MODEL_TITLES.get(e["model"], e["model"]).split(" (")[0]
                label = f"{s['lesson']} · {model}: {e['variant']}" + (f" ({which})" if which else "")
                hint = (e.get("options") or {}).get("precision") if runtime_of(e) else None
                label += f" [{hint}]" if hint else ""
                bars.append((s["lesson"], label, ratio, low, high))
    if not bars:
        return None
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    from .plots import ratio_axis

    lessons = list(dict.fromkeys(b[0] for b in bars))
    colours = {lesson: plt.get_cmap("tab10")(i % 10) for i, lesson in enumerate(lessons)}
    fig, ax = plt.subplots(figsize=(12, 0.26 * len(bars) + 1.6))
    for y, (lesson, _, ratio, low, high) in enumerate(bars):
        err = None if low is None or high is None else [[ratio - low], [high - ratio]]
        ax.barh(y, ratio - 1, left=1, xerr=err, color=colours[lesson], alpha=0.85, ecolor="0.3")
        end = max(ratio, high or ratio) * 1.04 if ratio >= 1 else min(ratio, low or ratio) / 1.04
        ax.text(end, y, f"{ratio:.2f}x", va="center", ha="left" if ratio >= 1 else "right", fontsize=7)
    ratio_axis(ax, [r for b in bars for r in b[2:] if r is not None])
    ax.set_yticks(range(len(bars)), [b[1] for b in bars], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("fp32 time / variant time (log scale; right of 1x: the variant is faster)")
    ax.set_title(f"{report['environment'].get('cpu')}: every timed variant against fp32", fontsize=10)
    fig.tight_layout()
    return fig


def _png(fig) -> bytes:
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    plt.close(fig)
    return buffer.getvalue()


def build(entries: list[dict] | None = None, environment: dict | None = None) -> dict:
    """The report's content as plain data: environment, and per lesson its claims and figures."""
    entries = results.load_results() if entries is None else entries
    environment = environment or results.environment_fingerprint()
    latest = latest_entries(entries)
    lessons = sorted({k[0] for k in latest} | {c.lesson for c in CLAIMS})
    sections = []
    for lesson in lessons:
        claims = [
            {
                "quoted claim": f"“{c.quote}” ({c.source})",
                "measured here": c.measured(latest) or "not measured yet: run the lesson",
            }
            for c in CLAIMS
            if c.lesson == lesson
        ]
        entries_here = [e for k, e in latest.items() if k[0] == lesson]
        by_model: dict[str, list[dict]] = {}
        for e in entries_here:
            by_model.setdefault(str(e.get("model")), []).append(e)
        figures = []
        for model, group in by_model.items():
            rows, notes = figures_table(group)
            figures.append(
                {"model": model, "title": MODEL_TITLES.get(model, model), "rows": rows, "notes": notes}
            )
        sections.append(
            {
                "lesson": lesson,
                "title": LESSON_TITLES.get(lesson, lesson),
                "claims": claims,
                "figures": figures,
                "entries": entries_here,
            }
        )
    return {
        "environment": environment,
        "entries": len(entries),
        "sections": sections,
        "sentences": sentence_counts(),
    }


NOT_HELD = ("contradicted", "unsettled", "not measured")


def sentence_counts(lessons: list[str] | None = None) -> dict:
    """Per lesson that ran here, how many of its sentences got each verdict, and every sentence that
    did not hold (contradicted, unsettled, not measured) with its evidence: from the figures and
    verdicts each lesson saved (`cl.verify`, `cl.end_lesson`)."""
    from course_machinery.claims import lessons_with_claims
    from course_machinery.reference import load_figures
    from course_machinery.verdicts import ORDER

    counts, not_held = {}, []
    for lesson in lessons or lessons_with_claims():
        found = load_figures(lesson)
        if not found:
            continue
        records = [r for r in found.get("claims", []) if r.get("id")]
        counts[lesson] = {verdict: sum(r["verdict"] == verdict for r in records) for verdict in ORDER}
        not_held += [
            {
                "lesson": lesson,
                "sentence": r["statement"],
                "verdict": r["verdict"],
                "evidence": r.get("reason") or r.get("evidence") or DASH,
            }
            for r in records
            if r["verdict"] in NOT_HELD
        ]
    return {"counts": counts, "not_held": not_held}


def environment_lines(env: dict) -> list[str]:
    """The machine, OS, cores, INT8 features and library versions, as a markdown list."""
    versions = ", ".join(f"{k} {v}" for k, v in sorted(env.get("versions", {}).items())) or DASH
    return [
        f"- **CPU**: {env.get('cpu') or DASH} ({env.get('machine') or DASH})",
        f"- **OS**: {env.get('os') or DASH}",
        f"- **cores**: {env.get('physical_cores') or DASH} physical, {env.get('logical_cores') or DASH} logical",
        f"- **INT8 features**: {', '.join(env.get('int8_features', [])) or 'none'}",
        f"- **library versions**: {versions}",
        f"- **environment hash**: `{env.get('hash') or DASH}`",
    ]


def to_markdown(report: dict, figure: str | None = None) -> str:
    """The report as markdown, the one source of the HTML page; `figure`: the speed-up plot's file
    name next to the markdown, to show after the environment (None: no plot)."""
    lines = [
        "# onnx-quant-course: what this machine measured",
        "",
        "## Environment",
        "",
        *environment_lines(report["environment"]),
        "",
        f"{report['entries']} measurements from this environment. Quoted figures come from the course's "
        "seed documents and were **not** measured here; the column beside them was.",
        "",
        f"In the tables, {SPEED_NOTE}",
    ]
    if figure:
        lines += ["", f"![Speed of every timed variant against fp32, per lesson, on a log axis]({figure})"]
    lines += sentences_lines(report.get("sentences") or {"counts": {}, "not_held": []})
    for s in report["sections"]:
        lines += ["", f"## {s['title']}", ""]
        if s["claims"]:
            lines += [measure.markdown_table(s["claims"]), ""]
        if not s["figures"]:
            lines += ["No measurements yet: run this lesson's notebook.", ""]
        for f in s["figures"]:
            lines += [f"### {f['title']}", "", measure.markdown_table(f["rows"]), ""]
            for note in f["notes"]:
                lines += [note, ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def sentences_lines(found: dict) -> list[str]:
    """The lessons' sentences on this machine: counts per lesson, then each one that did not hold."""
    if not found["counts"]:
        return [
            "",
            "## The lessons' sentences",
            "",
            "No lesson has run here yet: its check cells fill this in.",
        ]
    from course_machinery.verdicts import ORDER

    rows = [{"lesson": lesson, **{v: str(n) for v, n in c.items()}} for lesson, c in found["counts"].items()]
    lines = ["", "## The lessons' sentences", "", measure.markdown_table(rows), ""]
    if found["not_held"]:
        lines += [
            "Every sentence that did not hold here, with its evidence:",
            "",
            measure.markdown_table(found["not_held"]),
        ]
    else:
        lines += [f"Every sentence checked here held or was {' or '.join(ORDER[4:])}."]
    return lines


def to_html(markdown: str, images: Mapping[str, bytes] | None = None) -> str:
    """The page: `markdown` rendered into the course's one page template (`html_page.markdown_page`),
    each image whose file name is a key of `images` embedded."""
    page = html_page.markdown_page(markdown, images=images)
    if page is None:
        raise ModuleNotFoundError(
            "report.html is rendered by markdown-it-py, which is not installed here. "
            "Install the course's tooling: pip install -e '.[tooling]'."
        )
    return page


def write(out_dir: Path | None = None, entries: list[dict] | None = None) -> dict[str, Path]:
    """Write report.md, its plot (report-speedups.png, when anything was timed) and report.html
    (the markdown rendered, the plot embedded) under `out_dir` (default build/); return their paths."""
    out_dir = Path(out_dir or BUILD)
    out_dir.mkdir(parents=True, exist_ok=True)
    report = build(entries)
    paths = {"markdown": out_dir / "report.md", "html": out_dir / "report.html"}
    fig = speedup_figure(report)
    images = {}
    if fig is not None:
        images[FIGURE] = _png(fig)
        paths["figure"] = out_dir / FIGURE
        paths["figure"].write_bytes(images[FIGURE])
    markdown = to_markdown(report, FIGURE if images else None)
    paths["markdown"].write_text(markdown, encoding="utf-8")
    paths["html"].write_text(to_html(markdown, images), encoding="utf-8")
    return paths
