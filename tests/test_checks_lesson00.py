"""Lesson 00's self-checks: each passes the right answer and teaches on each wrong answer it recognises."""

from __future__ import annotations

import numpy as np
import pytest

from course_lib import checks
from course_lib.data import CLASS_NAMES, preprocess


# ---------------------------------------------------------------------------------------------------
# Exercise 2: the fp32 file's size, predicted from the parameter count
# ---------------------------------------------------------------------------------------------------
@pytest.fixture
def model_file(tmp_path):
    path = tmp_path / "model.onnx"
    path.write_bytes(b"\0" * 4_100)  # 1,000 fp32 parameters and 100 bytes of graph
    return path


def test_file_bytes_wants_a_guess_then_the_measurement(model_file):
    assert "answer_2_guess first" in repr(checks.check_fp32_file_bytes(None, 4_100, 1_000, model_file))
    assert "No answer yet" in repr(checks.check_fp32_file_bytes(4_000, None, 1_000, model_file))
    wrong = checks.check_fp32_file_bytes(4_000, 4_000, 1_000, model_file)
    assert not wrong and "4,100 bytes" in wrong.message


def test_file_bytes_right_prediction_explains_the_file(model_file):
    right = checks.check_fp32_file_bytes(4_000, 4_100, 1_000, model_file)
    assert right and "Predicted well" in right.message and "97.56%" in right.message


@pytest.mark.parametrize(
    "guess, hint",
    [
        (32_000, "counts bits"),
        (1_000, "INT8's size"),
        (8_000, "float64"),
        (2_000, "float16"),
        (5_000, "4 bytes"),
    ],
)
def test_file_bytes_names_each_slip(model_file, guess, hint):
    result = checks.check_fp32_file_bytes(guess, 4_100, 1_000, model_file)
    assert result and hint in result.message and "Predicted well" not in result.message


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
# Exercise 5: the pair of classes confused most
# ---------------------------------------------------------------------------------------------------
@pytest.fixture
def confusions():
    """Shirt and T-shirt/top confused 5 + 4 times, Coat taken for Pullover 7 times (one way only)."""
    labels = [6] * 5 + [0] * 4 + [4] * 7 + list(range(10)) * 3
    preds = [0] * 5 + [6] * 4 + [2] * 7 + list(range(10)) * 3
    return np.array(preds), np.array(labels)


def test_confusion_pair_right_answer(confusions):
    preds, labels = confusions
    assert "answer_5_guess first" in repr(checks.check_confusion_pair(None, ("Shirt", "Coat"), preds, labels))
    assert "No answer yet" in repr(checks.check_confusion_pair(("Shirt", "Coat"), None, preds, labels))
    predicted = checks.check_confusion_pair(("T-shirt/top", "Shirt"), ("Shirt", "T-shirt/top"), preds, labels)
    assert (
        predicted
        and "you predicted it" in predicted.message
        and "9 images: T-shirt/top taken for Shirt 4 times, Shirt for T-shirt/top 5 times"
        in predicted.message
    )
    by_index = checks.check_confusion_pair(("Coat", "Pullover"), (0, 6), preds, labels)
    assert by_index and "You guessed ['Coat', 'Pullover']" in by_index.message


def test_confusion_pair_names_each_slip(confusions):
    preds, labels = confusions
    one_way = checks.check_confusion_pair(("Shirt", "Coat"), ("Coat", "Pullover"), preds, labels)
    assert not one_way and "one direction" in one_way.message
    diagonal = checks.check_confusion_pair(("Shirt", "Coat"), ("Shirt", "Shirt"), preds, labels)
    assert not diagonal and "diagonal" in diagonal.message
    assert "two class names" in checks.check_confusion_pair(("Shirt", "Coat"), 3, preds, labels).message


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
    assert not result and hint in result.message and "expected 0.250" in result.message
