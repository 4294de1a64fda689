"""Run ruff over a tree with settings cascade fixes: ``--isolated`` ignores every ruff config of the repository."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

from cascade.models import Diagnostic
from cascade.static.process import run_tool
from cascade.static.sources import relative_to_tree, source_line, strip_tree
from cascade.static.toolrun import ToolRun
from cascade.tools import find_tool, tool_path_hint

# ruff >= 0.5 reports syntax errors without a code (null or "invalid-syntax"); older versions used E999
_SYNTAX_CODES = {None, "", "E999", "invalid-syntax", "syntax-error"}


def ruff_argv(executable: str, files: list[str], select: list[str], target_version: str) -> list[str]:
    """The ruff command line."""
    return [
        executable,
        "check",
        "--isolated",
        "--no-cache",
        "--no-fix",
        "--exit-zero",
        "--output-format",
        "json",
        "--select",
        ",".join(select),
        "--target-version",
        target_version,
        "--",
        *files,
    ]


def rule_of(item: dict[str, Any]) -> str:
    code = item.get("code")
    if code in _SYNTAX_CODES:
        return "syntax-error"
    return str(code)


def _diagnostic(item: dict[str, Any], tree: Path) -> Diagnostic:
    path = relative_to_tree(tree, str(item.get("filename", "")))
    start = item.get("location") or {}
    end = item.get("end_location") or {}
    line = int(start.get("row") or 0)
    return Diagnostic(
        tool="ruff",
        rule=rule_of(item),
        path=path,
        line=line,
        column=int(start.get("column") or 0),
        end_line=end.get("row"),
        end_column=end.get("column"),
        message=strip_tree(str(item.get("message", "")), tree),
        source_line=source_line(tree, path, line),
    )


def run_ruff(tree: Path, files: list[str], select: list[str], target_version: str, timeout: float) -> ToolRun:
    """ruff once over ``files`` (paths relative to ``tree``)."""
    exe = find_tool("ruff")
    if exe is None:
        return ToolRun(tool="ruff", tree=str(tree), error=f"ruff is not installed ({tool_path_hint('ruff')})")
    argv = ruff_argv(exe, files, select, target_version)
    run = ToolRun(tool="ruff", tree=str(tree), argv=argv)
    if not files:
        return run
    started = time.perf_counter()
    try:
        returncode, stdout, stderr = run_tool(argv, tree, timeout)
    except subprocess.TimeoutExpired:
        return run.model_copy(update={"error": f"ruff timed out after {timeout:g}s"})
    except OSError as exc:
        return run.model_copy(update={"error": f"ruff could not start: {exc}"})
    seconds = round(time.perf_counter() - started, 3)
    if returncode != 0:
        tail = (stderr.strip().splitlines() or ["no output"])[-1]
        return run.model_copy(update={"error": f"ruff exited {returncode}: {tail}", "seconds": seconds})
    try:
        items = json.loads(stdout or "[]")
    except json.JSONDecodeError:
        return run.model_copy(update={"error": "ruff printed no JSON", "seconds": seconds})
    diagnostics = [_diagnostic(item, tree) for item in items]
    return run.model_copy(update={"diagnostics": diagnostics, "seconds": seconds})
