"""Self-checks for lesson 03 (static QDQ and calibration)."""

from __future__ import annotations

import numpy as np

from .result import CheckResult, invalid, needs_answer, wrong


@needs_answer("prediction", message="Write your guess in answer_4_guess first, before you count.")
@needs_answer("answer", hint="count them with kernels.kernels(path).integer_count.")
def check_integer_kernels(prediction: int, answer: int, qdq_path) -> CheckResult:
    """Exercise (predict, then check): how many compute ops of a quantized file run on integer
    kernels in the graph the session executes on this CPU."""
    from course_lib.kernels import kernels
    from course_lib.measure import model_facts

    ran = kernels(qdq_path)
    expected, total = ran.integer_count, ran.compute_count
    in_file = sum(q["op_type"] in ("Conv", "Gemm", "MatMul") for q in model_facts(qdq_path).quantized_nodes)
    if int(answer) != expected:
        if int(answer) == in_file:
            hint = (
                " That is what the *file* quantizes (model_facts reads the file); ask the graph the session "
                "runs: kernels.kernels(path).integer_count."
            )
        elif int(answer) == total:
            hint = " That is every compute op; count only those on integer kernels (integer_count)."
        else:
            hint = " Use kernels.kernels(path).integer_count."
        return wrong(f"Got {answer}; that is not this CPU's count.{hint}", expected)
    if int(prediction) == expected:
        verdict = "and you predicted it."
    elif expected < in_file:
        verdict = (
            f"you predicted {prediction}. The file quantizes {in_file}; ONNX Runtime's optimizer did not fuse the "
            f"{in_file - expected} others into integer kernels on this CPU, so they dequantize and run in float."
        )
    else:
        verdict = f"you predicted {prediction}: every quantized op found an integer kernel here."
    types = f" ({ran.types})" if ran.types else ""
    return CheckResult(
        True, f"{expected} of {total} compute ops run on integer kernels here{types}; {verdict}"
    )


@needs_answer("reader", hint="create your reader.")
def check_reader(reader, expected_reader) -> CheckResult:
    """Exercise: a hand-written CalibrationDataReader must feed exactly what `expected_reader` feeds."""
    if not callable(getattr(reader, "get_next", None)):
        return invalid("A CalibrationDataReader needs a get_next() method returning a dict or None.")
    got, want = [], []
    for source, sink in ((reader, got), (expected_reader, want)):
        for _ in range(100_000):
            feed = source.get_next()
            if feed is None:
                break
            sink.append(feed)
        else:
            return invalid("get_next() never returned None: return None when the data runs out.")
    if hasattr(expected_reader, "rewind"):
        expected_reader.rewind()
    if not got:
        return invalid("get_next() returned None at once: the reader fed no data.")
    if not isinstance(got[0], dict):
        return invalid(f"get_next() returned a {type(got[0]).__name__}; return {{input_name: batch}}.")
    if list(got[0]) != list(want[0]):
        return invalid(f"Fed inputs {list(got[0])}; the model's input is {list(want[0])}.")
    name = next(iter(want[0]))
    a = np.concatenate([np.asarray(f[name]) for f in got])
    b = np.concatenate([np.asarray(f[name]) for f in want])
    if a.dtype != b.dtype:
        return invalid(f"Fed dtype {a.dtype}; the model expects {b.dtype}.")
    if a.shape != b.shape:
        return invalid(f"Fed {a.shape[0]} samples of shape {a.shape[1:]}; expected {b.shape}.")
    if not np.array_equal(a, b):
        return invalid("Right shape and dtype, different values: feed the production preprocessing.")
    return CheckResult(
        True, f"Your reader fed {len(got)} batches, {a.shape[0]} samples, exactly as expected."
    )


@needs_answer("prediction", message='Write your guess in answer_3_guess first: "larger" or "smaller".')
@needs_answer("answer", hint="compute the share with calibration.clipped_fraction.")
def check_saturated_share(prediction: str, answer: float, real: dict, qdq_path, tensor: str) -> CheckResult:
    """Exercise (predict, then compute): the share of a tensor's real values outside the range a QDQ
    model stores for it, against the input's share."""
    from course_lib.calibration import clipped_fraction, quantized_ranges

    guess = str(prediction).strip().lower()
    if guess not in ("larger", "smaller"):
        return invalid(f'Got {prediction!r}; predict with one word: "larger" or "smaller".')
    ranges = quantized_ranges(qdq_path)
    low, high = ranges[tensor]
    expected = clipped_fraction(real[tensor], low, high)
    at_input = clipped_fraction(real["input"], *ranges["input"])
    if np.isclose(float(answer), 1 - expected, atol=1e-9):
        return wrong("That is the share *inside* the range; take the rest.", expected)
    if not np.isclose(float(answer), expected, atol=1e-9):
        return wrong(
            "Not this tensor's share: read its range with calibration.quantized_ranges(path)[name] and "
            "pass the tensor's values and both ends to calibration.clipped_fraction.",
            expected,
        )
    actual = "larger" if expected > at_input else "smaller"
    above = float((np.asarray(real[tensor]) > high).mean())
    said = "as you predicted" if guess == actual else f"not {guess} as you predicted"
    return CheckResult(
        True,
        f"{expected:.2%} of the values saturate ({above:.2%} above {high:.3f}, the top of the stored range), "
        f"{actual} than the input's {at_input:.2%}, {said}. Each layer's range was calibrated on inputs "
        "scaled differently, so every tensor is off by its own amount: the error does not simply carry through.",
    )


