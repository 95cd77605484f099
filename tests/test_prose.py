"""No measured-looking number typed into a lesson's prose: every figure with a unit (%, x, ms, MB,
GB, s, dB, points, images/s, minutes) or a count (bytes, nodes, ops, times, images, layers, tokens,
runs, …) in a markdown cell, or in the literal text of a computed
`Markdown(...)` sentence, is either computed in the run or listed below as a quote, a definition
or a setting of the lesson, with the reason it may stand as typed.

Code spans, formulas ($…$), link targets, quote lines ("> **Quote** …") and the reference blocks
(generated from the course's stored reference runs, labelled with CPU and commit) are not typed claims.
Bare numbers are not checked: in the lessons they are section and lesson numbers, bit widths, the
formulas' constants (255, 127, 32,767) and ranges such as [0, 1].
"""

from __future__ import annotations

import ast
import re

import jupytext
import pytest

from conftest import ROOT

SOURCES = sorted((ROOT / "notebooks" / "src").glob("*.py"))
UNIT = re.compile(
    r"(?<![\w.])\d[\d,]*(?:\.\d+)?"
    r"(?:[–-]\d[\d,]*(?:\.\d+)?)?"
    r"\s?(?:%|x\b|ms\b|MB\b|GB\b|kB\b|s\b|dB\b|points?\b|images/s\b|minutes?\b|min\b|seconds?\b"
    # counts, the other kind of figure a run produces ("21 nodes", "3 times", "535,191 bytes")
    r"|bytes?\b|nodes?\b|ops?\b|times\b|-fold\b|weights\b|images\b|layers?\b|tokens?\b|sentences?\b"
    r"|runs?\b|bins?\b|samples?\b|classes\b|channels?\b|scales?\b)"
)
# (lesson, figure as written) -> why it may be typed rather than computed.
ALLOWED = {
    ("00", "2-4x"): "a blog post's claim, quoted as the example of a quote",
    ("00", "2 GB"): "Binder's memory limit, a fact of the platform",
    ("01", "6 dB"): "the 6 dB-per-bit rule of quantization noise, a formula",
    ("05", "90%"): "the confidence level of the interval, a setting",
    ("05", "2–4x"): "seed 000's figure, named as the quote in the sentence that compares with it",
    ("02", "2 GB"): "Binder's memory limit, a fact of the platform",
    ("05", "2 GB"): "Binder's memory limit, a fact of the platform",
    ("07", "210,000 weights"): "seed 003's NanoGPT, named as the quote it is",
    ("07", "0.69x"): "seed 003's figure, named as the quote in the sentence",
    ("07", "0.03 MB"): "seed 003's figure, named as the quote in the sentence",
    ("07", "64 channels"): "the NanoGPT's width, a setting (nanogpt.GPTConfig)",
    ("07", "128 tokens"): "the sequence length, a setting (text_encoder.encode)",
    ("07", "90%"): "the confidence level of the interval, a setting",
    ("07", "1 MB"): "defines the unit the exercise asks for",
    ("07", "2%"): "exercise 4's perplexity tolerance, a setting (the claim on dynamic INT8 uses the same)",
    ("07", "95%"): "the audit's rule for one value per sample, a setting (audit.evaluate.MAX_RELATIVE_ERROR)",
    ("07", "5%"): "the audit's rule for one value per sample, a setting (audit.evaluate.MAX_RELATIVE_ERROR)",
    ("02", "5%"): "the margin the claim cell tests (lesson 05's 'clearly faster' rule), a setting",
    ("01", "99.9%"): "defines the 99.9th percentile",
    ("01", "0.1%"): "defines the 99.9th percentile's tail",
    ("02", "90 %"): "the confidence level of the interval, a setting",
    ("04", "95 %"): "the confidence level of the interval, a setting",
    ("04", "0.5 points"): "seed 000's acceptance rule, quoted with its source",
    ("04", "99 %"): "seed 000's acceptance rule, quoted with its source",
    ("04", "200 points"): "the edge set's size, a setting (data.load_moons)",
    ("04", "6 dB"): "the 6 dB-per-bit rule of quantization noise, a formula",
    ("04", "0 dB"): "how to read the gap column, not a result",
    ("04", "0.3 points"): "the deployment target the lesson sets",
    ("04", "99.5 %"): "the deployment target the lesson sets",
    ("04", "1.5x"): "the deployment target the lesson sets",
    ("04", "10%"): "the margin the per-tensor claim allows, a setting (timed in turn with per-channel)",
    ("00", "10 classes"): "Fashion-MNIST's classes, a fact of the dataset",
    ("00", "1,000 images"): "the calibration pool's size, a setting (data._split_indices)",
    ("01", "16 times"): "int4 has 2**4 codes, int8 2**8: arithmetic",
    ("01", "16 bytes"): "32 packed 4-bit values, ggml's Q4_0 block as its source defines it",
    ("02", "128 tokens"): "the sequence length, a setting (text_encoder.encode)",
    ("03", "1,000 images"): "the calibration pool's size, a setting (data._split_indices)",
    ("03", "10,000 images"): "Fashion-MNIST's test set, a fact of the dataset",
    ("03", "500 images"): "the largest calibration set the lesson tries, a setting",
    ("03", "2,048 bins"): "the histogram size the lesson sets (TensorRT's number)",
    ("03", "128 bins"): "ONNX Runtime's default, read from its source",
    ("04", "10 images"): "the weak-calibration variant's set, a setting the lesson plants",
    ("04", "100 images"): "the debugger's sample, a setting",
    ("04", "40 runs"): "the timing's run count, a setting",
    ("04", "500 samples"): "seed 004's advice, quoted with its source",
    ("05", "256 tokens"): "the longest sequence 05b times, a setting",
    ("05", "16 tokens"): "the shortest sequence 05b times, a setting",
    ("05", "128 tokens"): "the sequence length of lesson 02's timing, a setting (text_encoder.encode)",
    ("05", "2,000 images"): "the test images the lesson scores, a setting",
    ("05", "95%"): "the confidence level of the accuracy interval, a setting",
    ("05", "99%"): "seed 000's acceptance rule (agreement above 99 %), quoted in lesson 04 (05b's remedies)",
    ("05", "5%"): "the margin 05b sets for leaving the default remedy, a setting",
    ("03", "95 %"): "the confidence level of the agreement interval, a setting",
    ("03", "90 %"): "the confidence level of the speed interval, a setting",
    ("06", "300 sentences"): "the sentence set's size, a setting (text_encoder.load_sentences)",
    ("06", "128 tokens"): "the sequence length, a setting (text_encoder.encode)",
    ("06", "99 %"): "lesson 04's acceptance rule (seed 000), restated in 06's rule and 06b's exercise A",
    ("06", "4 bytes"): "a float32 scale's size, a fact of the format",
    ("06", "32 weights"): "the block size the sentence works through, a setting",
    ("06", "0.625 bytes"): "half a byte plus 4 bytes per 32 weights: arithmetic",
    ("06", "256 times"): "2**16 levels against 2**8: arithmetic",
    ("06", "128 images"): "the QAT batch size, a setting (BATCH in the cell below it)",
    ("06", "16 sentences"): "the larger batch 06b times static INT8 at, a setting (its feeds)",
}


