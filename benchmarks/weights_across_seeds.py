"""Which of the lessons' sentences rest on the weights trained here? Train the demo models with
other seeds and run the lessons on each, then compare the claims' verdicts.

    python benchmarks/weights_across_seeds.py [--seeds 1 2 3] [--lessons 00,01,...] [--store]

A sentence about trained weights (lesson 01's outlier, the hardest class, an accuracy) must hold
for weights trained on any CPU with any seed; the course trains its models with seed 0, and the
same seed gives other weights on another CPU. For each seed this script

- trains the two demo models and the NanoGPT with that seed ($COURSE_TRAINING_SEED) in a data
  directory of their own under build/seeds/seed-N ($COURSE_DATA_DIR; the text encoder's export is
  linked from the course's data directory, which `prepare` fills, since it is not trained here),
- runs the lessons there (`python -m course_lib run`, into build/seeds/seed-N/notebooks),
- and, with --store, keeps the run's claims as an extra ledger, course_machinery/reference_runs/ledgers/
  ("<CPU>, seed N"), so that the suite's ledger test holds every sentence to all of them.

It prints, for each sentence that depends on the weights, its verdict under each seed, and the
lesson 01 figures the text describes (the outlier's ratio, what clipping gains at 8 and 4 bits)
seed by seed: the ranges a sentence about the weights has to hold across. Takes about 15 minutes
a seed on 2 cores (training about 7, the lessons about 8).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from course_lib.data import DATA_DIR_ENV, data_dir  # noqa: E402
from course_machinery.recording import LEDGER_DIR  # noqa: E402
from course_machinery.reference import cpu_class, short_cpu_name  # noqa: E402

FIGURES_01 = ("outlier_ratio", "sqnr_clip_int8", "sqnr_minmax_int8", "sqnr_clip_int4", "sqnr_minmax_int4")


def run_seed(seed: int, lessons: str, store: bool) -> dict:
    """Train with `seed`, run the lessons, return each lesson's saved figures and claims."""
    home = ROOT / "build" / "seeds" / f"seed-{seed}"
    (home / "models").mkdir(parents=True, exist_ok=True)
    encoder = home / "models" / "text_encoder"
    if not encoder.exists():  # published weights, the same for every seed: link the export
        encoder.symlink_to(data_dir() / "models" / "text_encoder", target_is_directory=True)
    env = os.environ | {DATA_DIR_ENV: str(home), "COURSE_TRAINING_SEED": str(seed)}
    start = time.perf_counter()
    command = [sys.executable, "-m", "course_lib", "run", "--build", str(home), "--lessons", lessons]
    subprocess.run(command, env=env, cwd=ROOT, check=False)
    print(f"seed {seed}: {time.perf_counter() - start:.0f} s", flush=True)
    if store:
        name = f"{short_cpu_name(cpu_class().label.split(', ')[0])}, seed {seed}"
        subprocess.run(
            [sys.executable, "-m", "course_lib", "reference", "ledger", "--name", name], env=env, cwd=ROOT
        )
    found = {}
    for path in sorted((home / "figures").glob("*.json")):
        saved = json.loads(path.read_text())
        found[saved["lesson"]] = saved
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--lessons", default="00,01,01b,02,02b,03,03b,04,04b,05,05b,05c,06,06b,06c,07")
    parser.add_argument("--store", action="store_true", help="keep each seed's claims as a ledger")
    args = parser.parse_args()
    runs = {seed: run_seed(seed, args.lessons, args.store) for seed in args.seeds}
    seed0 = {}
    for path in sorted((data_dir() / "figures").glob("*.json")):  # the course's own run, if any
        saved = json.loads(path.read_text())
        seed0[saved["lesson"]] = saved
    if seed0:
        runs = {0: seed0, **runs}

    print("\nLesson 01's figures about the trained weights, by seed")
    for seed, found in runs.items():
        figures = found.get("01", {}).get("figures", {})
        values = ", ".join(f"{k} {figures[k]:.2f}" for k in FIGURES_01 if k in figures)
        gains = ""
        if {"sqnr_clip_int8", "sqnr_minmax_int8"} <= set(figures):
            g8 = figures["sqnr_clip_int8"] - figures["sqnr_minmax_int8"]
            g4 = figures["sqnr_clip_int4"] - figures["sqnr_minmax_int4"]
            gains = f"; clipping gains {g8:+.1f} dB at 8 bits, {g4:+.1f} dB at 4 bits"
        print(f"  seed {seed}: {figures.get('outlier_layer', '?')}: {values}{gains}")

    print("\nSentences that depend on the weights, and their verdict by seed")
    verdicts: dict[tuple[str, str], dict[int, str]] = {}
    for seed, found in runs.items():
        for lesson, saved in found.items():
            for c in saved.get("claims", []):
                if "weights" in c["depends"]:
                    verdicts.setdefault((lesson, c["statement"]), {})[seed] = c["verdict"]
    for (lesson, statement), by_seed in sorted(verdicts.items()):
        mixed = len({v for v in by_seed.values() if v in ("held", "contradicted")}) > 1
        mark = "!!" if mixed or "contradicted" in by_seed.values() else "  "
        cells = ", ".join(f"seed {s}: {v}" for s, v in by_seed.items())
        print(f"{mark} {lesson} {statement[:90]}: {cells}")
    ledgers = ROOT / "course_machinery" / "reference_runs" / LEDGER_DIR
    if args.store:
        print(
            f"\nLedgers stored in {ledgers.relative_to(ROOT)}; `python -m course_lib reference check` reads them."
        )


if __name__ == "__main__":
    main()
