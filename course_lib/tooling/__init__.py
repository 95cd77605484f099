"""The course's own production tooling: what makes, checks and publishes the course.

Lessons never import this package (tests/test_packaging.py checks it): a learner reads the
modules one level up, which are what the lessons use. Nothing in course_lib outside this folder
imports it either, so the direction is one way: tooling uses the library, never the reverse.

    cli       `python -m course_lib <command>`: one function per command
    paths     the repository root and the build folder (the working directory after a pip install)
    runner    execute a lesson notebook in a fresh kernel, timed, with its peak memory
    editions  the student edition (solutions removed) and the instructor guide's timings table
    report    the seeds' quoted claims beside what this machine measured (build/report.md, .html)
    keys      the results the report reads: lesson, model, variant and metric, typed once
    bench     every INT8 variant against fp32 (and ONNX Runtime against PyTorch), one table
    site      the executed lessons and the report as a static site (jupyter-book)
    bundle    one .zip for a room without internet: the course, the data, the prepared models
    launch    the Colab/Binder badges and setup cells, from pyproject.toml's address
    release   write the release files: the trained models in one archive, and its manifest
"""
