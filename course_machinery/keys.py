"""The results the course report reads, typed once: lesson, model, variant and metric.

A lesson saves its figures with `results.record(lesson=..., model=..., variant=...,
metrics={...})`; the report finds them again by the same strings. They are written here, one
`Read` per claim, and the report looks nothing up that is not declared here.
tests/test_report_keys.py parses every lesson's `results.record` calls (and the benchmark's) and
checks that each key read here is one that is written.
"""

from __future__ import annotations

from dataclasses import dataclass

from course_lib.names import MOONS_MLP, NANOGPT, RESNET18, TEXT_ENCODER

BENCH = "bench"  # the benchmark's entries, under this lesson name
FP32_BASELINE = (
    "onnxruntime fp32"  # the benchmark's name for the fp32 graph each INT8 variant is timed against
)


@dataclass(frozen=True)
class Read:
    """Entries the report reads: one lesson and model (None: any), these variants ((): any), these metrics."""

    lesson: str
    model: str | None
    variants: tuple[str, ...]
    metrics: tuple[str, ...]


SPEED = ("speedup", "speedup_low", "speedup_high")  # a ratio of medians and its 90% interval

TEXT_ENCODER_DYNAMIC = Read(
    "02", TEXT_ENCODER, ("dynamic int8 per-channel",), ("speedup_vs_optimized_b16", "cos_min")
)
RESNET_DYNAMIC = Read("02b", RESNET18, ("dynamic int8",), ("speedup_b32", "fp32_accuracy", "int8_accuracy"))
MLP_DYNAMIC = Read("02", MOONS_MLP, ("dynamic int8",), ("speedup",))
# Lessons 03 and 04: the variant each shipped, with reduce_range where the CPU's U8S8 kernels saturate.
RESNET_STATIC = Read("03", RESNET18, ("QDQ U8S8", "QDQ U8S8, reduce_range"), ("speedup_b64", "size_ratio"))
RESNET_ACCEPTED = Read(
    "04", RESNET18, ("per-channel", "per-channel, reduce_range"), ("accuracy", "fp32_accuracy", "agreement")
)
SPEED_05 = Read("05", None, (), SPEED)  # every INT8 variant of lesson 05 against fp32
SPEED_05B = Read("05b", None, (), SPEED)  # lesson 05b: the text encoder over sequence lengths
SPEED_05C = Read("05c", None, (), SPEED)  # lesson 05c: the QDQ files on OpenVINO
# Lesson 06: the 4-bit weight-only text encoder, blocks of 32, asymmetric, beside its fp32 file.
FOUR_BIT = Read("06", TEXT_ENCODER, ("4-bit, blocks of 32, asymmetric",), ("fp32_bytes", "cos_min"))
# Lesson 06b: static INT8 on the text encoder beside dynamic INT8, both on the held-out sentences.
STATIC_TEXT_ENCODER = Read(
    "06b",
    TEXT_ENCODER,
    ("static INT8, representative calibration", "dynamic INT8, per-channel (lesson 02)"),
    ("cos_min", "speedup_b16"),
)
# Lesson 06c: 4-bit weights on the ResNet18, after training and with quantization-aware training.
QAT = Read(
    "06c",
    RESNET18,
    ("QAT (10 steps), 4-bit weights", "PTQ, 4-bit weights"),
    ("accuracy", "fp32_accuracy", "train_seconds", "codes_differing", "codes"),
)
# Lesson 07: the seed's NanoGPT size, trained here, and its dynamic INT8 file at batch 1.
NANOGPT_DYNAMIC = Read(
    "07",
    NANOGPT,
    ("dynamic int8",),
    (
        "fp32_bytes",
        "int8_bytes",
        "speedup_b1",
        "speedup_b1_low",
        "speedup_b1_high",
        "fp32_perplexity",
        "perplexity",
    ),
)
SPEED_BENCH = Read(BENCH, None, (), SPEED)  # those of the benchmark against FP32_BASELINE

