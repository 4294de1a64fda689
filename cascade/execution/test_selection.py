"""Which existing tests exercise a change: the one answer Stage 2's regression check uses. Pure: a tree and the
change in, pydantic ``SelectedTests`` out, nearest first (docs/architecture.md, Test selection).

1. ``name`` — test files named after a changed module: ``test_<module>.py``, ``<module>_test.py``, and with a prefix
   as projects spell them (``test_ext_viewcode.py`` for ``sphinx/ext/viewcode.py``, pylint's ``unittest_misc.py``);
2. ``import`` — test files importing a changed module (`cascade/imports.py`, relative imports included);
   ``package_name`` — test files named after a package the changed module is in, where its tests live
   (``tests/test_requests.py`` for ``requests/models.py``: small projects keep one test file per package and
   import it through ``__init__``);
3. ``test_name`` — single tests whose name mentions a changed function (``test_latex_derivatives`` for
   ``_print_Derivative`` is missed; ``test_hstack`` for ``hstack`` is found);
4. ``import_hop`` — test files importing a module that itself imports a changed module (one in-repo hop; package
   ``__init__`` modules are no hop: through them every test reaches everything).

Test files are the repository's own: pytest's default names plus its ``python_files`` (`cascade/paths.py`).
Within a group, files sharing a longer directory prefix with the change come first. The nearby pick Stage 2 always
runs is the first chunk of this list: its first ``MAX_REGRESSION_FILES`` files of groups 1 and 2.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from cascade.git import git
from cascade.imports import imported_modules, within
from cascade.models import FileKind, Patch
from cascade.paths import is_repo_test_file, module_of, pytest_file_patterns

SelectionReason = Literal["name", "import", "package_name", "test_name", "import_hop"]
NEARBY_REASONS: frozenset[SelectionReason] = frozenset({"name", "import", "package_name"})
MAX_REGRESSION_FILES = 2  # nearby test files per review (name-mapped first): each runs on both trees
MAX_TEST_NAME_MATCHES = 20
MIN_FUNCTION_NAME = 4
# Function names too generic to say which tests are about them.
_GENERIC = frozenset(
    {"init", "new", "call", "repr", "str", "eq", "hash", "doit", "eval", "main", "run", "get", "set", "setup",
     "update", "apply", "args", "func", "name", "copy", "items", "keys", "values", "parse", "print", "format"}
)  # fmt: skip
_TEST_DEF = re.compile(r"^(?P<indent>[ \t]*)(?:async[ \t]+)?def[ \t]+(?P<name>test\w*)", re.MULTILINE)
_CLASS_DEF = re.compile(r"^class[ \t]+(?P<name>Test\w*)", re.MULTILINE)
# What a test file's stem says it is about: the part after a "...test_" prefix or before a "_test" suffix.
_TEST_AFFIX = re.compile(r"^\w*?test_|_test$")
_TEST_DIRS = frozenset({"tests", "test", "testing"})


class SelectedTests(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    target: str = Field(description="A test file, or one test's node id (file::name).")
    reason: SelectionReason


class RegressionPlan(BaseModel):
    """The selection split where Stage 2 splits it: the nearby files it always runs, then the rest under a budget."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    nearby: list[str] = Field(description="The first files of the name, import and package_name groups.")
    wider: list[SelectedTests] = Field(description="Everything else the selection holds, in its order.")


def regression_plan(patch: Patch, base: Path, patched: Path, max_files: int = MAX_REGRESSION_FILES) -> RegressionPlan:
    """The regression tests of ``patch``: functions it changes are read from ``patched``, everything else from
    ``base`` (test files the patch removes are left out)."""
    code = [f for f in patch.files if f.kind == FileKind.CODE and f.is_python and f.source_path]
    functions: set[str] = set()
    for f in code:
        lines = {n for h in f.hunks for n in (h.changed_target_lines or [h.target_start])}
        path = patched / (f.target_path or f.path)
        if path.is_file():
            functions |= changed_functions(path.read_text(encoding="utf-8", errors="replace"), lines)
    removed = {f.path for f in patch.files if f.is_removed}
    tracked = git(base, "ls-files", "--", "*.py").splitlines()
    selection = select_tests(base, tracked, [f.path for f in code], functions, exclude=removed)
    nearby = [s for s in selection if s.reason in NEARBY_REASONS][:max_files]
    return RegressionPlan(nearby=[s.target for s in nearby], wider=[s for s in selection if s not in nearby])


def proximity(path: str, changed: list[str]) -> int:
    """Longer shared directory prefix with a changed file = nearer."""
    parts = PurePosixPath(path).parts
    best = 0
    for c in changed:
        shared = 0
        for a, b in zip(parts, PurePosixPath(c).parts, strict=False):
            if a != b:
                break
            shared += 1
        best = max(best, shared)
    return best


