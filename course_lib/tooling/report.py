"""The course report: what the seed documents claim (quoted), beside what this machine measured.

`python -m course_lib report` reads the results store that the lessons fill (`measure.record`),
keeps this environment's entries (same fingerprint) and the latest entry per lesson, model and
variant, and writes one page, `build/report.md` and `build/report.html`: the environment on
top, then per lesson its claims and its measured figures. A claim whose lesson has not run yet
says so instead of showing a number.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .. import hardware, measure
from . import keys
from .paths import BUILD

LESSON_TITLES = {
    "02": "02 · dynamic quantization",
    "03": "03 · static QDQ and calibration",
    "03b": "03b · calibration deep dive (optional)",
    "04": "04 · parity",
    "05": "05 · hardware and speed",
    "06": "06 · past W8A8",
    keys.BENCH: "the benchmark (python -m course_lib bench)",
}

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
        f"; {size / 1e6:.1f} MB" if size else ""
    )


def _resnet_dynamic(latest: Latest) -> str | None:
    read = keys.RESNET_DYNAMIC
    speed = _metric(latest, read, "speedup_b32")
    fp, q = (_metric(latest, read, k) for k in ("fp32_accuracy", "int8_accuracy"))
    if speed is None:
        return None
    return f"{speed:.2f}x fp32 at batch 32; accuracy {fp:.2%} → {q:.2%} (500 validation images)"


def _mlp_dynamic(latest: Latest) -> str | None:
    speed = _metric(latest, keys.MLP_DYNAMIC, "speedup")
    return _fmt(speed, ".2f", "x fp32 on the two-moons MLP (500 points, 1 thread)")


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
    return f"{variant} static ResNet18: {100 * (fp - acc):+.2f} points, agreement {agree:.2%} (10,000 test images)"


def _four_bit(latest: Latest) -> str | None:
    read = keys.FOUR_BIT
    fp32_bytes, cos = _metric(latest, read, "fp32_bytes"), _metric(latest, read, "cos_min")
    size = ((_entry(latest, read) or {}).get("file") or {}).get("bytes")
    if fp32_bytes is None or size is None:
        return None
    return (
        f"4-bit text encoder (blocks of 32, asymmetric): {size / 1e6:.1f} MB, {size / fp32_bytes:.0%} of the "
        f"fp32 file's {fp32_bytes / 1e6:.1f} MB (an ideal 4-bit payload is 12.5 %); worst cosine {cos:.4f}"
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


def _cpu_speedup(latest: Latest) -> str | None:
    """The best INT8/fp32 ratio that can be claimed: the highest lower end of a ratio's interval.

    The largest median would pick whichever comparison was luckiest: on 2 shared cores one noisy
    comparison can double a ratio. Ratios recorded without an interval cannot be claimed."""
    speedup, low, high = keys.SPEED
    found = [  # INT8 against fp32 only: the bench also sets ONNX Runtime against PyTorch
        (key, e["metrics"])
        for key, e in latest.items()
        if (
            key[0] == keys.SPEED_05.lesson
            or (key[0] == keys.SPEED_BENCH.lesson and f"vs {keys.FP32_BASELINE}" in key[2])
        )
        and e.get("metrics", {}).get(speedup) is not None
        and e["metrics"].get(low) is not None
    ]
    if not found:
        return None
    key, m = max(found, key=lambda kv: kv[1][low])
    return (
        f"best INT8/fp32 ratio measured: {m[speedup]:.2f}x (90% interval {m[low]:.2f}–"
        f"{m[high]:.2f}; {key[1]}, {key[2]})"
    )


CLAIMS = (
    Claim(
        "02",
        "Text encoder, dynamic INT8: 120 → 31 MB, 2.5–3x faster on CPU, about 0.3 % top-1 drop",
        "seed 000",
        _text_encoder,
    ),
    Claim(
        "02",
        "ResNet18, dynamic INT8: 45 → 12 MB, 1.2x faster, about 0.1 % top-1 drop",
        "seed 000",
        _resnet_dynamic,
    ),
    Claim(
        "02", "NanoGPT, dynamic INT8: 0.84 → 0.03 MB, 1,292.2 → 1,877.0 ms (0.69x)", "seed 003", _mlp_dynamic
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
        "06",
        "Static parameters avoid that runtime range calculation but can mismatch new inputs. [...] Neither "
        "method has a universal accuracy or latency advantage",
        "seed 004",
        _static_text_encoder,
    ),
    Claim(
        "06",
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


def _key_figures(entry: dict) -> str:
    parts = []
    for key, value in sorted(entry.get("metrics", {}).items()):
        if isinstance(value, bool) or value is None:
            parts.append(f"{key} {value}")
        elif isinstance(value, float):
            pct = any(w in key for w in ("accuracy", "agreement", "nn_agreement"))
            parts.append(f"{key} {value:.2%}" if pct else f"{key} {value:.4g}")
        elif isinstance(value, int | str):
            parts.append(f"{key} {value}")
    return "; ".join(parts)


def build(entries: list[dict] | None = None, environment: dict | None = None) -> dict:
    """The report's content as plain data: environment, and per lesson its claims and figures."""
    entries = measure.load_results() if entries is None else entries
    environment = environment or measure.environment_fingerprint()
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
        figures = [
            {"model": k[1], "variant": k[2], "measured": _key_figures(e), "when": e.get("timestamp", "")}
            for k, e in latest.items()
            if k[0] == lesson
        ]
        sections.append(
            {
                "lesson": lesson,
                "title": LESSON_TITLES.get(lesson, lesson),
                "claims": claims,
                "figures": figures,
            }
        )
    return {"environment": environment, "entries": len(entries), "sections": sections}


