"""Is `measure.compare_latency` steady on this machine? Its ratios against standalone medians.

    python benchmarks/latency_stability.py [--repeats 5] [--batches 1 64]

For the course ResNet18 in fp32 and in this CPU's production INT8 variant, at each batch size:

- standalone: each model alone in a fresh process (`measure.measure_latency`, many runs, pool
  threads not spinning), in turn, `--repeats` times; the ratio of the medians of those medians
  is the reference;
- `compare_latency` in one process, `--repeats` times, with ONNX Runtime's pool threads allowed
  to spin after a run and with spinning off.

It prints each comparison's ratio and interval, the spread over repeats, and how far the ratios
fall from the standalone one. Figures are this machine's: the CPU is named in the first line.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from course_lib import data, measure
from course_machinery import (
    hardware,
    variants,  # noqa: E402
)

STANDALONE = r"""
import json, sys
import numpy as np
from course_lib import data, measure
x = data.preprocess(data.load_split("test")[0][: int(sys.argv[2])])
lat = measure.measure_latency(sys.argv[1], {"input": x}, threads=int(sys.argv[3]), warmup=10, runs=int(sys.argv[4]))
print(json.dumps({"median_ms": lat.median_ms}))
"""


def standalone_ms(path: Path, batch: int, threads: int, runs: int) -> float:
    out = subprocess.run(
        [sys.executable, "-c", STANDALONE, str(path), str(batch), str(threads), str(runs)],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parent.parent,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])["median_ms"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 64])
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    threads = args.threads or measure.physical_cores()
    variant = variants.production_resnet_variant()
    print(f"CPU: {hardware.cpu_summary()}; {threads} threads; INT8 variant: {variant}")
    paths = variants.build_resnet_variants(
        data.data_dir() / "benchmarks" / "latency", (variant,), log=lambda _: None
    )
    fp32, int8 = paths["fp32"], paths[variant]
    x = data.preprocess(data.load_split("test")[0][: max(args.batches)])
    for batch in args.batches:
        runs = 200 if batch == 1 else 30
        alone = {"fp32": [], "int8": []}
        for _ in range(args.repeats):
            alone["fp32"].append(standalone_ms(fp32, batch, threads, runs))
            alone["int8"].append(standalone_ms(int8, batch, threads, runs))
        reference = statistics.median(alone["fp32"]) / statistics.median(alone["int8"])
        print(f"\nbatch {batch}")
        print(
            f"  standalone medians: fp32 {', '.join(f'{v:.2f}' for v in alone['fp32'])} ms; "
            f"int8 {', '.join(f'{v:.2f}' for v in alone['int8'])} ms -> ratio {reference:.2f}x"
        )
        for spinning in (True, False):
            ratios = []
            cells = []
            for _ in range(args.repeats):
                c = measure.compare_latency(
                    {"fp32": fp32, "int8": int8},
                    {"input": x[:batch]},
                    threads=threads,
                    warmup=5,
                    runs=runs // 2,
                    spinning=spinning,
                )
                ratios.append(c.speedup)
                cells.append(
                    f"{c.latency['fp32'].median_ms:.2f}/{c.latency['int8'].median_ms:.2f} = {c.speedup:.2f}x "
                    f"({c.speedup_low:.2f}-{c.speedup_high:.2f})"
                )
            worst = max(abs(r / reference - 1) for r in ratios)
            print(f"  compare_latency, spinning {'on ' if spinning else 'off'}: " + "; ".join(cells))
            print(
                f"    ratios {min(ratios):.2f}-{max(ratios):.2f}x, furthest {worst:.0%} from standalone {reference:.2f}x"
            )


if __name__ == "__main__":
    main()
