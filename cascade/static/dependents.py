"""Which files Stage 1 analyses: changed Python files plus in-repo dependents of the names a patch changed.

Names come from comparing the ``ast`` of each changed file in the base and patched trees:
- top-level functions, classes and assigned names that the patch removes, or whose signature (parameters and
  decorators) it changes — what a caller elsewhere can break on (undefined import, wrong arity, unknown keyword);
- methods of top-level classes removed or re-signed likewise (callers reach them as ``obj.name``);
- for a removed or renamed module, its module path; and its importers — every file that imports it by any spelling
  (``import m``, ``from m import x``, ``from pkg import m``, relative forms), confirmed from the file's ``ast`` —
  are dependents first, analysed in both trees like any other.
A body-only change cannot make another file's call or import invalid, so it adds no names; this keeps the
dependent set small. Dependents are unchanged tracked files of the patched tree found with
``git grep -l -w`` (fixed strings), non-test files first, at most ``max_dependents``.
"""

from __future__ import annotations

import ast
import difflib
import subprocess
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from cascade.config import NoChangeConfig
from cascade.git import run_git
from cascade.imports import imports_any
from cascade.models import FilePatch, Patch
from cascade.patch import classify
from cascade.paths import module_of

Defs = dict[str, str]  # name → ast dump of its signature ("" for plain assignments)


class Targets(BaseModel):
    """The files to analyse in each tree (relative paths) and why."""

    model_config = ConfigDict(extra="forbid")

    base_files: list[str] = Field(default_factory=list)
    patched_files: list[str] = Field(default_factory=list)
    changed: list[str] = Field(default_factory=list)
    dependents: list[str] = Field(default_factory=list)
    names: list[str] = Field(default_factory=list, description="Changed or removed names that selected dependents.")
    renamed: dict[str, str] = Field(default_factory=dict, description="Patched path → base path of renamed files.")
    added_lines: dict[str, set[int]] = Field(
        default_factory=dict, description="Patched path → the line numbers the patch added there."
    )


def _signature(node: ast.AST) -> str:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return ast.dump(node.args) + "".join(ast.dump(d) for d in node.decorator_list)
    if isinstance(node, ast.ClassDef):
        return "".join(ast.dump(b) for b in node.bases) + "".join(ast.dump(d) for d in node.decorator_list)
    return ""


def _bound_names(stmt: ast.stmt) -> list[str]:
    if isinstance(stmt, ast.Assign):
        return [t.id for t in stmt.targets if isinstance(t, ast.Name)]
    if isinstance(stmt, ast.AnnAssign | ast.AugAssign) and isinstance(stmt.target, ast.Name):
        return [stmt.target.id]
    return []


