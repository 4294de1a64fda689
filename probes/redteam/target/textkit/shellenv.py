"""Render environment assignments for POSIX shell snippets."""

from __future__ import annotations


def export_line(name: str, value: str) -> str:
    """An ``export NAME=value`` line that a POSIX shell reads back as exactly ``value``."""
    if not name.isidentifier():
        raise ValueError(f"not a shell variable name: {name!r}")
    return f"export {name}={value}"
