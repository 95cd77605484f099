"""Test accuracy against training minutes: the ResNet18 recipe trained for several epoch counts.

    python benchmarks/training_curve.py --epochs 4 5 6 [--set augment=hflip --set lr=0.3] [--cache]

Each run trains the course's ResNet18 from scratch with the course recipe, changed only as told
(`--epochs`, and `--set field=value` for any other Recipe field), prints one line per epoch and
then one table row: minutes, images/s, validation and test accuracy. Every run is appended to
build/bench/training_curve.json with the CPU it ran on. With --cache, a run whose recipe is the
course's own is written into the model cache, so `prepare` need not train it again.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from course_machinery import hardware, models  # noqa: E402


def parse_set(items: list[str]) -> dict:
    fields = models.Recipe.__dataclass_fields__
    out = {}
    for item in items:
        key, _, value = item.partition("=")
        if key not in fields:
            raise SystemExit(f"--set {item}: no Recipe field {key!r}; fields are {', '.join(fields)}.")
        kind = type(getattr(models.RESNET_RECIPE, key))
        out[key] = tuple(v for v in value.split(",") if v) if kind is tuple else kind(value)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, nargs="+", default=[models.RESNET_RECIPE.epochs])
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE")
    parser.add_argument("--cache", action="store_true", help="cache a run whose recipe is the course's")
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "bench" / "training_curve.json")
    args = parser.parse_args(argv)
    changes = parse_set(args.set)
    cpu = hardware.cpu_summary()
    runs = json.loads(args.out.read_text()) if args.out.exists() else []
    rows = []
    for epochs in args.epochs:
        recipe = models.Recipe(
            **{
                **models.RESNET_RECIPE.to_dict(),
                "augment": models.RESNET_RECIPE.augment,
                **changes,
                "epochs": epochs,
            }
        )
        print(f"{cpu}: training {recipe}", flush=True)
        module, record = models.train_resnet18(recipe, progress=False)
        run = {
            "cpu": cpu,
            "recipe": recipe.to_dict(),
            "minutes": record["train_seconds"] / 60,
            "images_per_second": sum(r["images_per_second"] for r in record["history"]) / epochs,
            "validation_accuracy": record["history"][-1]["validation_accuracy"],
            "test_accuracy": record["test_accuracy"],
            "history": record["history"],
            "at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        runs.append(run)
        rows.append(run)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(runs, indent=2) + "\n")
        if args.cache and recipe == models.RESNET_RECIPE:
            models.cache_trained("fashion_resnet18", module, record)
            print("cached as the course's fashion_resnet18 (its recipe is the course's)")
    print(f"\n{cpu}")
    print("| epochs | changes | minutes | images/s | validation | test accuracy |")
    print("|---:|---|---:|---:|---:|---:|")
    for run in rows:
        print(
            f"| {run['recipe']['epochs']} | {', '.join(f'{k}={v}' for k, v in changes.items()) or '-'} | "
            f"{run['minutes']:.1f} | {run['images_per_second']:,.0f} | {run['validation_accuracy']:.1%} | "
            f"{run['test_accuracy']:.2%} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
