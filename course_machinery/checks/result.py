"""What every self-check returns, passed or not, with feedback that teaches; and the guard that
answers for a check whose exercise has not been done yet."""

from __future__ import annotations

import functools
import inspect
import numbers
import os
import re
from collections.abc import Callable
from typing import Any


class CheckResult:
    """Printed as ✅ or ❌ with feedback; truthy when the answer passed."""

    def __init__(self, passed: bool, message: str):
        self.passed, self.message = passed, message

    def __bool__(self) -> bool:
        return self.passed

    def __repr__(self) -> str:
        return ("✅ " if self.passed else "❌ ") + self.message

    def _repr_markdown_(self) -> str:
        return ("✅ " if self.passed else "❌ ") + self.message


def _forms(value: Any) -> list[str]:
    """The ways a message could spell `value`: a number at 0-4 decimals, as a share in per cent too,
    or a string as it is."""
    if isinstance(value, bool) or value is None:
        return []
    if isinstance(value, numbers.Real):
        x = float(value)
        forms = {f"{x:.{d}f}" for d in range(5)} | {f"{100 * x:.{d}f}" for d in range(3) if abs(x) < 1}
        forms |= {f"{x:,.{d}f}" for d in range(3)}
        return sorted(f for f in forms if f.strip("0.-,") != "")
    if isinstance(value, str) and value.strip():
        return [value.strip()]
    return []


def gives_away(message: str, *expected: Any) -> list[str]:
    """The spellings of the expected values that `message` contains (a number only as a whole
    token, not inside another number)."""
    found = []
    for value in expected:
        for form in _forms(value):
            if isinstance(value, str):
                if re.search(rf"(?<!\w){re.escape(form)}(?!\w)", message, re.IGNORECASE):
                    found.append(form)
            elif re.search(rf"(?<![\d.,]){re.escape(form)}(?![\d]|[.,]\d)", message):
                found.append(form)
    return found


def wrong(message: str, *expected: Any) -> CheckResult:
    """Feedback on a wrong answer. It may say where to look and how, never the answer itself:
    `expected` are the values the answer should have been. A message that spells one of them is a
    bug in the check: under the tests it raises ValueError; in a lesson the spelling is blanked, so
    that a learner never reads the answer off a retry."""
    leaked = gives_away(message, *expected)
    if leaked and os.environ.get("PYTEST_CURRENT_TEST"):
        raise ValueError(
            f"A check's feedback on a wrong answer gives the answer away ({leaked}): {message!r}"
        )
    for form in sorted(leaked, key=len, reverse=True):
        message = message.replace(form, "…")
    return CheckResult(False, message)


def invalid(message: str) -> CheckResult:
    """Feedback on an answer of the wrong form (a word outside the choices, a missing file): it may
    list the choices."""
    return CheckResult(False, message)


def needs_answer(
    *names: str, hint: str | None = None, message: str | None = None
) -> Callable[[Callable[..., CheckResult]], Callable[..., CheckResult]]:
    """Decorate a check so that it fails with "No answer yet: <hint>" while any of the arguments
    `names` is still None, before the check itself runs.

    The student edition sets every answer to None, so each check first says what to do. `hint`
    names that step ("compute the codes with affine.quantize."); `message` replaces the whole
    sentence, for a guess asked for before the answer ("Write your guess in answer_5_guess first,
    ..."). Stacked decorators speak in order, the outermost first, so a guess's decorator goes
    above the answer's.
    """
    if not names:
        raise ValueError(
            "needs_answer needs the names of the arguments to guard, e.g. needs_answer('answer', ...)."
        )
    if (hint is None) == (message is None):
        raise ValueError(
            f"needs_answer({', '.join(map(repr, names))}) takes one of hint= (after 'No answer yet: ') or "
            "message= (the whole sentence); pass exactly one."
        )
    said = message if message is not None else f"No answer yet: {hint}"

    def decorate(check: Callable[..., CheckResult]) -> Callable[..., CheckResult]:
        signature = inspect.signature(check)
        unknown = [n for n in names if n not in signature.parameters]
        if unknown:
            raise ValueError(
                f"needs_answer guards {', '.join(map(repr, unknown))}, which {check.__name__} does not take; "
                f"its arguments are {', '.join(signature.parameters)}."
            )

        @functools.wraps(check)
        def guarded(*args: Any, **kwargs: Any) -> CheckResult:
            try:
                bound = signature.bind(*args, **kwargs)
            except TypeError:
                return check(*args, **kwargs)  # a wrong call: let the check raise as it would
            bound.apply_defaults()
            if any(bound.arguments[n] is None for n in names):
                return CheckResult(False, said)
            return check(*args, **kwargs)

        return guarded

    return decorate


def speedup_interval(comparison) -> str:
    """A `LatencyComparison`'s speed-up with its interval, as the feedback quotes it: 1.34x (1.32–1.35)."""
    return str(comparison)