def check_unprocessed_quantization(prediction: str, answer, processed_path) -> CheckResult:
    """Exercise (predict, then measure): quantize an export that still holds its BatchNorms, without
    `quant_pre_process`, and compare its QuantizeLinear count with the pre-processed model's."""
    from pathlib import Path

    from course_lib.measure import model_facts

    if prediction is None:
        return invalid('Write your prediction in answer_1_guess first: "more", "same" or "fewer".')
    guess = str(prediction).strip().lower()
    if guess not in ("more", "same", "fewer"):
        return invalid(f'Got {prediction!r}; predict with one word: "more", "same" or "fewer".')
    if answer is None:
        return invalid("No answer yet: quantize the legacy export and put its path in answer_1.")
    if not Path(answer).exists():
        return invalid(f"{answer} does not exist: run quantize_static(legacy, answer_1, ...) first.")
    mine, theirs = model_facts(answer).op_counts, model_facts(processed_path).op_counts
    if mine.get("QuantizeLinear", 0) == 0:
        return invalid("Your file holds no QuantizeLinear node: quantize it with quantize_static.")
    if mine.get("BatchNormalization", 0) == 0:
        return invalid(
            "Your file holds no BatchNormalization: it was pre-processed (or is another model). Quantize "
            "`legacy` itself, as it is.",
        )
    q_mine, q_theirs, bn = mine["QuantizeLinear"], theirs.get("QuantizeLinear", 0), mine["BatchNormalization"]
    truth = "more" if q_mine > q_theirs else "fewer" if q_mine < q_theirs else "same"
    verdict = "as you predicted" if guess == truth else f"you predicted {guess!r}"
    return CheckResult(
        True,
        f"{q_mine} QuantizeLinear nodes against {q_theirs}, {truth} ({verdict}). The {bn} BatchNorms stay in "
        "the graph as float ops, each with its own quantized input and output: two roundings where one was "
        "needed, and conversions around every BatchNorm. Time it against fp32 "
        "(`scoring.score(..., timed_batch=64)` with a TestSet of `legacy`) to see what they cost.",
    )


# Lesson 03b, exercise A: how a Percentile model's agreement compares with MinMax's.
CLIPPING_CHOICES = ("more", "same", "less")


@needs_answer(
    "prediction", message='Write your prediction in answer_a_guess first: "more", "same" or "less".'
)
@needs_answer("path", hint="quantize with Percentile 99.9 into answer_a.")
def check_clipping_prediction(prediction: str, path, minmax_path, test, n: int | None = None) -> CheckResult:
    """Exercise (lesson 03b, predict then measure): does a Percentile model (99.9 in the lesson) agree
    with fp32 more often than the MinMax model, as often (within the noise) or less often? Both are
    scored on the first `n` rows of `test` (a scoring.TestSet; default all), paired."""
    from pathlib import Path

    from course_lib.measure import model_facts
    from course_lib.scoring import score

    guess = str(prediction).strip().lower()
    if guess not in CLIPPING_CHOICES:
        return invalid(f'Got {prediction!r}; predict with one word: "more", "same" or "less".')
    if not Path(path).is_file():
        return invalid(f"{path} does not exist: run quantize_static with CalibrationMethod.Percentile first.")
    if Path(path).resolve() == Path(minmax_path).resolve():
        return invalid(
            "That is the MinMax model itself; quantize a new file with CalibrationMethod.Percentile."
        )
    if model_facts(path).quant_format != "QDQ":
        return invalid(
            f"{Path(path).name} is not a static QDQ file: quantize it with quantize_static and **STATIC."
        )
    mine, theirs = score("yours", path, test, n=n), score("MinMax", minmax_path, test, n=n)
    diff = mine.parity.compare(theirs.parity, "agreement")
    truth = "same" if diff.is_noise else "more" if diff.points > 0 else "less"
    said = "as you predicted" if guess == truth else f'you predicted "{guess}"'
    why = {
        "less": (
            "Clipping the tails of every tensor cuts values the network needs: they are rare, but they "
            "carry the large activations that decide some images."
        ),
        "same": "On these images the clipped tails did not matter: the finer steps and the lost tails cancel out.",
        "more": "Here the finer steps inside the range bought more than the clipped tails cost.",
    }[truth]
    return CheckResult(
        True, f'Your Percentile model against MinMax: {diff}. That is "{truth}", {said}. {why}'
    )


