"""Self-checks for lesson 00 (start here)."""

from __future__ import annotations

import numpy as np

from .result import CheckResult, needs_answer


@needs_answer("answer", hint="replace None with your computation.")
def check_normalised_pixel(answer: float, pixel: int, mean: float, std: float) -> CheckResult:
    """Exercise: the value the model sees for a raw pixel, (pixel / 255 - mean) / std."""
    expected = (pixel / 255 - mean) / std
    if np.isclose(answer, expected, atol=1e-4):
        return CheckResult(True, f"Pixel {pixel} reaches the model as {expected:.4f}.")
    hint = ""
    if np.isclose(answer, pixel / 255, atol=1e-4):
        hint = " You scaled to [0, 1] but did not subtract the mean and divide by the std."
    elif np.isclose(answer, (pixel - mean) / std, atol=1e-3):
        hint = " Divide the pixel by 255 first: mean and std are on the [0, 1] scale."
    return CheckResult(False, f"Got {answer:.4f}, expected {expected:.4f}.{hint}")


@needs_answer(
    "guess", message="Write your guess in answer_4_guess first, a share from 0 to 1, before you compute."
)
@needs_answer("answer", hint="softmax the logits, keep the wrong images, count those above.")
def check_confident_mistakes(
    guess, answer, logits: np.ndarray, labels: np.ndarray, above: float = 0.5
) -> CheckResult:
    """Exercise (predict, then check): the share of the wrongly classified images whose top softmax
    probability is above `above`. A model's probability reads like confidence; this says how often
    it was that sure and wrong."""
    logits, labels = np.asarray(logits, dtype=np.float64), np.asarray(labels)
    probs = np.exp(logits - logits.max(axis=1, keepdims=True))
    probs /= probs.sum(axis=1, keepdims=True)
    top, wrong = probs.max(axis=1), logits.argmax(axis=1) != labels
    expected = float((top[wrong] > above).mean())
    if np.isclose(float(answer), expected, atol=1e-3):
        verdict = "close to" if abs(float(guess) - expected) < 0.1 else "far from"
        return CheckResult(
            True,
            f"{expected:.1%} of the {wrong.sum():,} mistakes came with a top probability above {above}; your "
            f"guess, {float(guess):.0%}, was {verdict} it. A softmax probability says how the model ranks "
            "the classes, not how often it is right: trust a measured accuracy, not the model's confidence.",
        )
    hints = {
        float(
            (top > above).mean()
        ): "That is the share of all images; the question asks about the wrong ones.",
        float(
            (logits.max(axis=1)[wrong] > above).mean()
        ): "That compares raw logits; apply the softmax first.",
        float((top[~wrong] > above).mean()): "That is the share of the right ones; take the wrong ones.",
        float(wrong.mean()): "That is the error rate; count the wrong images above the threshold.",
    }
    hint = next((h for value, h in hints.items() if np.isclose(float(answer), value, atol=1e-3)), "")
    return CheckResult(False, f"Got {float(answer):.3f}, expected {expected:.3f}. {hint}".rstrip())


@needs_answer("guess", message="Write your prediction in answer_2_guess first, before you read the file.")
@needs_answer("answer", hint="read the file's size with resnet_path.stat().st_size.")
def check_fp32_file_bytes(guess, answer, n_params: int, path) -> CheckResult:
    """Exercise (predict, then check): an fp32 model file's size from its parameter count; the hints
    name the usual slips (bits for bytes, one byte per value, float64)."""
    from pathlib import Path

    size = Path(path).stat().st_size
    if int(answer) != size:
        return CheckResult(
            False, f"Got {int(answer):,}, but the file has {size:,} bytes: Path.stat().st_size."
        )
    expected = 4 * int(n_params)
    rest = size - expected
    explained = (
        f"4 bytes × {int(n_params):,} parameters = {expected:,} bytes, {expected / size:.2%} of the file's "
        f"{size:,}. The other {rest:,} bytes ({abs(rest) / size:.2%}) are the graph, the names, the "
        "metadata, and the difference between PyTorch's parameters and the exported weights (BatchNorm "
        "is folded into the convolutions)."
    )
    if abs(float(guess) - expected) <= 0.01 * expected:
        return CheckResult(True, f"Predicted well: {explained}")
    slips = {
        32 * n_params: "That counts bits: fp32 is 32 bits, but 4 bytes.",
        n_params: "One byte per parameter is INT8's size, the quarter that quantization aims at; fp32 takes 4.",
        8
        * n_params: "8 bytes per parameter is float64; PyTorch trains and ONNX stores these in float32, 4 bytes.",
        2 * n_params: "2 bytes per parameter is float16; these weights are float32, 4 bytes.",
    }
    slip = next((why for value, why in slips.items() if abs(float(guess) - value) <= 0.01 * value), "")
    return CheckResult(
        True,
        f"File size right; your prediction was {float(guess):,.0f} bytes. {slip or 'Each fp32 value takes 4 bytes.'} "
        + explained,
    )


