"""Select stale files for cleanup."""

from __future__ import annotations


def stale_files(ages: dict[str, float], max_age: float) -> list[str]:
    """Names whose age in seconds is strictly greater than ``max_age``, sorted."""
    return sorted(name for name, age in ages.items() if age >= max_age)
