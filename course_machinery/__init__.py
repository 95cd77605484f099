"""The course's own machinery: what checks, makes and publishes the course. Not lesson material.

A learner reads course_lib/, the helper library the lessons use. This package holds the rest, the
parts a lesson runs without teaching them: it uses course_lib, and course_lib never imports it
(tests/test_layout.py checks the direction). The few modules a lesson calls (the check cells, the
exercises' checks, Colab's setup, the audit) are reached through course_lib (`cl.verify`,
`cl.checks`, `from course_lib import colab`), so a lesson names one library.

What a lesson calls (listed in course_lib's `_MACHINERY`):
    verdicts  the check cell (`cl.verify`): a section's sentences checked on this run's figures
    claims    a sentence about a result, its key and the rule that checks it; the kernel's ledger
    checks    each lesson's claims (claimsNN) and its exercises' self-checks (lessonNN)
    colab     a lesson's setup on Colab: Drive, the install beside Colab's PyTorch, its models
    audit     the course's method on any ONNX model (`python -m course_lib audit`, lesson 07)
    models    every model by name (`cl.models.get`): registry, training, export, verified cache
    release   a published release: its archive's download and reading, each file checked
    text_encoder  all-MiniLM-L6-v2: published weights, ONNX export, tokenized sentences, embeddings
    nanogpt   lesson 07's character-level GPT: trained here, cached, exported, its perplexity
    variants  the ResNet18's INT8 variants (lessons 02-03's quantizer settings), built in one call
    hardware  the CPU's INT8 features, read on every platform (/proc/cpuinfo, sysctl, Windows, CPUID)
    cpuid     the CPUID instruction itself (x86-64)
    results   the results store the check cells fill and the report reads
    runtimes  OpenVINO beside ONNX Runtime: a compiled model behind `measure`'s methods, its layers

What makes and checks the course:
    reference the reference runs (figures measured on named CPUs) and their ledgers
    cli       `python -m course_lib <command>`: one function per command
    paths     the repository root and the build folder (the working directory after a pip install)
    runner    execute a lesson notebook in a fresh kernel, timed, with its peak memory
    recording record a run's figures as a reference run; check every class against the sentences
    sentences find markdown sentences that state a result but are bound to no claim
    emulated  the ARM class, replayed on emulated ARM CPUs (nothing timed)
    cpumask   a run with the CPU's features masked to another class's (AVX2 only, say)
    editions  the student edition (solutions removed) and the instructor guide's timings table
    report    the seeds' quoted claims beside what this machine measured (build/report.md, .html)
    html_page Markdown as one small HTML page (the report's and the audit's)
    keys      the results the report reads: lesson, model, variant and metric, typed once
    bench     every INT8 variant against fp32 (and ONNX Runtime against PyTorch), one table
    site      the executed lessons and the report as a static site (jupyter-book)
    bundle    one .zip for a room without internet: the course, the data, the prepared models
    launch    the Colab/Binder badges and setup cells, from pyproject.toml's address
    publish   write the release files: the trained models in one archive, and its manifest
    install   PyTorch from the right index, and what was installed
    doctor    whether this machine can run the course, and what to do where it cannot
"""
