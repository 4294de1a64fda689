"""What a project's own CI installs to run its tests, read from the tree at one commit (no code runs).

Where a repository states its test dependencies, first match wins (docs/architecture.md, "Test environments"):

1. tox — ``[testenv]`` of ``tox.ini`` (or ``setup.cfg``'s, or ``[tool.tox.env_run_base]`` / ``legacy_tox_ini`` in
   ``pyproject.toml``): its ``deps`` (factor-conditional lines evaluated for a plain ``py3X`` env), ``extras`` and
   ``dependency_groups``;
2. nox — the ``session.install(...)`` string arguments of the test sessions of ``noxfile.py``; pipenv — the
   Pipfile's ``[dev-packages]``;
3. ``pyproject.toml`` dependency groups, then extras, named test, tests, testing, then dev (``setup.cfg``'s and a
   literal ``extras_require`` of ``setup.py`` too);
4. a test/dev requirements file (``requirements-dev.txt``, ``requirements/tests.txt``, …).

Requirement files are followed through ``-r``/``-c``; a line naming the project itself (``-e .[socks]``,
``.[testutils]``, ``pytest[dev]`` inside pytest) becomes project extras, since the project is installed anyway.
Pins are honoured as constraints: ``-c`` files, ``Pipfile.lock``, and a ``uv.lock`` exported by uv. Each source used
is named in ``used``.
"""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

TEST_NAMES = ("test", "tests", "testing", "dev")
REQUIREMENT_FILES = (
    "requirements-dev.txt", "requirements_dev.txt", "dev-requirements.txt", "requirements-test.txt",
    "requirements_test.txt", "requirements-tests.txt", "test-requirements.txt", "requirements/tests.txt",
    "requirements/test.txt", "requirements/testing.txt", "requirements/dev.txt", "tests/requirements.txt",
)  # fmt: skip
_FACTOR_LINE = re.compile(r"^(!?[\w.]+(?:[-,]!?[\w.]+)*)\s*:\s+(.+)$")
_NAME = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?\s*(.*)$")
_SKIPPED_OPTIONS = ("--index-url", "-i", "--extra-index-url", "--find-links", "-f", "--pre", "--no-binary",
                    "--only-binary", "--trusted-host", "--prefer-binary", "--use-feature", "--hash")  # fmt: skip


class CiDependencies(BaseModel):
    """The test dependencies a project's CI installs, as requirement strings for uv."""

    model_config = ConfigDict(extra="forbid")

    requirements: list[str] = Field(default_factory=list)
    constraints: list[str] = Field(default_factory=list)
    extras: list[str] = Field(default_factory=list, description="Extras of the project itself.")
    used: list[str] = Field(default_factory=list, description="Which files and sections these came from.")
    skipped: list[str] = Field(default_factory=list, description="Lines that could not be honoured, and why.")


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


class Reader:
    """Accumulates one project's dependencies; knows the project's name to spot self-references."""

    def __init__(self, tree: Path, project: str | None, python: str) -> None:
        self.tree = tree
        self.project = _canonical(project) if project else None
        self.factor = "py" + python.replace(".", "")
        self.deps = CiDependencies()
        self._seen: set[Path] = set()

    def requirement(self, line: str, where: str) -> None:
        """One requirement string or path; the project itself becomes extras."""
        line = line.strip()
        if line.startswith(("-e ", "--editable ")):
            line = line.split(maxsplit=1)[1].strip()
        if self._is_self_path(line):
            self._extras(line)
            return
        match = _NAME.match(line)
        if match and self.project and _canonical(match.group(1)) == self.project and not match.group(3).strip("; "):
            self._extras(line)
            return
        if line.startswith((".", "/", "file:")) or self._is_local_dir(line):
            self.deps.skipped.append(f"{where}: {line} (a local path other than the project)")
            return
        self.deps.requirements.append(line)

    def _is_local_dir(self, line: str) -> bool:
        """``examples/tutorial[test]`` (flask's tox deps): a directory of the tree, not a PyPI name."""
        path = line.split("[", 1)[0].strip()
        return "/" in path and (self.tree / path).is_dir()

    def _is_self_path(self, line: str) -> bool:
        path = line.split("[", 1)[0].removeprefix("file:").strip() or "."
        return line.startswith((".", "{toxinidir}", "file:")) and path.rstrip("/") in (".", "{toxinidir}", "./")

    def _extras(self, line: str) -> None:
        inside = line.partition("[")[2].partition("]")[0]
        self.deps.extras.extend(e.strip() for e in inside.split(",") if e.strip())

    def requirements_file(self, path: Path, constraint: bool = False) -> None:
        """Follow a requirements file (and its ``-r``/``-c`` includes), relative to the file's directory."""
        path = path.resolve()
        if path in self._seen or not path.is_relative_to(self.tree.resolve()) or not path.is_file():
            return
        self._seen.add(path)
        rel = str(path.relative_to(self.tree.resolve()))
        self.deps.used.append(f"{rel} (constraints)" if constraint else rel)
        for raw in path.read_text(errors="replace").splitlines():
            line = re.sub(r"(^|\s)#.*$", "", raw).strip()
            if line:
                self._requirement_line(line, path.parent, rel, constraint)

    def _requirement_line(self, line: str, here: Path, rel: str, constraint: bool) -> None:
        include = re.match(r"^(-r|--requirement|-c|--constraint)\s*=?\s*(\S+)$", line)
        if include:
            self.requirements_file(here / include.group(2), constraint or include.group(1) in ("-c", "--constraint"))
        elif line.startswith(_SKIPPED_OPTIONS):
            self.deps.skipped.append(f"{rel}: {line} (pip option)")
        elif constraint:
            self.deps.constraints.append(line)
        else:
            self.requirement(line, rel)

    def for_this_env(self, lines: list[str]) -> list[str]:
        """tox entries that apply to a plain ``py3X`` env, factor prefixes removed, ``{toxinidir}`` resolved."""
        kept: list[str] = []
        for raw in lines:
            line = raw.strip()
            factor = _FACTOR_LINE.match(line)
            if factor:
                if not self._factors_hold(factor.group(1)):
                    continue
                line = factor.group(2).strip()
            line = line.replace("{toxinidir}/", "").replace("{toxinidir}", ".")
            if line and not line.startswith("#") and "{" not in line:
                kept.append(line)
        return kept

    def tox_deps(self, lines: list[str], where: str) -> None:
        for line in self.for_this_env(lines):
            include = re.match(r"^(-r|-c)\s*(\S+)$", line)
            if include:
                self.requirements_file(self.tree / include.group(2), include.group(1) == "-c")
            else:
                self.requirement(line, where)

    def _factors_hold(self, condition: str) -> bool:
        """tox factor conditions for a plain ``py3X`` env: ``a,b`` is or, ``a-b`` is and, ``!a`` is not."""
        return any(all(self._factor(f) for f in part.split("-")) for part in condition.split(","))

    def _factor(self, factor: str) -> bool:
        negated = factor.startswith("!")
        holds = factor.lstrip("!") in (self.factor, "py3", "py")
        return holds != negated
