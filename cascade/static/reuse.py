"""Base-tree tool runs kept in the result store (docs/architecture.md, Reuse).

ruff's and pyright's findings on a base tree are fully determined by: the tree (repository and commit), the files
analysed, the interpreter environment pyright resolves third-party imports in, the tools themselves, cascade's
settings for them, and cascade's code that runs them and reads their output. That tuple is the key, so re-reviews of
one base (the bench's several agents per task, every push to a pull request) analyse only the patched tree. Only
runs where every tool worked are stored, so a crash is never replayed.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from cascade.config import StaticConfig
from cascade.static.toolrun import ToolRun
from cascade.store import StoreKey
from cascade.tools import find_tool

# The modules whose code decides what a stored run holds: a change to any of them is a new key.
_PRODUCERS = ("ruff.py", "pyright.py", "sources.py", "toolrun.py", "process.py", "reuse.py")
TREE = "<tree>"  # stored runs name no checkout: the tree is filled in on reuse


class StaticBaseKey(StoreKey):
    kind: Literal["static-base"] = "static-base"
    repository: str
    base_commit: str
    environment: str
    tools: dict[str, str]
    config: dict[str, object]
    targets: list[str]
    producer: str


class StaticBaseRuns(BaseModel):
    """ruff's and pyright's runs over the base tree, in that order."""

    model_config = ConfigDict(extra="forbid")

    runs: list[ToolRun]


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@lru_cache(maxsize=1)
def producer_digest() -> str:
    here = Path(__file__).parent
    return _digest("".join(_digest((here / name).read_text(encoding="utf-8")) for name in _PRODUCERS))


# What pyright asks the interpreter it finds on PATH (python3, then python) for its import search paths; each
# existing path's entries stand for what is installed there (a dist-info directory names its version).
_ENV_PROBE = (
    "import json, os, sys\n"
    "listing = {p: sorted(os.listdir(p)) for p in sys.path if p and os.path.isdir(p)}\n"
    "print(json.dumps([os.path.realpath(sys.executable), sys.version, sys.path, listing]))\n"
)


@lru_cache(maxsize=1)
def environment_digest() -> str:
    """The interpreter environment pyright resolves imports in; computed once per process."""
    python = shutil.which("python3") or shutil.which("python")
    if python is None:
        return "no-python-on-path"
    try:
        proc = subprocess.run([python, "-I", "-c", _ENV_PROBE], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unknown:{type(exc).__name__}"  # a key no other run shares unless it failed alike
    return _digest(f"{python}\0{proc.returncode}\0{proc.stdout}")


def _package_version(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "unknown"


def tool_identity(name: str) -> str:
    """The executable cascade would run, with its package version and the file's size and modification time (a
    reinstall changes them)."""
    exe = find_tool(name)
    if exe is None:
        return "missing"
    real = os.path.realpath(exe)
    try:
        stat = os.stat(real)
    except OSError:
        return f"{real} unreadable"
    return f"{real} {_package_version(name)} {stat.st_size} {stat.st_mtime_ns}"


def static_base_key(
    repository: str, base_commit: str, files: list[str], cfg: StaticConfig, python_version: str
) -> StaticBaseKey:
    return StaticBaseKey(
        repository=repository,
        base_commit=base_commit,
        environment=environment_digest(),
        tools={tool: tool_identity(tool) for tool in ("ruff", "pyright")},
        config={"ruff_select": list(cfg.ruff_select), "python_version": python_version},
        targets=list(files),
        producer=producer_digest(),
    )


def storable(runs: list[ToolRun]) -> StaticBaseRuns | None:
    """The runs as stored (their tree a placeholder), or None when a tool failed: a failure is never replayed."""
    if not runs or not all(r.ok for r in runs):
        return None
    return StaticBaseRuns(runs=[r.model_copy(update={"tree": TREE}) for r in runs])


def reused(stored: StaticBaseRuns, tree: Path) -> list[ToolRun]:
    """Stored runs re-pointed at this review's base tree; no tool ran, so no time is counted."""
    return [r.model_copy(update={"tree": str(tree), "seconds": 0.0}) for r in stored.runs]
