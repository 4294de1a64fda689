"""One path→module mapping and one test-file rule for every stage (cascade/paths.py)."""

from __future__ import annotations

import pytest

from cascade.models import EvidenceKind, Outcome, StageResult
from cascade.paths import is_test_file, module_of, module_parts


@pytest.mark.parametrize(
    ("path", "module"),
    [
        ("pkg/sub/mod.py", "pkg.sub.mod"),
        ("src/pkg/mod.py", "pkg.mod"),
        ("lib/matplotlib/axes/_base.py", "matplotlib.axes._base"),
        ("pkg/__init__.py", "pkg"),
        ("__init__.py", None),
        ("docs/conf.txt", None),
    ],
)
def test_module_of_strips_src_and_lib_layouts_and_init(path: str, module: str | None) -> None:
    assert module_of(path) == module


def test_module_parts_keep_init_so_relative_imports_resolve_against_the_package() -> None:
    assert module_parts("lib/pkg/__init__.py") == ["pkg", "__init__"]


@pytest.mark.parametrize(
    ("path", "is_test"),
    [("tests/test_x.py", True), ("pkg/x_test.py", True), ("pkg/testing.py", False), ("test_x.txt", False)],
)
def test_test_files_by_pytest_default_names(path: str, is_test: bool) -> None:
    assert is_test_file(path) is is_test


def test_a_skipped_result_carries_its_reason_as_unavailable_evidence() -> None:
    result = StageResult.skipped("static", "repository unavailable: no checkout to analyse")
    assert (result.outcome, result.reason) == (Outcome.SKIPPED, "repository unavailable: no checkout to analyse")
    assert [(e.kind, e.grounded, e.summary) for e in result.evidence] == [
        (EvidenceKind.UNAVAILABLE, False, "repository unavailable: no checkout to analyse")
    ]
