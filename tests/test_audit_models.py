"""The audit on models no one here trained: a torchvision MobileNetV3 (depthwise convolutions), a
Hugging Face BERT encoder fed input_ids and a padded attention_mask, and a torch module with two
outputs. Each has random weights and is exported here with the dynamo exporter at opset 18, as
course_lib exports its own models; each audit runs end to end, and the tests check what it found."""

from __future__ import annotations

import json
import warnings

import numpy as np
import onnx
import pytest

torch = pytest.importorskip("torch")

OPSET = 18


@pytest.fixture(autouse=True)
def short_timings(monkeypatch):
    """One second per speed comparison instead of six: these tests read what the audit built and
    judged, never a speed."""
    from course_machinery.audit import run

    monkeypatch.setattr(run, "SECONDS_PER_COMPARISON", 1.0)


def _export(module, args, path, names, outputs, dynamic):
    """torch.onnx.export with the dynamo exporter at opset 18, quietly."""
    module.eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            module,
            args,
            str(path),
            input_names=names,
            output_names=outputs,
            dynamic_shapes=dynamic,
            opset_version=OPSET,
            dynamo=True,
            verbose=False,
        )
    onnx.checker.check_model(str(path))
    return path


# ------------------------------------------------------------------------------------ MobileNetV3
@pytest.fixture(scope="module")
def mobilenet(tmp_path_factory):
    torchvision = pytest.importorskip("torchvision")
    torch.manual_seed(0)
    model = torchvision.models.mobilenet_v3_small(weights=None)
    path = tmp_path_factory.mktemp("mobilenet") / "mobilenet_v3_small.onnx"
    batch = torch.export.Dim("batch")
    return _export(model, (torch.randn(1, 3, 64, 64),), path, ["image"], ["logits"], {"x": {0: batch}})


def test_a_torchvision_mobilenet_with_depthwise_convolutions(mobilenet, tmp_path):
    from course_machinery.audit import audit

    images = np.random.default_rng(0).standard_normal((100, 3, 64, 64)).astype(np.float32)
    result = audit(mobilenet, {"image": images}, batch=(4,), out=tmp_path / "out", progress=False)
    skipped = {s.name for s in result.skipped}
    assert {"dynamic INT8", "4-bit weight-only"} <= skipped  # convolutions do the work (lesson 02)
    static = [v for v in result.variants if v.kind == "static"]
    assert static and all(v.quality is not None and v.quality.figures["n"] == 80 for v in static)
    # Its depthwise convolutions (one group per channel) are quantized like the others: a
    # DequantizeLinear feeds each one's weight.
    pre = onnx.load(str(tmp_path / "out" / "work" / "mobilenet_v3_small.pre.onnx"))
    depthwise = {
        n.name
        for n in pre.graph.node
        if n.op_type == "Conv" and any(a.name == "group" and a.i > 1 for a in n.attribute)
    }
    assert len(depthwise) >= 9
    variant = onnx.load(str(static[0].path))
    made_by = {out: n.op_type for n in variant.graph.node for out in n.output}
    quantized = {
        n.name
        for n in variant.graph.node
        if n.name in depthwise and made_by.get(n.input[1]) == "DequantizeLinear"
    }
    assert quantized == depthwise
    assert all(v.recipe.function == "quantize_static" and not v.keep_float for v in static)
    data = json.loads((tmp_path / "out" / "audit.json").read_text())
    assert data["decision"]["batch"] == 4 and data["quality_rule"]["outputs"] == ["logits"]
    assert data["quality_rule"]["masking"]["mask_input"] is None


# ------------------------------------------------------------------------------------ BERT
SEQ = 16


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    transformers = pytest.importorskip("transformers")
    config = transformers.BertConfig(
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=128,
        vocab_size=1000,
        attn_implementation="eager",  # attention as two MatMuls of activations, as exports of it have
    )
    torch.manual_seed(0)
    encoder = transformers.BertModel(config)

    class Encoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bert = encoder

        def forward(self, input_ids, attention_mask):
            out = self.bert(input_ids=input_ids, attention_mask=attention_mask)
            return out.last_hidden_state, out.pooler_output

    path = tmp_path_factory.mktemp("bert") / "tiny_bert.onnx"
    batch, seq = torch.export.Dim("batch"), torch.export.Dim("seq")
    ids, mask = torch.randint(1, 1000, (2, SEQ)), torch.ones(2, SEQ, dtype=torch.int64)
    axes = {"input_ids": {0: batch, 1: seq}, "attention_mask": {0: batch, 1: seq}}
    names = ["input_ids", "attention_mask"]
    return _export(Encoder(), (ids, mask), path, names, ["last_hidden_state", "pooler_output"], axes)


