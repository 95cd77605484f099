"""The ARM reference class from emulated ARM CPUs: each sentence's verdict there, and the stored run."""

from __future__ import annotations

import json

import pytest

from course_machinery import emulated
from course_machinery.claims import book_of, lessons_with_claims
from course_machinery.emulated import I8MM
from course_machinery.recording import sentence_ledgers
from course_machinery.reference import REFERENCE_DIR, reference_runs

ARM = {"x86": False, "arm": True, "vnni": False, "amx": False, "saturates": False}
# Lesson 05's section 3 as the emulated Neoverse N1 measured it (every INT8 file fused)
FUSED = {
    "u8s8_full": 4,
    "u8s8_files": 4,
    "int8_full": 7,
    "int8_files": 7,
    "s8s8_qlinear": 20,
    "s8s8_convs": 20,
    "dynamic_integer_ops": 21,
    "compute_ops": 21,
}


def _sentence(lesson: str, name: str):
    return book_of(lesson).sentences[name]


def test_an_arm_sentence_is_checked_on_the_replayed_figures_and_can_fail():
    sentence = _sentence("05", "arm-all-integer")
    assert emulated._verdict(sentence, FUSED, ARM)["verdict"] == "held"
    half = FUSED | {"int8_full": 5}  # what x86 gives: the two S8S8 files keep float convolutions
    assert emulated._verdict(sentence, half, ARM)["verdict"] == "contradicted"


def test_on_arm_a_speed_sentence_is_not_timed_and_an_x86_one_not_for_this_cpu():
    speed = _sentence("05", "dynamic-below-half")  # no scope, depends on speed
    record = emulated._verdict(speed, {}, ARM)
    assert record["verdict"] == "not timed"
    x86 = _sentence("05", "s8s8-half-float")
    assert emulated._verdict(x86, FUSED, ARM)["verdict"] == "not for this CPU"


def test_a_sentence_outside_the_replayed_sections_is_not_measured_with_the_reason():
    sentence = _sentence("01", "worst-half-step")
    record = emulated._verdict(sentence, {"anything": 1}, ARM)
    assert record["verdict"] == "not measured" and "not replayed" in record["reason"]
    # a replayed section whose figure the replay could not take (peak memory needs a fresh process)
    memory = _sentence("05", "memory-far-less")
    record = emulated._verdict(memory, {"smallest_size": 0.25}, ARM)
    assert record["verdict"] == "not measured" and "peak_mb" in record["reason"]


def test_merging_keeps_a_contradiction_on_any_cpu_and_every_cpus_evidence():
    held = {"statement": "s", "fingerprint": "f", "verdict": "held", "evidence": "7 of 7"}
    against = held | {"verdict": "contradicted", "evidence": "5 of 7"}
    merged = emulated.merge({"cortex-a72": held, "neoverse-n1": against, "max": held})
    assert merged["verdict"] == "contradicted"
    assert "cortex-a72: 7 of 7" in merged["evidence"] and "neoverse-n1: 5 of 7" in merged["evidence"]
    same = emulated.merge({"cortex-a72": held, "neoverse-n1": held, "max": held})
    assert same["verdict"] == "held" and same["evidence"] == "7 of 7"
    unsettled = emulated.merge({"a": held, "b": held | {"verdict": "unsettled"}})
    assert unsettled["verdict"] == "unsettled"


def test_recording_names_the_missing_replays_and_how_to_make_them(tmp_path):
    with pytest.raises(
        FileNotFoundError,
        match=r"cortex-a72, neoverse-n1, max,sve=off,sme=off.*kept in .*found none.*arm64 --cpu NAME",
    ):
        emulated.record(tmp_path / "staged", directory=tmp_path / "ledger")


def test_the_class_names_only_the_cpus_it_replayed():
    assert emulated.label_for({"cortex-a72": {}}) == "ARM, emulated (Cortex-A72): not timed"
    assert "Neoverse N1, i8mm" in emulated.label_for(dict.fromkeys(emulated.ARM_CPUS, {}))


def test_staging_refuses_a_data_directory_without_the_lessons_files(tmp_path, private_data_dir):
    with pytest.raises(FileNotFoundError, match=r"run --lessons 05,06"):
        emulated.stage(tmp_path / "staged")


def test_the_stored_arm_class_is_emulated_untimed_and_contradicts_nothing():
    path = REFERENCE_DIR / f"{emulated.CPU_CLASS}.json"
    if not path.is_file():
        pytest.fail(f"{path} is missing: record it with `python -m course_lib emulated`")
    stored = json.loads(path.read_text())
    [run] = [r for r in reference_runs() if r.cpu_class == emulated.CPU_CLASS]
    [ledger] = sentence_ledgers([run])
    assert "emulated" in stored["claims_source"] and run.machine.startswith("aarch64")
    every = [s for lesson in lessons_with_claims() for s in book_of(lesson).sentences.values()]
    verdicts = [r["verdict"] for lesson in stored["sentences"].values() for r in lesson.values()]
    assert len(verdicts) >= len(every) - len(ledger.stale)
    assert "contradicted" not in verdicts
    # nothing timed: every current sentence about speed reads "not timed" or "not for this CPU"
    for sentence in every:
        record = ledger.verdicts.get(sentence.id)
        if record and "speed" in sentence.depends:
            assert record["verdict"] in ("not timed", "not for this CPU"), sentence.id
    # the ARM story's own sentence was checked there, on every CPU replayed
    assert ledger.verdicts["05.arm-all-integer"]["verdict"] == "held"


