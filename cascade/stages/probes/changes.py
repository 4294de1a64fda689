"""What the patch changed, as Stage 2 needs it: the lines a probe must execute, module names, touched tests."""

from __future__ import annotations

import ast
from pathlib import Path

from cascade.models import FileKind, Patch


def changed_lines(patch: Patch, tree: Path) -> dict[Path, set[int]]:
    """Per changed code file of the patched ``tree``, the lines whose execution makes a probe relevant.

    Added lines of each hunk; for a hunk that only deletes, the lines around the deletion (its context). Lines that
    only define (def/class headers, imports) are dropped unless nothing else is left.
    """
    result: dict[Path, set[int]] = {}
    for f in patch.files:
        if f.kind != FileKind.CODE or not f.is_python or f.is_removed or f.target_path is None:
            continue
        lines: set[int] = set()
        for h in f.hunks:
            lines.update(h.changed_target_lines or range(h.target_start, h.target_start + h.target_length))
        path = tree / f.target_path
        if not lines or not path.is_file():
            continue
        meaningful = lines - _definition_lines(path.read_text(encoding="utf-8", errors="replace"))
        result[path] = meaningful or lines
    return result


def _definition_lines(source: str) -> set[int]:
    """Lines that merely run at import (def/class headers, decorators, imports): executing them says nothing."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            lines.update(range(min([node.lineno, *(d.lineno for d in node.decorator_list)]), node.body[0].lineno))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            lines.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return lines


def touched_test_names(source: str, lines: set[int]) -> set[str]:
    """Names ('test_x' or 'TestK::test_x') of test functions whose span contains one of ``lines``."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    names: set[str] = set()
    for node in tree.body:
        scopes = [(node, "")] if not isinstance(node, ast.ClassDef) else [(n, node.name + "::") for n in node.body]
        for fn, prefix in scopes:
            if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                start = min([fn.lineno, *(d.lineno for d in fn.decorator_list)])
                if any(start <= n <= (fn.end_lineno or fn.lineno) for n in lines):
                    names.add(prefix + fn.name)
    return names


def test_name(test_id: str) -> str:
    """'path.py::TestK::test_x[1]' → 'TestK::test_x'."""
    return test_id.split("::", 1)[-1].split("[", 1)[0]