def to_markdown(report: dict) -> str:
    env = report["environment"]
    versions = ", ".join(f"{k} {v}" for k, v in sorted(env.get("versions", {}).items()))
    lines = [
        "# onnx-quant-course: what this machine measured",
        "",
        f"**Environment** `{env.get('hash')}`: {env.get('cpu')} ({env.get('machine')}, {env.get('os')}), "
        f"{env.get('physical_cores')} physical / {env.get('logical_cores')} logical cores; INT8 features: "
        f"{', '.join(env.get('int8_features', [])) or 'none'}; {versions}.",
        "",
        f"{report['entries']} measurements from this environment. Quoted figures come from the course's "
        "seed documents and were **not** measured here; the column beside them was.",
    ]
    for s in report["sections"]:
        lines += ["", f"## {s['title']}", ""]
        if s["claims"]:
            lines += [measure.markdown_table(s["claims"]), ""]
        if s["figures"]:
            lines += [
                measure.markdown_table(
                    [{k: r[k] for k in ("model", "variant", "measured")} for r in s["figures"]]
                )
            ]
        else:
            lines += ["No measurements yet: run this lesson's notebook."]
    return "\n".join(lines) + "\n"


def _html_table(rows: list[dict]) -> str:
    if not rows:
        return ""
    cols = list(rows[0])
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(r[c]))}</td>" for c in cols) + "</tr>" for r in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def to_html(report: dict) -> str:
    env = report["environment"]
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>onnx-quant-course report</title>",
        "<style>body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em}"
        "table{border-collapse:collapse;margin:.5em 0 1.5em;font-size:.9em}td,th{border:1px solid #ccc;"
        "padding:.3em .6em;text-align:left;vertical-align:top}th{background:#f3f3f3}</style></head><body>",
        "<h1>onnx-quant-course: what this machine measured</h1>",
        f"<p><b>Environment</b> <code>{html.escape(str(env.get('hash')))}</code>: {html.escape(str(env.get('cpu')))}, "
        f"{env.get('physical_cores')} physical / {env.get('logical_cores')} logical cores; INT8 features: "
        f"{html.escape(', '.join(env.get('int8_features', [])) or 'none')}.</p>",
        f"<p>{report['entries']} measurements from this environment. Quoted figures come from the seed documents and "
        "were <b>not</b> measured here; the column beside them was.</p>",
    ]
    for s in report["sections"]:
        parts.append(f"<h2>{html.escape(s['title'])}</h2>")
        parts.append(_html_table(s["claims"]))
        figures = [{k: r[k] for k in ("model", "variant", "measured")} for r in s["figures"]]
        parts.append(
            _html_table(figures) if figures else "<p>No measurements yet: run this lesson's notebook.</p>"
        )
    parts.append("</body></html>")
    return "\n".join(parts)


def write(out_dir: Path | None = None, entries: list[dict] | None = None) -> dict[str, Path]:
    """Write report.md and report.html under `out_dir` (default build/); return their paths."""
    out_dir = Path(out_dir or BUILD)
    out_dir.mkdir(parents=True, exist_ok=True)
    report = build(entries)
    paths = {"markdown": out_dir / "report.md", "html": out_dir / "report.html"}
    paths["markdown"].write_text(to_markdown(report))
    paths["html"].write_text(to_html(report))
    return paths
