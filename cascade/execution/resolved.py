"""Environments resolved first, then cached by what they resolved to (a project's CI pins, as of a date).

A spec with an ``exclude_newer`` date or constraints is resolved with ``uv pip compile`` into exact pins; the venv is
keyed by those pins (with the interpreter and the project's dependency files), so two commits that resolve alike
share one venv while any difference in what would be installed gets its own. The resolution itself is cached by the
spec's inputs (the date included), so a commit is resolved once. A resolution that fails is not cached: its reason
(uv's one line) makes Stage 2 unable to run, and the next review tries again.

The test tools cascade itself drives (pytest, coverage) are resolved with the project's pins; coverage alone is
exempt from the date (``--exclude-newer-package``), because cascade's runner needs a coverage with ``--data-file``.
The project is installed without its dependencies (they are in the pins) for its metadata and entry points; each run
puts its own tree first on ``PYTHONPATH``, as an editable install would (``Environment.run_env``).
"""

from __future__ import annotations

import hashlib
import re
import shutil
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from cascade import toml
from cascade.execution.envs import (
    _READY,
    TEST_TOOLS,
    EnvironmentUnavailable,
    EnvSpec,
    _locked,
    _uv,
    cache_key,
    project_fingerprint,
)

_EXEMPT_FROM_DATE = ("coverage",)
_BUILD_RECIPE = "compiled-bytecode"  # part of the venv key: a change in how venvs are built must not reuse old ones


def _date_flags(spec: EnvSpec, exempt: list[str] | None = None) -> list[str]:
    """uv's date limit, with the packages that are exempt from it (coverage; others after a retry)."""
    if not spec.exclude_newer:
        return []
    now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    exempt = [f"--exclude-newer-package={name}={now}" for name in [*_EXEMPT_FROM_DATE, *(exempt or [])]]
    return ["--exclude-newer", spec.exclude_newer, *exempt]


def installable(tree: Path) -> bool:
    """A tree pip/uv can build: a setup.py, or a pyproject.toml naming a project or a build system."""
    if (tree / "setup.py").is_file():
        return True
    try:
        pyproject = toml.loads((tree / "pyproject.toml").read_text(errors="replace"))
    except (OSError, toml.TOMLDecodeError):
        return False
    return "project" in pyproject or "build-system" in pyproject


def _project_requirement(spec: EnvSpec, project_tree: Path | None) -> list[str]:
    if not spec.install_project or project_tree is None or not installable(project_tree):
        return []
    extras = f"[{','.join(spec.extras)}]" if spec.extras else ""
    return [f"{project_tree}{extras}"]


_MISSING = re.compile(
    r"Because (?:there is no version of|there are no versions of) ([A-Za-z0-9._-]+)"
    r"|Because ([A-Za-z0-9._-]+) was not found in the package registry"
)
_BUILD_FAILED = re.compile(r"Failed to (?:build|parse metadata|prepare|download and build)|[Bb]uild backend")
_BUILD_BACKENDS = ("setuptools", "wheel")
MAX_RETRIES = 6


