"""Command line: `python -m course_lib prepare | doctor | run | bench | report`.

Each command is one function below, taking the command's options as arguments; `main` parses
the command line and calls it (`set_defaults(func=...)`). `python -m course_lib` runs `main`
(course_lib/__main__.py). The commands:

prepare  data, demo models and their ONNX files (idempotent: reuses what is cached and valid)
doctor   library versions, CPU features for INT8, data source, cached models, what to do next
run      prepare, then execute every lesson notebook into build/, print a summary, write the report
bench    every INT8 variant against fp32 (and ONNX Runtime against PyTorch), one interleaved run
report   what the seeds claim beside what this machine measured: build/report.md and .html
student  the student edition: every lesson without its exercise solutions, in a folder of your choice
notebooks  everything generated from notebooks/src: reference blocks, badges, .ipynb, student edition
sentences  the lessons' sentences that state a result and are bound to no claim
reference  record this machine's figures as its CPU class's reference run, then regenerate the lessons
emulated the ARM reference class from emulated ARM CPUs (stage, replay with ../shared/tools/arm64, record)
bundle   one .zip for a room without internet: the course, Fashion-MNIST, the prepared models
site     the executed lessons and the report as a static HTML site in build/site/ (jupyter-book)
timings  the instructor guide's table of run times and peak memory, from build/run.json
launch   regenerate the Colab/Binder badges and setup cells from pyproject.toml's address (--check)
release  the release files: the trained models in one archive and its manifest, and course_lib/release.json
audit    a model you bring: every INT8 variant that fits it and this CPU, measured, and the one to ship
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

from course_lib.units import format_bytes, format_duration

from .paths import BUILD, ROOT
from .runner import DEFAULT_TIMEOUT

MODEL_ORDER = ("moons_mlp", "fashion_resnet18")


_fmt_seconds = format_duration  # the course's one way to write a duration (course_lib.units)


def _source_line(meta: dict) -> str:
    """Where a cached model came from, in words (recorded in its metadata)."""
    source = meta.get("source") or {}
    kind = source.get("kind")
    if kind == "release download":
        return f"downloaded from {source['url']} (SHA-256 {source['sha256'][:12]}…, trained on {source.get('trained_on')})"
    if kind in ("release archive", "workshop bundle"):
        return f"installed from the {kind} {source['path']} (trained on {source.get('trained_on')})"
    if kind == "trained here":
        return f"trained here on {source.get('device')}"
    return "trained here (before the course recorded sources)"


def prepare(progress: bool = True, archive: Path | None = None) -> dict:
    """Make data, trained models and ONNX files available; say what was done and how long it took."""
    from course_lib import data
    from course_machinery import models

    report: dict = {"steps": []}
    t_all = time.perf_counter()

    t0 = time.perf_counter()
    ds = data.load_fashion_mnist()
    msg = (
        f"Fashion-MNIST: {len(ds.train_images):,} training + {len(ds.test_images):,} test images from the "
        f"{ds.source.kind} ({ds.source.directory}), checksums verified [{_fmt_seconds(time.perf_counter() - t0)}]"
    )
    print(msg, flush=True)
    report["data_source"] = ds.source.kind

    t0 = time.perf_counter()
    got = models.ensure_models(MODEL_ORDER, progress=progress, archive=archive)
    for name, trained in got.items():
        path = models.onnx_path(name)
        action = str(trained.origin) + (", exported to ONNX" if trained.exported else "")
        line = (
            f"{name}: {action}; {_source_line(trained.meta)}; test accuracy {trained.test_accuracy:.2%}; "
            f"ONNX {path.name} {format_bytes(path, 2)}, parity max |diff| "
            f"{trained.meta['onnx']['parity_max_abs_diff']:.1e}"
        )
        print(line, flush=True)
        report["steps"].append(
            {"model": name, "action": str(trained.origin), "test_accuracy": trained.test_accuracy}
        )
    print(f"demo models ready [{_fmt_seconds(time.perf_counter() - t0)}]", flush=True)
    t0 = time.perf_counter()
    status = models.status(models.TEXT_ENCODER)
    encoder = models.get(models.TEXT_ENCODER)
    paths, te_meta = encoder.onnx_files, encoder.meta
    action = "cached" if status == "ok" else f"exported and optimized ({status})"
    sizes = ", ".join(f"{p.name} {format_bytes(p)}" for p in paths.values())
    worst = max(f["parity_max_abs_diff"] for f in te_meta["files"].values())
    print(
        f"text encoder (all-MiniLM-L6-v2, {te_meta['parameters'] / 1e6:.1f} M parameters): {action}; weights "
        f"SHA-256 verified; ONNX {sizes}, parity max |diff| {worst:.1e} [{_fmt_seconds(time.perf_counter() - t0)}]",
        flush=True,
    )
    report["steps"].append({"model": models.TEXT_ENCODER, "action": action})
    total = time.perf_counter() - t_all
    print(f"prepare finished in {_fmt_seconds(total)}; data directory: {data.data_dir()}", flush=True)
    report["seconds"] = total
    return report


def prepare_command(progress: bool = True, archive: Path | None = None) -> int:
    """`prepare`: get the data, the models and their ONNX files (the steps are printed as they go)."""
    prepare(progress=progress, archive=archive)
    return 0


# What a learner loses without an optional extra (doctor says it beside the missing package).
OPTIONAL_WITHOUT = {"openvino": "lesson 05 skips its OpenVINO section and runs the rest"}


def doctor() -> int:
    """Print the environment report; return 0 if everything the course needs is there, else 1."""
    import platform

    from course_lib import data
    from course_machinery import hardware, models, release

    from .doctor import requirement_status

    problems: list[str] = []
    print("Environment")
    print(f"  Python {platform.python_version()} on {platform.system()} {platform.machine()}")
    # Every requirement the installed course declares (its own metadata), with its version checked.
    for row in requirement_status():
        where = f" [{row['extra']}]" if row["extra"] else ""
        state = "ok" if row["ok"] else ("MISSING" if row["installed"] is None else "TOO OLD/NEW")
        print(f"  {row['name']:<22} {row['installed'] or '-':<14} wants {row['wanted']:<12} {state}{where}")
        if row["ok"]:
            continue
        found = "not installed" if row["installed"] is None else f"{row['installed']} is installed"
        fix = "pip install -e ." if row["extra"] is None else f"pip install -e '.[{row['extra']}]'"
        message = f"{row['name']}{row['wanted'].replace('any', '')} is needed, {found}: {fix} (or make)"
        if row["extra"] in (None, "tooling"):
            problems.append(message)
        else:
            print(
                f"    (only the {row['extra']} extra needs it; {OPTIONAL_WITHOUT.get(row['extra'], 'the lessons run without it')})"
            )

    cpu = hardware.cpu_report()
    print(f"\nCPU: {cpu['cpu']} ({cpu['logical_cores']} logical cores, {cpu['machine']})")
    for feature, present in cpu["features"].items():
        print(f"  {'yes' if present else 'no ':<4} {feature:<16} {hardware.INT8_FEATURES[feature][1]}")
    dot = hardware.int8_dot_product()
    saturates = ", and U8S8 kernels can saturate (reduce_range=True)" if hardware.u8s8_can_saturate() else ""
    print(
        f"  -> INT8 dot-product instructions present ({dot.instructions}: {dot.signs}): expect the larger INT8 speed-ups."
        if dot
        else f"  -> No INT8 dot-product instruction: INT8 gains here are smaller{saturates}."
    )
    print(f"  ONNX Runtime providers: {', '.join(hardware.onnxruntime_providers())}")
    dot = shutil.which("dot")
    print(f"  Graphviz dot (draws the lessons' graphs): {dot or 'NOT FOUND'}")
    if dot is None:
        problems.append(
            "install Graphviz: apt-get install graphviz (Debian/Ubuntu), conda install graphviz or brew install graphviz"
        )

    print("\nData")
    print(f"  data directory: {data.data_dir()}")
    try:
        src = data.find_fashion_mnist(download=False)
        print(f"  Fashion-MNIST: found in the {src.kind} ({src.directory})")
    except data.DataNotFoundError as exc:
        print("  Fashion-MNIST: NOT FOUND")
        print("    " + str(exc).replace("\n", "\n    "))
        problems.append("make Fashion-MNIST available (see above)")

    print("\nModels")
    for name in MODEL_ORDER:
        status = models.cache_status(name)
        if status == "ok":
            meta = models.load_cached(name).meta
            onnx_ok = models.onnx_path(name).exists() and "onnx" in meta
            print(
                f"  {name}: cached, test accuracy {meta['test_accuracy']:.2%}, trained in "
                f"{_fmt_seconds(meta['train_seconds'])}; ONNX {'exported' if onnx_ok else 'NOT exported'}\n"
                f"    source: {_source_line(meta)}"
            )
            if not onnx_ok:
                problems.append(f"export {name} to ONNX: python -m course_lib prepare")
        else:
            print(f"  {name}: {status}")
            problems.append(f"get {name}: python -m course_lib prepare (the release, else training)")
    try:
        published = release.published()
    except release.ReleaseError as exc:
        published = None
        print(f"  release: {exc}")
    if published is None:
        print("  release: none published for this version of the course (training is the fallback)")
    else:
        current = (
            "" if published.tag == release.release_tag(published.models) else " (for other recipes: not used)"
        )
        print(f"  release: {published.tag}{current}, {format_bytes(published.bytes)} from {published.url()}")

    status = models.status(models.TEXT_ENCODER)
    if status == "ok":
        print(f"  {models.TEXT_ENCODER}: all-MiniLM-L6-v2 exported to ONNX (raw and optimized)")
    else:
        print(f"  {models.TEXT_ENCODER}: {status}")
        problems.append(f"export the {models.TEXT_ENCODER}: python -m course_lib prepare")

    print("\nNext")
    if problems:
        for p in dict.fromkeys(problems):
            print(f"  - {p}")
        print("Environment incomplete.")
        return 1
    print(
        "  Everything is in place. Open the course with `make lab` and start with notebooks/00_start_here.ipynb."
    )
    print("Environment complete.")
    return 0


def run(
    notebooks: Path = ROOT / "notebooks",
    build: Path = BUILD,
    timeout: int = DEFAULT_TIMEOUT,
    cpu_mask: str | None = None,
    lessons: str | None = None,
) -> int:
    """prepare, then execute every lesson notebook (or those `lessons` names, e.g. "01,03b") into
    build/notebooks and print a summary. `cpu_mask` runs the kernels with the CPU's features masked
    to another class's (course_machinery.cpumask): every figure but the timings stands in for it."""
    from .editions import run_record
    from .runner import execute_notebook, lesson_notebooks

    env = None
    if cpu_mask:
        from . import cpumask

        problem = cpumask.supported()
        if problem:
            print(f"Cannot mask the CPU's features here: {problem}", file=sys.stderr)
            return 1
        env = cpumask.environment(cpu_mask)
        print(f"CPU features masked to {cpu_mask!r}: {cpumask.MASKS[cpu_mask]}. Timings are this host's.")
    prep = prepare()
    results = []
    paths = lesson_notebooks(notebooks)
    if lessons:
        chosen = {name.strip() for name in lessons.split(",")}
        unknown = chosen - {p.name.split("_", 1)[0] for p in paths}
        if unknown:
            known = ", ".join(p.name.split("_", 1)[0] for p in paths)
            print(
                f"No lesson {', '.join(sorted(unknown))} in {notebooks}; the lessons are {known}.",
                file=sys.stderr,
            )
            return 1
        paths = [p for p in paths if p.name.split("_", 1)[0] in chosen]
    if not paths:
        print(f"No lesson notebooks found in {notebooks}.")
        return 1
    for nb in paths:
        print(f"Executing {nb.name} …", flush=True)
        r = execute_notebook(nb, build / "notebooks", timeout=timeout, cwd=nb.parent, env=env)
        results.append(r)
        print(
            f"  {'ok    ' if r.ok else 'FAILED'} {nb.name} in {_fmt_seconds(r.seconds)}"
            + (f": {r.error}" if r.error else "")
        )
        for line in r.claims["differs"]:
            print(f"  claim contradicted by this run: {line}")
    print("\nSummary")
    print(f"  prepare: {_fmt_seconds(prep['seconds'])}")
    for r in results:
        memory = format_bytes(r.peak_memory_bytes, 0) if r.peak_memory_bytes else "?"
        claims = (
            "{holds} held, {differs} contradicted, {unsettled} unsettled, {unmeasured} not measured, "
            "{elsewhere} not for this CPU" + (", {untimed} not timed" if r.claims["untimed"] else "")
        ).format(**{k: len(v) for k, v in r.claims.items()})
        print(
            f"  {r.notebook.name:<40} {'ok' if r.ok else 'FAILED':<7} {_fmt_seconds(r.seconds):>9} "
            f"{memory:>9} peak, claims: {claims}  -> {r.output}"
        )
    failed = [r for r in results if not r.ok]
    print(
        f"{len(results) - len(failed)} of {len(results)} notebooks ran top to bottom; executed copies in {build / 'notebooks'}"
    )
    record = run_record(results, prep["seconds"])
    (build / "run.json").write_text(json.dumps(record, indent=2) + "\n")
    print(f"Run record: {build / 'run.json'} (`python -m course_lib timings` puts it in docs/instructor.md)")
    report(build)
    return 1 if failed else 0