def _prose(text: str) -> str:
    # Reference blocks are generated from the stored reference runs (tests/test_reference.py).
    text = re.sub(r"<!-- reference(?:-table|-claim|-order)?:.*?<!-- /reference -->", "", text, flags=re.S)
    text = re.sub(r"`[^`]*`", "", text)
    text = re.sub(r"\$\$.*?\$\$|\$[^$\n]*\$", "", text, flags=re.S)
    text = re.sub(r"\]\([^)]*\)", "]", text)
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith(">"))


def _markdown_literals(code: str) -> list[str]:
    """The literal text (not the {computed} parts) of every Markdown(...) call in a code cell."""
    try:
        tree = ast.parse(code)
    except SyntaxError:  # IPython magics
        return []
    found = []
    for node in ast.walk(tree):
        name = getattr(node.func, "id", getattr(node.func, "attr", "")) if isinstance(node, ast.Call) else ""
        if name == "Markdown":
            specs = {id(c) for f in ast.walk(node) if isinstance(f, ast.FormattedValue) for c in ast.walk(f)}
            for part in ast.walk(node):  # string constants, minus format specs such as ".2f"
                if isinstance(part, ast.Constant) and isinstance(part.value, str) and id(part) not in specs:
                    found.append(part.value)
    return found


def typed_figures(source) -> list[tuple[str, str, str]]:
    """(lesson, figure, the sentence it is in) for every figure with a unit in a lesson's prose.

    A sentence marked as a quote, a setting or a definition (`<!-- quote -->`, `<!-- setting -->`,
    `<!-- definition -->`: course_machinery/sentences.py) may type its figures; a sentence bound to
    a claim may not: its figures come from the run."""
    from course_machinery.sentences import sentences_of_markdown

    lesson = source.name[:2]
    found = []
    for cell in jupytext.read(source).cells:
        if cell.cell_type == "markdown":
            for sentence in sentences_of_markdown(cell.source, lesson):
                if {"quote", "setting", "definition"} & {kind for kind, _ in sentence.markers}:
                    continue
                text = _prose(sentence.text)
                found += [(lesson, m.group(), text) for m in UNIT.finditer(text)]
        elif cell.cell_type == "code":
            for text in cell_literals(cell.source):
                found += [
                    (lesson, m.group(), line.strip())
                    for line in _prose(text).splitlines()
                    for m in UNIT.finditer(line)
                ]
    return found