def _sentences(n: int = 120, seed: int = 0) -> dict[str, np.ndarray]:
    """Token ids of n sentences of 4 to 16 tokens, padded with 0 to 16, and their attention mask."""
    rng = np.random.default_rng(seed)
    mask = (np.arange(SEQ)[None] < rng.integers(4, SEQ + 1, n)[:, None]).astype(np.int64)
    return {"input_ids": rng.integers(1, 1000, (n, SEQ)) * mask, "attention_mask": mask}


def test_padded_positions_do_not_change_the_masked_comparison_of_a_real_encoder(bert):
    """Change every padded token: BERT's real positions do not see them (the attention mask), its
    padded positions do. The masked cosine between the two runs is 1; unmasked it is not."""
    from course_machinery.audit import read_model
    from course_machinery.audit.evaluate import Rule, collect, find_mask

    feed = _sentences(40)
    other = dict(feed, input_ids=np.where(feed["attention_mask"] == 1, feed["input_ids"], 7))
    names = ["last_hidden_state", "pooler_output"]
    ref = collect(bert, feed, names, batch=40, threads=1)
    moved = collect(bert, other, names, batch=40, threads=1)
    assert not np.allclose(ref["last_hidden_state"], moved["last_hidden_state"], atol=1e-3)  # padding moved
    masking = find_mask(read_model(bert), feed, names, {n: ref[n].shape for n in names})
    assert masking.mask == "attention_mask" and masking.masked == {
        "last_hidden_state": True,
        "pooler_output": False,
    }
    judged = Rule("fp32", ["last_hidden_state"], ref, feed, masking=masking).judge(moved)
    assert judged.figures["cosine_worst"] > 0.99999 and judged.figures["relative_error_max"] < 1e-4
    unmasked = Rule("fp32", ["last_hidden_state"], ref, feed).judge(moved)
    assert unmasked.figures["cosine_worst"] < 0.999


def test_a_hugging_face_encoder_with_a_padded_attention_mask(bert, tmp_path):
    from course_machinery.audit import audit
    from course_machinery.audit.candidates import activation_matmuls

    result = audit(bert, _sentences(), batch=(8,), out=tmp_path / "out", progress=False, output="all")
    assert (
        result.mode == "fp32"
        and "every compared output ('last_hidden_state', 'pooler_output')" in result.decided_by
    )
    report = (tmp_path / "out" / "audit.md").read_text()
    assert "are left out of the comparison of 'last_hidden_state'" in report
    assert "'pooler_output' has no axis of 'attention_mask''s positions" in report
    for v in result.variants:  # both outputs judged, each must pass
        assert set(v.quality.figures["outputs"]) == {"last_hidden_state", "pooler_output"}
        assert v.quality.passes == all(
            f["cosine_worst"] >= 0.98 and f["cosine_mean"] >= 0.99
            for f in v.quality.figures["outputs"].values()
        )
    # The static variants keep attention's two MatMuls of activations per layer in float, and say why.
    products, unnamed = activation_matmuls(tmp_path / "out" / "work" / "tiny_bert.pre.onnx")
    assert len(products) == 4 and unnamed == 0
    static = [v for v in result.variants if v.kind == "static"]
    assert static and all(v.keep_float == products and "lesson 06" in v.keep_float_why for v in static)
    for v in static:
        graph = onnx.load(str(v.path)).graph
        made_by = {out: n.op_type for n in graph.node for out in n.output}
        matmuls = {n.name: [made_by.get(i) for i in n.input] for n in graph.node if n.op_type == "MatMul"}
        assert all("DequantizeLinear" not in matmuls[name] for name in products)  # left in float
        weighted = [inputs for name, inputs in matmuls.items() if name not in products]
        assert weighted and all(inputs == ["DequantizeLinear"] * 2 for inputs in weighted)  # quantized
        assert v.recipe.kwargs["nodes_to_exclude"] == products
    data = json.loads((tmp_path / "out" / "audit.json").read_text())
    kept = next(v for v in data["variants"] if v["kind"] == "static")["kept_in_float"]
    assert kept["nodes"] == products and "queries by keys" in kept["why"]


