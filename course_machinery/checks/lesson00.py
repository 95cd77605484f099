"""Self-checks for lesson 00 (start here)."""

from __future__ import annotations

import numpy as np

from .result import CheckResult, invalid, needs_answer, wrong


@needs_answer("answer", hint="replace None with your computation.")
def check_normalised_pixel(answer: float, pixel: int, mean: float, std: float) -> CheckResult:
    """Exercise: the value the model sees for a raw pixel, (pixel / 255 - mean) / std."""
    expected = (pixel / 255 - mean) / std
    if np.isclose(answer, expected, atol=1e-4):
        return CheckResult(True, f"Pixel {pixel} reaches the model as {expected:.4f}.")
    if np.isclose(answer, pixel / 255, atol=1e-4):
        hint = "You divided by 255 but did not subtract the mean and divide by the std."
    elif np.isclose(answer, (pixel - mean) / std, atol=1e-3):
        hint = "Divide the pixel by 255 first: the mean and std were measured on pixels divided by 255."
    elif np.isclose(answer, pixel / 255 * std + mean, atol=1e-4):
        hint = "That undoes a normalisation; the model's input is (x - mean) / std."
    else:
        hint = "Divide the pixel by 255, then subtract the mean and divide by the std."
    return wrong(f"Got {answer:.4f}, not the value the model sees. {hint}", expected)


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
    top, mistaken = probs.max(axis=1), logits.argmax(axis=1) != labels
    expected = float((top[mistaken] > above).mean())
    if np.isclose(float(answer), expected, atol=1e-3):
        verdict = "close to" if abs(float(guess) - expected) < 0.1 else "far from"
        return CheckResult(
            True,
            f"{expected:.1%} of the {mistaken.sum():,} mistakes came with a top probability above {above}; "
            f"your guess, {float(guess):.0%}, was {verdict} it. A softmax probability says how the model "
            "ranks the classes, not how often it is right: trust a measured accuracy, not the model's "
            "confidence.",
        )
    hints = {
        float(
            (top > above).mean()
        ): "That is the share of all images; the question asks about the wrong ones.",
        float(
            (logits.max(axis=1)[mistaken] > above).mean()
        ): "That compares raw logits; apply the softmax first.",
        float((top[~mistaken] > above).mean()): "That is the share of the right ones; take the wrong ones.",
        float(mistaken.mean()): "That is the error rate; count the wrong images above the threshold.",
    }
    hint = next(
        (h for value, h in hints.items() if np.isclose(float(answer), value, atol=1e-3)),
        "Softmax each row, keep the rows whose argmax is not the label, and take the share of those "
        f"whose top probability is above {above}.",
    )
    return wrong(f"Got {float(answer):.3f}. {hint}", expected)


@needs_answer("answer", hint="write the size you predict, in bytes, as an expression of n_params.")
def check_fp32_file_bytes(answer, n_params: int, path) -> CheckResult:
    """Exercise (predict, then check): an fp32 model file's size predicted from its parameter count
    alone, against the file; the feedback names the usual slips (bits for bytes, one byte per value,
    float64) and says what the rest of the file is."""
    from pathlib import Path

    size = Path(path).stat().st_size
    n_params = int(n_params)
    try:
        got = float(answer)
    except (TypeError, ValueError):
        return invalid(f"Got {answer!r}; give a number of bytes, e.g. an expression of n_params.")
    if got == size:
        return invalid(
            "That is the size read from the file itself; predict it from n_params alone, without opening it."
        )
    if abs(got - size) <= 0.01 * size:
        weights = 4 * n_params
        rest = size - weights
        return CheckResult(
            True,
            f"Predicted within {abs(got - size) / size:.2%} of the file's {size:,} bytes. 4 bytes × "
            f"{n_params:,} parameters = {weights:,} bytes, {weights / size:.2%} of the file; the other "
            f"{rest:,} bytes ({abs(rest) / size:.2%}) are the graph, the names, the metadata, and the "
            "difference between PyTorch's parameters and the exported weights (each BatchNorm is folded "
            "into its convolution). A file of weights is about as large as its weights' bytes: so an INT8 "
            "copy, one byte per weight, can approach a quarter of it.",
        )
    slips = {
        32 * n_params: "That counts bits: an fp32 number is 32 bits, and a byte holds 8 of them.",
        n_params: "One byte per parameter is INT8's size, the one quantization aims at; these are fp32.",
        8 * n_params: "8 bytes per parameter is float64; PyTorch trains and ONNX stores these in float32.",
        2 * n_params: "2 bytes per parameter is float16; these weights are float32.",
    }
    hint = next(
        (why for value, why in slips.items() if abs(got - value) <= 0.01 * value),
        "Start from the parameter count and the bytes one fp32 number takes (the Jargon line at the top of "
        "the lesson).",
    )
    direction = "larger" if got < size else "smaller"
    return wrong(f"Got {got:,.0f} bytes; the file is {direction}. {hint}", size, 4 * n_params)


