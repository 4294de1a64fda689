"""Rule classes of diagnostics, with the "in-repo" qualifiers the reject allow-list relies on.

A rule class is ``tool:rule`` (``ruff:F821``, ``pyright:reportUndefinedVariable``), with these refinements:

- ``ruff:syntax-error`` — any ruff syntax error; ``ruff:syntax-version`` when the message only says the syntax
  needs a newer Python than the configured target (a guess about the repository, so never a sound reject).
- ``pyright:reportMissingImports:in-repo`` — the unresolved module is the repository's own (relative import, or
  its top-level name is one of the repository's top-level packages/modules) and no file of that module exists in
  the tree under any extension (a ``.pyx``/``.so``/``.c`` twin or a package directory means a compiled or
  generated module pyright cannot see, not a missing one).
- ``pyright:reportAttributeAccessIssue:in-repo-module`` — ``from M import X`` reports X unknown, or
  ``M.X`` is "not a known attribute of module M", where M is an in-repo module, X is not a submodule file, and
  M's own source (read with ``ast``) binds X in no module-level statement, has no star import and no dynamic
  binding (``globals``, ``setattr``, ``exec``, module ``__getattr__``). The cross-check exists because pyright
  misses names bound under conditions it cannot evaluate (measured: pytest's
  ``if sys.version_info[:2] >= (3, 6): from pathlib import Path`` made the gold patch of pytest-7220 look wrong).
- ``ruff:F821:added-line`` / ``pyright:reportUndefinedVariable:added-line`` — an undefined name on a line the
  patch added (a crash waiting for its branch to run); the same rule on an unchanged line of a changed file or
  dependent (a name the patch removed elsewhere) stays plain ``ruff:F821`` / ``pyright:reportUndefinedVariable``.
- ``pyright:reportCallIssue:in-repo`` — wrong arity / unknown keyword where the callee is defined in a repository
  file: the call is located in the patched file's ``ast`` from the diagnostic's range, and its callee must be
  (a) a module-level name bound only by a ``def``/``class`` of that file or by imports from in-repo modules,
  not shadowed by a parameter or assignment of an enclosing function (a class counts only when it defines
  ``__init__``/``__new__`` or all its bases are in-repo names, so an inherited stdlib constructor does not),
  (b) ``self.m``/``cls.m`` where the enclosing class body defines ``m``, or (c) ``mod.f`` where ``mod`` is an
  import of an in-repo module (`cascade/static/callees.py`).
- ``pyright:reportCallIssue:stdlib`` / ``:third-party`` — the callee is a builtin, a method of a str/bytes
  literal, or a name or module imported (``import m``, ``from m import f``, then ``f()``/``m.f()``) from the
  standard library (``sys.stdlib_module_names``) or from a package neither in the repository nor in the standard
  library (whose signature pyright knows only from a stub it bundles). Not in the default reject rules: measured
  on the acceptable dev controls in benchmarks/results/new_user_rules.md. Anything not determinable (a method of
  a local object, an assigned name, an inherited constructor) stays plain ``pyright:reportCallIssue``.
- ``ruff:T201:added-library-line`` / ``ruff:T203:added-library-line`` — a ``print``/``pprint`` on a line the patch
  added to library code: a module inside one of the repository's packages, not a test (the patch's test globs or
  pytest's file names) and not a ``__main__``; the same rule in tests or scripts stays ``ruff:T201``.

"In-repo" modules: the top-level packages (directories with ``__init__.py``) and modules (``*.py``) at the tree
root and under ``src/`` or ``lib/``, plus every relative import.
"""

from __future__ import annotations

import ast
import re

from cascade.imports import resolve_relative
from cascade.models import Diagnostic
from cascade.paths import is_test_file, module_parts
from cascade.static.callees import call_origin
from cascade.static.layout import SOURCE_ROOTS, RepoLayout

__all__ = ["SOURCE_ROOTS", "AddedLines", "RepoLayout", "library_lines", "resolve_relative", "rule_class"]

_UNKNOWN_IMPORT_SYMBOL = re.compile(r'^"(?P<name>[\w.]+)" is unknown import symbol')
_NOT_MODULE_ATTR = re.compile(r'^"(?P<name>\w+)" is not a known attribute of module "(?P<module>[\w.]+)"')
_IMPORT_UNRESOLVED = re.compile(r'^Import "(?P<module>[\w.]+)" could not be resolved')
_VERSION_SYNTAX = re.compile(r"on Python \d|requires Python \d|syntax was added in Python", re.IGNORECASE)

