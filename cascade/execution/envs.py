"""Test environments: one `uv` venv per (repo, Python version, dependency set), cached on disk.

The repository itself is *not* baked into the cached venv: both trees of a review (base and patched) and concurrent
reviews share one venv, and each run puts its own tree first on ``PYTHONPATH`` (``src/`` for src-layout projects).
What the venv holds is the repository's dependencies — from the table in ``repo_specs`` for the SWE-bench
repositories, or from the project's own metadata (``uv pip install <base tree>``, whose code the tree on
``PYTHONPATH`` then shadows) — plus pytest and coverage. A tree run from source may lack a module its build would
generate (setuptools_scm's version file, which pytest imports): ``write_scm_version_file`` supplies it before each run.

The per-repository, per-version table transcribed from the SWE-bench harness is data and lives in its own module,
``cascade.execution.repo_specs`` (``spec_for_repo(repo, version)``). Compiled extensions (astropy) are built once per
environment and extension sources by ``cascade.execution.extensions``.
"""

from __future__ import annotations

import fcntl
import glob
import hashlib
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from cascade.errors import CascadeError
from cascade.git import run_git
from cascade.sandbox.allowlist import MPLCONFIGDIR_IN_SANDBOX
from cascade.tools import find_tool, tool_path_hint

DEFAULT_CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "cascade" / "envs"
TEST_TOOLS = ["pytest", "coverage"]
_READY = ".cascade-ready"
_NO_PROJECT = hashlib.sha256().hexdigest()[:16]  # fingerprint of a tree without any dependency file
_DEPENDENCY_FILES = ("pyproject.toml", "setup.py", "setup.cfg", "requirements.txt", "requirements-dev.txt")


class EnvironmentUnavailable(CascadeError):
    """The repository's test environment cannot be built here; Stage 2 is then skipped with this reason."""


class EnvSpec(BaseModel):
    """What a venv must contain. Two specs with the same key share one cached venv."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    repo: str = Field(description="Repository name, e.g. sympy/sympy (only labels the cache entry).")
    python: str = Field(description="A version ('3.9') or an interpreter path.")
    packages: list[str] = Field(default_factory=list, description="Requirement strings installed with uv.")
    install_project: bool = Field(default=False, description="Also install the base tree's declared dependencies.")
    extras: list[str] = Field(default_factory=list, description="Extras of the project to install (e.g. test).")
    unsupported: str | None = Field(default=None, description="Why this repository cannot be tested here.")
    build_extensions: bool = Field(
        default=False, description="The tests need the project's compiled extensions built in the tree (astropy)."
    )
    constraints: list[str] = Field(default_factory=list, description="Pins (constraint lines) the resolution honours.")
    exclude_newer: str | None = Field(
        default=None, description="Resolve only versions uploaded before this time (RFC 3339), e.g. the commit's."
    )
    sources: list[str] = Field(
        default_factory=list, description="Where packages and constraints came from (reported, not part of the key)."
    )


class Environment(BaseModel):
    """A ready interpreter: a cached venv, or (documented option) the interpreter running cascade."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    python: str = Field(description="Interpreter that runs the tests.")
    python_version: str
    venv_dir: str | None = None
    base_prefix: str = Field(description="Prefix of the interpreter the venv was made from (must stay readable).")
    description: str = ""
    autoload_plugins: bool = Field(
        default=True, description="False for cascade's own interpreter: its pytest plugins are not the repo's."
    )
    build_extensions: bool = Field(
        default=False, description="The tests need the project's compiled extensions built in the tree."
    )

    def pythonpath(self, tree: Path) -> list[str]:
        """The tree's import roots: ``src/`` for src-layout projects, the tree itself otherwise."""
        src = tree / "src"
        roots = [str(src)] if src.is_dir() and any(src.glob("*/__init__.py")) else []
        return [*roots, str(tree)]

    def run_env(self, tree: Path) -> dict[str, str]:
        """Variables every test run gets: fixed TZ and hash seed for reproducible outcomes, no bytecode in the tree.

        Also writes the tree's setuptools_scm version module if it is missing (see ``write_scm_version_file``): every
        run passes through here, and without it a project like pytest cannot even be imported from its source tree.
        """
        write_scm_version_file(tree)
        env = {
            "TZ": "UTC",
            "PYTHONHASHSEED": "0",
            "PYTHONDONTWRITEBYTECODE": "1",
            "MPLBACKEND": "Agg",
            # matplotlib otherwise makes ~/.config/matplotlib: a HOME write. This path is a named allow-list entry.
            "MPLCONFIGDIR": MPLCONFIGDIR_IN_SANDBOX,
            "PYTHONPATH": ":".join(self.pythonpath(tree)),
        }
        if not self.autoload_plugins:
            env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        return env

    def exposed_paths(self) -> list[str]:
        return [p for p in (self.venv_dir, self.base_prefix) if p]