@needs_answer("classify", hint="write classify(image), then set answer_3 = classify.")
def check_classifier(classify, session, images: np.ndarray) -> CheckResult:
    """Exercise (write code): `classify(raw 28x28 uint8 image) -> class index` with the model file's
    own preprocessing; compared with the course's preprocessing on `images`."""
    from ..data import default_preprocessing, preprocess

    images = np.asarray(images)

    def run(x: np.ndarray) -> np.ndarray:
        return session.run(None, {session.get_inputs()[0].name: x.astype(np.float32)})[0].argmax(1)

    expected = run(preprocess(images))
    try:
        got = [classify(image) for image in images]
    except Exception as exc:  # the learner's code: report what failed and how to fix it
        hint = ""
        if "dimension" in str(exc).lower() or "shape" in str(exc).lower() or "rank" in str(exc).lower():
            hint = (
                " The session wants float32 of shape (1, 1, 32, 32): pad the 28×28 image by 2 on every "
                "side, then add the batch and channel axes with x[None, None]."
            )
        return CheckResult(False, f"classify raised {type(exc).__name__}: {str(exc)[:200]}.{hint}")
    if any(isinstance(g, np.ndarray) and g.size > 1 for g in got):
        return CheckResult(
            False, "classify returned an array of scores; return the class index, argmax of them."
        )
    if any(isinstance(g, str) for g in got):
        return CheckResult(
            False, "classify returned a class name; return its index (cl.CLASS_NAMES[i] names it)."
        )
    got = np.array([int(np.asarray(g).ravel()[0]) for g in got])
    wrong = int(np.sum(got != expected))
    if wrong == 0:
        return CheckResult(True, f"Same class as the course's preprocessing on all {len(images)} images.")
    prep, pad = default_preprocessing(), ((0, 0), (2, 2), (2, 2))
    padded = np.pad(images, pad).astype(np.float32)
    slips = {
        "You did not divide by 255: mean and std are on the [0, 1] scale.": (padded - prep.mean) / prep.std,
        "You scaled to [0, 1] but did not normalise: subtract the mean and divide by the std.": padded / 255,
    }
    hint = next(
        (why for why, x in slips.items() if np.array_equal(got, run(x[:, None].astype(np.float32)))),
        "Compare your input with cl.preprocess(image) for one image: padding, scale, mean and std.",
    )
    return CheckResult(False, f"{wrong} of {len(images)} images get another class than expected. {hint}")


@needs_answer("guess", message="Write your guess in answer_5_guess first, before you compute.")
@needs_answer("answer", hint="compute the pair from a confusion matrix.")
def check_confusion_pair(guess, answer, predictions: np.ndarray, labels: np.ndarray) -> CheckResult:
    """Exercise (predict, then check): the two classes confused most often, both directions counted."""
    from ..data import CLASS_NAMES

    predictions, labels = np.asarray(predictions), np.asarray(labels)
    confusion = np.zeros((10, 10), dtype=int)
    np.add.at(confusion, (labels, predictions), 1)
    both = np.triu(confusion + confusion.T, k=1)
    i, j = np.unravel_index(both.argmax(), both.shape)
    expected = {CLASS_NAMES[i], CLASS_NAMES[j]}
    count = (
        f"{CLASS_NAMES[i]} and {CLASS_NAMES[j]}, {both[i, j]} images: {CLASS_NAMES[i]} taken for "
        f"{CLASS_NAMES[j]} {confusion[i, j]} times, {CLASS_NAMES[j]} for {CLASS_NAMES[i]} {confusion[j, i]} times"
    )

    def names(pair) -> set[str]:
        return {CLASS_NAMES[p] if isinstance(p, int | np.integer) else str(p) for p in pair}

    try:
        got, predicted = names(answer), names(guess)
    except (TypeError, IndexError):
        return CheckResult(False, "Give two class names, e.g. ('Coat', 'Pullover').")
    if got != expected:
        directed = np.where(np.eye(10, dtype=bool), 0, confusion)
        a, b = np.unravel_index(directed.argmax(), directed.shape)
        hint = ""
        if got == {CLASS_NAMES[a], CLASS_NAMES[b]}:
            hint = (
                " That is the largest count in one direction; add both directions, confusion + confusion.T."
            )
        elif len(got) == 1:
            hint = " Leave out the diagonal: those are the correct answers."
        return CheckResult(False, f"Got {sorted(got)}; the pair confused most is {count}.{hint}")
    if predicted == expected:
        return CheckResult(True, f"{count}, and you predicted it.")
    return CheckResult(
        True,
        f"{count}. You guessed {sorted(predicted)}: look at the images of both classes in the browser "
        "above to see why they are confused.",
    )