class Resolution(BaseModel):
    """Exact pins, and what had to give way for them (each retry says why)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    pins: list[str]
    notes: list[str] = Field(default_factory=list)
    exempt: list[str] = Field(default_factory=list, description="Packages resolved without the date limit.")


def resolve(spec: EnvSpec, python: str, project_tree: Path | None, timeout: float) -> Resolution:
    """Exact pins for the spec (the project's own line left out); EnvironmentUnavailable with uv's reason.

    Old commits meet a PyPI that changed since: pinned versions yanked or deleted, packages re-uploaded with new
    dates (atomicwrites), packages deleted (codecov), era build tools that modern installers refuse. Rather than give
    up at once, each retry takes one step — drop a pin the index lacks; exempt from the date a package with no upload
    before it; drop a required package the index lacks entirely; current setuptools/wheel for a failed build — and
    each step is a note in the report."""
    notes: list[str] = []
    exempt: list[str] = []
    for _ in range(MAX_RETRIES):
        try:
            return Resolution(pins=_compile(spec, python, project_tree, exempt, timeout), notes=notes, exempt=exempt)
        except EnvironmentUnavailable as exc:
            step = _next_step(spec, str(exc), exempt)
            if step is None:
                raise
            spec, note = step
            notes.append(note)
    raise EnvironmentUnavailable(f"resolution still failing after {MAX_RETRIES} attempts ({'; '.join(notes)})")


def _next_step(spec: EnvSpec, reason: str, exempt: list[str]) -> tuple[EnvSpec, str] | None:
    """One change that may let the resolution succeed (``exempt`` grows in place), or None."""
    match = _MISSING.search(reason)
    name = ((match.group(1) or match.group(2)) if match else "").split("==")[0]
    if name and _canonical(name) in {_name_of(c) for c in spec.constraints}:
        return _without(spec, name, pin_only=True), f"dropped the pin of {name} (that version is not on PyPI)"
    if name and spec.exclude_newer and name not in exempt:
        exempt.append(name)
        return spec, f"{name}: no upload before the date (re-uploaded since?), its current versions allowed"
    if name and f"you require {name}" in reason and _canonical(name) in {_name_of(r) for r in spec.packages}:
        return _without(spec, name, pin_only=False), f"dropped {name} (not on PyPI)"
    if _BUILD_FAILED.search(reason) and spec.exclude_newer and not set(_BUILD_BACKENDS) <= set(exempt):
        exempt.extend(b for b in _BUILD_BACKENDS if b not in exempt)
        return spec, f"current setuptools/wheel (the project does not build with its era's: {reason[:120]})"
    return None


def _name_of(requirement: str) -> str:
    return _canonical(re.split(r"[\s\[<>=!~;@]", requirement.strip(), maxsplit=1)[0])


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _without(spec: EnvSpec, name: str, pin_only: bool) -> EnvSpec:
    drop = _canonical(name)
    packages = spec.packages if pin_only else [r for r in spec.packages if _name_of(r) != drop]
    return spec.model_copy(
        update={"packages": packages, "constraints": [c for c in spec.constraints if _name_of(c) != drop]}
    )


def _compile(spec: EnvSpec, python: str, project_tree: Path | None, exempt: list[str], timeout: float) -> list[str]:
    with tempfile.TemporaryDirectory(prefix="cascade-resolve-") as scratch:
        requirements, constraints = Path(scratch, "requirements.in"), Path(scratch, "constraints.txt")
        lines = [*spec.packages, *TEST_TOOLS, *_project_requirement(spec, project_tree)]
        requirements.write_text("\n".join(lines) + "\n", encoding="utf-8")
        constraints.write_text("\n".join(spec.constraints) + "\n", encoding="utf-8")
        flags = _date_flags(spec, exempt)
        args = ["pip", "compile", "--quiet", "--no-header", "--no-annotate", "--python", python, *flags]
        out = _uv([*args, "-c", str(constraints), str(requirements)], timeout)
    project = str(project_tree) if project_tree is not None else None
    return [line.strip() for line in out.splitlines() if line.strip() and not (project and project in line)]


def ensure_resolved(
    spec: EnvSpec, python: str, version: str, project_tree: Path | None, cache: Path, timeout: float
) -> tuple[Path, str]:
    """The venv for the spec's resolved pins (built on first use) and its description for the report."""
    cached = cache / "resolved" / f"{cache_key(spec, python, version, project_tree)}.json"
    with _locked(cached.with_suffix(".lock")):
        if not cached.is_file():
            cached.write_text(resolve(spec, python, project_tree, timeout).model_dump_json(), encoding="utf-8")
    resolution = Resolution.model_validate_json(cached.read_text(encoding="utf-8"))
    project = project_fingerprint(project_tree) if spec.install_project and project_tree is not None else "-"
    key = [_BUILD_RECIPE, python, version, project, ",".join(spec.extras), *resolution.exempt, *resolution.pins]
    venv = cache / f"r-{hashlib.sha256(chr(10).join(key).encode()).hexdigest()[:18]}"
    with _locked(venv.with_suffix(".lock")):
        if not (venv / _READY).is_file():
            _build(spec, python, venv, resolution.pins, resolution.exempt, project_tree, timeout)
    return venv, _describe(spec, venv, version, resolution)


def _build(
    spec: EnvSpec, python: str, venv: Path, pins: list[str], exempt: list[str], project: Path | None, timeout: float
) -> None:
    shutil.rmtree(venv, ignore_errors=True)
    _uv(["venv", "--quiet", "--python", python, str(venv)], timeout)
    (venv / "cascade-pins.txt").write_text("\n".join(pins) + "\n", encoding="utf-8")
    # bytecode compiled at install, as pip does: a project whose tests turn warnings into errors (flask 2.0) would
    # otherwise fail importing an old dependency that warns when compiled (blinker 1.4's invalid escapes)
    target = ["--python", str(venv / "bin" / "python"), "--compile-bytecode", *_date_flags(spec, exempt)]
    _uv(["pip", "install", "--quiet", *target, "-r", str(venv / "cascade-pins.txt")], timeout)
    if spec.install_project and project is not None and installable(project):
        _uv(["pip", "install", "--quiet", "--no-deps", *target, str(project)], timeout)
    (venv / _READY).write_text("\n".join(spec.sources) + "\n", encoding="utf-8")


def _describe(spec: EnvSpec, venv: Path, version: str, resolution: Resolution) -> str:
    when = f"as of {spec.exclude_newer}" if spec.exclude_newer else "latest versions"
    sources = "; ".join([*spec.sources, *resolution.notes]) or "no test dependencies stated"
    return f"uv venv {venv.name} (Python {version}; {len(resolution.pins)} pinned packages {when}; from: {sources})"
