"""Run pyright over a tree with a configuration cascade generates in a temporary directory.

The repository's own ``pyrightconfig.json`` / ``[tool.pyright]`` never apply: pyright is started with ``-p`` on the
generated file, which fixes the checking mode, the Python version, and where in-repo imports resolve (the tree and
its ``src/`` directory, searched before installed packages). ``# type: ignore`` comments are not honoured either,
so a patch cannot hide its own errors with one.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from cascade.models import Diagnostic
from cascade.static.process import run_tool
from cascade.static.sources import relative_to_tree, source_line, strip_tree
from cascade.static.toolrun import ToolRun
from cascade.tools import find_tool, tool_path_hint

_SEVERITIES = {"error", "warning"}


def pyright_config(tree: Path, python_version: str) -> dict[str, Any]:
    """The fixed configuration: standard mode, the configured Python, in-repo code found first."""
    extra = [str(tree)] + ([str(tree / "src")] if (tree / "src").is_dir() else [])
    return {
        "pythonVersion": python_version,
        "typeCheckingMode": "standard",
        "extraPaths": extra,
        "useLibraryCodeForTypes": True,
        "enableTypeIgnoreComments": False,
        "reportMissingModuleSource": "none",
    }


def _diagnostic(item: dict[str, Any], tree: Path) -> Diagnostic | None:
    severity = item.get("severity")
    if severity not in _SEVERITIES:
        return None
    path = relative_to_tree(tree, str(item.get("file", "")))
    rng = item.get("range") or {}
    start, end = rng.get("start") or {}, rng.get("end") or {}
    line = int(start.get("line", -1)) + 1
    return Diagnostic(
        tool="pyright",
        rule=str(item.get("rule") or "error"),
        path=path,
        line=line,
        column=int(start.get("character", 0)),
        end_line=int(end.get("line", -1)) + 1 if end else None,
        end_column=end.get("character"),
        message=strip_tree(str(item.get("message", "")), tree),
        severity=severity,
        source_line=source_line(tree, path, line),
    )


def pyright_executable() -> str | None:
    return find_tool("pyright")


def run_pyright(tree: Path, files: list[str], python_version: str, timeout: float) -> ToolRun:
    """pyright once over ``files`` (paths relative to ``tree``) with the generated configuration."""
    exe = pyright_executable()
    if exe is None:
        return ToolRun(tool="pyright", tree=str(tree), error=f"pyright is not installed ({tool_path_hint('pyright')})")
    with tempfile.TemporaryDirectory(prefix="cascade-pyright-") as cfg_dir:
        cfg_path = Path(cfg_dir) / "pyrightconfig.json"
        config = pyright_config(tree, python_version)
        cfg_path.write_text(json.dumps(config, indent=2), encoding="utf-8")
        argv = [exe, "-p", str(cfg_path), "--outputjson", *files]
        run = ToolRun(tool="pyright", tree=str(tree), argv=argv, config=config)
        if not files:
            return run
        return _execute(run, tree, timeout, Path(cfg_dir))


def _execute(run: ToolRun, tree: Path, timeout: float, scratch: Path) -> ToolRun:
    # TMPDIR: pyright's own pyright-<pid>-* directory goes inside ours, which is removed even when pyright is killed
    # (Ctrl-C ends it with SIGKILL after a short grace, before it could remove its directory; cascade/interrupt.py)
    env = {**os.environ, "PYRIGHT_PYTHON_IGNORE_WARNINGS": "1", "NODE_OPTIONS": "--max-old-space-size=4096"}
    env["TMPDIR"] = str(scratch)
    started = time.perf_counter()
    try:
        returncode, stdout, stderr = run_tool(run.argv, tree, timeout, env)
    except subprocess.TimeoutExpired:
        return run.model_copy(update={"error": f"pyright timed out after {timeout:g}s"})
    except OSError as exc:
        return run.model_copy(update={"error": f"pyright could not start: {exc}"})
    seconds = round(time.perf_counter() - started, 3)
    try:
        report = json.loads(stdout)
    except json.JSONDecodeError:
        tail = (stderr.strip().splitlines() or stdout.strip().splitlines() or ["no output"])[-1]
        return run.model_copy(update={"error": f"pyright exited {returncode}: {tail[:300]}", "seconds": seconds})
    if returncode not in (0, 1):
        return run.model_copy(update={"error": f"pyright exited {returncode} (fatal)", "seconds": seconds})
    items = report.get("generalDiagnostics") or []
    diagnostics = [d for d in (_diagnostic(item, tree) for item in items) if d is not None]
    return run.model_copy(update={"diagnostics": diagnostics, "seconds": seconds})
