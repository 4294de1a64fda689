"""pytest hooks the PR adds or changes that can rewrite what the gate reads: reports, outcomes, skips, collection.

A conftest.py (or a plugin module it names) runs inside the pytest process the gate observes; a hook there can turn
a failure into a pass before any report is written. The gate's own plugin records each test's raw exception before
report hooks run (`execution/outcomes.py` flags a failure that reached the report as a pass), but a hook around the
test call itself can swallow the exception first. So such a hook is named as a finding, and the decisive regression
runs of existing tests are repeated on the patched tree with the base versions of the conftest files that define
them (a PR-added one left empty) — where the tests still collect without it (docs/architecture.md, "Run model")."""

from __future__ import annotations

import ast
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from cascade.models import Patch

# Hooks that decide or rewrite what a test's outcome is, whether it runs, or what the report says.
OUTCOME_HOOKS = frozenset({
    "pytest_runtest_protocol", "pytest_runtest_setup", "pytest_runtest_call", "pytest_runtest_teardown",
    "pytest_runtest_makereport", "pytest_runtest_logreport", "pytest_report_teststatus", "pytest_pyfunc_call",
    "pytest_collection_modifyitems", "pytest_collection", "pytest_ignore_collect", "pytest_collect_file",
    "pytest_pycollect_makeitem", "pytest_deselected", "pytest_sessionfinish", "pytest_unconfigure",
    "pytest_configure", "pytest_terminal_summary", "pytest_exception_interact",
})  # fmt: skip


class HookFinding(BaseModel):
    """One report-, outcome- or collection-changing hook the PR added or changed."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str
    hook: str
    line: int

    def describe(self) -> str:
        return f"{self.path}:{self.line} defines {self.hook}"


def hooks_in(source: str) -> dict[str, tuple[int, str]]:
    """hook name → (line, its source) of the top-level pytest hooks a module defines."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return {}
    lines = source.splitlines()
    found: dict[str, tuple[int, str]] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in OUTCOME_HOOKS:
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            found[node.name] = (node.lineno, "\n".join(lines[start - 1 : node.end_lineno]))
    return found


def pr_hooks(patch: Patch, base: Path, patched: Path) -> list[HookFinding]:
    """The outcome-changing hooks of Python files the PR added or changed whose hook source differs from base."""
    findings: list[HookFinding] = []
    for changed in patch.files:
        path = changed.target_path
        if not path or changed.is_removed or not path.endswith(".py") or not (patched / path).is_file():
            continue
        new = hooks_in((patched / path).read_text(encoding="utf-8", errors="replace"))
        old_file = base / (changed.source_path or path)
        old = hooks_in(old_file.read_text(encoding="utf-8", errors="replace")) if old_file.is_file() else {}
        findings += [HookFinding(path=path, hook=name, line=line) for name, (line, body) in sorted(new.items())
                     if old.get(name, (0, ""))[1] != body]  # fmt: skip
    return findings


def without_pr_hooks(findings: list[HookFinding], base: Path) -> dict[str, str]:
    """Files to place on the patched tree so the PR's hooks are gone: each file's base version, or an empty module
    where the PR added it."""
    placed: dict[str, str] = {}
    for finding in findings:
        old = base / finding.path
        placed[finding.path] = old.read_text(encoding="utf-8", errors="replace") if old.is_file() else ""
    return placed
