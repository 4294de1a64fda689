"""Real-PR controls in `cascade bench`: gold patch + test_patch together, and a repository's merged fix commits."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from cascade.bench.data import TaskRow
from cascade.bench.fix_commits import (
    FIX_COMMIT_MODEL,
    FixCommit,
    changes_code_and_tests,
    commits_in_range,
    fix_commit_case,
    read_commit_list,
)
from cascade.bench.merged_prs import MERGED_PR_MODEL, merged_pr_cases, merged_pr_patch
from cascade.bench.results import read_rows
from cascade.bench.rows import BenchCase, LabelClass
from cascade.bench.worker import config_for_case, report_name
from cascade.cli import cli
from cascade.config import CascadeConfig
from cascade.errors import BadInput
from cascade.models import Verdict
from cascade.workspace import apply_patch
from tests.support import MakeRepo, diff_of, run_git

OPS = "def div(a, b):\n    return a / b\n"
FIXED = "def div(a, b):\n    if b == 0:\n        return None\n    return a / b\n"
TEST = "from calc.ops import div\n\n\ndef test_div():\n    assert div(4, 2) == 2\n"
TEST_FIXED = TEST + "\n\ndef test_div_zero():\n    assert div(1, 0) is None\n"
ROOT = Path(__file__).resolve().parents[1]
BASE_FILES = {"calc/__init__.py": "", "calc/ops.py": OPS, "tests/test_ops.py": TEST}


def _commit(repo: Path, files: dict[str, str], message: str) -> str:
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    run_git(repo, "add", "-A")
    run_git(repo, "commit", "-q", "-m", message)
    return run_git(repo, "rev-parse", "HEAD").strip()


def _history(make_repo: MakeRepo) -> tuple[Path, dict[str, str]]:
    """main: base → docs-only commit → merge of a fix branch (code + test in two commits) → code-only commit."""
    repo = make_repo(BASE_FILES)
    shas = {"base": run_git(repo, "rev-parse", "HEAD").strip()}
    shas["docs"] = _commit(repo, {"README.rst": "calc\n"}, "Document calc")
    run_git(repo, "checkout", "-q", "-b", "fix")
    _commit(repo, {"calc/ops.py": FIXED}, "Return None on division by zero")
    _commit(repo, {"tests/test_ops.py": TEST_FIXED}, "Test division by zero")
    run_git(repo, "checkout", "-q", "main")
    run_git(repo, "merge", "-q", "--no-ff", "-m", "Merge pull request #7: fix div by zero\n\nFixes #6.", "fix")
    shas["merge"] = run_git(repo, "rev-parse", "HEAD").strip()
    shas["code"] = _commit(repo, {"calc/ops.py": FIXED + "\n\ndef mul(a, b):\n    return a * b\n"}, "Add mul")
    return repo, shas


def test_the_pull_request_as_merged_is_patch_then_test_patch_and_applies(make_repo: MakeRepo) -> None:
    repo = make_repo(BASE_FILES)
    code = diff_of(repo, {"calc/ops.py": FIXED})
    tests = diff_of(repo, {"tests/test_ops.py": TEST_FIXED})
    base = run_git(repo, "rev-parse", "HEAD").strip()
    task = TaskRow(instance_id="acme__calc-1", repo="acme/calc", base_commit=base, patch=code, test_patch=tests,
                   version="1.0", problem_statement="div by zero")  # fmt: skip
    patch = merged_pr_patch(task)
    assert patch.startswith(code) and patch.endswith(tests)
    apply_patch(repo, patch)
    assert (repo / "calc/ops.py").read_text() == FIXED and (repo / "tests/test_ops.py").read_text() == TEST_FIXED
    (case,) = merged_pr_cases({task.instance_id: task, "empty-1": task.model_copy(update={"patch": ""})})
    assert case.label is LabelClass.ACCEPTABLE and case.model == MERGED_PR_MODEL and case.version == "1.0"
    overlap = task.model_copy(update={"test_patch": code})
    with pytest.raises(BadInput, match=r"both change calc/ops\.py"):
        merged_pr_patch(overlap)


def test_a_merge_commit_is_reviewed_against_its_first_parent_with_its_message(make_repo: MakeRepo) -> None:
    repo, shas = _history(make_repo)
    case = fix_commit_case(str(repo), FixCommit(repo="acme/calc", sha=shas["merge"][:10]))
    assert case.base_commit == shas["docs"] and case.model == FIX_COMMIT_MODEL
    assert case.instance_id == f"acme__calc-{shas['merge'][:12]}" and case.label is LabelClass.ACCEPTABLE
    assert case.issue_text is not None and "Fixes #6." in case.issue_text
    run_git(repo, "checkout", "-q", shas["docs"])
    apply_patch(repo, case.patch_text)  # the branch's code and tests together
    assert (repo / "calc/ops.py").read_text() == FIXED and (repo / "tests/test_ops.py").read_text() == TEST_FIXED


def test_a_range_keeps_first_parent_commits_that_change_code_and_tests(make_repo: MakeRepo) -> None:
    repo, shas = _history(make_repo)
    found = commits_in_range(str(repo), "acme/calc", f"{shas['base']}..main")
    assert [c.sha for c in found] == [shas["merge"]]  # not the docs or code-only commit, nor the branch's own
    assert found[0].subject.startswith("Merge pull request #7")
    assert changes_code_and_tests(["src/pkg/mod.py", "testing/test_mod.py"])
    assert not changes_code_and_tests(["docs/conf.py", "tests/test_mod.py"])
    assert not changes_code_and_tests(["pkg/mod.py", "pkg/other.py"])


def test_commit_list_lines_and_their_errors(tmp_path: Path) -> None:
    good = tmp_path / "fixes.txt"
    good.write_text("# repo sha subject\n\nacme/calc 0123456789abcdef Fix div\nacme/calc abcdef0\n")
    assert read_commit_list(good) == [
        FixCommit(repo="acme/calc", sha="0123456789abcdef", subject="Fix div"),
        FixCommit(repo="acme/calc", sha="abcdef0"),
    ]
    bad = tmp_path / "bad.txt"
    bad.write_text("acme/calc not-a-sha Fix\n")
    with pytest.raises(BadInput, match=r"bad\.txt:1: expected"):
        read_commit_list(bad)


def test_merged_commits_have_no_task_version_so_the_harness_table_does_not_apply() -> None:
    commit = BenchCase(instance_id="sympy__sympy-0123456789ab", model=FIX_COMMIT_MODEL, repo="sympy/sympy",
                       base_commit="0" * 40, patch_text="", label=LabelClass.ACCEPTABLE)  # fmt: skip
    assert config_for_case(CascadeConfig(), commit) == CascadeConfig()
    row = commit.model_copy(update={"version": "1.1"})
    assert config_for_case(CascadeConfig(), row).env.python == "3.9"  # a SWE-bench row keeps the harness's pins


@pytest.mark.slow
def test_bench_run_replays_commits_and_the_merged_pr(make_repo: MakeRepo, tmp_path: Path) -> None:
    repo, shas = _history(make_repo)
    repos = tmp_path / "repos"
    (repos / "acme").mkdir(parents=True)
    (repos / "acme" / "calc").symlink_to(repo)
    listed = tmp_path / "fixes.txt"
    listed.write_text(f"acme/calc {shas['merge']} Merge pull request #7\n")
    task = {"instance_id": "acme__calc-9", "repo": "acme/calc", "base_commit": shas["code"], "version": "1.0",
            "patch": diff_of(repo, {"calc/ops.py": FIXED + "\nX = 1\n"}),
            "test_patch": diff_of(repo, {"tests/test_ops.py": TEST_FIXED})}  # fmt: skip
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps(task) + "\n")
    out = tmp_path / "out"
    common = ["--repos-dir", str(repos), "--output", str(out), "--quiet", "--resamples", "10", "--timeout", "300",
              "--reports", str(tmp_path / "reports")]  # fmt: skip
    runs = [
        ["--commits", str(listed), "--commit-range", f"acme/calc:{shas['docs']}..main"],
        ["--tasks", str(tasks), "--gold", "--with-tests"],
    ]
    for extra in runs:
        result = CliRunner().invoke(cli, ["bench", "run", *extra, *common], catch_exceptions=False)
        assert result.exit_code == 0, result.output
    rows = read_rows(out / "results.jsonl")
    by_model = sorted((r.model, r.instance_id, r.label.value, r.status.value) for r in rows)
    merge_id = f"acme__calc-{shas['merge'][:12]}"
    assert by_model == [
        ("gold+tests", "acme__calc-9", "acceptable", "ok"),
        (FIX_COMMIT_MODEL, merge_id, "acceptable", "ok"),  # listed and in the range: one row
    ]
    assert all(r.decision.value != "reject" and [s.stage for s in r.stages] == ["no_change", "hygiene", "static"]
               for r in rows), [r.evidence for r in rows]  # fmt: skip
    for row in rows:  # the full verdict beside each row
        verdict = Verdict.model_validate_json((tmp_path / "reports" / report_name(row)).read_text())
        assert [s.stage for s in verdict.stages] == [s.stage for s in row.stages]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--gold"], "need --tasks"),
        ([], "nothing to replay"),
        (["--tasks", "T", "--predictions", "P", "--with-tests"], "--with-tests belongs to --gold"),
        (["--commit-range", "acme/calc"], "expected owner/name:A..B"),
    ],
)
def test_control_options_misused_are_one_line_bad_input(tmp_path: Path, args: list[str], message: str) -> None:
    tasks = tmp_path / "T"
    tasks.write_text("")
    args = [str(tasks) if a == "T" else str(tmp_path / "P") if a == "P" else a for a in args]
    command = [sys.executable, "-m", "cascade", "bench", "run", *args, "--output", str(tmp_path / "o")]
    proc = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 3 and message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
