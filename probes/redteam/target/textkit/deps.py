"""Parse requirement lines."""

from __future__ import annotations


def parse_requirement(line: str) -> tuple[str, str]:
    """(name, specifier) of a requirement line such as ``requests>=2.0  # http``."""
    text = line.strip()
    for i, ch in enumerate(text):
        if ch in "<>=!~":
            return text[:i].strip().lower(), text[i:].strip()
    return text.lower(), ""
