"""Which INT8 text encoder meets lesson 06b's target on this CPU, if any?

    python benchmarks/text_encoder_target.py [--runs-b1 30] [--runs-b16 10]

The target (issue 14): worst cosine >= 0.99 against the optimized fp32 graph over the 200
held-out sentences (the 300 of lesson 02, less the first 100 that static INT8 calibrates on),
at least 1.5x the fp32 graph at batch 16 and 1.3x at batch 1, sequence 128, each variant timed
in turn with fp32 (`measure.compare_latency`). The candidates are the course's fast ones and
the ones that buy quality back:

- dynamic INT8, per-channel (lesson 02's choice);
- the same with the FFN output MatMuls in float (the MatMuls after GELU), and with the first
  layer's FFN input MatMul in float as well;
- static INT8 (lesson 06b section 2's recipe);
- 8-bit MatMulNBits, blocks of 32, accuracy_level 4 (weight-only 8-bit).

It prints one row per variant and names those that meet the target: the worst cosine, and the
whole 90% interval of each speed ratio at or above its target. A variant whose interval reaches
both sides of a target is "unsettled" (run again with more runs). Figures are this machine's: the
CPU is named in the first line. About 2 to 6 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnxruntime.quantization import (  # noqa: E402
    CalibrationDataReader,
    QuantFormat,
    QuantType,
    quantize_dynamic,
    quantize_static,
)
from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer  # noqa: E402
from onnxruntime.quantization.shape_inference import quant_pre_process  # noqa: E402

from course_lib import measure
from course_machinery import (
    hardware,
    models,  # noqa: E402
)
from course_machinery import text_encoder as te  # noqa: E402

TARGET_COS, TARGET_B16, TARGET_B1 = 0.99, 1.5, 1.3


class Sentences(CalibrationDataReader):
    def __init__(self, feed: dict[str, np.ndarray], batch: int = 4):
        self.feed, self.batch = feed, batch
        self.rewind()

    def get_next(self):
        start = next(self.starts, None)
        return None if start is None else {k: v[start : start + self.batch] for k, v in self.feed.items()}

    def rewind(self):
        self.starts = iter(range(0, len(self.feed["input_ids"]), self.batch))


def build(folder: Path, optimized: Path, calibration: dict) -> dict[str, Path]:
    matmuls = [n.name for n in onnx.load(str(optimized)).graph.node if n.op_type == "MatMul"]
    ffn_out = [n for n in matmuls if "/output/dense/" in n and "attention" not in n]
    dynamic = {
        "dynamic INT8, per-channel": [],
        "dynamic INT8, FFN outputs in float": ffn_out,
        "dynamic INT8, FFN outputs and layer 0's FFN input in float": ffn_out
        + [n for n in matmuls if "layer.0/intermediate" in n],
    }
    files = {}
    for i, (label, excluded) in enumerate(dynamic.items()):
        files[label] = folder / f"dynamic.{i}.onnx"
        quantize_dynamic(
            optimized,
            files[label],
            weight_type=QuantType.QInt8,
            per_channel=True,
            nodes_to_exclude=excluded,
            extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
        )
    pre = folder / "pre.onnx"
    quant_pre_process(optimized, pre)
    files["static INT8 (lesson 06b)"] = folder / "static.onnx"
    quantize_static(
        pre,
        files["static INT8 (lesson 06b)"],
        Sentences(calibration),
        quant_format=QuantFormat.QDQ,
        op_types_to_quantize=["MatMul"],
        per_channel=True,
        activation_type=QuantType.QUInt8,
        weight_type=QuantType.QInt8,
        extra_options={"OpTypesToExcludeOutputQuantization": ["MatMul"]},
    )
    quantizer = MatMulNBitsQuantizer(
        onnx.load(str(optimized)), bits=8, block_size=32, is_symmetric=False, accuracy_level=4
    )
    quantizer.process()
    files["8-bit MatMulNBits, blocks of 32, accuracy_level 4"] = folder / "nbits8.onnx"
    quantizer.model.save_model_to_file(str(folder / "nbits8.onnx"), use_external_data_format=False)
    return files


def verdict(cos: float, b1: measure.LatencyComparison, b16: measure.LatencyComparison) -> str:
    """'yes' when the worst cosine and both speed intervals clear the target, 'no' when the cosine
    misses or a whole interval lies below its target, 'unsettled' when an interval straddles it."""
    fast = [b16.speedup_at_least(TARGET_B16), b1.speedup_at_least(TARGET_B1)]  # True, False or None
    if cos < TARGET_COS or False in fast:
        return "no"
    return "yes" if all(fast) else "unsettled"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs-b1", type=int, default=30)
    parser.add_argument("--runs-b16", type=int, default=10)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    logging.getLogger().setLevel(logging.ERROR)
    print(f"CPU: {hardware.cpu_summary()}; {args.threads} threads; sequence 128")
    paths = models.get(te.NAME, log=lambda _: None).onnx_files
    sentences = te.load_sentences(300)
    calibration = te.encode(sentences[:100], max_length=128, padding="max_length")
    feed = te.encode(sentences[100:], max_length=128, padding="max_length")
    ref = te.onnx_embed(paths["optimized"], feed)
    with tempfile.TemporaryDirectory() as tmp:
        files = build(Path(tmp), paths["optimized"], calibration)
        met, unsettled = [], []
        print("| variant | cos min | ×fp32 b1 | ×fp32 b16 | meets |")
        print("|---|---|---|---|---|")
        for label, path in files.items():
            cos = float((ref * te.onnx_embed(path, feed)).sum(1).min())
            ratios = {}
            for batch, runs in ((1, args.runs_b1), (16, args.runs_b16)):
                ratios[batch] = measure.compare_latency(
                    {"fp32": paths["optimized"], "int8": path},
                    lambda n: {k: v[:n] for k, v in feed.items()},
                    batch_size=batch,
                    threads=args.threads,
                    warmup=2,
                    runs=runs,
                )
            ok = verdict(cos, ratios[1], ratios[16])
            met += [label] if ok == "yes" else []
            unsettled += [label] if ok == "unsettled" else []
            cells = [str(r) for r in (ratios[1], ratios[16])]
            print(f"| {label} | {cos:.4f} | {cells[0]} | {cells[1]} | {ok} |", flush=True)
    target = f"worst cosine >= {TARGET_COS}, >= {TARGET_B16}x at batch 16 and >= {TARGET_B1}x at batch 1"
    print(f"meet the target ({target}): {', '.join(met) if met else 'none, on this CPU'}")
    print(f"unsettled (a speed interval reaches both sides of its target): {', '.join(unsettled) or 'none'}")


if __name__ == "__main__":
    main()
