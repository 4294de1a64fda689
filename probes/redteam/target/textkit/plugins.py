"""Map plugin file names to importable module names."""

from __future__ import annotations


def plugin_module_name(filename: str) -> str:
    """``textkit_plugins.<stem>`` for a plugin file such as ``fancy_wrap.py``."""
    stem = filename.rsplit("/", 1)[-1]
    return f"textkit_plugins.{stem}"