def cell_literals(code: str) -> list[str]:
    return _markdown_literals(code)


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_no_measured_looking_figure_is_typed_into_a_lesson(source):
    typed = [
        (lesson, fig, line) for lesson, fig, line in typed_figures(source) if (lesson, fig) not in ALLOWED
    ]
    assert typed == [], (
        "Compute these in the run, quote them with their source, or add them to ALLOWED with the reason:\n"
        + "\n".join(f"  {lesson}: {fig!r} in: {line[:100]}" for lesson, fig, line in typed)
    )


def test_the_figure_pattern_catches_what_it_should():
    text = "INT8 ran 1.8x faster, 12.5 ms, 45 → 12 MB, 0.2 points, 2–4x, 98.5 %, 300 images/s, 21 nodes"
    assert [m.group() for m in UNIT.finditer(_prose(text))] == [
        "1.8x",
        "12.5 ms",
        "12 MB",
        "0.2 points",
        "2–4x",
        "98.5 %",
        "300 images/s",
        "21 nodes",
    ]
    assert [
        m.group() for m in UNIT.finditer(_prose("`0.5 points` $2x$ > **Quote**: 3x\nint8, 2 × 255"))
    ] == []
    assert _markdown_literals('display(Markdown(f"ran {s:.2f}x, on 500 images in 3 s"))') == [
        "ran ",
        "x, on 500 images in 3 s",
    ]


# Sentences that say, by hand, on which CPU classes a result held. The check tables say that (each
# reference CPU's stored verdict on the sentence), and a class added later would make a typed "both"
# false without anyone noticing.
ACROSS_CLASSES = re.compile(
    r"(?:both|every|each|all|neither|either|any)(?: of (?:its|the course's|the))? reference CPUs?"
    r"|wherever this lesson has run|every CPU the course has (?:measured|met)|both kinds of CPU"
    r"|on both CPUs|the (?:VNNI|AVX2(?:-only)?) reference CPU",
    re.IGNORECASE,
)


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_no_lesson_says_by_hand_on_which_reference_cpus_a_result_held(source):
    found = []
    for cell in jupytext.read(source).cells:
        if cell.cell_type != "markdown":
            continue
        text = re.sub(
            r"<!-- reference(?:-table|-claim|-order)?:.*?<!-- /reference -->", "", cell.source, flags=re.S
        )
        flat = " ".join(text.split())  # a phrase may wrap onto the next line
        found += [
            f"{m.group()!r} in: ...{flat[max(0, m.start() - 60) : m.end() + 40]}..."
            for m in ACROSS_CLASSES.finditer(flat)
        ]
    assert found == [], (
        "Bind the sentence to a claim (`<!-- claim: name -->`): its check table says where it held, "
        "not a sentence by hand:\n" + "\n".join(found)
    )
