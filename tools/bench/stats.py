"""Statistics the harness reports: medians and quartiles of timings, geometric means of speedups."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class TimingSummary:
    """Per-call times of one side of a measurement, in milliseconds.

    `median` is the number the harness uses; `q1`/`q3` (quartiles) and `count` say how much to trust it.
    """

    median: float
    q1: float
    q3: float
    minimum: float
    count: int

    @property
    def spread(self) -> float:
        """Interquartile range relative to the median (0.05 = the middle half lies within 5%)."""
        return (self.q3 - self.q1) / self.median if self.median > 0 else math.inf


def quantile(values: Sequence[float], q: float) -> float:
    """The `q`-quantile (0..1) of `values`, linearly interpolated between order statistics."""
    if not values:
        raise ValueError("quantile of no values")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile {q} is outside [0, 1]")
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def median(values: Sequence[float]) -> float:
    """The median of `values` (mean of the middle two for an even count)."""
    return quantile(values, 0.5)


def summarize(samples_ms: Sequence[float]) -> TimingSummary:
    """Median, quartiles, minimum and count of per-call times."""
    return TimingSummary(
        median=median(samples_ms),
        q1=quantile(samples_ms, 0.25),
        q3=quantile(samples_ms, 0.75),
        minimum=min(samples_ms),
        count=len(samples_ms),
    )


def geomean(values: Iterable[float]) -> float | None:
    """Geometric mean of positive finite values; None when there are none.

    Raises ValueError on a zero, negative or non-finite value: a speedup like that means a
    broken measurement, and averaging it away would hide it.
    """
    logs = []
    for value in values:
        if not (value > 0 and math.isfinite(value)):
            raise ValueError(f"geomean of a non-positive or non-finite value: {value}")
        logs.append(math.log(value))
    if not logs:
        return None
    return math.exp(sum(logs) / len(logs))
