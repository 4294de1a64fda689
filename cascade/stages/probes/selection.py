"""Regression-test selection: the repository's existing test files nearest to the change."""

from __future__ import annotations

import ast
from pathlib import Path

from cascade.execution.test_selection import (
    SelectedTests,
    changed_functions,
    is_repo_test_file,
    named_after,
    named_after_package,
    proximity,
    pytest_file_patterns,
    select_tests,
)
from cascade.git import git
from cascade.models import FileKind, Patch
from cascade.paths import module_of

MAX_REGRESSION_FILES = 2  # nearby test files per review (name-mapped first): each runs on both trees


def select_regression_tests(patch: Patch, tree: Path, limit: int = MAX_REGRESSION_FILES) -> list[str]:
    """Existing test files near the change: named after a changed module first, then its importers, then test
    files named after its package."""
    code = [f.path for f in patch.files if f.kind == FileKind.CODE and f.is_python and f.source_path]
    modules = {m for m in (module_of(p) for p in code) if m}
    if not modules:
        return []
    removed = {f.path for f in patch.files if f.is_removed}
    patterns = pytest_file_patterns(tree)
    tracked = [p for p in git(tree, "ls-files", "--", "*.py").splitlines()
               if is_repo_test_file(p, patterns) and p not in removed]  # fmt: skip
    leaves = {m.rsplit(".", 1)[-1] for m in modules}
    by_name = [p for p in tracked if named_after(p, leaves)]
    importers = [p for p in tracked if p not in by_name and _imports_any(tree / p, modules, leaves)]
    by_package = [p for p in tracked if p not in by_name and p not in importers and named_after_package(p, modules)]
    return [p for group in (by_name, importers, by_package) for p in sorted(group, key=lambda p: -proximity(p, code))][
        :limit
    ]


def wider_regression_selection(patch: Patch, base: Path, patched: Path, exclude: set[str]) -> list[SelectedTests]:
    """Beyond the nearby files: importers, tests named after changed functions, one-hop importers (issue 15)."""
    code = [f for f in patch.files if f.kind == FileKind.CODE and f.is_python and f.source_path]
    functions: set[str] = set()
    for f in code:
        lines = {n for h in f.hunks for n in (h.changed_target_lines or [h.target_start])}
        path = patched / (f.target_path or f.path)
        if path.is_file():
            functions |= changed_functions(path.read_text(encoding="utf-8", errors="replace"), lines)
    removed = {f.path for f in patch.files if f.is_removed}
    tracked = git(base, "ls-files", "--", "*.py").splitlines()
    selection = select_tests(base, tracked, [f.path for f in code], functions, exclude=exclude | removed)
    return [s for s in selection if s.target not in exclude]


def _imports_any(path: Path, modules: set[str], leaves: set[str]) -> bool:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    if not any(leaf in text for leaf in leaves):  # cheap filter before parsing
        return False
    return any(_imports_module(text, m) for m in modules)


def _imports_module(source: str, module: str) -> bool:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(_within(a.name, module) for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if _within(node.module, module):
                return True
            if any(f"{node.module}.{a.name}" == module for a in node.names):
                return True
    return False


def _within(name: str, module: str) -> bool:
    return name == module or name.startswith(module + ".")
