"""The audit's report: markdown (read anywhere), HTML (markdown-it-py, when installed) and JSON.

to_markdown       the whole report: samples, where the work is, the table, every verdict
                  explained with a link to the lesson that teaches it, skipped variants, debugging
write             audit.md, audit.html and audit.json in the audit's folder
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from course_lib import measure
from course_lib.units import format_duration
from course_machinery import html_page

from .decide import LESSONS, MIN_SPEEDUP, ratio_text, rule_words
from .findings import AuditResult, runtime_line, summary_markdown

LESSON_TITLES = {
    "02_dynamic_quantization.ipynb": "lesson 02, dynamic quantization",
    "02b_dynamic_in_depth.ipynb": "lesson 02b, dynamic quantization in depth",
    "03_static_qdq.ipynb": "lesson 03, static QDQ and calibration",
    "04_parity.ipynb": "lesson 04, parity",
    "05_hardware_and_speed.ipynb": "lesson 05, hardware and speed",
    "04b_where_errors_gather.ipynb": "lesson 04b, where errors gather",
    "05c_a_second_runtime.ipynb": "lesson 05c, a second runtime: OpenVINO",
    "06_past_w8a8.ipynb": "lesson 06, past W8A8",
    "06b_past_w8a8_in_depth.ipynb": "lesson 06b, past W8A8 in depth (static INT8 on a transformer)",
}

# What each kind of verdict means, in the course's words.
MEANING = {
    "recommended": "Ship this one: it answers as fp32 does by the quality rule, the whole interval of its speed "
    f"ratio lies at or above {MIN_SPEEDUP:.2f}x, and no other passing variant is clearly faster.",
    "tied": "As fast as the choice within the noise of this run: the two intervals overlap, so neither can be "
    "called faster. The choice is the one closer to fp32 (then the smaller file).",
    "slower than the choice": "Passes, and is clearly faster than fp32, but its interval lies wholly below the "
    "choice's.",
    "not faster": f"Passes the quality rule, but the interval of its speed ratio reaches below {MIN_SPEEDUP:.2f}x: "
    f"it is not {MIN_SPEEDUP - 1:.0%} faster however this run's noise fell, so on this CPU it buys a smaller file, "
    "not speed worth a second file. Time it on the machine you deploy on.",
    "not timed": "Passes, but no timing exists at the batch the decision is made at.",
    "fails": "Answers too differently from fp32 on the evaluation samples; the rule's advice says where to look "
    "first.",
    "refused": "The runtime would not compile this file with these settings on this CPU: a valid file can be "
    "refused on one CPU and run on the next, since a runtime picks its kernels per CPU and precision.",
}


# The same kinds across runtimes, where every ratio is against ONNX Runtime's fp32.
RUNTIME_MEANING = {
    "recommended": "Ship this file on this runtime: it passes the quality rule, and the whole interval of its "
    f"speed ratio against ONNX Runtime's fp32 lies at or above {MIN_SPEEDUP:.2f}x, and no other row is clearly "
    "faster.",
    "not faster": f"Passes the quality rule, but the interval of its speed ratio against ONNX Runtime's fp32 reaches "
    f"below {MIN_SPEEDUP:.2f}x on this CPU.",
}


def _lesson_link(lesson: str, out: Path) -> str:
    """'[lesson 04, parity](../../notebooks/04_parity.ipynb)': relative to the report when this is
    the course's checkout, else the notebook's file name."""
    from course_lib.data import source_checkout

    title = LESSON_TITLES.get(lesson, lesson)
    root = source_checkout()
    if root is not None and (root / "notebooks" / lesson).is_file():
        return f"[{title}]({Path(os.path.relpath(root / 'notebooks' / lesson, out)).as_posix()})"
    return f"{title} (`notebooks/{lesson}`)"


def _runtime_table(result: AuditResult) -> str:
    """The second runtime's rows: each file compiled (or refused), its quality, its speed against
    ONNX Runtime's fp32 at the decision's batch, and its verdict across runtimes."""
    d = result.runtime_decision
    batch = d.batch if d else result.decision.batch
    rows = []
    for r in result.runtime_runs:
        kind, _ = d.verdicts.get(r.name, ("-", "")) if d else ("-", "")
        rows.append(
            {
                "run": r.name,
                "file": Path(r.path).name,
                "settings": ", ".join(f"{k}={v}" for k, v in r.settings.items()) or "default",
                "float precision": r.precision or "-",
                "quality": "-"
                if r.quality is None
                else ("✔ " if r.quality.passes else "✘ ") + r.quality.text,
                f"speed, batch {batch} (ONNX Runtime fp32 = 1.00x)": ratio_text(r.speed_tuple(batch))
                if batch in r.speed
                else f"refused: {r.refusal.said}"
                if r.refusal
                else "-",
                "verdict": kind,
            }
        )
    return measure.markdown_table(rows)


def to_markdown(result: AuditResult) -> str:
    d, out = result.decision, result.out
    shares = result.shares
    lines = [
        f"# Audit of {result.model.name}",
        "",
        summary_markdown(result).rstrip(),
        "",
        f"CPU: {result.cpu}. Speed is fp32's median time over the variant's, timed in turn with fp32 "
        f"(`measure.compare_latency`), with a 90 % bootstrap interval; the decision is made at {d.decided_at}, "
        f"and a variant counts as faster only when it is {rule_words(d.min_speedup)} "
        f"(`LatencyComparison.speedup_at_least({d.min_speedup:.2f})`, as lessons 02 and 05 ask). Peak memory: "
        f"resident memory a fresh process adds to load and run batch "
        f"{max(result.batches)}. Integer kernels: compute ops of the graph ONNX Runtime runs that multiply in "
        f"integers. The audit took {format_duration(result.seconds)}.",
        "",
        "## The samples and the rule",
        "",
        f"- {result.split.describe()}.",
        f"- Quality decided by {result.decided_by or result.rule}.",
        f"- Quality rule: {result.rule}.",
        *[f"- {note[0].upper()}{note[1:]}." for note in result.notes[1:]],
        "",
        "## Where the work is",
        "",
        f"Multiply-adds of one sample ({shares.how}): "
        + ", ".join(f"{op} {n / 1e6:,.1f} M" for op, n in sorted(shares.multiply_adds.items()))
        + f"; MatMul/Gemm do {shares.share('MatMul', 'Gemm'):.0%} of them, and MatMuls hold "
        f"{shares.share('MatMul', of='weights'):.0%} of the weights. That decides which quantizers fit: dynamic "
        f"quantization pays where MatMuls do the work ({_lesson_link('02_dynamic_quantization.ipynb', out)}), "
        f"static QDQ fits both ({_lesson_link('03_static_qdq.ipynb', out)}), 4-bit weight-only needs the weights "
        f"in MatMuls ({_lesson_link('06_past_w8a8.ipynb', out)}).",
        "",
        "## Every verdict, explained",
        "",
    ]
    for v in result.variants:
        kind, text = d.verdicts.get(v.name, ("-", ""))
        lesson = LESSONS.get(kind, v.lesson)
        lines.append(f"- **{v.name}**: {text}. {MEANING.get(kind, '')} See {_lesson_link(lesson, out)}.")
        if v.note:
            lines.append(f"  Built with: {v.note}; see {_lesson_link(v.lesson, out)}.")
        if v.keep_float_why:
            lines.append(
                f"  Kept in float: {v.keep_float_why} ({_lesson_link('06b_past_w8a8_in_depth.ipynb', out)})."
            )
        if v.sensitivity is not None:
            lines.append(
                f"  qdq_loss_debug ranked its layers by {v.sensitivity.ranked_by} and proposed keeping "
                f"{', '.join(v.sensitivity.proposal)} in float; the rerun is the row '{v.name}, "
                f"{len(v.sensitivity.proposal)} layers in float'."
            )
        if v.excluded:
            before = next((u for u in result.variants if v.name.startswith(u.name + ",")), None)
            if before is not None and v.coverage["integer"] >= before.coverage["integer"]:
                lines.append(
                    f"  The session still runs {v.coverage['integer']} integer compute ops, as many as before: "
                    "ONNX Runtime fused the excluded layers with the Quantize/DequantizeLinear nodes around them "
                    "into integer kernels, so their float weights were quantized when the session started."
                )
    if not result.variants:
        lines.append("- No variant was measured.")
    lines += _runtime_section(result)
    lines += ["", "## Skipped", ""]
    lines += [f"- **{s.name}**: {s.reason}. See {_lesson_link(s.lesson, out)}." for s in result.skipped] or [
        "- Nothing: every variant that fits was built and measured."
    ]
    debugged = [v for v in result.variants if v.sensitivity is not None]
    if debugged:
        lines += [
            "",
            "## Debugging with qdq_loss_debug",
            "",
            "For each static variant that failed, ONNX Runtime's `qdq_loss_debug` compared it with fp32 tensor by "
            "tensor on calibration samples (SQNR in dB, higher is better; each bit is about 6 dB). A first layer "
            "whose input is tens of dB below the rest points at the calibration data, not at layers "
            f"({_lesson_link('04b_where_errors_gather.ipynb', out)}). The worst layers were kept in float "
            "(`nodes_to_exclude`) and the variant built and measured once more: the row named '…, N layers in float'.",
        ]
        for v in debugged:
            s = v.sensitivity
            first = "-" if s.first_input_sqnr is None else f"{s.first_input_sqnr:.1f} dB"
            lines += [
                "",
                f"### {v.name}",
                "",
                f"{s.samples} samples; first layer's input SQNR {first}; ranked by {s.ranked_by}.",
                "",
            ]
            rows = [
                {
                    "layer": layer["node"],
                    "op": layer["op"],
                    "weight SQNR": _db(layer["weight_sqnr_db"]),
                    "input SQNR": _db(layer["input_sqnr_db"]),
                    "output SQNR": _db(layer["output_sqnr_db"]),
                    "lost across it": _db(layer["loss_db"]),
                    "proposed": "keep in float" if layer["node"] in s.proposal else "",
                }
                for layer in s.layers[:6]
            ]
            lines.append(measure.markdown_table(rows))
    if result.rebuild:
        lines += [
            "",
            "## Rebuild the recommended file",
            "",
            f"The calls that made `{result.recommended_path.name}` from `{result.model.name}`, with the options the "
            "audit used (audit.json holds each variant's call as data, under `recipe`):",
            "",
            "```python",
            result.rebuild.rstrip(),
            "```",
        ]
    lines += [
        "",
        "## Files",
        "",
        f"- Variants: `{out / 'variants'}`; the pre-processed fp32 file: `{out / 'work'}`.",
        f"- This report as data: `{out / 'audit.json'}`.",
    ]
    if result.recommended_path:
        lines.append(f"- The recommended file: `{result.recommended_path}`.")
    return "\n".join(lines).rstrip() + "\n"


def _runtime_section(result: AuditResult) -> list[str]:
    """The second runtime: what ran, its table, and each verdict with lesson 05c's link."""
    out = result.out
    lines = ["", "## A second runtime", ""]
    if result.runtime_decision is None:
        return [
            *lines,
            f"{result.runtime_note[0].upper()}{result.runtime_note[1:]}; see {_lesson_link('05c_a_second_runtime.ipynb', out)}.",
        ]
    d = result.runtime_decision
    lines += [
        f"{result.runtime_note[0].upper()}{result.runtime_note[1:]}. Every ratio is against ONNX Runtime's fp32, so "
        "the two runtimes' rows compare; the same quality rule and the same speed rule decide across them.",
        "",
        runtime_line(result),
        "",
        _runtime_table(result),
        "",
    ]
    # The ONNX Runtime rows were explained above; here OpenVINO's, and the choice wherever it runs.
    ov_names = {r.name for r in result.runtime_runs}
    for name, (kind, text) in d.verdicts.items():
        if name not in ov_names and kind != "recommended":
            continue
        # Every verdict across runtimes is lesson 05c's (it compares the two); a failed rule is also lesson 04's.
        also = f" The rule: {_lesson_link(LESSONS['fails'], out)}." if kind == "fails" else ""
        lines.append(
            f"- **{name}**: {text}. {RUNTIME_MEANING.get(kind, MEANING.get(kind, ''))} See "
            f"{_lesson_link('05c_a_second_runtime.ipynb', out)}.{also}"
        )
    return lines


def _db(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _json_default(value: Any) -> Any:
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    return str(value)


def write(result: AuditResult) -> dict[str, Path]:
    """audit.md, audit.html (when markdown-it-py is installed) and audit.json under result.out."""
    out = result.out
    markdown = to_markdown(result)
    files = {"markdown": out / "audit.md", "json": out / "audit.json"}
    files["markdown"].write_text(markdown, encoding="utf-8")
    files["json"].write_text(
        json.dumps(result.to_dict(), indent=2, default=_json_default) + "\n", encoding="utf-8"
    )
    page = html_page.markdown_page(markdown, f"Audit of {result.model.name}")  # None without markdown-it
    if page is not None:
        files["html"] = out / "audit.html"
        files["html"].write_text(page, encoding="utf-8")
    return files