def _replay(cpu: str, commit: str, figures: dict) -> dict:
    return {
        "cpu": cpu,
        "commit": commit,
        "facts": ARM,
        "report": {},
        "onnxruntime": "1.32.0",
        "figures": figures,
    }


def test_recording_counts_a_kept_replay_with_its_commit_and_keeps_the_new_one(tmp_path):
    staged, ledger_dir = tmp_path / "staged", tmp_path / "ledger"
    kept = ledger_dir / emulated.KEPT
    staged.mkdir()
    kept.mkdir(parents=True)
    (staged / f"{I8MM}.json").write_text(json.dumps(_replay(I8MM, "new5678", {"05": FUSED})))
    # kept from an earlier recording: the Cortex-A72 (used) and an older i8mm replay (the staged one wins)
    (kept / "cortex-a72.json").write_text(json.dumps(_replay("cortex-a72", "old1234", {"05": FUSED})))
    (kept / f"{I8MM}.json").write_text(json.dumps(_replay(I8MM, "old1234", {"05": FUSED | {"int8_full": 5}})))

    target = emulated.record(staged, commit="rec9999", directory=ledger_dir)
    run = json.loads(target.read_text())
    assert run["label"] == "ARM, emulated (Cortex-A72, i8mm without SVE or SME): not timed"
    assert (
        "cortex-a72 (replayed at old1234)" in run["source"]
        and f"{I8MM} (replayed at new5678)" in run["source"]
    )
    assert "not replayed: neoverse-n1" in run["source"] and run["commit"] == "rec9999"
    assert run["sentences"]["05"]["arm-all-integer"]["verdict"] == "held"  # not the older replay's 5 of 7
    assert json.loads((kept / f"{I8MM}.json").read_text())["commit"] == "new5678"
    # a second recording with nothing staged uses what the first kept
    (staged / f"{I8MM}.json").unlink()
    again = json.loads(emulated.record(staged, commit="rec9999", directory=ledger_dir).read_text())
    assert again["sentences"] == run["sentences"]


def test_a_replay_of_plain_max_is_refused_with_the_reason_and_the_cpu_to_use(tmp_path):
    staged = tmp_path / "staged"
    staged.mkdir()
    (staged / f"{I8MM}.json").write_text(json.dumps(_replay(I8MM, "new5678", {"05": FUSED})))
    (staged / "max.json").write_text(json.dumps(_replay("max", "new5678", {"05": FUSED})))
    with pytest.raises(ValueError, match=r"found max\.json .*--cpu max,sve=off,sme=off.*SME"):
        emulated.record(staged, directory=tmp_path / "ledger")
    assert not (tmp_path / "ledger").exists()  # nothing written