def definitions(source: str) -> Defs | None:
    """Top-level names and class members with their signatures; None when the source does not parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    defs: Defs = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            defs[stmt.name] = _signature(stmt)
            if isinstance(stmt, ast.ClassDef):
                for member in stmt.body:
                    if isinstance(member, ast.FunctionDef | ast.AsyncFunctionDef):
                        defs[f"{stmt.name}.{member.name}"] = _signature(member)
        for name in _bound_names(stmt):
            defs.setdefault(name, "")
    return defs


def changed_names(base_source: str | None, patched_source: str | None) -> set[str]:
    """Names removed or re-signed by the patch (bare names; a method contributes its own name)."""
    before = definitions(base_source or "") or {}
    after = definitions(patched_source or "") or {}
    names: set[str] = set()
    for qualified, sig in before.items():
        if qualified not in after or after[qualified] != sig:
            names.add(qualified.rsplit(".", 1)[-1])
    return {n for n in names if not (n.startswith("__") and n.endswith("__"))}


def module_name(rel_path: str) -> str:
    return module_of(rel_path) or ""


def _read(tree: Path, rel: str | None) -> str | None:
    if rel is None:
        return None
    try:
        return (tree / rel).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _file_names(f: FilePatch, base: Path, patched: Path) -> set[str]:
    names = changed_names(_read(base, f.source_path), _read(patched, f.target_path))
    if f.source_path and (f.is_removed or f.is_rename):
        names.add(module_name(f.source_path))
    return names


def git_grep_files(tree: Path, names: list[str], timeout: float) -> list[str]:
    """Tracked Python files of ``tree`` that contain any of ``names`` as a whole word."""
    if not names:
        return []
    args = ["grep", "-l", "-w", "-F", "--no-color"]
    for name in names:
        args += ["-e", name]
    args += ["--", "*.py"]
    try:
        proc = run_git(tree, *args, timeout=timeout)
    except (subprocess.TimeoutExpired, OSError):
        return []
    return [line for line in proc.stdout.splitlines() if line]


def importers_of(tree: Path, modules: list[str], timeout: float) -> list[str]:
    """Tracked Python files of ``tree`` that import one of ``modules`` (a module the patch removes or renames).

    Candidates are the files that mention a module's last component as a word (every spelling of an import
    names it); each is then confirmed from its ``ast``, relative imports resolved against its own package."""
    if not modules:
        return []
    wanted = set(modules)
    candidates = git_grep_files(tree, sorted({m.rsplit(".", 1)[-1] for m in modules}), timeout)
    return [p for p in candidates if imports_any(_read(tree, p) or "", p, wanted)]


def find_targets(
    patch: Patch, base: Path, patched: Path, max_dependents: int, no_change: NoChangeConfig, timeout: float
) -> Targets:
    """Changed Python files of each tree plus up to ``max_dependents`` dependents, the same set for both trees."""
    py = [f for f in patch.files if f.is_python and not f.is_binary]
    base_changed = [f.source_path for f in py if f.source_path and (base / f.source_path).is_file()]
    patched_changed = [f.target_path for f in py if f.target_path and (patched / f.target_path).is_file()]
    names: set[str] = set()
    for f in py:
        names |= _file_names(f, base, patched)
    changed = set(base_changed) | set(patched_changed)
    gone = sorted({module_name(f.source_path) for f in py if f.source_path and (f.is_removed or f.is_rename)})
    importers = [p for p in importers_of(patched, gone, timeout) if p not in changed and (base / p).is_file()]
    found = [p for p in git_grep_files(patched, sorted(names), timeout) if p not in changed and p not in importers]
    found = [p for p in found if (base / p).is_file() and (patched / p).is_file()]
    # files that also name a changed module are likelier importers than a same-named method elsewhere
    stems = sorted({module_name(p).rsplit(".", 1)[-1] for p in changed if module_name(p)})
    near = set(git_grep_files(patched, stems, timeout)) if found else set()
    found.sort(key=lambda p: (classify(p, no_change).value == "test", p not in near, p))
    importers.sort(key=lambda p: (classify(p, no_change).value == "test", p))
    dependents = (importers + found)[:max_dependents]
    renamed = {f.target_path: f.source_path for f in py if f.is_rename and f.target_path and f.source_path}
    return Targets(
        base_files=sorted(base_changed) + dependents,
        patched_files=sorted(patched_changed) + dependents,
        changed=sorted(changed),
        dependents=dependents,
        names=sorted(names),
        renamed=renamed,
        added_lines={
            f.target_path: added_lines(_read(base, f.source_path), _read(patched, f.target_path))
            for f in py
            if f.target_path
        },
    )


def added_lines(base_source: str | None, patched_source: str | None) -> set[int]:
    """Line numbers (1-based) of the patched file that the base file does not have at that place.

    Computed from the two trees rather than the hunk headers, so a patch applied with fuzz at an offset still
    points at the lines it really added."""
    before = (base_source or "").splitlines()
    after = (patched_source or "").splitlines()
    matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
    return {
        line + 1
        for tag, _i1, _i2, j1, j2 in matcher.get_opcodes()
        if tag in ("replace", "insert")
        for line in range(j1, j2)
    }
