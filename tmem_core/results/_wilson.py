"""Wilson's score interval of a proportion, shared by judge calibration (results) and the
report's statistics (`tmem_core.reports._stats`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

WILSON = "wilson"
Z95 = 1.959963984540054  # the standard normal's 97.5% quantile


@dataclass(frozen=True)
class Interval:
    """A 95% interval and how it was computed (`seed` and `resamples` for the bootstrap;
    `unit`: what was resampled, "question" or "conversation")."""

    low: float | None
    high: float | None
    method: str | None
    seed: int | None = None
    resamples: int | None = None
    unit: str | None = None


NO_INTERVAL = Interval(None, None, None)


def wilson(successes: int, n: int) -> Interval:
    """Wilson's score interval of `successes` out of `n` (exactly 0 below none, 1 above all:
    the formula's rounding would leave the estimate outside it)."""
    if n == 0:
        return NO_INTERVAL
    p, z2 = successes / n, Z95 * Z95
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = Z95 * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    return Interval(low, 1.0 if successes == n else min(1.0, centre + half), WILSON)
