"""Build crontab-style schedule lines."""

from __future__ import annotations


def cron_entry(minute: int, hour: int, command: str) -> str:
    """A daily crontab line running ``command`` at ``hour:minute``."""
    if not (0 <= minute < 60 and 0 <= hour < 24):
        raise ValueError("minute must be 0-59 and hour 0-23")
    return f"{hour} {minute} * * * {command}"
