"""The official-tests stage and arm: a task's test_patch, FAIL_TO_PASS and PASS_TO_PASS run in a real sandbox on a
real repository, graded as the SWE-bench harness grades."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cascade.bench.arms import get_arm
from cascade.bench.data import DevData, TaskRow, build_cases, load_predictions
from cascade.bench.official_tests import OfficialTestsStage
from cascade.config import parse_config
from cascade.errors import BadInput
from cascade.execution.official import grade as grade_run
from cascade.execution.runner import NEEDS_NETWORK, PytestRun
from cascade.execution.runner import TestResult as Result
from cascade.models import OfficialTests, OfficialTestsDetails, Outcome, ReviewRequest, StageResult
from cascade.pipeline import review
from cascade.sandbox.base import RunResult, Sandbox
from cascade.stages import STAGES
from tests.support import SWEBENCH_DIR, MakeRepo, diff_of, run_git

CALC = "def divide(a, b):\n    return a / b\n"
FIXED = "def divide(a, b):\n    if b == 0:\n        return None\n    return a / b\n"
TESTS = "from pkg.calc import divide\n\n\ndef test_divide():\n    assert divide(4, 2) == 2\n"
# The task's own tests: one new test, and a parametrised one whose id has a space (the harness cuts it there).
TEST_PATCH_TESTS = TESTS + (
    "\n\ndef test_zero():\n    assert divide(1, 0) is None\n"
    "\n\nimport pytest\n\n\n@pytest.mark.parametrize('pair', ['6 3'])\n"
    "def test_pairs(pair):\n    a, b = map(int, pair.split())\n    assert divide(a, b) == 2\n"
)
F2P = ["tests/test_calc.py::test_zero"]
P2P = ["test_divide", "tests/test_calc.py::test_pairs[6"]  # a bare name (sympy style) and a cut parametrised id


def task(make_repo: MakeRepo) -> tuple[Path, OfficialTests]:
    repo = make_repo({"pkg/__init__.py": "", "pkg/calc.py": CALC, "tests/test_calc.py": TESTS})
    test_patch = diff_of(repo, {"tests/test_calc.py": TEST_PATCH_TESTS})
    return repo, OfficialTests(repo="demo/demo", test_patch=test_patch, fail_to_pass=F2P, pass_to_pass=P2P)


def grade(repo: Path, patch: str, tests: OfficialTests | None, sandbox: Sandbox) -> StageResult:
    config = parse_config({"env": {"use_current_interpreter": True}})
    request = ReviewRequest(repo=str(repo), patch_text=patch, config=config)
    return review(request, stages=[OfficialTestsStage(tests=tests, sandbox=sandbox)]).stages[0]


def details(result: StageResult) -> OfficialTestsDetails:
    return next(e.details for e in result.evidence if isinstance(e.details, OfficialTestsDetails))


def test_a_resolving_patch_is_accepted(make_repo: MakeRepo, sandbox: Sandbox) -> None:
    repo, tests = task(make_repo)
    result = grade(repo, diff_of(repo, {"pkg/calc.py": FIXED}), tests, sandbox)
    assert result.outcome == Outcome.ACCEPT, result.reason
    assert result.reason == "resolved: all 1 FAIL_TO_PASS, 2 PASS_TO_PASS tests pass"
    assert details(result).files == ["tests/test_calc.py"]
    assert (repo / "tests/test_calc.py").read_text() == TESTS  # the test_patch went to a tree of its own


@pytest.mark.slow
def test_a_patch_that_does_not_fix_the_issue_is_rejected_naming_the_test(make_repo: MakeRepo, sandbox: Sandbox) -> None:
    repo, tests = task(make_repo)
    wrong = "def divide(a, b):\n    if b == 0:\n        return 0\n    return a / b\n"
    result = grade(repo, diff_of(repo, {"pkg/calc.py": wrong}), tests, sandbox)
    assert result.outcome == Outcome.REJECT
    assert result.reason.startswith("not resolved: 1/1 FAIL_TO_PASS and 0/2 PASS_TO_PASS tests fail")
    assert details(result).fail_to_pass_failed == {"tests/test_calc.py::test_zero": "fail"}
    assert "assert 0 is None" in str(details(result).log_excerpt)


@pytest.mark.slow
def test_the_agents_edits_to_the_official_test_files_are_discarded(make_repo: MakeRepo, sandbox: Sandbox) -> None:
    repo, tests = task(make_repo)
    breaking = FIXED.replace("return a / b", "return a // b + 1")  # breaks test_divide …
    edited_tests = TESTS.replace("== 2", "== 3")  # … which the agent "fixed" to match
    result = grade(repo, diff_of(repo, {"pkg/calc.py": breaking, "tests/test_calc.py": edited_tests}), tests, sandbox)
    assert result.outcome == Outcome.REJECT, result.reason
    assert details(result).pass_to_pass_failed == {"test_divide": "fail", "tests/test_calc.py::test_pairs[6": "fail"}


@pytest.mark.slow
def test_a_listed_test_the_run_does_not_have_counts_against_the_patch(make_repo: MakeRepo, sandbox: Sandbox) -> None:
    repo, tests = task(make_repo)
    tests = tests.model_copy(update={"pass_to_pass": [*P2P, "tests/test_calc.py::test_gone"]})
    result = grade(repo, diff_of(repo, {"pkg/calc.py": FIXED}), tests, sandbox)
    assert result.outcome == Outcome.REJECT
    assert details(result).pass_to_pass_failed == {"tests/test_calc.py::test_gone": "missing"}


def test_empty_patch_and_missing_tests(make_repo: MakeRepo, sandbox: Sandbox) -> None:
    repo, tests = task(make_repo)
    assert grade(repo, "", tests, sandbox).outcome == Outcome.REJECT  # the harness never resolves an empty patch
    skipped = grade(repo, diff_of(repo, {"pkg/calc.py": FIXED}), None, sandbox)
    assert skipped.outcome == Outcome.SKIPPED and "no official tests" in skipped.reason


def test_task_rows_carry_their_official_tests_only_when_they_have_them() -> None:
    row = TaskRow(instance_id="a__b-1", repo="a/b", base_commit="c", version="1.0", test_patch="diff --git …",
                  FAIL_TO_PASS='["t::x"]', PASS_TO_PASS="[]")  # fmt: skip
    assert row.official_tests() == OfficialTests(
        repo="a/b", version="1.0", test_patch="diff --git …", fail_to_pass=["t::x"], pass_to_pass=[]
    )
    assert TaskRow(instance_id="a__b-2", repo="a/b", base_commit="c").official_tests() is None  # Verified rows
    with pytest.raises(BadInput, match="FAIL_TO_PASS is not a JSON list"):
        TaskRow(instance_id="a__b-3", repo="a/b", base_commit="c", test_patch="d", FAIL_TO_PASS="t::x").official_tests()


def test_the_arm_runs_only_the_official_tests_stage() -> None:
    arm = get_arm("official-tests")
    assert [s.name for s in arm.stages(parse_config({}))] == ["official_tests"]


def test_the_official_tests_are_the_benchmarks_never_the_gates_input() -> None:
    """The grader lives in cascade/bench: the gate's request has no field for a task's tests, and the stage is no
    gate stage (the official-tests arm builds it with each case's own tests)."""
    assert "official_tests" not in ReviewRequest.model_fields and "official_tests" not in STAGES


def test_bench_case_from_the_published_lite_rows(tmp_path: Path) -> None:
    dev = DevData(SWEBENCH_DIR)
    if not dev.has("lite"):
        pytest.skip("../shared/data/swebench is not here")
    row = next(r for r in dev.tasks("lite").values() if r.repo == "pallets/flask")
    preds = tmp_path / "preds.jsonl"
    preds.write_text(json.dumps({"instance_id": row.instance_id, "model_name_or_path": "m", "model_patch": row.patch}))
    [case] = build_cases({row.instance_id: row}, load_predictions(preds), None).cases
    assert case.official_tests is not None and case.official_tests.fail_to_pass
    assert case.official_tests.version == row.version


@pytest.mark.slow
def test_the_stage_leaves_the_repository_as_it_found_it(make_repo: MakeRepo, sandbox: Sandbox) -> None:
    repo, tests = task(make_repo)
    grade(repo, diff_of(repo, {"pkg/calc.py": FIXED}), tests, sandbox)
    assert run_git(repo, "worktree", "list").count("\n") == 1 and run_git(repo, "status", "--porcelain") == ""


def _run(tests: list[Result], run_error: str | None, exit_code: int | None) -> PytestRun:
    result = RunResult(isolation="none", argv=["pytest"], exit_code=exit_code, timed_out=exit_code is None)
    return PytestRun(tree="/t", targets=[], command="pytest", result=result, tests=tests, run_error=run_error)


def test_a_report_is_graded_even_after_an_abnormal_exit_and_only_a_timeout_is_no_grade() -> None:
    tests = OfficialTests(repo="a/b", test_patch="", fail_to_pass=["t.py::x"], pass_to_pass=["t.py::y"])
    passed = [Result(test_id="t.py::x", status="pass"), Result(test_id="t.py::y", status="skipped")]
    graded = grade_run(_run(passed, "pytest exit code 3 (internal or usage error)", 3), tests, ["t.py"])
    assert graded.resolved and graded.run_error is None and graded.run_note and graded.statuses["t.py::y"] == "skipped"
    silent = grade_run(_run([], "timeout after 300s", None), tests, ["t.py"])
    assert not silent.resolved and silent.run_error == "timeout after 300s"
    assert silent.statuses == {"t.py::x": "missing", "t.py::y": "missing"}
    crashed = grade_run(_run([], "crash: pytest wrote no report (exit code 4)", 4), tests, ["t.py"])
    assert not crashed.resolved and crashed.run_error is None and crashed.failed == ["t.py::x", "t.py::y"]


def test_tests_failing_only_for_want_of_network_leave_the_grade_open() -> None:
    tests = OfficialTests(repo="a/b", test_patch="", fail_to_pass=["t.py::x"], pass_to_pass=["t.py::y"])
    offline = Result(test_id="t.py::x", status="setup_error", reason=NEEDS_NETWORK)
    graded = grade_run(_run([offline, Result(test_id="t.py::y", status="pass")], None, 1), tests, ["t.py"])
    assert not graded.resolved and graded.only_for_want_of_network and graded.statuses["t.py::x"] == "needs_network"
    broken = Result(test_id="t.py::y", status="behavioural_fail")
    assert not grade_run(_run([offline, broken], None, 1), tests, ["t.py"]).only_for_want_of_network


@pytest.mark.slow
def test_a_patch_that_breaks_the_import_conftest_needs_fails_every_listed_test(
    make_repo: MakeRepo, sandbox: Sandbox
) -> None:
    repo = make_repo({"pkg/__init__.py": "", "pkg/calc.py": CALC, "tests/test_calc.py": TESTS,
                      "conftest.py": "import pkg.calc\n"})  # fmt: skip
    test_patch = diff_of(repo, {"tests/test_calc.py": TEST_PATCH_TESTS})
    tests = OfficialTests(repo="demo/demo", test_patch=test_patch, fail_to_pass=F2P, pass_to_pass=P2P)
    result = grade(repo, diff_of(repo, {"pkg/calc.py": FIXED + "undefined_name\n"}), tests, sandbox)
    assert result.outcome == Outcome.REJECT, result.reason
    assert result.reason.endswith("(the run: crash: pytest wrote no report (exit code 4))")
    assert "NameError" in str(details(result).log_excerpt)