_SCM_WRITE_TO = re.compile(r"""\b(?:write_to|version_file)["']?\s*[:=]\s*["']([\w./-]+\.py)["']""")
_SCM_CONFIG_FILES = ("pyproject.toml", "setup.py", "setup.cfg")


def write_scm_version_file(tree: Path) -> Path | None:
    """Write the version module that setuptools_scm's ``write_to`` / ``version_file`` would generate at build time.

    Trees here are run from source, never built, so a module the project imports unconditionally (pytest's
    ``_pytest/_version.py``) would be missing. The version comes from ``git describe`` like setuptools_scm's; an
    existing file is left alone. Returns the file written, if any.
    """
    target = _scm_version_target(tree)
    if target is None or target.exists():
        return None
    version = _describe_version(tree)
    parts = tuple(int(p) if p.isdigit() else p for p in re.split(r"[.+]", version))
    target.write_text(
        "# generated by cascade in place of setuptools_scm (the tree runs from source, unbuilt)\n"
        f"version = __version__ = {version!r}\nversion_tuple = __version_tuple__ = {parts!r}\n",
        encoding="utf-8",
    )
    return target


def _scm_version_target(tree: Path) -> Path | None:
    for name in _SCM_CONFIG_FILES:
        config = tree / name
        match = _SCM_WRITE_TO.search(config.read_text(errors="replace")) if config.is_file() else None
        if match:
            target = (tree / match.group(1)).resolve()
            return target if target.is_relative_to(tree.resolve()) and target.parent.is_dir() else None
    return None


def _describe_version(tree: Path) -> str:
    """setuptools_scm's default scheme (guess-next-dev) from ``git describe``; 0.0.0 without tags.

    ``5.4.0-195-g4787fd6`` → ``5.4.1.dev195+g4787fd6``; a dev tag keeps its release (pytest tags ``9.2.0.dev0`` on
    main): ``9.2.0.dev0-72-g198eff1`` → ``9.2.0.dev72+g198eff1``. Appending to a dev tag instead gives an invalid
    version (``9.2.0.dev0.dev72``) that pytest's own ``minversion`` check refuses, so every run of its tests crashed."""
    proc = run_git(tree, "describe", "--tags", "--long", timeout=60)
    match = re.fullmatch(r"v?(.+)-(\d+)-(g[0-9a-f]+)", proc.stdout.strip())
    if proc.returncode != 0 or match is None:
        return "0.0.0"
    tag, distance, node = match.groups()
    return tag if distance == "0" else f"{_next_version(tag)}.dev{distance}+{node}"


def _next_version(tag: str) -> str:
    """setuptools_scm's guess_next_version: a dev release's own release, else the last number bumped."""
    tag = tag.split("+", 1)[0]
    if ".dev" in tag:
        return tag.split(".dev", 1)[0]
    match = re.fullmatch(r"(.*?)(\d+)", tag)
    return f"{match.group(1)}{int(match.group(2)) + 1}" if match else tag


def resolve_python(request: str) -> str:
    """An interpreter path for a version ('3.9') or a path; EnvironmentUnavailable when none is installed."""
    if os.sep in request:
        if Path(request).is_file():
            return request
        raise EnvironmentUnavailable(f"Python interpreter not found: {request}")
    for candidate in _python_candidates(request):
        if _reports_version(candidate, request):
            return candidate
    raise EnvironmentUnavailable(
        f"no Python {request} interpreter found (on Debian: scripts/install-python39.sh installs 3.9)"
    )


def _python_candidates(version: str) -> Iterator[str]:
    yield f"/usr/bin/python{version}"
    yield f"/usr/local/bin/python{version}"
    found = shutil.which(f"python{version}")
    if found:
        yield found
    yield from sorted(glob.glob(str(Path.home() / f".pyenv/versions/{version}.*/bin/python{version}")))
    uv = find_tool("uv")
    if uv is None:
        return
    proc = subprocess.run([uv, "python", "find", version], capture_output=True, text=True, timeout=60)
    if proc.returncode == 0 and proc.stdout.strip():
        yield proc.stdout.strip()


def _reports_version(python: str, version: str) -> bool:
    if not Path(python).is_file():
        return False
    proc = subprocess.run(
        [python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], capture_output=True, text=True, timeout=60
    )
    return proc.returncode == 0 and proc.stdout.strip() == version


