"""Repository paths as Python sees them: the module a file defines, and whether a file is a test module by name.

One mapping for every stage: ``src/`` and ``lib/`` layouts drop their prefix (``lib/matplotlib/axes.py`` →
``matplotlib.axes``), packages drop ``__init__``. Which files a *patch* counts as tests is configurable
(``no_change.test_globs``, `cascade/patch.py`); `is_test_file` is pytest's own default naming rule.
"""

from __future__ import annotations

from pathlib import PurePosixPath

LAYOUT_ROOTS = ("src", "lib")


def module_parts(path: str) -> list[str]:
    """``pkg/sub/mod.py`` → ``['pkg', 'sub', 'mod']``; ``__init__`` is kept (the package is the parts before it)."""
    parts = list(PurePosixPath(path).with_suffix("").parts)
    if parts and parts[0] in LAYOUT_ROOTS:
        parts = parts[1:]
    return parts


def module_of(path: str) -> str | None:
    """The dotted module a repository-relative Python file defines; None for a non-Python path."""
    if not path.endswith(".py"):
        return None
    parts = module_parts(path)
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts) or None


def is_test_file(path: str) -> bool:
    """pytest's default test-module names: ``test_*.py`` and ``*_test.py``."""
    name = PurePosixPath(path).name
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))
