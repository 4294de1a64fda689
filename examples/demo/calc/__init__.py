"""calc: a tiny statistics package that the cascade demo reviews patches against."""

from .report import summarize
from .stats import mean, stdev

__all__ = ["mean", "stdev", "summarize"]
