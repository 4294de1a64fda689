"""The one-line summary of a sample that the command line prints."""

from __future__ import annotations

from collections.abc import Sequence

from .stats import mean, stdev


def summarize(values: Sequence[float]) -> str:
    """``"n=3 mean=2.00 stdev=1.00"`` for ``[1, 2, 3]``."""
    return f"n={len(values)} mean={mean(values):.2f} stdev={stdev(values):.2f}"
