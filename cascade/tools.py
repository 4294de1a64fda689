"""Find the command-line tools cascade runs (pyright, ruff, uv): next to the running interpreter first, then PATH.

``/path/to/venv/bin/cascade review …`` without an activated venv must use the venv's own tools: they were
installed with cascade, as its dependencies, into the interpreter's scripts directory, which need not be on PATH.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from pathlib import Path


def scripts_dirs() -> list[Path]:
    """Where the running interpreter's packages put their executables (the venv's ``bin``, or the user scheme's)."""
    found: list[Path] = []
    for candidate in (sysconfig.get_path("scripts"), str(Path(sys.executable).parent)):
        path = Path(candidate)
        if path not in found:
            found.append(path)
    return found


def find_tool(name: str) -> str | None:
    """The executable ``name`` from the interpreter's scripts directory, else from PATH; None when neither has it."""
    for directory in scripts_dirs():
        path = directory / name
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
    return shutil.which(name)


def tool_path_hint(name: str) -> str:
    """Where ``find_tool`` looked, for the message when it found nothing."""
    return f"not in {', '.join(str(d) for d in scripts_dirs())} nor on PATH"
