"""Lesson 00's self-checks: each passes the right answer and teaches on each wrong answer it recognises."""

from __future__ import annotations

import numpy as np
import pytest

from course_lib.data import CLASS_NAMES, preprocess
from course_machinery import checks


# ---------------------------------------------------------------------------------------------------
# Exercise 1: the value the model sees for a raw pixel
# ---------------------------------------------------------------------------------------------------
def test_normalised_pixel_right_and_each_slip():
    mean, std = 0.286, 0.353
    right = checks.check_normalised_pixel((200 / 255 - mean) / std, 200, mean, std)
    assert right and "reaches the model" in right.message
    assert "No answer yet" in checks.check_normalised_pixel(None, 200, mean, std).message
    scaled = checks.check_normalised_pixel(200 / 255, 200, mean, std)
    assert not scaled and "did not subtract the mean" in scaled.message
    raw = checks.check_normalised_pixel((200 - mean) / std, 200, mean, std)
    assert not raw and "Divide the pixel by 255" in raw.message
    other = checks.check_normalised_pixel(3.0, 200, mean, std)
    assert not other and "then subtract the mean" in other.message


# ---------------------------------------------------------------------------------------------------
# Exercise 2: the fp32 file's size, predicted from the parameter count
# ---------------------------------------------------------------------------------------------------
@pytest.fixture
def model_file(tmp_path):
    path = tmp_path / "model.onnx"
    path.write_bytes(b"\0" * 4_010)  # 1,000 fp32 parameters and 10 bytes of graph
    return path


def test_file_bytes_passes_a_prediction_from_the_count(model_file):
    assert "No answer yet" in repr(checks.check_fp32_file_bytes(None, 1_000, model_file))
    right = checks.check_fp32_file_bytes(4 * 1_000, 1_000, model_file)
    assert right and "Predicted within 0.25%" in right.message and "99.75%" in right.message


def test_file_bytes_refuses_the_size_read_from_the_file(model_file):
    read = checks.check_fp32_file_bytes(4_010, 1_000, model_file)
    assert not read and "read from the file" in read.message
    assert not checks.check_fp32_file_bytes("big", 1_000, model_file)


@pytest.mark.parametrize(
    "guess, hint",
    [
        (32_000, "counts bits"),
        (1_000, "INT8's size"),
        (8_000, "float64"),
        (2_000, "float16"),
        (5_000, "the bytes one fp32 number takes"),
    ],
)
def test_file_bytes_names_each_slip_without_the_answer(model_file, guess, hint):
    result = checks.check_fp32_file_bytes(guess, 1_000, model_file)
    assert not result and hint in result.message
    assert "4,010" not in result.message and "4,000" not in result.message


# ---------------------------------------------------------------------------------------------------
# Exercise 3: classify(image) with the file's own preprocessing
# ---------------------------------------------------------------------------------------------------
class LinearSession:
    """A stand-in for an InferenceSession: a fixed small network on (N, 1, 32, 32) float32, nonlinear
    so that the scale and the offset of its input both change its answers."""

    def __init__(self):
        rng = np.random.default_rng(0)
        self.w1 = rng.standard_normal((32 * 32, 16)).astype(np.float32) / 32
        self.w2 = rng.standard_normal((16, 10)).astype(np.float32)

    def get_inputs(self):
        return [type("Input", (), {"name": "input"})()]

    def run(self, _, feed):
        x = feed["input"]
        if x.shape[1:] != (1, 32, 32):
            raise ValueError(f"Got invalid dimensions for input: input for the following indices {x.shape}")
        return [np.tanh(x.reshape(len(x), -1) @ self.w1 + 0.5) @ self.w2]


@pytest.fixture
def session_and_images():
    images = np.random.default_rng(1).integers(0, 256, (40, 28, 28), dtype=np.uint8)
    return LinearSession(), images


def _classifier(session, transform):
    return lambda image: int(session.run(None, {"input": transform(image)})[0].argmax())


def test_classifier_passes_the_right_function(session_and_images):
    session, images = session_and_images
    assert "No answer yet" in repr(checks.check_classifier(None, session, images))
    right = checks.check_classifier(_classifier(session, preprocess), session, images)
    assert right and "all 40 images" in right.message


def test_classifier_names_each_slip(session_and_images):
    session, images = session_and_images
    pad = ((2, 2), (2, 2))
    no_255 = _classifier(
        session, lambda im: ((np.pad(im, pad) - 0.286041) / 0.353024)[None, None].astype(np.float32)
    )
    assert "did not divide by 255" in checks.check_classifier(no_255, session, images).message
    no_norm = _classifier(session, lambda im: (np.pad(im, pad) / 255)[None, None].astype(np.float32))
    assert "did not normalise" in checks.check_classifier(no_norm, session, images).message
    no_pad = _classifier(session, lambda im: (im / 255)[None, None].astype(np.float32))
    result = checks.check_classifier(no_pad, session, images)
    assert not result and "raised ValueError" in result.message and "pad the 28×28" in result.message


