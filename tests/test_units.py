"""course_lib.units: the one way the course writes a size, a duration and a speed ratio."""

from __future__ import annotations

import pytest

from course_lib import units


def test_a_size_is_written_in_decimal_megabytes_from_bytes_or_from_a_file(tmp_path):
    path = tmp_path / "model.onnx"
    path.write_bytes(b"\0" * 2_345_678)
    assert units.format_bytes(44_712_345) == "44.7 MB"
    assert units.format_bytes(path) == units.format_bytes(str(path)) == "2.3 MB"
    assert units.format_bytes(path, 2) == "2.35 MB"
    assert units.format_bytes(1_234_567_890, 0) == "1,235 MB"  # grouped, as the tooling prints GB-sized files
    assert units.format_bytes(44_712_345, unit=False) == "44.7"  # under a column headed "MB"
    assert units.megabytes(path) == pytest.approx(2.345678)
    assert units.megabytes(2**20) == pytest.approx(1.048576)  # the course's MB is 10**6 bytes, not 2**20


@pytest.mark.parametrize("bad", [None, True, [1, 2], b"12"])
def test_a_size_that_is_neither_bytes_nor_a_file_is_refused_with_what_to_pass(bad):
    with pytest.raises(TypeError, match="a number of bytes or a file's path; got .* Pass the bytes"):
        units.format_bytes(bad)


def test_a_ratio_and_a_duration():
    assert units.format_ratio(1.3412, 1.2891, 1.4049) == "1.34x (1.29–1.40)"
    assert [units.format_duration(s) for s in (0.44, 42.4, 522.0)] == ["0.4 s", "42 s", "8 min 42 s"]