def _interpreter_facts(python: str) -> tuple[str, str]:
    proc = subprocess.run(
        [python, "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3]); print(sys.base_prefix)"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if proc.returncode != 0:
        raise EnvironmentUnavailable(f"Python interpreter does not run: {python}")
    version, prefix = proc.stdout.split("\n")[:2]
    return version.strip(), prefix.strip()


def project_fingerprint(tree: Path) -> str:
    """Hash of the files that declare the project's dependencies (part of the cache key when they are installed)."""
    digest = hashlib.sha256()
    for name in _DEPENDENCY_FILES:
        path = tree / name
        if path.is_file():
            digest.update(name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def cache_key(spec: EnvSpec, python: str, python_version: str, project_tree: Path | None) -> str:
    parts = [spec.repo, python, python_version, *sorted(spec.packages), *TEST_TOOLS, ",".join(sorted(spec.extras))]
    if spec.install_project and project_tree is not None:
        parts.append(project_fingerprint(project_tree))
    if spec.constraints or spec.exclude_newer:  # absent from the table's specs: their keys stay as they were
        parts += ["constraints", *sorted(spec.constraints), f"exclude-newer={spec.exclude_newer}"]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:20]


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Serialise builders of one cache entry across processes (the benchmark runs two)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def ensure_environment(
    spec: EnvSpec, project_tree: Path | None = None, cache_dir: Path | None = None, timeout: float = 900
) -> Environment:
    """The cached venv for ``spec``, built with uv on first use; EnvironmentUnavailable when it cannot be built."""
    if spec.unsupported:
        raise EnvironmentUnavailable(f"{spec.repo}: {spec.unsupported}")
    if find_tool("uv") is None:
        raise EnvironmentUnavailable(f"uv is not installed ({tool_path_hint('uv')}; pip install uv)")
    python = resolve_python(spec.python)
    version, base_prefix = _interpreter_facts(python)
    if spec.constraints or spec.exclude_newer:
        from cascade.execution.resolved import ensure_resolved

        venv, description = ensure_resolved(spec, python, version, project_tree, cache_dir or DEFAULT_CACHE, timeout)
    else:
        venv = (cache_dir or DEFAULT_CACHE) / cache_key(spec, python, version, project_tree)
        with _locked(venv.with_suffix(".lock")):
            if not (venv / _READY).is_file():
                _build(spec, python, venv, project_tree, timeout)
        description = f"uv venv {venv.name} (Python {version}; {', '.join(spec.packages) or 'no extra packages'})"
    return Environment(
        python=str(venv / "bin" / "python"),
        python_version=version,
        venv_dir=str(venv),
        base_prefix=base_prefix,
        description=description,
        build_extensions=spec.build_extensions,
    )


def _build(spec: EnvSpec, python: str, venv: Path, project_tree: Path | None, timeout: float) -> None:
    shutil.rmtree(venv, ignore_errors=True)
    _uv(["venv", "--quiet", "--python", python, str(venv)], timeout)
    requirements = [*spec.packages, *TEST_TOOLS]
    if spec.install_project and project_tree is not None and project_fingerprint(project_tree) != _NO_PROJECT:
        extras = f"[{','.join(spec.extras)}]" if spec.extras else ""
        requirements.append(f"{project_tree}{extras}")
    _uv(["pip", "install", "--quiet", "--python", str(venv / "bin" / "python"), *requirements], timeout)
    (venv / _READY).write_text(" ".join(requirements) + "\n", encoding="utf-8")


def _uv(args: list[str], timeout: float) -> str:
    """Run uv; its stdout, or EnvironmentUnavailable with uv's reason on one line."""
    uv = find_tool("uv")
    if uv is None:
        raise EnvironmentUnavailable(f"uv is not installed ({tool_path_hint('uv')}; pip install uv)")
    try:
        proc = subprocess.run([uv, *args], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise EnvironmentUnavailable(f"uv {args[0]} timed out after {timeout:.0f}s") from None
    if proc.returncode != 0:
        raise EnvironmentUnavailable(f"uv {' '.join(args[:2])} failed: {uv_reason(proc.stderr)}")
    return proc.stdout


def uv_reason(stderr: str, limit: int = 300) -> str:
    """uv's error as one line: the error and its cause (the resolver's explanation), without decoration."""
    lines = [line.strip().lstrip("×╰─▶│ ").strip() for line in stderr.splitlines()]
    lines = [line for line in lines if line and not line.startswith(("hint:", "help:", "warning:"))]
    start = next((i for i, line in enumerate(lines) if line.lower().startswith(("error", "no solution"))), None)
    text = " ".join(lines[start:] if start is not None else lines[-1:]) or "no output"
    text = re.sub(r"^error:\s*", "", text).replace("cause: ", "— ")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def current_environment() -> Environment:
    """The interpreter running cascade, as is: for repositories whose tests need no dependencies beyond pytest and
    coverage (config ``env.use_current_interpreter``; also what the test suite uses for its small repos)."""
    version = ".".join(str(n) for n in sys.version_info[:3])
    return Environment(
        python=sys.executable,
        python_version=version,
        base_prefix=sys.base_prefix,
        venv_dir=sys.prefix if sys.prefix != sys.base_prefix else None,
        autoload_plugins=False,
        description=f"current interpreter {sys.executable} (Python {version})",
    )
