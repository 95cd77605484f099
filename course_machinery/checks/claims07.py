"""Lesson 07's sentences about its results, and the figures each section's check cell measures.

Each sentence here is written once in the lesson's markdown, with `<!-- claim: name -->` after it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..claims import (
    NOT_SATURATING,
    X86,
    Book,
    about,
    at_least,
    far,
    faster,
    interval,
    not_measured,
    slower,
)
from ..claims import speed as interval_of

book = Book("07", timed=("audit_choice", "audit_seconds"))

# Seed 003's NanoGPT (quoted in the lesson): 0.84 MB in fp32, 0.03 MB in dynamic INT8.
QUOTE_FP32_MB, QUOTE_INT8_MB = 0.84, 0.03


# 1. The seed's NanoGPT, trained here ----------------------------------------------------------------
@book.figures("1")
def _(record: dict, run_work: Any) -> dict:
    return {
        "parameters": int(record["parameters"]),
        "steps": int(record["steps"]),
        "train_seconds": float(record["seconds"]),
        "perplexity": float(record["onnx"]["validation_perplexity"]),
        "unigram_perplexity": float(record["unigram_perplexity"]),
        "multiply_adds_millions": run_work.multiply_adds / 1e6,
        # the smallest file its weights can make at one byte each, in MB (1 MB = 1e6 bytes)
        "int8_floor_mb": int(record["parameters"]) / 1e6,
        "quote_int8_mb": QUOTE_INT8_MB,
    }


@book.sentence(
    "1",
    "quote-below-floor",
    "The quote's INT8 file holds fewer bytes than its weights fill at one byte each",
    shows="the quote's {quote_int8_mb} MB against a floor of {int8_floor_mb:.2f} MB",
    depends="weights",
)
def _(f):
    return f["quote_int8_mb"] < f["int8_floor_mb"]


@book.sentence(
    "1",
    "trained-far-below",
    "Trained, the model's perplexity lies far below that of guessing from character frequencies alone",
    shows="{perplexity:.2f} against {unigram_perplexity:.1f}",
    depends="weights",
)
def _(f):
    return far(f["unigram_perplexity"] / f["perplexity"])


@book.sentence(
    "1",
    "work-per-run",
    "One run of 64 characters takes about 13 million multiply-adds",
    shows="{multiply_adds_millions:.1f} million",
    depends="runtime",
)
def _(f):
    return about(f["multiply_adds_millions"], 13)


# 2. Quantized as lessons 02 and 03 do --------------------------------------------------------------
@book.figures("2")
def _(fp32: Path, dynamic: Path, ppl: dict, speed: dict, integer_ms: float, profile: Any) -> dict:
    fp32_bytes, dynamic_bytes = Path(fp32).stat().st_size, Path(dynamic).stat().st_size
    dynamic_b1, static_b1 = speed[1]["dynamic"], speed[1]["static, mask in float"]
    return {
        "fp32_mb": fp32_bytes / 1e6,
        "dynamic_mb": dynamic_bytes / 1e6,
        "shrink": fp32_bytes / dynamic_bytes,
        "quote_shrink": QUOTE_FP32_MB / QUOTE_INT8_MB,
        "ppl_fp32": ppl["fp32"],
        "ppl_dynamic": ppl["dynamic"],
        "ppl_static": ppl["static"],
        "ppl_static_fixed": ppl["static, mask in float"],
        "dynamic_b1_speed": interval_of(dynamic_b1),
        "static_b1_speed": interval_of(static_b1),
        "dynamic_b32_speed": interval_of(speed[32]["dynamic"]),
        "static_b32_speed": interval_of(speed[32]["static, mask in float"]),
        "matmul_share": integer_ms / profile.total_ms,
    }


@book.sentence(
    "2",
    "shrink-far-less",
    "The dynamic INT8 file shrinks far less than the quote's",
    shows="{fp32_mb:.2f} MB to {dynamic_mb:.2f} MB, {shrink:.1f}x smaller; the quote's {quote_shrink:.0f}x",
    depends="runtime",
)
def _(f):
    return far(f["quote_shrink"] / f["shrink"])


@book.sentence(
    "2",
    "dynamic-within-2pct",
    "Dynamic INT8 keeps the perplexity within 2% of fp32's",
    shows="{ppl_dynamic:.3f} against {ppl_fp32:.3f}",
    scope=NOT_SATURATING,
    depends=("weights", "cpu"),
)
def _(f):
    return f["ppl_dynamic"] <= 1.02 * f["ppl_fp32"]


@book.sentence(
    "2",
    "static-default-breaks",
    "Static INT8 with the default settings more than doubles the perplexity",
    shows="{ppl_static:.1f} against {ppl_fp32:.3f}",
    depends=("weights", "runtime"),
)
def _(f):
    return f["ppl_static"] > 2 * f["ppl_fp32"]


@book.sentence(
    "2",
    "mask-in-float-back",
    "With the mask's nodes in float, static INT8 comes back within 5% of fp32's perplexity",
    shows="{ppl_static_fixed:.3f} against {ppl_fp32:.3f}",
    scope=NOT_SATURATING,
    depends=("weights", "cpu"),
)
def _(f):
    return f["ppl_static_fixed"] <= 1.05 * f["ppl_fp32"]


@book.sentence(
    "2",
    "dynamic-b1-faster",
    "Dynamic INT8 runs faster than fp32 at batch 1",
    shows="{dynamic_b1_speed}",
    scope=X86,
    depends="speed",
)
def _(f):
    return faster(f["dynamic_b1_speed"])


@book.sentence(
    "2",
    "static-mask-slower",
    "Static INT8 with the mask in float runs slower than fp32 at batch 1",
    shows="{static_b1_speed}",
    scope=X86,
    depends="speed",
)
def _(f):
    return slower(f["static_b1_speed"])


@book.sentence(
    "2",
    "matmuls-under-half",
    "The quantized MatMuls, with their inputs' quantization, take less than half of the dynamic file's kernel time",
    shows="{matmul_share:.0%}",
    depends="speed",
)
def _(f):
    return f["matmul_share"] < 0.5


# 3. The audit ----------------------------------------------------------------------------------------
def _best_at(result: Any, batch: int) -> tuple[str, dict]:
    """The recommended variant and its speed at `batch`; without a recommendation, the passing
    variant whose interval reaches highest at its low end (or fp32's own 1x when none passes)."""
    timed = {v.name: v.speed[batch] for v in result.variants if v.quality is not None and batch in v.speed}
    chosen = result.decision.recommended
    if chosen in timed:
        return chosen, interval_of(timed[chosen])
    passing = [v for v in result.variants if v.quality is not None and v.quality.passes and v.name in timed]
    if not passing:
        return "none", interval(1.0, 1.0, 1.0, "x")
    best = max(passing, key=lambda v: timed[v.name].speedup_low)
    return "none", interval_of(timed[best.name])


@book.figures("3")
def _(result: Any) -> dict:
    choice, chosen_speed = _best_at(result, result.decision.batch)
    return {
        "audit_choice": choice,
        "audit_batch": result.decision.batch,
        "audit_choice_speed": chosen_speed,
        "audit_seconds": float(result.seconds),
    }


@book.sentence(
    "3",
    "audit-recommends",
    "The audit recommends a variant at least 5% faster than fp32 over its whole interval at batch 1",
    shows="{audit_choice} at batch {audit_batch}: {audit_choice_speed}",
    scope=X86,
    depends="speed",
)
def _(f):
    return f["audit_batch"] == 1 and f["audit_choice"] != "none" and at_least(f["audit_choice_speed"], 1.05)


# 4. Your own model -----------------------------------------------------------------------------------
@book.figures("4")
def _(yours: Any, model: Any) -> dict:
    from course_machinery.models import get

    if Path(model).resolve() != Path(get("fashion_resnet18").onnx).resolve():
        reason = "you audited your own model; these sentences are about the course's ResNet18"
        return {
            "resnet_variants": not_measured(reason),
            "resnet_dynamic_built": not_measured(reason),
            "resnet_4bit_built": not_measured(reason),
            "resnet_choice": not_measured(reason),
        }
    kinds = {v.kind for v in yours.variants}
    return {
        "resnet_variants": ", ".join(v.name for v in yours.variants),
        "resnet_dynamic_built": "dynamic" in kinds,
        "resnet_4bit_built": "4-bit" in kinds,
        "resnet_choice": yours.decision.recommended or "none",
    }


@book.sentence(
    "4",
    "resnet-no-dynamic",
    "On the ResNet18 the audit builds neither dynamic INT8 nor 4-bit",
    shows="built: {resnet_variants}",
    depends="runtime",
)
def _(f):
    return not f["resnet_dynamic_built"] and not f["resnet_4bit_built"]


@book.sentence(
    "4",
    "resnet-static-u8s8",
    "On the ResNet18 the audit recommends a static U8S8 file",
    shows="{resnet_choice}",
    scope=X86,
    depends=("speed", "cpu"),
)
def _(f):
    return f["resnet_choice"].startswith("static U8S8")


@book.end
def _(fp32: Path, dynamic: Path, speed: dict, ppl: dict, threads: int) -> None:
    """The NanoGPT's dynamic INT8 in the course's results store: the report sets it beside seed 003's quote."""
    from course_machinery import nanogpt, results

    comparison = speed[1]["dynamic"]
    results.record(
        lesson="07",
        model=nanogpt.NAME,
        variant="dynamic int8",
        path=dynamic,
        metrics={
            "fp32_bytes": Path(fp32).stat().st_size,
            "int8_bytes": Path(dynamic).stat().st_size,
            "speedup_b1": comparison.speedup,
            "speedup_b1_low": comparison.speedup_low,
            "speedup_b1_high": comparison.speedup_high,
            "fp32_perplexity": ppl["fp32"],
            "perplexity": ppl["dynamic"],
        },
        options={"threads": threads, "batch": 1, "characters": 64},
    )