def _read(tree: Path, path: str) -> str:
    try:
        return (tree / path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _imports_of(tree: Path, path: str) -> set[str]:
    return imported_modules(_read(tree, path), path)


def _function_keys(functions: set[str]) -> set[str]:
    keys = set()
    for name in functions:
        key = name.strip("_").lower()
        if len(key) >= MIN_FUNCTION_NAME and key not in _GENERIC:
            keys.add(key)
    return keys


def tests_named_after(text: str, path: str, keys: set[str]) -> list[str]:
    """Node ids of the tests in ``text`` whose name mentions one of ``keys`` (methods of Test classes included)."""
    classes = [(m.start(), m["name"]) for m in _CLASS_DEF.finditer(text)]
    ids: list[str] = []
    for m in _TEST_DEF.finditer(text):
        name = m["name"]
        if not any(k in name.lower() for k in keys):
            continue
        if m["indent"]:
            owner = [c for start, c in classes if start < m.start()]
            if not owner:
                continue
            ids.append(f"{path}::{owner[-1]}::{name}")
        else:
            ids.append(f"{path}::{name}")
    return ids


def subject_of(path: str) -> str:
    """What a test file's name says it tests: ``test_ext_viewcode.py`` → ``ext_viewcode``."""
    return _TEST_AFFIX.sub("", PurePosixPath(path).stem)


def named_after(path: str, names: set[str]) -> bool:
    """Whether a test file is named after one of ``names`` (a module or package's last name part)."""
    subject = subject_of(path)
    return any(subject == n or subject.endswith("_" + n) for n in names)


def named_after_package(path: str, modules: set[str]) -> bool:
    """Whether a test file is named after a package a changed module is in, and sits where that package's tests
    live: beside it (``sympy/printing/tests``) or in a tests tree mirroring it (``tests/config`` for
    ``pylint/config``, ``tests`` for the top-level ``requests``)."""
    subject = subject_of(path)
    where = tuple(p for p in PurePosixPath(path).parent.parts if p not in _TEST_DIRS)
    for module in modules:
        parts = tuple(module.split("."))
        for depth in range(1, len(parts)):
            package = parts[:depth]
            if subject == package[-1] and where in (package, package[1:]):
                return True
    return False


def select_tests(
    tree: Path, tracked: list[str], changed: list[str], functions: set[str], exclude: set[str] | None = None
) -> list[SelectedTests]:
    """Regression targets for a change to the Python files ``changed`` (and the functions ``functions`` in them),
    among the repository's ``tracked`` Python files; nearest first, each file at most once."""
    modules = {m for m in (module_of(p) for p in changed) if m}
    if not modules:
        return []
    exclude = exclude or set()
    patterns = pytest_file_patterns(tree)
    tests = [p for p in tracked if is_repo_test_file(p, patterns) and p not in exclude]
    leaves = {m.rsplit(".", 1)[-1] for m in modules}
    chosen: list[SelectedTests] = []
    taken: set[str] = set()

    def take(paths: list[str], reason: SelectionReason) -> None:
        for p in sorted(paths, key=lambda p: -proximity(p, changed)):
            if p not in taken:
                taken.add(p)
                chosen.append(SelectedTests(target=p, reason=reason))

    take([p for p in tests if named_after(p, leaves)], "name")
    texts = {p: _read(tree, p) for p in tests}
    mentions = [p for p in tests if any(leaf in texts[p] for leaf in leaves)]
    direct = [p for p in mentions if _within_any(_imports_of(tree, p), modules)]
    take(direct, "import")
    take([p for p in tests if named_after_package(p, modules)], "package_name")
    keys = _function_keys(functions)
    named: list[str] = []
    for p in sorted(tests, key=lambda p: -proximity(p, changed)):
        if p not in taken and keys:
            named.extend(tests_named_after(texts[p], p, keys))
    for node_id in named[:MAX_TEST_NAME_MATCHES]:
        chosen.append(SelectedTests(target=node_id, reason="test_name"))
    hops = _hop_modules(tree, tracked, modules, leaves, patterns)
    if hops:
        hop_leaves = {h.rsplit(".", 1)[-1] for h in hops}
        take([p for p in tests if p not in taken and any(leaf in texts[p] for leaf in hop_leaves)
              and _within_any(_imports_of(tree, p), hops)], "import_hop")  # fmt: skip
    return chosen


def _within_any(imports: set[str], modules: set[str]) -> bool:
    return any(within(name, modules) for name in imports)


def _hop_modules(tree: Path, tracked: list[str], modules: set[str], leaves: set[str], patterns: list[str]) -> set[str]:
    """Non-test, non-package modules of the repository that import a changed module."""
    hops: set[str] = set()
    for p in tracked:
        name = PurePosixPath(p).name
        if is_repo_test_file(p, patterns) or name in ("__init__.py", "conftest.py", "setup.py") or "/tests/" in f"/{p}":
            continue
        module = module_of(p)
        if module is None or module in modules:
            continue
        text = _read(tree, p)
        if any(leaf in text for leaf in leaves) and _within_any(imported_modules(text, p), modules):
            hops.add(module)
    return hops


def changed_functions(source: str, lines: set[int]) -> set[str]:
    """Names of the functions (and methods) whose definition spans one of ``lines``."""
    import ast

    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return set()
    names: set[str] = set()
    for node in ast.walk(tree):
        spans = isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and any(
            node.lineno <= n <= (node.end_lineno or node.lineno) for n in lines
        )
        if spans:
            names.add(getattr(node, "name", ""))
    return names


def chunked(selection: list[SelectedTests], files_per_chunk: int = 4, tests_per_chunk: int = 20) -> list[list[str]]:
    """Consecutive targets grouped into pytest runs: a few whole files, or many single tests, per run."""
    chunks: list[list[str]] = []
    current: list[str] = []
    current_kind = ""
    for item in selection:
        kind = "test" if "::" in item.target else "file"
        limit = tests_per_chunk if kind == "test" else files_per_chunk
        if current and (kind != current_kind or len(current) >= limit):
            chunks.append(current)
            current = []
        current.append(item.target)
        current_kind = kind
    if current:
        chunks.append(current)
    return chunks
