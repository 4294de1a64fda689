"""Where the callee of a pyright ``reportCallIssue`` is defined: the repository, the standard library (builtins
included), a third-party package, or not determinable — read from the patched file's ``ast`` (rules in
`cascade/static/rules.py`'s docstring)."""

from __future__ import annotations

import ast
import builtins
import sys
from typing import Literal

from cascade.imports import resolve_relative
from cascade.models import Diagnostic
from cascade.static.layout import RepoLayout, module_bindings, names_bound_by

_OWN_RANGE_MESSAGES = ("Argument missing", "Arguments missing", "No overloads for")
# ... and these name one of the call's arguments. Any other reportCallIssue (pyright's "Object of type X is not
# callable" on a name it inferred from sympy's Function('f')) says nothing about a callee's signature: not determinable.
_ARGUMENT_RANGE_MESSAGES = ("Expected ", "No parameter named")


Origin = Literal["in-repo", "stdlib", "third-party"]


def call_origin(d: Diagnostic, layout: RepoLayout) -> Origin | None:
    """Where the called object comes from; None when the ``ast`` cannot tell (a method of a local object, a
    name bound by an assignment, a class whose constructor it inherits from outside the repository)."""
    tree = layout.ast_of(d.path)
    call = _call_of(d, tree) if tree is not None else None
    if tree is None or call is None:
        return None
    parents = _parents(tree)
    if _callee_in_repo(call, parents, tree, d.path, layout):
        return "in-repo"
    return _external_origin(call, parents, tree, d.path, layout)


def call_in_repo(d: Diagnostic, layout: RepoLayout) -> bool:
    return call_origin(d, layout) == "in-repo"


def _external_origin(
    call: ast.Call, parents: dict[ast.AST, ast.AST], tree: ast.Module, path: str, layout: RepoLayout
) -> Origin | None:
    """The standard library (a builtin, a method of a str/bytes literal, a name or module imported from it) or a
    third-party package (imported from a module neither in the repository nor in the standard library)."""
    func = call.func
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Constant):
        return "stdlib" if isinstance(func.value.value, str | bytes) else None
    name = func.id if isinstance(func, ast.Name) else _root_name(func) if isinstance(func, ast.Attribute) else None
    if name is None or name in ("self", "cls") or _locally_bound(name, call, parents):
        return None
    stmts = module_bindings(tree).get(name, [])
    if not stmts:
        return "stdlib" if isinstance(func, ast.Name) and hasattr(builtins, name) else None
    origins: set[Origin | None] = {_import_origin(stmt, name, path, layout) for stmt in stmts}
    origin = origins.pop() if len(origins) == 1 else None
    return None if origin == "in-repo" else origin  # in-repo only by _callee_in_repo's stricter test


def _import_origin(stmt: ast.AST, name: str, path: str, layout: RepoLayout) -> Origin | None:
    """Where the module an import binds ``name`` from lives; None for anything but an import."""
    if isinstance(stmt, ast.ImportFrom):
        return "in-repo" if stmt.level > 0 else module_origin(stmt.module or "", layout)
    if isinstance(stmt, ast.Import):
        modules = {a.name for a in stmt.names if (a.asname or a.name).split(".")[0] == name}
        found: set[Origin] = {module_origin(m, layout) for m in modules}
        return found.pop() if len(found) == 1 else None
    return None


def module_origin(module: str, layout: RepoLayout) -> Origin:
    if layout.is_in_repo(module):
        return "in-repo"
    return "stdlib" if module.split(".", 1)[0] in sys.stdlib_module_names else "third-party"


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
    if not own and not d.message.startswith(_ARGUMENT_RANGE_MESSAGES):
        return None
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
            if any(name in names_bound_by(s) for s in inner):
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
    bindings = module_bindings(tree)
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
        stmts = module_bindings(tree).get(func.id, [])
        return bool(stmts) and all(_binding_in_repo(s, func.id, path, layout, tree) for s in stmts)
    if not isinstance(func, ast.Attribute):
        return False
    if isinstance(func.value, ast.Name) and func.value.id in ("self", "cls"):
        return _enclosing_class_defines(call, func.attr, parents)
    owner = _root_name(func.value)
    if owner is None or _locally_bound(owner, call, parents):
        return False
    stmts = module_bindings(tree).get(owner, [])
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
