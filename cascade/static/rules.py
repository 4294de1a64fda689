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
  import of an in-repo module. Anything else — stdlib, third-party, or not determinable — stays plain
  ``pyright:reportCallIssue`` and never rejects (typeshed vs the repository's Python).

"In-repo" modules: the top-level packages (directories with ``__init__.py``) and modules (``*.py``) at the tree
root and under ``src/`` or ``lib/``, plus every relative import.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from cascade.imports import resolve_relative
from cascade.models import Diagnostic

SOURCE_ROOTS = ("", "src", "lib")
_UNKNOWN_IMPORT_SYMBOL = re.compile(r'^"(?P<name>[\w.]+)" is unknown import symbol')
_NOT_MODULE_ATTR = re.compile(r'^"(?P<name>\w+)" is not a known attribute of module "(?P<module>[\w.]+)"')
_IMPORT_UNRESOLVED = re.compile(r'^Import "(?P<module>[\w.]+)" could not be resolved')
_VERSION_SYNTAX = re.compile(r"on Python \d|requires Python \d|syntax was added in Python", re.IGNORECASE)
_OWN_RANGE_MESSAGES = ("Argument missing", "Arguments missing")


@dataclass
class RepoLayout:
    """What counts as the repository's own code in one tree."""

    tree: Path
    _asts: dict[str, ast.Module | None] = field(default_factory=dict)

    @cached_property
    def top_level(self) -> set[str]:
        names: set[str] = set()
        for root in SOURCE_ROOTS:
            base = self.tree / root
            if not base.is_dir():
                continue
            for entry in base.iterdir():
                if entry.is_dir() and (entry / "__init__.py").is_file():
                    names.add(entry.name)
                elif entry.suffix == ".py":
                    names.add(entry.stem)
        return names

    def is_in_repo(self, module: str) -> bool:
        return module.startswith(".") or module.split(".", 1)[0] in self.top_level

    def module_has_files(self, module: str) -> bool:
        """True when a file or directory of ``module`` exists under any extension (compiled twins included)."""
        parts = module.split(".")
        for root in SOURCE_ROOTS:
            parent = self.tree / root / Path(*parts[:-1]) if len(parts) > 1 else self.tree / root
            if (parent / parts[-1]).is_dir():
                return True
            if parent.is_dir() and any(parent.glob(f"{parts[-1]}.*")):
                return True
        return False

    def module_source(self, module: str) -> str | None:
        """The relative path of ``module``'s Python source (``mod.py`` or ``mod/__init__.py``), if any."""
        parts = module.split(".")
        for root in SOURCE_ROOTS:
            for candidate in (Path(root, *parts).with_suffix(".py"), Path(root, *parts, "__init__.py")):
                if (self.tree / candidate).is_file():
                    return candidate.as_posix()
        return None

    def module_lacks_name(self, module: str, name: str) -> bool:
        """True only when the module's source exists, parses, binds ``name`` in no statement at module level
        (at any depth of if/try/with/loop blocks), has no star import and no dynamic binding."""
        rel = self.module_source(module)
        tree = self.ast_of(rel) if rel else None
        if tree is None:
            return False
        dynamic = {"globals", "setattr", "__getattr__", "exec"}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
                return False
            if isinstance(node, ast.Name) and node.id in dynamic:
                return False
            if isinstance(node, ast.FunctionDef) and node.name == "__getattr__":
                return False
        return not any(name in _names_bound_by(stmt) for stmt in _module_level_statements(tree))

    def ast_of(self, rel_path: str) -> ast.Module | None:
        if rel_path not in self._asts:
            try:
                self._asts[rel_path] = ast.parse((self.tree / rel_path).read_text(encoding="utf-8", errors="replace"))
            except (OSError, SyntaxError, ValueError):
                self._asts[rel_path] = None
        return self._asts[rel_path]


AddedLines = dict[str, set[int]]  # patched-tree path → line numbers the patch added there
_ADDED_LINE_RULES = {("ruff", "F821"), ("pyright", "reportUndefinedVariable")}


def rule_class(d: Diagnostic, layout: RepoLayout, added: AddedLines | None = None) -> str:
    """The class the allow-list is written in (see the module docstring)."""
    if (d.tool, d.rule) in _ADDED_LINE_RULES and d.line in (added or {}).get(d.path, set()):
        return f"{d.tool}:{d.rule}:added-line"
    if d.tool == "ruff":
        if d.rule == "syntax-error" and _VERSION_SYNTAX.search(d.message):
            return "ruff:syntax-version"
        return f"ruff:{d.rule}"
    base = f"pyright:{d.rule}"
    qualifier = {
        "reportMissingImports": _missing_import_in_repo,
        "reportAttributeAccessIssue": _module_attribute_in_repo,
        "reportCallIssue": _call_in_repo,
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


def _call_in_repo(d: Diagnostic, layout: RepoLayout) -> bool:
    tree = layout.ast_of(d.path)
    if tree is None:
        return False
    parents = _parents(tree)
    call = _call_of(d, tree)
    return call is not None and _callee_in_repo(call, parents, tree, d.path, layout)


def _pos(node: ast.AST) -> tuple[int, int, int, int]:
    return (
        getattr(node, "lineno", 0),
        getattr(node, "col_offset", 0),
        getattr(node, "end_lineno", 0) or 0,
        getattr(node, "end_col_offset", 0) or 0,
    )


def _call_of(d: Diagnostic, tree: ast.Module) -> ast.Call | None:
    """The call a reportCallIssue is about: the call itself is the range ("Argument missing …"), otherwise the
    range is one of its direct arguments or keywords ("Expected N positional arguments", "No parameter named")."""
    # ast columns are UTF-8 byte offsets and pyright's are UTF-16 units: equal on ASCII lines, which call
    # sites almost always are; a mismatch only means "not determinable" (no reject).
    start = (d.line, d.column)
    own = d.message.startswith(_OWN_RANGE_MESSAGES)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        if own and _pos(node)[:2] == start:
            return node
        if not own and any(_pos(a)[:2] == start for a in [*node.args, *node.keywords]):
            return node
    return None


def _parents(tree: ast.Module) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def _module_level_statements(tree: ast.Module) -> list[ast.stmt]:
    """Statements that run at module level: the body, and the bodies of its if/try/with/for/while blocks."""
    found: list[ast.stmt] = []
    pending: list[ast.stmt] = list(tree.body)
    while pending:
        stmt = pending.pop()
        if isinstance(stmt, ast.If | ast.Try | ast.With | ast.For | ast.While):
            pending.extend(getattr(stmt, "body", []) + getattr(stmt, "orelse", []) + getattr(stmt, "finalbody", []))
            for handler in getattr(stmt, "handlers", []):
                pending.extend(handler.body)
            if isinstance(stmt, ast.For):
                found.append(stmt)  # its loop target is bound at module level
            continue
        found.append(stmt)
    return found


def _module_bindings(tree: ast.Module) -> dict[str, list[ast.AST]]:
    """Module-level statements (also inside top-level if/try blocks) that bind each name."""
    bindings: dict[str, list[ast.AST]] = {}
    for stmt in _module_level_statements(tree):
        for name in _names_bound_by(stmt):
            bindings.setdefault(name, []).append(stmt)
    return bindings


def _names_bound_by(stmt: ast.stmt) -> list[str]:
    if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [stmt.name]
    if isinstance(stmt, ast.Import | ast.ImportFrom):
        return [(a.asname or a.name).split(".")[0] for a in stmt.names]
    return [n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)]


def _locally_bound(name: str, node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """True when an enclosing function binds ``name`` (parameter, assignment, import, nested def)."""
    current = parents.get(node)
    while current is not None:
        if isinstance(current, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            params = current.args
            all_args = [*params.posonlyargs, *params.args, *params.kwonlyargs, params.vararg, params.kwarg]
            if any(a is not None and a.arg == name for a in all_args):
                return True
            inner = (s for s in ast.walk(current) if isinstance(s, ast.stmt) and s is not current)
            if any(name in _names_bound_by(s) for s in inner):
                return True
        current = parents.get(current)
    return False


def _binding_in_repo(stmt: ast.AST, name: str, path: str, layout: RepoLayout, tree: ast.Module) -> bool:
    if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
        return True
    if isinstance(stmt, ast.ClassDef):
        return _class_constructor_in_repo(stmt, path, layout, tree)
    if isinstance(stmt, ast.ImportFrom):
        return layout.is_in_repo(resolve_relative(path, stmt.module, stmt.level)) or stmt.level > 0
    if isinstance(stmt, ast.Import):
        return all(layout.is_in_repo(a.name) for a in stmt.names if (a.asname or a.name).split(".")[0] == name)
    return False


def _class_constructor_in_repo(cls: ast.ClassDef, path: str, layout: RepoLayout, tree: ast.Module) -> bool:
    members = {m.name for m in cls.body if isinstance(m, ast.FunctionDef | ast.AsyncFunctionDef)}
    if members & {"__init__", "__new__"}:
        return True
    bindings = _module_bindings(tree)
    for base in cls.bases:
        if not isinstance(base, ast.Name) or base.id == cls.name:
            return False
        stmts = bindings.get(base.id, [])
        if not stmts or not all(_binding_in_repo(s, base.id, path, layout, tree) for s in stmts):
            return False
    return True


def _callee_in_repo(
    call: ast.Call, parents: dict[ast.AST, ast.AST], tree: ast.Module, path: str, layout: RepoLayout
) -> bool:
    func = call.func
    if isinstance(func, ast.Name):
        if _locally_bound(func.id, call, parents):
            return False
        stmts = _module_bindings(tree).get(func.id, [])
        return bool(stmts) and all(_binding_in_repo(s, func.id, path, layout, tree) for s in stmts)
    if not isinstance(func, ast.Attribute):
        return False
    if isinstance(func.value, ast.Name) and func.value.id in ("self", "cls"):
        return _enclosing_class_defines(call, func.attr, parents)
    owner = _root_name(func.value)
    if owner is None or _locally_bound(owner, call, parents):
        return False
    stmts = _module_bindings(tree).get(owner, [])
    if isinstance(func.value, ast.Attribute):  # pkg.mod.f(): only through `import pkg.mod`
        stmts_ok = all(isinstance(s, ast.Import) for s in stmts)
        return bool(stmts) and stmts_ok and all(_is_in_repo_module_import(s, owner, path, layout) for s in stmts)
    return bool(stmts) and all(_is_in_repo_module_import(s, owner, path, layout) for s in stmts)


def _root_name(node: ast.expr) -> str | None:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _enclosing_class_defines(node: ast.AST, method: str, parents: dict[ast.AST, ast.AST]) -> bool:
    current = parents.get(node)
    while current is not None and not isinstance(current, ast.ClassDef):
        current = parents.get(current)
    if current is None:
        return False
    return any(isinstance(m, ast.FunctionDef | ast.AsyncFunctionDef) and m.name == method for m in current.body)


def _is_in_repo_module_import(stmt: ast.AST, name: str, path: str, layout: RepoLayout) -> bool:
    """``import pkg.mod [as name]`` or ``from pkg import mod`` where the bound object is an in-repo module file."""
    if isinstance(stmt, ast.Import):
        return all(layout.is_in_repo(a.name) for a in stmt.names if (a.asname or a.name).split(".")[0] == name)
    if isinstance(stmt, ast.ImportFrom):
        module = resolve_relative(path, stmt.module, stmt.level)
        alias = next((a for a in stmt.names if (a.asname or a.name) == name), None)
        return alias is not None and layout.is_in_repo(module) and layout.module_has_files(f"{module}.{alias.name}")
    return False