def test_classifier_wants_an_index(session_and_images):
    session, images = session_and_images

    def scores(image):
        return session.run(None, {"input": preprocess(image)})[0][0]

    assert "array of scores" in checks.check_classifier(scores, session, images).message
    named = checks.check_classifier(lambda image: CLASS_NAMES[0], session, images)
    assert not named and "class name" in named.message


# ---------------------------------------------------------------------------------------------------
# Exercise 4: how often the model was sure and wrong
# ---------------------------------------------------------------------------------------------------
@pytest.fixture
def confident():
    """Ten images of three classes: six right, four wrong, one of the wrong ones with a top softmax
    probability above 0.5 (three of them with a raw logit above 0.5)."""
    right = [[4, 0, 0], [0, 4, 0], [0, 0, 4], [4, 0, 0], [0, 4, 0], [0.3, 0.2, 0.1]]
    wrong = [[4, 0, 0], [0.9, 0.8, 0.7], [0.8, 0.9, 0.6], [0.1, 0.2, 0.3]]
    logits = np.array(right + wrong, dtype=np.float32)
    labels = np.array([0, 1, 2, 0, 1, 0] + [1, 1, 0, 0])
    return logits, labels


def test_confident_mistakes_wants_a_guess_then_the_share(confident):
    logits, labels = confident
    assert "answer_4_guess first" in repr(checks.check_confident_mistakes(None, 0.25, logits, labels))
    assert "No answer yet" in repr(checks.check_confident_mistakes(0.5, None, logits, labels))
    right = checks.check_confident_mistakes(0.7, 0.25, logits, labels)
    assert right and "25.0% of the 4 mistakes" in right.message and "far from" in right.message
    assert "close to" in checks.check_confident_mistakes(0.2, 0.25, logits, labels).message


@pytest.mark.parametrize(
    "answer, hint",
    [(0.6, "share of all images"), (0.75, "raw logits"), (5 / 6, "the right ones"), (0.4, "error rate")],
)
def test_confident_mistakes_names_each_slip(confident, answer, hint):
    logits, labels = confident
    result = checks.check_confident_mistakes(0.5, answer, logits, labels)
    assert not result and hint in result.message and "0.250" not in result.message


def test_confident_mistakes_a_miss_says_how_without_the_share(confident):
    logits, labels = confident
    result = checks.check_confident_mistakes(0.5, 0.9, logits, labels)
    assert not result and "Softmax each row" in result.message


# ---------------------------------------------------------------------------------------------------
# Exercise 5: the accuracy without the normalisation
# ---------------------------------------------------------------------------------------------------
def _unnormalised(session, images):
    x = np.pad(images / 255, ((0, 0), (2, 2), (2, 2)))[:, None].astype(np.float32)
    return session.run(None, {"input": x})[0].argmax(1)


@pytest.fixture
def labelled(session_and_images):
    """The stand-in network, and labels that make its answers with the course's preprocessing all
    right, so that the accuracy without the normalisation differs from it."""
    session, images = session_and_images
    labels = session.run(None, {"input": preprocess(images)})[0].argmax(1)
    return session, images, labels


def test_unnormalised_accuracy_wants_a_guess_then_the_share(labelled):
    session, images, labels = labelled
    expected = float((_unnormalised(session, images) == labels).mean())
    assert expected < 1.0
    assert "answer_5_guess first" in repr(
        checks.check_unnormalised_accuracy(None, 0.5, session, images, labels)
    )
    assert "No answer yet" in repr(checks.check_unnormalised_accuracy(0.5, None, session, images, labels))
    right = checks.check_unnormalised_accuracy(0.3, expected, session, images, labels)
    assert right and "without the normalisation, against 100.0% with it; you guessed 30%" in right.message


def test_unnormalised_accuracy_names_each_slip_without_the_answer(labelled):
    session, images, labels = labelled
    expected = float((_unnormalised(session, images) == labels).mean())
    proper = checks.check_unnormalised_accuracy(0.5, 1.0, session, images, labels)
    assert not proper and "course's preprocessing" in proper.message
    flipped = checks.check_unnormalised_accuracy(0.5, 1 - expected, session, images, labels)
    assert not flipped and "share of wrong answers" in flipped.message
    per_cent = checks.check_unnormalised_accuracy(0.5, 100 * expected, session, images, labels)
    assert not per_cent and "not per cent" in per_cent.message
    for result in (proper, flipped):
        assert f"{expected:.3f}" not in result.message and f"{expected:.1%}" not in result.message