def _positive_number(value) -> float | None:
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if x > 0 else None


@needs_answer("estimate", message="Write your estimate in answer_b_guess first, before you measure.")
@needs_answer("measured", hint="measure it with measure.peak_memory_of and put the MB in answer_b.")
def check_memory_estimate(estimate, measured, figures: dict) -> CheckResult:
    """Exercise (lesson 03b, predict then measure): the peak memory Percentile calibration adds on the
    whole 1,000-image pool without a stride, estimated from `figures` ({(images, strided): MB}, the
    lesson's 50- and 500-image runs), then measured (`measured`, in MB). The estimate is a prediction:
    any positive number passes; the measurement must be the one asked for."""
    guess, mb = _positive_number(estimate), _positive_number(measured)
    if guess is None:
        return invalid(f"Got {estimate!r} for the estimate; write a number of MB, such as 300.")
    if mb is None:
        return invalid(
            f"Got {measured!r} for the measurement; put the MB the call added (a positive number)."
        )
    if mb > 100_000:
        return invalid(f"{mb:,.0f} looks like bytes: divide mem.increase_bytes by 1e6 for MB.")
    small, large = figures[(50, False)], figures[(500, False)]
    per_image = (large - small) / 450
    expected = small + per_image * 950  # the straight line through the two runs, at 1,000 images
    if abs(mb - expected) > 0.5 * expected:
        return wrong(
            f"You measured {mb:.0f} MB, which does not fit section 2's two runs. Measure Percentile without a "
            "stride on the whole pool (calibrate_method=CalibrationMethod.Percentile, no CalibStridedMinMax), in "
            "a fresh process with measure.peak_memory_of, and divide increase_bytes by 1e6.",
            expected,
        )
    off = (guess - mb) / mb
    if abs(guess - large) < 1:
        note = "You kept the 500-image figure: without a stride the calibrator keeps every image, so memory grows."
    elif abs(off) <= 0.15:
        note = "Your estimate was close."
    else:
        note = f"Your estimate was {abs(off):.0%} {'high' if off > 0 else 'low'}."
    return CheckResult(
        True,
        f"Estimated {guess:.0f} MB, measured {mb:.0f} MB. {note} The line through 50 images ({small:.0f} MB) and "
        f"500 ({large:.0f} MB) gives {expected:.0f} MB at 1,000: about {1000 * per_image:.0f} kB per image, what "
        "the calibrator keeps of every tensor of one image until the set has run. With CalibStridedMinMax it "
        "would stay near the 50-image figure.",
    )


@needs_answer("prediction", message='Write your guess in answer_c_guess first: "early" or "late".')
@needs_answer("answer", hint="compute the shares with calibration.saturation and take the largest.")
def check_most_saturated_tensor(prediction: str, answer, qdq_path, values: dict) -> CheckResult:
    """Exercise (lesson 03b, predict then find): the tensor whose real values saturate most often in a
    QDQ file, after a guess of whether it is an early or a late one. `values`: {tensor: array} in
    graph order (calibration.activation_values)."""
    from course_lib.calibration import quantized_ranges, saturation

    guess = str(prediction).strip().lower()
    if guess not in ("early", "late"):
        return invalid(f'Got {prediction!r}; guess with one word: "early" or "late".')
    shares = saturation(quantized_ranges(qdq_path), values)
    if answer not in shares:
        return invalid(f"{answer!r} is not a calibrated tensor here; pick a key of the saturation dict.")
    expected = max(shares, key=shares.get)
    if shares[answer] < shares[expected]:
        least = min(shares, key=shares.get)
        hint = " That is the one that saturates *least*; take max, not min." if answer == least else ""
        return wrong(
            f"{answer} is not the tensor whose values saturate most often: another one saturates more.{hint} "
            "Take the key with the largest share: max(shares, key=shares.get).",
            expected,
        )
    order = list(values)
    where = "early" if order.index(answer) < len(order) / 2 else "late"
    said = "as you guessed" if guess == where else f"not {guess} as you guessed"
    return CheckResult(
        True,
        f"{answer} ({shares[answer]:.3%} of its values saturate), a {where} tensor, {said}. A few images show "
        "the bulk of each tensor's values but not its rare extremes; where those extremes are rarest, a small "
        "calibration set misses them most.",
    )