def report(build: Path = BUILD) -> int:
    """Write the course report from the results store; say where it is."""
    from . import report as course_report

    paths = course_report.write(build)
    print(f"Course report: {paths['html']} (and {paths['markdown'].name})")
    return 0


def bench(quick: bool = False, out: Path = BUILD / "bench") -> int:
    """Run the benchmark, print its table, say where the JSON and the plot are; record a full run."""
    from . import bench as course_bench

    config = course_bench.QUICK if quick else course_bench.BenchConfig()
    result = course_bench.run(config, out)
    print()
    print(course_bench.table(result))
    print(
        f"\n{len(result.rows)} comparisons in {_fmt_seconds(result.seconds)}; {out / 'bench.json'}, {out / 'bench.png'}"
    )
    if not quick:
        course_bench.record_results(result)
    return 0


def make_release(out: Path = BUILD / "release", package_file: bool = True) -> int:
    """Write the release's files from the verified cache; print their sizes and what to upload where."""
    from course_machinery import release

    from .publish import write_release

    t0 = time.perf_counter()
    target = release.RELEASE_FILE if package_file else None
    published = write_release(out, package_file=target)
    print(f"Release {published.tag} in {out} [{_fmt_seconds(time.perf_counter() - t0)}]:")
    print(f"  {published.asset}: {format_bytes(published.bytes)}, SHA-256 {published.sha256}")
    for arcname, info in sorted(published.files.items()):
        size = format_bytes(info["bytes"], 2) if info["bytes"] >= 100_000 else f"{info['bytes']:,} bytes"
        print(f"    {arcname}: {size}, SHA-256 {info['sha256'][:16]}…")
    print(f"  {release.MANIFEST_ASSET}: the same hashes")
    if target is not None:
        print(f"  {target}: the same manifest, inside the package; commit it with the release")
    print(
        f"Upload both files as the assets of the GitHub release tagged {published.tag}; an installed course "
        f"then downloads {published.url()}"
    )
    return 0


