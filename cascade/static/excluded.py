"""Files the repository keeps out of its own linting: test data such as pylint's ``tests/functional/`` inputs, which
are wrong on purpose. Read from the **base** tree only, so a patch cannot exclude its own files (docs/architecture.md,
Stages): ruff's ``exclude``/``extend-exclude`` (pyproject.toml, ruff.toml, .ruff.toml), pyright's ``exclude``
(pyproject.toml, pyrightconfig.json) and flake8's ``exclude`` (setup.cfg, tox.ini, .flake8). A new diagnostic in
such a file is reported, never a reason to reject — for files under a test directory only: the repository's
settings never switch the gate off for its library code (``exclude = ["pkg"]`` still rejects there)."""

from __future__ import annotations

import configparser
import contextlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pathspec

from cascade.paths import under_test_dir
from cascade.toml import TOMLDecodeError, loads

MAX_CONFIG_BYTES = 1 << 20


def _read(base: Path, name: str) -> str | None:
    path = base / name
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_CONFIG_BYTES:
            return None
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _toml(base: Path, name: str) -> dict[str, Any]:
    text = _read(base, name)
    try:
        return loads(text) if text else {}
    except TOMLDecodeError:
        return {}


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [p.strip() for p in value.replace("\n", ",").split(",") if p.strip()]
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _patterns(base: Path) -> list[str]:
    tool = _toml(base, "pyproject.toml").get("tool", {})
    found: list[str] = []
    for section in (tool.get("ruff", {}), _toml(base, "ruff.toml"), _toml(base, ".ruff.toml"), tool.get("pyright", {})):
        if isinstance(section, dict):
            found += _strings(section.get("exclude")) + _strings(section.get("extend-exclude"))
    text = _read(base, "pyrightconfig.json")
    with contextlib.suppress(ValueError, AttributeError):  # not JSON, or not an object: no excludes from it
        found += _strings(json.loads(text).get("exclude")) if text else []
    for name in ("setup.cfg", "tox.ini", ".flake8"):
        parser = configparser.ConfigParser(interpolation=None)
        try:
            parser.read_string(_read(base, name) or "")
        except configparser.Error:
            continue
        if parser.has_option("flake8", "exclude"):
            found += _strings(parser.get("flake8", "exclude"))
    return found


class RepositoryExcludes:
    """Which repository-relative paths the base tree's lint settings exclude."""

    def __init__(self, base: Path) -> None:
        self.patterns = _patterns(base)
        self._spec = pathspec.PathSpec.from_lines("gitwildmatch", self.patterns)

    def excluded(self, path: str) -> bool:
        return under_test_dir(path) and bool(self.patterns) and self._spec.match_file(path)

    def among(self, paths: Iterable[str]) -> list[str]:
        return sorted({p for p in paths if self.excluded(p)})