# ------------------------------------------------------------------------------------ two outputs
class TwoHeads(torch.nn.Module):
    """x (N, 16) -> hidden (N, 32) -> `scores` (N, 4), and `delta` (N, 8): the difference of two
    nearly equal projections, which 8-bit weights cannot keep (each rounds by more than they differ)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.body = torch.nn.Linear(16, 32)
        self.scores = torch.nn.Linear(32, 4)
        self.left = torch.nn.Linear(32, 8, bias=False)
        self.right = torch.nn.Linear(32, 8, bias=False)
        with torch.no_grad():  # 1e-4 apart: far below an 8-bit step of these weights (about 1e-3)
            self.right.weight.copy_(self.left.weight + 1e-4 * torch.randn_like(self.left.weight))

    def forward(self, x):
        hidden = torch.relu(self.body(x))
        return self.scores(hidden), self.left(hidden) - self.right(hidden)


@pytest.fixture(scope="module")
def two_heads(tmp_path_factory):
    path = tmp_path_factory.mktemp("two") / "two_heads.onnx"
    batch = torch.export.Dim("batch")
    return _export(TwoHeads(), (torch.randn(2, 16),), path, ["x"], ["scores", "delta"], {"x": {0: batch}})


def _x(n: int = 150) -> dict[str, np.ndarray]:
    return {"x": np.random.default_rng(0).standard_normal((n, 16)).astype(np.float32)}


def _rule_passes(figures: dict) -> bool:
    return figures["cosine_worst"] >= 0.98 and figures["cosine_mean"] >= 0.99


def test_output_chooses_what_the_rule_reads_and_all_judges_each(two_heads, tmp_path):
    from course_machinery.audit import audit

    def run(output, folder):
        return audit(
            two_heads, _x(), batch=(8,), out=tmp_path / folder, progress=False, openvino=False, output=output
        )

    scores, every = run("scores", "scores"), run("all", "all")
    assert scores.decided_by == "cosine on output 'scores'" and scores.quality_rule["outputs"] == ["scores"]
    assert every.decided_by == "cosine on every compared output ('scores', 'delta'): each must pass"
    for v in every.variants:
        per_output = v.quality.figures["outputs"]
        assert set(per_output) == {"scores", "delta"}
        assert v.quality.passes == (_rule_passes(per_output["scores"]) and _rule_passes(per_output["delta"]))
    # Dynamic INT8 keeps the scores and loses the delta: it passes on 'scores', fails on 'all'.
    dynamic = {
        r: next(v for v in result.variants if v.kind == "dynamic")
        for r, result in (("scores", scores), ("all", every))
    }
    assert dynamic["scores"].quality.passes and "cosine_mean" in dynamic["scores"].quality.figures
    assert not dynamic["all"].quality.passes and dynamic["all"].quality.advice.startswith("'delta': ")
    assert every.decision.verdicts[dynamic["all"].name][0] == "fails"
    data = json.loads((tmp_path / "all" / "audit.json").read_text())
    assert data["quality_rule"]["outputs"] == ["scores", "delta"]


def test_the_metric_hook_is_called_on_every_model_and_decides(two_heads, tmp_path, capsys):
    """A metric that reads `delta` fails dynamic INT8, which the cosine on `scores` passes; one that
    reads `scores` with a loose tolerance passes it where the rule on every output fails it."""
    from course_machinery.audit import audit
    from course_machinery.cli import main

    calls = []

    def delta_size(outputs, inputs, labels):
        calls.append((sorted(outputs), len(inputs["x"]), labels))
        return float(np.abs(outputs["delta"]).mean()), False

    strict = audit(
        two_heads,
        _x(),
        batch=(8,),
        out=tmp_path / "strict",
        progress=False,
        openvino=False,
        output="scores",
        metric=delta_size,
    )
    assert calls[0] == (["delta", "scores"], 120, None)  # every output, the evaluation rows, no labels
    assert len(calls) == 1 + len(strict.variants)  # fp32 once, then each measured variant
    assert all(v.quality.mode == "metric" for v in strict.variants)
    dynamic = next(v for v in strict.variants if v.kind == "dynamic")
    assert dynamic.quality.figures["outputs_rule"]["passes"]  # the cosine on 'scores' alone would pass it
    assert not dynamic.quality.passes and strict.decision.verdicts[dynamic.name][0] == "fails"
    assert "delta_size" in dynamic.quality.advice and "delta_size" in strict.decided_by
    assert dynamic.quality.figures["metric_fp32"] == strict.quality_rule["metric"]["fp32_value"]

    metric_file = tmp_path / "task.py"
    metric_file.write_text(
        "import numpy as np\n\n"
        "def mean_score(outputs, inputs, labels):\n"
        "    return float(np.abs(outputs['scores']).mean()), True\n"
    )
    np.savez(tmp_path / "x.npz", **_x())
    argv = ["audit", str(two_heads), "--inputs", str(tmp_path / "x.npz"), "--batch", "8", "--output", "all"]
    options = [
        "--metric",
        f"{metric_file}:mean_score",
        "--metric-tolerance",
        "0.5",
        "--runtimes",
        "onnxruntime",
    ]
    assert main([*argv, *options, "--out", str(tmp_path / "loose"), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "quality decided by your metric" in printed and "mean_score" in printed
    data = json.loads((tmp_path / "loose" / "audit.json").read_text())
    assert data["mode"] == "metric" and data["quality_rule"]["metric"]["tolerance"] == 0.5
    assert all(v["quality"]["passes"] for v in data["variants"])
    dynamic = next(v for v in data["variants"] if v["kind"] == "dynamic")
    assert not dynamic["quality"]["outputs_rule"]["passes"]  # the metric decided, not the rule on 'delta'
    assert (
        dynamic["quality"]["metric"].endswith("task.py:mean_score") and "metric_value" in dynamic["quality"]
    )
    report = (tmp_path / "loose" / "audit.md").read_text()
    assert "mean_score" in report and "against fp32's" in report
