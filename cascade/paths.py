"""Repository paths as Python sees them: the module a file defines, and whether a file is a test module by name.

One mapping for every stage: ``src/`` and ``lib/`` layouts drop their prefix (``lib/matplotlib/axes.py`` →
``matplotlib.axes``), packages drop ``__init__``. Which files a *patch* counts as tests is configurable
(``no_change.test_globs``, `cascade/patch.py`); which files of a *repository* are its test modules is pytest's
default naming rule (`is_test_file`) plus the repository's own ``python_files`` (`is_repo_test_file`).
"""

from __future__ import annotations

import configparser
import fnmatch
from pathlib import Path, PurePosixPath

from cascade import toml

# Where pytest reads its ini options, in its own order of precedence (file, section).
_PYTEST_INI = (("pytest.ini", "pytest"), (".pytest.ini", "pytest"), ("tox.ini", "pytest"), ("setup.cfg", "tool:pytest"))

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


TEST_DIRS = frozenset({"tests", "test", "testing"})


def under_test_dir(path: str) -> bool:
    """Inside a directory named like a test directory (``tests/``, ``test/``, ``testing/``) at any depth."""
    return bool(TEST_DIRS & set(PurePosixPath(path).parts[:-1]))


def is_conftest(path: str) -> bool:
    return PurePosixPath(path).name == "conftest.py"


def is_test_file(path: str) -> bool:
    """pytest's default test-module names: ``test_*.py`` and ``*_test.py``."""
    name = PurePosixPath(path).name
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


def pytest_file_patterns(tree: Path) -> list[str]:
    """The repository's own ``python_files`` patterns (pytest's defaults apply besides them): files a project
    names ``unittest_*.py`` are its tests as much as ``test_*.py`` ones."""
    pyproject = tree / "pyproject.toml"
    if pyproject.is_file():
        try:
            options = toml.loads(pyproject.read_text(encoding="utf-8", errors="replace"))
        except toml.TOMLDecodeError:
            options = {}
        value = options.get("tool", {}).get("pytest", {}).get("ini_options", {}).get("python_files")
        if value:
            return value.split() if isinstance(value, str) else [str(v) for v in value]
    for name, section in _PYTEST_INI:
        parser = configparser.ConfigParser(interpolation=None)
        try:
            parser.read(tree / name, encoding="utf-8")
        except (configparser.Error, UnicodeDecodeError):
            continue
        if parser.has_option(section, "python_files"):
            return parser.get(section, "python_files").split()
    return []


def is_repo_test_file(path: str, patterns: list[str]) -> bool:
    """pytest's default test-module names, or the repository's own ``python_files`` patterns."""
    name = PurePosixPath(path).name
    return is_test_file(path) or (name.endswith(".py") and any(fnmatch.fnmatchcase(name, p) for p in patterns))