def test_a_recording_stopped_while_writing_leaves_the_earlier_ledger_whole(tmp_path, monkeypatch):
    staged, ledger_dir = tmp_path / "staged", tmp_path / "ledger"
    staged.mkdir()
    (staged / f"{I8MM}.json").write_text(json.dumps(_replay(I8MM, "new5678", {"05": FUSED})))
    target = emulated.record(staged, commit="rec1111", directory=ledger_dir)
    before = {p.name: p.read_bytes() for p in [target, *(ledger_dir / emulated.KEPT).iterdir()]}

    class Stopped(Exception):
        pass

    def half_then_stop(self, text, *args, **kwargs):  # the process dies halfway through a write
        with open(self, "w") as f:
            f.write(text[: len(text) // 2])
        raise Stopped

    monkeypatch.setattr(type(target), "write_text", half_then_stop)
    with pytest.raises(Stopped):
        emulated.record(staged, commit="rec2222", directory=ledger_dir)
    monkeypatch.undo()
    after = {p.name: p.read_bytes() for p in [target, *(ledger_dir / emulated.KEPT).iterdir()]}
    assert after == before  # no half file left, none in place of the old one
    assert json.loads(target.read_text())["commit"] == "rec1111"


def _classifier(path):
    """x (N, 3, 8, 8) -> Conv -> GlobalAveragePool -> Flatten -> Gemm -> 10 scores: a tiny real model."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("GlobalAveragePool", ["c"], ["p"]),
        helper.make_node("Flatten", ["p"], ["f"]),
        helper.make_node("Gemm", ["f", "g"], ["y"]),
    ]
    inits = [
        numpy_helper.from_array(rng.normal(size=(8, 3, 3, 3)).astype(np.float32), "w"),
        numpy_helper.from_array(rng.normal(size=(8, 10)).astype(np.float32), "g"),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])
    model = helper.make_model(
        helper.make_graph(nodes, "tiny", [x], [y], inits), opset_imports=[helper.make_opsetid("", 17)]
    )
    model.ir_version = 8
    onnx.save(model, path)


def _staged_05(folder, rows=300):
    import numpy as np

    folder.mkdir()
    _classifier(folder / "tiny.onnx")
    rng = np.random.default_rng(1)
    np.save(folder / "x.npy", rng.normal(size=(rows, 3, 8, 8)).astype(np.float32))
    np.save(folder / "labels.npy", rng.integers(0, 10, rows))
    return {n: "tiny.onnx" for n in ("fp32", "static U8S8 per-channel", "static S8S8 per-channel")}


def test_an_openvino_run_too_slow_under_emulation_is_not_run_and_says_why(tmp_path, monkeypatch):
    pytest.importorskip("openvino")
    files = _staged_05(tmp_path / "05")
    monkeypatch.setattr(emulated, "OPENVINO_MINUTES", 60)  # every run fits: all four are scored
    ran = emulated._lesson05c(tmp_path / "05", files, "max")
    assert ran["runs_scored"] == 4 and ran["pinned_drift"] < 1e-4
    monkeypatch.setattr(emulated, "OPENVINO_MINUTES", 0)  # none fits: each is probed, then left
    left = emulated._lesson05c(tmp_path / "05", files, "max")
    reason = left["runs_scored"]["not_measured"]
    assert "not run, too slow under emulation" in reason
    assert (
        all(f"'{run}'" in reason for run in left["openvino_stopped"]) and len(left["openvino_stopped"]) == 4
    )
    assert left["default_drift"] == left["runs_scored"]


def test_openvino_is_scored_against_the_fp32_logits_lesson_05_saved_for_these_images(tmp_path, monkeypatch):
    import numpy as np

    from course_lib import measure

    pytest.importorskip("openvino")
    files = _staged_05(tmp_path / "05", rows=200)
    monkeypatch.setattr(emulated, "OPENVINO_MINUTES", 60)
    x = np.load(tmp_path / "05" / "x.npy")
    shifted = measure.logits(tmp_path / "05" / "tiny.onnx", x) + 1.0  # saved logits 1.0 off
    np.savez(tmp_path / "05" / "logits.max.npz", **{n: shifted for n in files})
    ran = emulated._lesson05c(tmp_path / "05", files, "max")
    assert ran["pinned_drift"] == pytest.approx(1.0, abs=1e-3)  # scored against the saved fp32 logits
    np.savez(tmp_path / "05" / "logits.max.npz", **{n: shifted[:100] for n in files})  # other images
    again = emulated._lesson05c(tmp_path / "05", files, "max")
    assert again["pinned_drift"] < 1e-4  # not reused: fp32 computed here


def test_a_replay_reuses_lesson_05s_logits_only_when_every_file_saved_them(tmp_path):
    import numpy as np

    paths = {"fp32": tmp_path / "a.onnx", "static U8S8 per-channel": tmp_path / "b.onnx"}
    saved = tmp_path / "logits.max.npz"
    assert emulated._saved_logits(saved, paths, 5) == {}  # nothing saved
    np.savez(saved, fp32=np.ones((5, 10)), **{"static U8S8 per-channel": np.zeros((5, 10))})
    reused = emulated._saved_logits(saved, paths, 5)
    assert set(reused) == set(paths) and reused["fp32"].sum() == 50
    assert emulated._saved_logits(saved, paths, 6) == {}  # saved for other images
    assert emulated._saved_logits(saved, paths | {"dynamic (QUInt8)": tmp_path / "c.onnx"}, 5) == {}


def test_replay_runs_the_named_cpu_only_and_refuses_plain_max(tmp_path, capsys):
    from course_machinery import cli

    calls = tmp_path / "calls"
    tool = tmp_path / "arm64"
    tool.write_text(f'#!/usr/bin/env bash\necho "$@" >> {calls}\n')
    tool.chmod(0o755)
    assert cli.emulated("replay", tool=tool, cpus=["max"]) == 2
    assert "Expected --cpu to name one of cortex-a72, neoverse-n1, max,sve=off,sme=off; got max" in (
        capsys.readouterr().err
    )
    assert not calls.exists()  # nothing ran
    assert cli.emulated("replay", tool=tool, cpus=[I8MM]) == 0
    (line,) = calls.read_text().splitlines()
    assert line.startswith(f"--cpu {I8MM} --pip ") and line.endswith(f"course_machinery/emulated.py {I8MM}")
    assert cli.emulated("replay", tool=tool) == 0  # no --cpu: every CPU, in turn
    assert [x.split()[1] for x in calls.read_text().splitlines()[1:]] == list(emulated.ARM_CPUS)
