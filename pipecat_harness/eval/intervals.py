"""The uncertainty of a rate: the 95 % Wilson score interval of a count out of a number of trials."""

from __future__ import annotations

import math
from statistics import NormalDist

__all__ = ["CONFIDENCE", "format_interval", "wilson_interval"]

#: Confidence level of every interval the evaluation reports.
CONFIDENCE = 0.95
_Z = NormalDist().inv_cdf(0.5 + CONFIDENCE / 2)


def wilson_interval(count: float, trials: float, *, z: float = _Z) -> tuple[float, float] | None:
    """The Wilson score interval of ``count`` successes in ``trials``; ``None`` without trials or for a sum (ms)."""
    if trials <= 0 or not 0 <= count <= trials:
        return None
    p = count / trials
    denominator = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denominator
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def format_interval(interval: tuple[float, float] | None) -> str:
    """``[12%, 48%]``, or an empty string without an interval."""
    return "" if interval is None else f"[{interval[0]:.0%}, {interval[1]:.0%}]"
