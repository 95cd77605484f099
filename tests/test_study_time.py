"""Every lesson fits its study budget, and the course checking itself stays out of the way
(benchmarks/study_time.py: markdown words / 100 + code lines / 6 over the whole student notebook)."""

from __future__ import annotations

import importlib.util

import pytest

from conftest import ROOT

_spec = importlib.util.spec_from_file_location("study_time", ROOT / "benchmarks" / "study_time.py")
study_time = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(study_time)

NOTEBOOKS = sorted(study_time.STUDENT.glob("[0-9][0-9]*_*.ipynb"))


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_each_lesson_fits_its_study_time(notebook):
    found = study_time.study(notebook)
    minutes = study_time.minutes(found)
    assert minutes <= study_time.limit_of(notebook), (
        f"{notebook.name}: {minutes:.0f} minutes of study ({found['words']:,} words, {found['code']} code lines); "
        f"the limit is {study_time.limit_of(notebook)}"
    )


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_checks_and_reference_lines_stay_under_a_tenth_of_a_lesson(notebook):
    found = study_time.study(notebook)
    assert found["checking"] / found["lines"] < study_time.CHECK_SHARE_LIMIT, found


def test_the_count_sees_checks_and_reference_blocks(tmp_path):
    import json

    cells = [
        {
            "cell_type": "markdown",
            "source": ["Intro words here.\n", "<!-- reference: {a} -->\n", "x\n", "<!-- /reference -->"],
        },
        {"cell_type": "code", "source": ["import course_lib as cl\n", "x = 1\n"]},
        {"cell_type": "code", "source": ['cl.verify("03.1", x=x)']},
    ]
    path = tmp_path / "99_x.ipynb"
    path.write_text(json.dumps({"cells": cells}))
    found = study_time.study(path)
    assert (found["code"], found["lines"], found["checking"]) == (3, 7, 4)
    assert study_time.limit_of(path) == 60 and study_time.limit_of(tmp_path / "99b_x.ipynb") == 75