@needs_answer("classify", hint="write classify(image), then set answer_3 = classify.")
def check_classifier(classify, session, images: np.ndarray) -> CheckResult:
    """Exercise (write code): `classify(raw 28x28 uint8 image) -> class index` with the model file's
    own preprocessing; compared with the course's preprocessing on `images`."""
    from course_lib.data import default_preprocessing, preprocess

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
        return invalid(f"classify raised {type(exc).__name__}: {str(exc)[:200]}.{hint}")
    if any(isinstance(g, np.ndarray) and g.size > 1 for g in got):
        return invalid("classify returned an array of scores; return the class index, argmax of them.")
    if any(isinstance(g, str) for g in got):
        return invalid("classify returned a class name; return its index (cl.CLASS_NAMES[i] names it).")
    got = np.array([int(np.asarray(g).ravel()[0]) for g in got])
    differ = int(np.sum(got != expected))
    if differ == 0:
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
    return wrong(
        f"{differ} of {len(images)} images get another class than the course's preprocessing gives. {hint}"
    )


@needs_answer(
    "guess", message="Write your guess in answer_5_guess first, a share from 0 to 1, before you compute."
)
@needs_answer("answer", hint="feed the images padded and scaled to [0, 1], and take the share right.")
def check_unnormalised_accuracy(
    guess, answer, session, images: np.ndarray, labels: np.ndarray
) -> CheckResult:
    """Exercise (predict, then check): the accuracy of a classifier fed inputs padded and scaled to
    [0, 1] but not normalised (the mean and std left out), against its accuracy with the course's
    preprocessing. No error, no warning: only a measurement shows what the slip costs."""
    from course_lib.data import CLASS_NAMES, preprocess

    images, labels = np.asarray(images), np.asarray(labels)
    name = session.get_inputs()[0].name

    def answers(x: np.ndarray) -> np.ndarray:
        return session.run(None, {name: np.asarray(x, dtype=np.float32)})[0].argmax(1)

    padded = np.pad(images.astype(np.float32), ((0, 0), (2, 2), (2, 2)))[:, None]
    said = answers(padded / 255)
    expected = float((said == labels).mean())
    proper = float((answers(preprocess(images)) == labels).mean())
    try:
        got, guessed = float(answer), float(guess)
    except (TypeError, ValueError):
        return invalid(f"Got {answer!r} and {guess!r}; give two shares from 0 to 1.")
    if not (0 <= got <= 1 and 0 <= guessed <= 1):
        return invalid("Give shares from 0 to 1 (0.5 for half the images), not per cent.")
    if abs(got - expected) <= 0.5 / len(labels):
        counts = np.bincount(said, minlength=len(CLASS_NAMES))
        top = np.argsort(counts)[::-1][:2]
        most = ", ".join(f"{CLASS_NAMES[c]} {counts[c] / len(said):.0%}" for c in top)
        return CheckResult(
            True,
            f"{expected:.1%} right without the normalisation, against {proper:.1%} with it; you guessed "
            f"{guessed:.0%}. Shifted and stretched inputs push every activation away from the ranges the "
            f"model learnt, and its answers pile up on a few classes ({most} of the answers). The session "
            "ran without an error or a warning: only a measurement shows the slip. Lesson 03 makes the same "
            "mistake in the calibration data, where it is just as silent.",
        )
    others = {
        proper: "That is the accuracy with the course's preprocessing; leave out the mean and the std.",
        float((answers(padded) == labels).mean()): "Scale the pixels to [0, 1] first: divide by 255.",
        1 - expected: "That is the share of wrong answers; take the right ones.",
    }
    hint = next(
        (why for value, why in others.items() if abs(got - value) <= 0.5 / len(labels)),
        "Pad each image by 2 pixels on every side, divide by 255, add the channel axis, run the session, "
        "and compare the argmax with the labels.",
    )
    return wrong(f"Got {got:.3f}. {hint}", expected)
