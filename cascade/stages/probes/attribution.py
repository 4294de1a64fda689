"""Whose doing a side-effect record is: the patch's, or what an unchanged test always does (docs/architecture.md, "Run
model").

Every record carries the test that made it (`sandbox/attribution.py`). A test the PR added or changed — its function,
or the module-level code of its file, differs between the base and patched trees — is the PR's code: what it does
counts on both trees, judged by the allow-list alone. A test the PR did not touch runs the same code on both sides
except for the code under review, so:

* on the base tree, its records are not the patch's (nothing of the patch ran);
* on the patched tree, a record the same test also made on the base tree is not the patch's either (requests' tests
  look up unresolvable hosts and connect to closed ports to test their own error handling, with or without a fix);
  a record only the patched run has is the patch's doing.

Records made outside any test (``session``: collection, session fixtures) follow the same rule, with the session
counting as touched when the PR changed the module-level code of a test file the run placed. Records made before the
first test file's collection began (``startup``: the interpreter, plugins, the tree's conftest files) follow it with
start-up never touched — no placed file has been imported yet — unless the run placed a conftest of the PR's; a run
whose runner never began its session (a conftest that fails to import, a timeout during start-up) ran start-up only.
A record no time places ('': the run's own integrity, a report file it swapped) always counts. Allowed records are
kept, with the test that made them, as context."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple, TypeGuard

from cascade.execution.runner import PytestRun
from cascade.paths import is_conftest
from cascade.safety import SideEffect
from cascade.sandbox.attribution import SESSION, STARTUP

LONG_NUMBER = re.compile(r"\d{4,}")  # ports, pids, random suffixes: not what makes two records the same act
# tempfile's random names (mkdtemp/mkstemp/TemporaryDirectory: a prefix, then 8 of [a-z0-9_]) differ in every run
TEMP_NAME = re.compile(r"(tmp|[-_.])[a-z0-9_]{8}(?=/|$)")
# mkstemp(3)'s names from C libraries: six random letters or digits (fontconfig's cache-8.TMP-XD3aJO)
C_TEMP_NAME = re.compile(r"([-_.])[A-Za-z0-9]{6}(?=/|$)")

Touched = Callable[[str], bool]
# A file left behind is attributed by its mtime, whose granularity can put it just outside its test's interval
# (then it reads as the session's): for these, the same file left on base by any test is the same act.
MTIME_SOURCES = frozenset({"home_diff", "tmp_diff", "shm_diff", "worktree_diff", "docker_diff"})


def record_key(effect: SideEffect, tree: str) -> tuple[str, str, str]:
    target = effect.target.replace(tree, "<tree>") if tree else effect.target
    target = C_TEMP_NAME.sub(r"\1<random>", TEMP_NAME.sub(r"\1<random>", LONG_NUMBER.sub("<n>", target)))
    return effect.kind, target, effect.source


def split(
    base: PytestRun | None, patched: PytestRun | None, touched: Touched, judge_base: bool = True
) -> tuple[list[SideEffect], list[SideEffect]]:
    """(the patch's harmful records, allowed records) of a base run and the patched run of the same tests; with
    ``judge_base`` False the base run only serves for comparison (its records were judged with an earlier pair)."""
    counted: list[SideEffect] = []
    allowed: list[SideEffect] = []
    seen_on_base: set[tuple[str, tuple[str, str, str]]] = set()
    left_on_base: set[tuple[str, str, str]] = set()
    if base is not None:
        for effect in base.result.side_effects:
            seen_on_base.add((effect.test, record_key(effect, base.result.tree)))
            if effect.source in MTIME_SOURCES:
                left_on_base.add(record_key(effect, base.result.tree))
            if not judge_base:
                continue
            if effect.benign:
                allowed.append(effect)
            elif touched(effect.test):
                counted.append(effect)
            else:
                allowed.append(_excused(effect, "made on the base tree by a test the PR did not touch"))
    if patched is not None:
        for effect in patched.result.side_effects:
            if effect.benign:
                allowed.append(effect)
            elif touched(effect.test):
                counted.append(effect)
            elif (effect.test, key := record_key(effect, patched.result.tree)) in seen_on_base or (
                effect.source in MTIME_SOURCES and key in left_on_base
            ):
                allowed.append(_excused(effect, "the same test the PR did not touch made it on the base tree too"))
            else:
                counted.append(effect)
    return counted, allowed


def _excused(effect: SideEffect, why: str) -> SideEffect:
    who = {SESSION: "outside any test", STARTUP: "at start-up, before any test file was collected"}.get(
        effect.test, effect.test
    )
    return effect.model_copy(update={"benign": True, "detail": f"{effect.detail} [not the patch's: {why} ({who})]"})


# -- which tests the PR touched ----------------------------------------------------------------------------------------

# Module-level names pytest itself reads: a change to one of them changes how every test of the file runs.
PYTEST_NAMES = re.compile(r"^(pytestmark|pytest_plugins|pytest_\w+|setup_module|teardown_module|setup_function|"
                          r"teardown_function|setUpModule|tearDownModule)$")  # fmt: skip


class Layout(NamedTuple):
    """A test file as the attribution needs it, compared as syntax trees (blank lines and comments are no change):
    each test's code; each module-level name's definition; the names every test and definition refers to (its
    fixtures included); each test class's code outside its tests; what binds no name (a change there touches all)."""

    tests: dict[str, str]
    defs: dict[str, str]
    uses: dict[str, set[str]]
    class_rest: dict[str, str]
    other: str
    autouse: set[str]


def _names(node: ast.AST) -> set[str]:
    found = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    found |= {a.arg for n in ast.walk(node) if isinstance(n, ast.arguments) for a in [*n.posonlyargs, *n.args,
                                                                                        *n.kwonlyargs]}  # fmt: skip
    return found


def _is_test(node: ast.stmt) -> TypeGuard[ast.FunctionDef | ast.AsyncFunctionDef]:
    return isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test")


def _bound(node: ast.stmt) -> list[str]:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [node.name]
    if isinstance(node, ast.Import | ast.ImportFrom):
        return [(a.asname or a.name).split(".", 1)[0] for a in node.names if a.name != "*"]
    targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
    names = [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
    return names if targets and all(isinstance(t, ast.Name | ast.Tuple | ast.List) for t in targets) else []


def layout(source: str) -> Layout | None:
    """The file's layout, or None when it does not parse (then every test of it counts as touched)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    tests: dict[str, str] = {}
    defs: dict[str, str] = {}
    uses: dict[str, set[str]] = {}
    class_rest: dict[str, str] = {}
    other: list[str] = []
    autouse: set[str] = set()
    for index, node in enumerate(tree.body):
        if index == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # the module docstring
        if _is_test(node):
            tests[node.name], uses[node.name] = ast.dump(node), _names(node)
            continue
        if isinstance(node, ast.ClassDef) and any(_is_test(n) for n in node.body):
            rest = [n for n in node.body if not _is_test(n)]
            class_rest[node.name] = "|".join(
                ast.dump(n) for n in [*node.bases, *node.keywords, *node.decorator_list, *rest]
            )
            uses[node.name] = set().union(*(_names(n) for n in [*rest, *node.bases, *node.decorator_list]))
            for member in filter(_is_test, node.body):
                name = f"{node.name}::{member.name}"
                tests[name], uses[name] = ast.dump(member), _names(member)
            continue
        names = _bound(node)
        if not names or any(PYTEST_NAMES.match(n) for n in names):
            other.append(ast.dump(node))
            continue
        for name in names:
            defs[name] = defs.get(name, "") + ast.dump(node)
            uses[name] = uses.get(name, set()) | _names(node)
            if "autouse" in ast.dump(node) and isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                autouse.add(name)
    return Layout(tests, defs, uses, class_rest, "\n".join(other), autouse)


class FileChange(NamedTuple):
    tests: set[str]  # the tests the PR added or changed, or that use a definition it changed
    everything: bool  # every test of the file counts (what binds no name, an autouse fixture, pytest's names changed)
    module: bool  # the module-level code changed at all (collection runs it: the session's records count)


def file_change(old: str | None, new: str) -> FileChange:
    after = layout(new)
    before = layout(old) if old is not None else None
    if after is None or before is None:
        return FileChange(set(after.tests) if after else set(), True, True)
    changed = {n for n in {*before.defs, *after.defs} if before.defs.get(n) != after.defs.get(n)}
    while True:  # a helper that uses a changed helper changed too
        more = {n for n in after.defs if n not in changed and after.uses.get(n, set()) & changed}
        if not more:
            break
        changed |= more
    everything = before.other != after.other or bool(changed & (before.autouse | after.autouse))
    classes = {
        c for c in {*before.class_rest, *after.class_rest} if before.class_rest.get(c) != after.class_rest.get(c)
    }
    classes |= {c for c in after.class_rest if after.uses.get(c, set()) & changed}
    tests = {
        name
        for name, code in after.tests.items()
        if before.tests.get(name) != code
        or after.uses.get(name, set()) & changed
        or ("::" in name and name.split("::", 1)[0] in classes)
    }
    module = everything or bool(changed) or bool(classes)
    return FileChange(tests, everything, module)


class TouchedTests:
    """Which tests of the placed files are the PR's code: added, changed, using a module-level definition (helper,
    fixture, constant, import) the PR changed, or in a file where the PR changed what every test depends on.
    ``placed``: path → the text run on both sides; ``base_tree``: the pristine base (the old texts)."""

    def __init__(self, base_tree: Path, placed: dict[str, str], pr_code: set[str]) -> None:
        self.files: dict[str, FileChange] = {}
        for path, text in placed.items():
            if path not in pr_code:
                self.files[path] = FileChange(set(), False, False)
                continue
            old_path = base_tree / path
            old = old_path.read_text(encoding="utf-8", errors="replace") if old_path.is_file() else None
            self.files[path] = file_change(old, text) if old is not None else FileChange(set(), True, True)

    def __call__(self, test: str) -> bool:
        if not test:
            return True
        if test == STARTUP:
            return any(change.module for path, change in self.files.items() if is_conftest(path))
        if test == SESSION:
            return any(change.module for change in self.files.values())
        path, _, rest = test.partition("::")
        if path not in self.files:
            return False
        change = self.files[path]
        return change.everything or rest.split("[", 1)[0] in change.tests