def bundle(out: Path = BUILD / "onnx-quant-course-bundle.zip", wheels: bool = False) -> int:
    """Write the offline bundle; print its path, size and file count (or why it cannot be made)."""
    from course_machinery import release

    from . import bundle as course_bundle

    t0 = time.perf_counter()
    try:
        path = course_bundle.write_bundle(out, wheels=wheels)
    except course_bundle.BundleError as exc:
        print(f"Cannot make the bundle: {exc}", file=sys.stderr)
        return 1
    files = len(release.bundle_manifest(path)["files"]) + 1  # and the manifest itself
    print(
        f"Bundle: {path} ({format_bytes(path)}, {files} files"
        f"{', with wheels' if wheels else ''}) [{_fmt_seconds(time.perf_counter() - t0)}]"
    )
    return 0


def site(
    executed: Path | None = None,
    out: Path = BUILD / "site",
    notebooks: Path = ROOT / "notebooks",
    build: Path = BUILD,
) -> int:
    """Build the static site from executed lessons and the report; print where its index.html is.

    Without `executed`, build/notebooks is used when every lesson there ran to the end and is newer
    than its notebook; otherwise the lessons are run first (`run`, which also writes the report).
    """
    from . import site as course_site

    t0 = time.perf_counter()
    stale = {}
    if executed is None:
        executed = build / "notebooks"
        stale = course_site.executed_problems(executed, notebooks)
    if stale:
        print(f"The executed lessons in {executed} cannot be used as they are; running the lessons first:")
        for name, why in stale.items():
            print(f"  {name}: {why}")
        if run(notebooks, build, DEFAULT_TIMEOUT) != 0:  # run writes the report too
            print("A lesson failed, so the site was not built.", file=sys.stderr)
            return 1
    else:
        report(build)
    try:
        index = course_site.build_site(executed, out, build / "report.md", notebooks)
    except course_site.SiteError as exc:
        print(f"Cannot build the site: {exc}", file=sys.stderr)
        return 1
    print(f"Site: {index} (open it in a browser) [{_fmt_seconds(time.perf_counter() - t0)}]")
    return 0


