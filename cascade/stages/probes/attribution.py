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

Records made outside any test (``session``: collection, start-up) follow the same rule, with the session counting as
touched when the PR changed the module-level code of a test file the run placed. A record no test boundary covers
('': the runner never marked one) counts. Allowed records are kept, with the test that made them, as context."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from pathlib import Path

from cascade.execution.runner import PytestRun
from cascade.safety import SideEffect
from cascade.sandbox.attribution import SESSION

LONG_NUMBER = re.compile(r"\d{4,}")  # ports, pids, random suffixes: not what makes two records the same act

Touched = Callable[[str], bool]


def record_key(effect: SideEffect, tree: str) -> tuple[str, str, str]:
    target = effect.target.replace(tree, "<tree>") if tree else effect.target
    return effect.kind, LONG_NUMBER.sub("<n>", target), effect.source


def split(
    base: PytestRun | None, patched: PytestRun | None, touched: Touched, judge_base: bool = True
) -> tuple[list[SideEffect], list[SideEffect]]:
    """(the patch's harmful records, allowed records) of a base run and the patched run of the same tests; with
    ``judge_base`` False the base run only serves for comparison (its records were judged with an earlier pair)."""
    counted: list[SideEffect] = []
    allowed: list[SideEffect] = []
    seen_on_base: set[tuple[str, tuple[str, str, str]]] = set()
    if base is not None:
        for effect in base.result.side_effects:
            seen_on_base.add((effect.test, record_key(effect, base.result.tree)))
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
            elif (effect.test, record_key(effect, patched.result.tree)) in seen_on_base:
                allowed.append(_excused(effect, "the same test the PR did not touch made it on the base tree too"))
            else:
                counted.append(effect)
    return counted, allowed


def _excused(effect: SideEffect, why: str) -> SideEffect:
    who = effect.test if effect.test and effect.test != SESSION else "outside any test"
    return effect.model_copy(update={"benign": True, "detail": f"{effect.detail} [not the patch's: {why} ({who})]"})


# -- which tests the PR touched ----------------------------------------------------------------------------------------


def definitions(source: str) -> tuple[dict[str, str], str]:
    """(test name → its source, the module's code outside its tests) of a test file; names as in node ids
    ('test_x', 'TestK::test_x')."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return {}, source
    lines = source.splitlines()
    tests: dict[str, str] = {}
    spans: list[tuple[int, int]] = []
    for node in tree.body:
        members = [(node, "")] if not isinstance(node, ast.ClassDef) else [(n, node.name + "::") for n in node.body]
        for fn, prefix in members:
            if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef) and fn.name.startswith("test"):
                start = min([fn.lineno, *(d.lineno for d in fn.decorator_list)]) - 1
                end = fn.end_lineno or fn.lineno
                tests[prefix + fn.name] = "\n".join(lines[start:end])
                spans.append((start, end))
    rest = [line for i, line in enumerate(lines) if not any(s <= i < e for s, e in spans)]
    return tests, "\n".join(rest)


class TouchedTests:
    """Which tests of the placed files are the PR's code: added, changed, or in a file whose module-level code
    changed. ``placed``: path → the text run on both sides; ``base_tree``: the pristine base (the old texts)."""

    def __init__(self, base_tree: Path, placed: dict[str, str], pr_code: set[str]) -> None:
        self.files: dict[str, tuple[set[str], bool]] = {}  # path → (touched test names, module level touched)
        for path, text in placed.items():
            if path not in pr_code:
                self.files[path] = (set(), False)
                continue
            old_path = base_tree / path
            old = old_path.read_text(encoding="utf-8", errors="replace") if old_path.is_file() else None
            new_tests, new_rest = definitions(text)
            if old is None:
                self.files[path] = (set(new_tests), True)
                continue
            old_tests, old_rest = definitions(old)
            changed = {name for name, body in new_tests.items() if old_tests.get(name) != body}
            self.files[path] = (changed, old_rest.strip() != new_rest.strip())

    def __call__(self, test: str) -> bool:
        if not test:
            return True
        if test == SESSION:
            return any(module for _, module in self.files.values())
        path, _, rest = test.partition("::")
        if path not in self.files:
            return False
        names, module = self.files[path]
        return module or rest.split("[", 1)[0] in names
