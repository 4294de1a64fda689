"""The test environment of a repository at any commit: its CI's test dependencies, as of the commit's date.

For a repository without an entry in the SWE-bench table (``repo_specs``), Stage 2 builds the environment from the
base tree itself (docs/architecture.md, "Test environments"):

- **dependencies** — what the project's CI installs (``ci_deps`` / ``ci_sources``: tox, nox, Pipfile, extras and
  dependency groups, requirement files), the project itself with its extras, its lock files as pins;
- **as of the commit** — uv resolves only versions uploaded before the base commit's date (``--exclude-newer``), so a
  2021 commit gets 2021's libraries;
- **a Python of that era** — one the project's ``requires-python`` allows and that was out a year before the commit:
  cascade's own interpreter when it qualifies, else the newest installed one that does, else the oldest installed
  one the project allows.
"""

from __future__ import annotations

import re
import sys
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from cascade import toml
from cascade.execution.ci_sources import read_ci_dependencies
from cascade.execution.envs import EnvironmentUnavailable, EnvSpec, resolve_python
from cascade.execution.extensions import declares_extensions
from cascade.git import run_git

# First release of each CPython minor version (python.org): the era rule compares them with the commit's date.
PYTHON_RELEASES = {
    "3.6": date(2016, 12, 23), "3.7": date(2018, 6, 27), "3.8": date(2019, 10, 14), "3.9": date(2020, 10, 5),
    "3.10": date(2021, 10, 4), "3.11": date(2022, 10, 24), "3.12": date(2023, 10, 2), "3.13": date(2024, 10, 7),
    "3.14": date(2025, 10, 7),
}  # fmt: skip
ERA_MARGIN = timedelta(days=365)  # a Python this much older than the commit has wheels for the commit's libraries


def commit_date(tree: Path) -> datetime | None:
    """The committer date of the tree's HEAD (a checkout of the base commit)."""
    proc = run_git(tree, "log", "-1", "--format=%cI", "HEAD", timeout=60)
    try:
        return datetime.fromisoformat(proc.stdout.strip()) if proc.returncode == 0 else None
    except ValueError:
        return None


def requires_python(tree: Path) -> str | None:
    """The project's ``requires-python`` (pyproject), or ``python_requires`` (setup.cfg, setup.py)."""
    pyproject = tree / "pyproject.toml"
    if pyproject.is_file():
        try:
            value = toml.loads(pyproject.read_text(errors="replace")).get("project", {}).get("requires-python")
        except toml.TOMLDecodeError:
            value = None
        if isinstance(value, str):
            return value
    for name in ("setup.cfg", "setup.py"):
        path = tree / name
        match = (
            re.search(r"python_requires\s*=\s*['\"]?([^'\"\n]+)", path.read_text(errors="replace"))
            if path.is_file()
            else None
        )
        if match:
            return match.group(1).strip()
    return None


def _allows(requirement: str | None, version: str) -> bool:
    if not requirement:
        return True
    try:
        return SpecifierSet(requirement).contains(f"{version}.99", prereleases=True)
    except InvalidSpecifier:
        return True  # an unreadable bound constrains nothing we can check; uv will say if it matters


def choose_python(requirement: str | None, when: datetime | None, own: str, installed: list[str]) -> str | None:
    """The Python version for a commit (see the module docstring); None when the project allows none installed."""
    allowed = [v for v in installed if _allows(requirement, v)]
    if not allowed:
        return None
    cutoff = (when.date() if when else date.today()) - ERA_MARGIN
    of_era = [v for v in allowed if PYTHON_RELEASES.get(v, date.max) <= cutoff]
    if own in of_era:
        return own
    by_age = sorted(allowed, key=lambda v: PYTHON_RELEASES.get(v, date.max))
    return max(of_era, key=lambda v: PYTHON_RELEASES[v]) if of_era else by_age[0]


def build_requires(tree: Path) -> list[str]:
    """``[build-system] requires`` of pyproject.toml (setuptools and wheel when it names none): what building the
    extensions in place needs in the environment."""
    try:
        system = toml.loads((tree / "pyproject.toml").read_text(errors="replace")).get("build-system", {})
    except (OSError, toml.TOMLDecodeError):
        system = {}
    requires = system.get("requires") if isinstance(system, dict) else None
    listed = [r for r in requires if isinstance(r, str)] if isinstance(requires, list) else []
    return listed or ["setuptools", "wheel"]


def installed_pythons() -> list[str]:
    found: list[str] = []
    for version in PYTHON_RELEASES:
        try:
            resolve_python(version)
        except EnvironmentUnavailable:
            continue
        found.append(version)
    return found


def project_spec(
    tree: Path,
    repo: str,
    python: str | None = None,
    packages: list[str] | None = None,
    extras: list[str] | None = None,
    ci_dependencies: bool = True,
    exclude_newer: str | None = "commit",
    install_project: bool = True,
) -> EnvSpec:
    """The environment spec for the project at ``tree``'s commit; EnvironmentUnavailable when no Python fits."""
    when = commit_date(tree)
    own = f"{sys.version_info[0]}.{sys.version_info[1]}"
    requirement = requires_python(tree)
    chosen = python or choose_python(requirement, when, own, installed_pythons())
    if chosen is None:
        raise EnvironmentUnavailable(f"the project requires Python {requirement}; no such interpreter is installed")
    deps = read_ci_dependencies(tree, chosen if "/" not in chosen else own)
    cutoff = exclude_newer
    if exclude_newer == "commit":
        cutoff = when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ") if when else None
    sources = [*deps.used, *(f"not installed: {line}" for line in deps.skipped)] if ci_dependencies else []
    builds = ci_dependencies and declares_extensions(tree)  # what the CI's editable install compiles
    return EnvSpec(
        repo=repo,
        python=chosen,
        packages=[
            *(deps.requirements if ci_dependencies else []),
            *(build_requires(tree) if builds else []),
            *(packages or []),
        ],
        build_extensions=builds,
        constraints=deps.constraints if ci_dependencies else [],
        install_project=install_project,
        extras=list(dict.fromkeys([*(deps.extras if ci_dependencies else []), *(extras or [])])),
        exclude_newer=cutoff,
        sources=sources or ["the project's declared dependencies only (its CI states no test dependencies)"],
    )