def timings(
    run_json: Path = BUILD / "run.json", docs: Path = ROOT / "docs", notebooks: Path = ROOT / "notebooks"
) -> int:
    """Put a measured run's timings into docs/timings.json and docs/instructor.md."""
    from .editions import TimingsError, write_timings

    try:
        guide = write_timings(run_json, docs, notebooks)
    except TimingsError as exc:
        print(f"Cannot update the instructor guide's timings: {exc}", file=sys.stderr)
        return 1
    print(f"Timings from {run_json} written to {guide} and {docs / 'timings.json'}")
    return 0


def student(notebooks: Path = ROOT / "notebooks", out: Path = BUILD / "student") -> int:
    """Write the student edition (every lesson without its solutions); say how many and where."""
    from .editions import write_student_edition

    written = write_student_edition(notebooks, out)
    print(f"Student edition: {len(written)} notebooks in {out}")
    return 0


def notebooks(check: bool = False, lessons: str | None = None) -> int:
    """Regenerate (or, with `check`, only list) everything made from the lessons' sources (of every
    lesson, or those `lessons` names, e.g. "03,03b")."""
    from .notebooks import regenerate

    only = {part.strip() for part in lessons.split(",") if part.strip()} if lessons else None
    changed = regenerate(dry_run=check, only=only)
    for path in changed:
        print(f"{'out of date' if check else 'rewrote'}: {path.relative_to(ROOT)}")
    if check:
        print(
            f"{len(changed)} file(s) out of date"
            + ("; run `python -m course_lib notebooks`" if changed else "")
        )
        return 1 if changed else 0
    print(f"{len(changed)} file(s) regenerated from notebooks/src and the reference runs.")
    return 0