READS = (
    TEXT_ENCODER_DYNAMIC,
    RESNET_DYNAMIC,
    MLP_DYNAMIC,
    RESNET_STATIC,
    RESNET_ACCEPTED,
    SPEED_05,
    SPEED_05B,
    SPEED_05C,
    FOUR_BIT,
    STATIC_TEXT_ENCODER,
    QAT,
    NANOGPT_DYNAMIC,
    SPEED_BENCH,
)


# ------------------------------------------------------------------ how the report shows a metric
@dataclass(frozen=True)
class Column:
    """A metric as a table column: its heading, with the unit, and how its values read.

    kind: "ratio" (×, 3 significant figures), "percent" (a fraction shown ×100, 2 decimals),
    "percent3" (a fraction ×100, 3 significant figures), "ms", "seconds", "megabytes" (bytes shown
    in MB), "cosine" (4 decimals), "count", "yes/no". `interval`: the metrics holding the 90%
    interval of a ratio, shown in brackets beside it.
    """

    heading: str
    kind: str
    interval: tuple[str, str] | None = None


def _speed(heading: str, key: str | None = None) -> Column:
    return Column(heading, "ratio", None if key is None else (f"{key}_low", f"{key}_high"))


# Every metric a lesson or the benchmark records (tests/test_report_keys.py checks that none is
# missing), in the order the report's tables show them. A ratio's "_low"/"_high" ride with it.
COLUMNS: dict[str, Column] = {
    "speedup": _speed("speed-up (×)", "speedup"),
    "speedup_b1": _speed("speed-up, batch 1 (×)", "speedup_b1"),
    "speedup_short": _speed("speed-up, one short sentence (×)"),
    "speedup_b16": _speed("speed-up, batch 16 (×)", "speedup_b16"),
    "speedup_b32": _speed("speed-up, batch 32 (×)"),
    "speedup_b64": _speed("speed-up, batch 64 (×)", "speedup_b64"),
    "speedup_vs_optimized_b1": _speed("speed-up vs optimized fp32, batch 1 (×)"),
    "speedup_vs_optimized_b16": _speed("speed-up vs optimized fp32, batch 16 (×)"),
    "speedup_vs_raw_b1": _speed("speed-up vs exported fp32, batch 1 (×)"),
    "speedup_vs_torch_int8_b1": _speed("speed-up vs PyTorch dynamic INT8, batch 1 (×)"),
    "fp32_ms": Column("fp32 (ms)", "ms"),
    "int8_ms": Column("INT8 (ms)", "ms"),
    "accuracy": Column("accuracy (%)", "percent"),
    "int8_accuracy": Column("INT8 accuracy (%)", "percent"),
    "fp32_accuracy": Column("fp32 accuracy (%)", "percent"),
    "agreement": Column("top-1 agreement with fp32 (%)", "percent"),
    "cos_min": Column("worst cosine to fp32", "cosine"),
    "cos_mean": Column("mean cosine to fp32", "cosine"),
    "nn_agreement": Column("same nearest neighbour (%)", "percent3"),
    "nn": Column("same nearest neighbour (%)", "percent3"),
    "max_rel_drift": Column("max relative drift (%)", "percent3"),
    "size_ratio": Column("file (% of fp32)", "percent3"),
    "fp32_bytes": Column("fp32 file (MB)", "megabytes"),
    "int8_bytes": Column("INT8 file (MB)", "megabytes"),
    "perplexity": Column("perplexity", "number"),
    "fp32_perplexity": Column("fp32 perplexity", "number"),
    "peak_memory_bytes": Column("peak memory (MB)", "megabytes"),
    "peak_memory_b1_bytes": Column("peak memory, batch 1 (MB)", "megabytes"),
    "calibration_s": Column("calibration (s)", "seconds"),
    "train_seconds": Column("training (s)", "seconds"),
    "train_images": Column("training images", "count"),
    "images": Column("test images", "count"),
    "codes_differing": Column("INT4 codes differing from training", "count"),
    "codes": Column("INT4 codes", "count"),
    "passes_acceptance": Column("passes acceptance", "yes/no"),
    "meets_course_target": Column("meets the course target", "yes/no"),
}
INTERVAL_METRICS = {k for c in COLUMNS.values() if c.interval for k in c.interval}