AddedLines = dict[str, set[int]]  # patched-tree path → line numbers the patch added there
_ADDED_LINE_RULES = {("ruff", "F821"), ("pyright", "reportUndefinedVariable")}
_LIBRARY_LINE_RULES = {("ruff", "T201"), ("ruff", "T203")}  # print / pprint left behind


def library_lines(added: AddedLines, layout: RepoLayout, test_paths: set[str]) -> AddedLines:
    """The added lines of library code: files inside one of the repository's packages that are neither tests
    (``test_paths``: the patch's own test classification, and pytest's file names) nor a ``__main__`` module."""
    found: AddedLines = {}
    for path, lines in added.items():
        parts = module_parts(path)
        package = len(parts) > 1 and parts[0] in layout.top_level and (layout.tree / path).parent.is_dir()
        if package and parts[-1] != "__main__" and path not in test_paths and not is_test_file(path):
            found[path] = lines
    return found


def rule_class(
    d: Diagnostic, layout: RepoLayout, added: AddedLines | None = None, library: AddedLines | None = None
) -> str:
    """The class the allow-list is written in (see the module docstring)."""
    if (d.tool, d.rule) in _ADDED_LINE_RULES and d.line in (added or {}).get(d.path, set()):
        return f"{d.tool}:{d.rule}:added-line"
    if (d.tool, d.rule) in _LIBRARY_LINE_RULES and d.line in (library or {}).get(d.path, set()):
        return f"{d.tool}:{d.rule}:added-library-line"
    if d.tool == "pyright" and d.rule == "reportCallIssue":
        origin = call_origin(d, layout)
        return f"pyright:reportCallIssue:{origin}" if origin else "pyright:reportCallIssue"
    if d.tool == "ruff":
        if d.rule == "syntax-error" and _VERSION_SYNTAX.search(d.message):
            return "ruff:syntax-version"
        return f"ruff:{d.rule}"
    base = f"pyright:{d.rule}"
    qualifier = {
        "reportMissingImports": _missing_import_in_repo,
        "reportAttributeAccessIssue": _module_attribute_in_repo,
    }.get(d.rule)
    if qualifier is None:
        return base
    suffix = {"reportAttributeAccessIssue": "in-repo-module"}.get(d.rule, "in-repo")
    return f"{base}:{suffix}" if qualifier(d, layout) else base


def _missing_import_in_repo(d: Diagnostic, layout: RepoLayout) -> bool:
    match = _IMPORT_UNRESOLVED.match(d.message)
    if not match:
        return False
    module = match.group("module")
    if module.startswith("."):
        module = _absolute_from_dots(d.path, module)
    return bool(module) and layout.is_in_repo(module) and not layout.module_has_files(module)


def _absolute_from_dots(rel_path: str, dotted: str) -> str:
    level = len(dotted) - len(dotted.lstrip("."))
    return resolve_relative(rel_path, dotted.lstrip(".") or None, level)


def _module_attribute_in_repo(d: Diagnostic, layout: RepoLayout) -> bool:
    match = _NOT_MODULE_ATTR.match(d.message)
    if match:
        module, name = match.group("module"), match.group("name")
    else:
        match = _UNKNOWN_IMPORT_SYMBOL.match(d.message)
        module = _import_from_module_at(d, layout) if match else None
        if not match or module is None:
            return False
        name = match.group("name")
    if not layout.is_in_repo(module) or layout.module_has_files(f"{module}.{name}"):
        return False
    # pyright's own view of a module misses names bound under conditions it cannot evaluate statically
    # (pytest's `if sys.version_info[:2] >= (3, 6): from pathlib import Path`): only a module whose source
    # binds the name nowhere, and cannot bind it dynamically, counts.
    return layout.module_lacks_name(module, name)


def _import_from_module_at(d: Diagnostic, layout: RepoLayout) -> str | None:
    tree = layout.ast_of(d.path)
    if tree is None:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.lineno <= d.line <= (node.end_lineno or node.lineno):
            return resolve_relative(d.path, node.module, node.level)
    return None