def reference(
    action: str = "show",
    source: str | None = None,
    commit: str | None = None,
    into: str | None = None,
    name: str | None = None,
    keep_measured: bool = False,
    sentence: list[str] | None = None,
) -> int:
    """`record`: store the last full run as its CPU class's reference run (figures and claims'
    verdicts) and regenerate the lessons; `ledger --name N`: store only its claims' verdicts, as an
    extra ledger (weights from another seed, say); `rejudge --into CLASS --sentence ID`: judge a
    changed sentence again from that class's stored figures (recording.rejudge says when that is
    sound); `check`: the claims across every stored ledger; `show`: list the stored reference runs,
    their ledgers and this machine's class."""
    from course_machinery.reference import cpu_class, reference_runs

    from . import recording as course_reference

    if action in ("record", "ledger", "rejudge"):
        try:
            if action == "rejudge":
                if not into:
                    print(
                        "`reference rejudge` needs --into CLASS, e.g. --into amd-epyc-avx-512-vnni",
                        file=sys.stderr,
                    )
                    return 2
                path = course_reference.rejudge(into, sentence or [], commit=commit)
            elif action == "record":
                path = course_reference.record(
                    source=source, commit=commit, into=into, keep_measured=keep_measured
                )
            else:
                if not name:
                    print(
                        "`reference ledger` needs --name, e.g. --name 'Intel Xeon, seed 2'", file=sys.stderr
                    )
                    return 2
                path = course_reference.record_ledger(name, commit=commit)
        except course_reference.ReferenceRunError as exc:
            print(exc, file=sys.stderr)
            return 1
        print(f"Recorded {path.relative_to(ROOT)}")
        status = notebooks() if action in ("record", "rejudge") else 0
        return max(status, _ledger_check())
    if action == "check":
        return _ledger_check()
    here = cpu_class()
    for run in reference_runs():
        count = sum(len(v) for v in run.figures.values())
        mark = "  <- this machine's class" if run.label == here.label else ""
        print(f"{run.label}: {count} figures, commit {run.commit}, {run.date[:10]}{mark}")
    for ledger in course_reference.sentence_ledgers():
        counts = ", ".join(f"{n} {verdict}" for verdict, n in sorted(ledger.counts().items())) or "none"
        print(
            f"  sentences (commit {ledger.commit}): {counts}; {len(ledger.stale)} not checked since they changed"
        )
    if here.label not in {run.label for run in reference_runs()}:
        print(
            f"This machine ({here.label}) is a new CPU class: `make run`, then `python -m course_lib reference record`."
        )
    return 0


def _ledger_check() -> int:
    """Per stored run, its verdicts on the lessons' current sentences (and how many it checked only
    in an earlier version); every contradicted one, and every sentence held on one class and
    contradicted on another; 1 if there is any."""
    from . import recording as course_reference

    found = course_reference.sentence_ledgers()
    against = [
        f"{ledger.label} (commit {ledger.commit}): {key}" for ledger in found for key in ledger.contradicted()
    ]
    clashes = course_reference.sentence_conflicts(found)
    for ledger in found:
        counts = ", ".join(f"{n} {verdict}" for verdict, n in sorted(ledger.counts().items())) or "none"
        print(
            f"{ledger.label} (commit {ledger.commit}): {counts}; "
            f"{len(ledger.stale)} not checked on this class since they changed"
        )
    for line in against:
        print(f"contradicted: {line}")
    for line in clashes:
        print(f"conflict: {line}")
    total = sum(len(ledger.verdicts) for ledger in found)
    print(
        f"{len(found)} reference runs, {total} current verdicts: {len(against)} contradicted, "
        f"{len(clashes)} held on one and contradicted on another."
    )
    return 1 if against or clashes else 0


