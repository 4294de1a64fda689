"""What counts as the repository's own code in one tree, and which names a module binds at module level
(the building blocks of the in-repo qualifiers in `cascade/static/rules.py`)."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

SOURCE_ROOTS = ("", "src", "lib")


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
        return not any(name in names_bound_by(stmt) for stmt in module_level_statements(tree))

    def ast_of(self, rel_path: str) -> ast.Module | None:
        if rel_path not in self._asts:
            try:
                self._asts[rel_path] = ast.parse((self.tree / rel_path).read_text(encoding="utf-8", errors="replace"))
            except (OSError, SyntaxError, ValueError):
                self._asts[rel_path] = None
        return self._asts[rel_path]


def module_level_statements(tree: ast.Module) -> list[ast.stmt]:
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


def module_bindings(tree: ast.Module) -> dict[str, list[ast.AST]]:
    """Module-level statements (also inside top-level if/try blocks) that bind each name."""
    bindings: dict[str, list[ast.AST]] = {}
    for stmt in module_level_statements(tree):
        for name in names_bound_by(stmt):
            bindings.setdefault(name, []).append(stmt)
    return bindings


def names_bound_by(stmt: ast.stmt) -> list[str]:
    if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [stmt.name]
    if isinstance(stmt, ast.Import | ast.ImportFrom):
        return [(a.asname or a.name).split(".")[0] for a in stmt.names]
    return [n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)]
