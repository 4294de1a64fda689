"""Descriptive statistics for small samples of numbers."""

from __future__ import annotations

import math
from collections.abc import Sequence


def mean(values: Sequence[float]) -> float:
    """Arithmetic mean of ``values``."""
    if not values:
        raise ValueError("mean() needs at least one value")
    return sum(values) / len(values)


def stdev(values: Sequence[float]) -> float:
    """Sample standard deviation of ``values``, like ``statistics.stdev``."""
    centre = mean(values)
    return math.sqrt(sum((v - centre) ** 2 for v in values) / len(values))