def launch(check: bool = False) -> int:
    """Regenerate (or, with `check`, only list) what comes from the repository's address."""
    from . import launch as course_launch

    config = course_launch.read_launch()
    if check:
        stale = course_launch.stale()
        for path in stale:
            print(f"out of date: {path.relative_to(ROOT)}")
        print(
            f"{len(stale)} file(s) out of date with {config.repository}@{config.branch}"
            + ("; run `python -m course_lib launch`" if stale else "")
        )
        return 1 if stale else 0
    changed = course_launch.write()
    for path in changed:
        print(f"rewrote {path.relative_to(ROOT)}")
    print(
        f"Badges and setup cells point at {config.repository} (branch {config.branch}); "
        f"{len(changed)} file(s) changed."
    )
    return 0


def _batch_sizes(text: str) -> tuple[int, ...]:
    """'1,32' -> (1, 32), for --batch."""
    try:
        sizes = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        sizes = ()
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(
            f"expected batch sizes as whole numbers >= 1 separated by commas, e.g. 1,32; got {text!r}"
        )
    return sizes


def audit(
    model: Path,
    inputs: Path,
    labels: Path | None = None,
    batch: tuple[int, ...] = (1, 32),
    out: Path | None = None,
    progress: bool = True,
    serve_batch: int | None = None,
    output: str | None = None,
    metric: str | None = None,
    metric_tolerance: float = 0.02,
    runtimes: str | None = None,
) -> int:
    """`audit`: the variants of MODEL that fit it and this CPU, measured; print the decision, the
    Python call that rebuilds the recommended file, and the files."""
    from course_machinery.audit import AuditError
    from course_machinery.audit import audit as run_audit

    out = out if out is not None else BUILD / "audit" / model.stem
    openvino = None if runtimes is None else "openvino" in runtimes.split(",")
    try:
        result = run_audit(
            model,
            inputs,
            labels=labels,
            batch=batch,
            out=out,
            progress=progress,
            serve_batch=serve_batch,
            output=output,
            metric=metric,
            metric_tolerance=metric_tolerance,
            openvino=openvino,
        )
    except AuditError as exc:
        print(f"Cannot audit {model}: {exc}", file=sys.stderr)
        return 2
    print()
    print(result._repr_markdown_())
    if result.rebuild:
        print(f"To rebuild {result.recommended_path.name} from {model.name}:")
        print()
        print(result.rebuild)
    files = ", ".join(str(path) for path in result.files.values())
    print(f"Audit finished in {_fmt_seconds(result.seconds)}; report: {files}")
    return 0


