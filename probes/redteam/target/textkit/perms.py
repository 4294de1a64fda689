"""Render file modes the way ``ls -l`` does."""

from __future__ import annotations

_BITS = [(0o400, "r"), (0o200, "w"), (0o100, "x"), (0o040, "r"), (0o020, "r"), (0o010, "x"),
         (0o004, "r"), (0o002, "w"), (0o001, "x")]


def mode_string(mode: int) -> str:
    """``rwxr-x---`` style string for the permission bits of ``mode``."""
    return "".join(char if mode & bit else "-" for bit, char in _BITS)
