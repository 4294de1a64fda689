"""What a Python file imports, as absolute module names: the one import resolver of cascade.

Read from the file's ``ast``, so only real import statements count (not a docstring's example), in any spelling:
``import a.b`` → ``a.b``; ``from a import b`` → ``a`` and ``a.b`` (``b`` may be a module); the relative forms
``from .m import x`` and ``from .. import m`` resolved against the file's own package (an ``__init__.py`` is its
package). Stage 1's dependents and Stage 2's regression selection both ask it (docs/architecture.md, Test
selection). A file that does not parse imports nothing: Python could not import it either.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

from cascade.paths import module_parts


def resolve_relative(rel_path: str, module: str | None, level: int) -> str:
    """The absolute dotted name of ``from <level dots><module> import …`` written in ``rel_path``."""
    if level == 0:
        return module or ""
    package = module_parts(rel_path)[:-1]  # a module's package; for __init__.py the package itself
    package = package[: len(package) - (level - 1)] if level > 1 else package
    return ".".join([*package, *([module] if module else [])])


def imported_modules(source: str, rel_path: str) -> set[str]:
    """Every absolute name the file at ``rel_path`` imports (see the module docstring)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return set()
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            origin = resolve_relative(rel_path, node.module, node.level)
            if origin:
                found.add(origin)
            found.update(f"{origin}.{a.name}" if origin else a.name for a in node.names if a.name != "*")
    return found


def within(name: str, modules: Iterable[str]) -> bool:
    """``name`` is one of ``modules`` or something inside one of them."""
    return any(name == m or name.startswith(m + ".") for m in modules)


def imports_any(source: str, rel_path: str, modules: set[str]) -> bool:
    """Whether the file imports one of ``modules`` (or something inside it) by any spelling."""
    return any(within(name, modules) for name in imported_modules(source, rel_path))