def _parser() -> argparse.ArgumentParser:
    """The command line: one subcommand per function above, each with its options."""
    parser = argparse.ArgumentParser(prog="python -m course_lib", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare", help="data, demo models and ONNX files (idempotent)")
    p.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bars")
    p.add_argument(
        "--archive",
        type=Path,
        default=None,
        help="a release archive (course-models.tar) or workshop bundle (.zip) to install the models from",
    )
    p.set_defaults(func=prepare_command)
    rl = sub.add_parser(
        "release", help="the release files (models archive + manifest) and course_lib/release.json"
    )
    rl.add_argument("--out", type=Path, default=BUILD / "release")
    rl.add_argument(
        "--no-package-file",
        dest="package_file",
        action="store_false",
        help="do not write course_lib/release.json (a trial release)",
    )
    rl.set_defaults(func=make_release)
    d = sub.add_parser("doctor", help="report what the course needs and what is missing")
    d.set_defaults(func=doctor)
    r = sub.add_parser("run", help="prepare, then execute every notebook into build/")
    r.add_argument("--notebooks", type=Path, default=ROOT / "notebooks")
    r.add_argument("--build", type=Path, default=BUILD)
    r.add_argument("--timeout", type=int, default=DEFAULT_TIMEOUT, help="seconds per notebook")
    r.add_argument(
        "--cpu-mask",
        default=None,
        help="run as another CPU class: hide features from CPUID (avx2, avx512-vnni); timings stay the host's",
    )
    r.add_argument("--lessons", default=None, help="only these lessons, e.g. 01,03b (default: all)")
    r.set_defaults(func=run)
    b = sub.add_parser(
        "bench", help="every INT8 variant against fp32, timed in turn; JSON and plot in build/bench"
    )
    b.add_argument(
        "--quick", action="store_true", help="a small configuration (a minute): two variants, few runs"
    )
    b.add_argument("--out", type=Path, default=BUILD / "bench")
    b.set_defaults(func=bench)
    rep = sub.add_parser("report", help="the course report: seed claims beside this machine's measurements")
    rep.add_argument("--build", type=Path, default=BUILD)
    rep.set_defaults(func=report)
    st = sub.add_parser(
        "student", help="the student edition (solutions removed, checks kept) in build/student"
    )
    st.add_argument("--notebooks", type=Path, default=ROOT / "notebooks")
    st.add_argument("--out", type=Path, default=BUILD / "student")
    st.set_defaults(func=student)
    nb = sub.add_parser(
        "notebooks",
        help="regenerate reference blocks, badges, .ipynb and the student edition from notebooks/src",
    )
    nb.add_argument("--check", action="store_true", help="only list what is out of date (exit 1 if any)")
    nb.add_argument("--lessons", help="only these lessons, e.g. 03,03b (default: all)")
    nb.set_defaults(func=notebooks)
    rf = sub.add_parser(
        "reference", help="the reference runs: show them, or record this machine's (after `run`)"
    )
    rf.add_argument(
        "action", nargs="?", choices=("show", "record", "ledger", "rejudge", "check"), default="show"
    )
    rf.add_argument(
        "--into", default=None, help="record: the stored class a masked run stands in for; rejudge: the class"
    )
    rf.add_argument(
        "--sentence",
        action="append",
        default=None,
        help="rejudge: a changed sentence to judge again from the class's stored figures, e.g. 02b.rr-about-same-speed",
    )
    rf.add_argument("--name", default=None, help="ledger: the extra ledger's name, e.g. 'Intel Xeon, seed 2'")
    rf.add_argument(
        "--keep-measured",
        action="store_true",
        help="record of a masked run: keep the figures the class's own run measured, fill only the others",
    )
    rf.add_argument("--source", default=None, help="how the figures were measured (stored with them)")
    rf.add_argument("--commit", default=None, help="the commit the lessons ran at (default: HEAD)")
    rf.set_defaults(func=reference)
    bu = sub.add_parser("bundle", help="one .zip with the course, data and prepared models, for offline use")
    bu.add_argument("--out", type=Path, default=BUILD / "onnx-quant-course-bundle.zip")
    bu.add_argument(
        "--wheels",
        action="store_true",
        help="add wheels/: pip download of the dependencies for this platform (needs PyPI; torch makes it GBs)",
    )
    bu.set_defaults(func=bundle)
    si = sub.add_parser("site", help="the executed lessons and the report as a static HTML site (build/site)")
    si.add_argument(
        "--executed",
        type=Path,
        default=None,
        help="executed lessons to use (default: build/notebooks, run first when stale)",
    )
    si.add_argument("--out", type=Path, default=BUILD / "site")
    si.set_defaults(func=site)
    ti = sub.add_parser(
        "timings", help="the instructor guide's timings table from a measured run (build/run.json)"
    )
    ti.add_argument("--run", dest="run_json", metavar="RUN", type=Path, default=BUILD / "run.json")
    ti.set_defaults(func=timings)
    la = sub.add_parser(
        "launch", help="regenerate the Colab/Binder badges and setup cells from pyproject.toml"
    )
    la.add_argument("--check", action="store_true", help="only list what is out of date (exit 1 if any)")
    la.set_defaults(func=launch)
    au = sub.add_parser(
        "audit", help="a model you bring: its INT8 variants measured on this CPU, and the one to ship"
    )
    au.add_argument("model", type=Path, help="the fp32 ONNX model (external data beside it)")
    au.add_argument(
        "--inputs",
        type=Path,
        required=True,
        help="sample inputs: an .npz with one array per model input, samples along axis 0 (at least 100)",
    )
    au.add_argument("--labels", type=Path, default=None, help="class indices, one per sample (.npy)")
    au.add_argument(
        "--batch", type=_batch_sizes, default=(1, 32), help="batch sizes to time, e.g. 1,32 (default)"
    )
    au.add_argument(
        "--serve-batch",
        type=int,
        default=None,
        metavar="N",
        help="the batch you serve (1 for an online service): the decision reads it, and it is timed "
        "(default: the largest batch timed)",
    )
    au.add_argument(
        "--output",
        default=None,
        metavar="NAME",
        help="the float output(s) the quality rule compares, NAME or NAME,NAME, or 'all' to judge each "
        "(default: the first float output)",
    )
    au.add_argument(
        "--metric",
        default=None,
        metavar="MODULE:FUNCTION",
        help="your task's metric instead of the output rule: module:function or file.py:function, called "
        "as f(outputs, inputs, labels) -> (value, higher_is_better) for fp32 and each variant",
    )
    au.add_argument(
        "--metric-tolerance",
        type=float,
        default=0.02,
        metavar="FRACTION",
        help="how far a variant's metric may be from fp32's on the worse side, relative (default 0.02)",
    )
    au.add_argument(
        "--runtimes",
        choices=("onnxruntime", "onnxruntime,openvino"),
        default=None,
        help="onnxruntime alone, or with OpenVINO as the second runtime (default: OpenVINO too where installed)",
    )
    au.add_argument(
        "--out", type=Path, default=None, help="folder for variants and reports (build/audit/MODEL)"
    )
    au.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")
    au.set_defaults(func=audit)
    em = sub.add_parser(
        "emulated", help="the ARM reference class: lessons 05-06's files replayed on emulated ARM CPUs"
    )
    em.add_argument("action", choices=("stage", "replay", "record", "all"), default="all", nargs="?")
    em.add_argument(
        "--tool",
        type=Path,
        default=ROOT.parent / "shared" / "tools" / "arm64",
        help="the ARM emulator's runner",
    )
    em.add_argument(
        "--cpu",
        dest="cpus",
        action="append",
        default=None,
        help="replay: this emulated ARM CPU only, as course_machinery/emulated.py's ARM_CPUS names it "
        "(repeatable; default: all of them)",
    )
    em.add_argument("--commit", default=None, help="record: the commit the lessons ran at (default: HEAD)")
    em.set_defaults(func=emulated)
    se = sub.add_parser(
        "sentences", help="the lessons' sentences that state a result and are bound to no claim"
    )
    se.add_argument("lessons", nargs="*", help="lessons, e.g. 03 03b (default: all)")
    se.set_defaults(func=sentences)
    return parser


def emulated(
    action: str = "all", tool: Path | None = None, commit: str | None = None, cpus: list[str] | None = None
) -> int:
    """The ARM reference class (course_machinery/emulated.py): `stage` the last run's files of
    lessons 05 and 06, `replay` them on each emulated ARM CPU (or those `cpus` names: a replay takes
    one to two hours, and `record` keeps the other CPUs' earlier replays), `record` one reference run
    from the three and regenerate the lessons; `all` does the three in turn."""
    import subprocess

    from . import emulated as arm

    unknown = [c for c in cpus or () if c not in arm.ARM_CPUS]
    if unknown:
        print(
            f"Expected --cpu to name one of {', '.join(arm.ARM_CPUS)}; got {', '.join(unknown)}. "
            "Plain `max` is not one: see ARM_CPUS in course_machinery/emulated.py.",
            file=sys.stderr,
        )
        return 2

    if action in ("stage", "all"):
        print(f"staged {arm.stage().relative_to(ROOT)}")
    if action in ("replay", "all"):
        if tool is None or not Path(tool).is_file():
            print(f"Expected the ARM emulator's runner at {tool}; pass --tool PATH.", file=sys.stderr)
            return 2
        script = Path(arm.__file__).relative_to(ROOT)
        for cpu in cpus or arm.ARM_CPUS:
            start = time.perf_counter()
            command = [str(tool), "--cpu", cpu, "--pip", arm.PIP, str(script), cpu]
            if subprocess.run(command, cwd=ROOT).returncode:
                print(f"the replay on {cpu} failed: {' '.join(command)}", file=sys.stderr)
                return 1
            print(f"{cpu}: replayed in {_fmt_seconds(time.perf_counter() - start)}")
    if action in ("record", "all"):
        try:
            path = arm.record(commit=commit)
        except FileNotFoundError as exc:
            print(exc, file=sys.stderr)
            return 1
        print(f"Recorded {path.relative_to(ROOT)}")
        return max(notebooks(), _ledger_check())
    return 0


def sentences(lessons: list[str]) -> int:
    """List the unbound sentences of the named lessons (course_machinery/sentences.py)."""
    from .sentences import main as list_unbound

    return list_unbound(lessons, ROOT)


def main(argv: list[str] | None = None) -> int:
    """Parse the command line and run the command: its function, called with its options."""
    args = _parser().parse_args(argv)
    options = {name: value for name, value in vars(args).items() if name not in ("command", "func")}
    return args.func(**options)
