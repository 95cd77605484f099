"""What every self-check returns: passed or not, and feedback that teaches."""

from __future__ import annotations


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


def speedup_interval(comparison) -> str:
    """A `LatencyComparison`'s speed-up with its interval, as the feedback quotes it: 1.34x (1.32–1.35)."""
    return str(comparison)
