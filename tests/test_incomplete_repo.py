"""A repository that lacks objects of the base commit is reported as incomplete, with the stages that need no checkout
still run — not a generic error (README, Review a patch). The repository is real: a blob's object is deleted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cascade.bench.arms import get_arm
from cascade.bench.rows import BenchCase, LabelClass, TraceJob, TraceStatus
from cascade.bench.worker import run_trace
from tests.bad_inputs import ROOT, make_partial_repo
from tests.support import run_git

CLEAN = ROOT / "examples/demo/clean.diff"


@pytest.fixture(scope="module")
def partial(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_partial_repo(tmp_path_factory.mktemp("incomplete") / "partial")


def review(repo: Path, patch: str) -> tuple[int, dict, str]:
    proc = subprocess.run(
        [sys.executable, "-m", "cascade", "review", "-", "--repo", str(repo), "--format", "json"],
        cwd=ROOT, input=patch, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    report = json.loads(proc.stdout) if proc.stdout.strip() else {}
    return proc.returncode, report, proc.stderr


def test_a_missing_blob_is_an_incomplete_repository_not_an_error(partial: Path) -> None:
    code, report, stderr = review(partial, CLEAN.read_text())
    assert code == 2, stderr
    assert "is incomplete" in report["incomplete_repo"] and "Could not reset index file" in report["incomplete_repo"]
    outcomes = {s["stage"]: (s["outcome"], s["reason"]) for s in report["stages"]}
    assert outcomes["no_change"][0] == "pass"  # needs no checkout: ran
    assert outcomes["static"][0] == "skipped" and "incomplete" in outcomes["static"][1]
    worktrees = run_git(partial, "worktree", "list")
    assert len(worktrees.strip().splitlines()) == 1  # the failed checkout left nothing behind


@pytest.mark.slow
def test_a_stage_that_needs_no_checkout_still_decides(partial: Path) -> None:
    test_only = (  # written by hand: `git add` in the repository would restore the missing object
        "diff --git a/tests/test_more.py b/tests/test_more.py\nnew file mode 100644\n--- /dev/null\n"
        "+++ b/tests/test_more.py\n@@ -0,0 +1,2 @@\n+def test_more():\n+    assert True\n"
    )
    code, report, stderr = review(partial, test_only)
    assert code == 1, stderr
    assert report["deciding_stage"] == "no_change" and report["incomplete_repo"]


@pytest.mark.slow
def test_a_patch_of_the_file_whose_object_is_missing_is_incomplete_not_missing(partial: Path) -> None:
    patch = (
        "diff --git a/data.bin b/data.bin\nindex 1111111..2222222 100644\n"
        "Binary files a/data.bin and b/data.bin differ\n"
    )
    code, report, stderr = review(partial, CLEAN.read_text() + patch)
    assert "does not exist" not in stderr
    assert code in (1, 2) and "data.bin" in report["incomplete_repo"], stderr


def test_bench_rows_get_their_own_status(partial: Path) -> None:
    case = BenchCase(
        instance_id="demo-1",
        model="m",
        repo="demo/partial",
        base_commit=run_git(partial, "rev-parse", "HEAD").strip(),
        patch_text=CLEAN.read_text(),
        label=LabelClass.ACCEPTABLE,
    )
    row = run_trace(TraceJob(case=case, arm="rules-only", repo_path=str(partial)), get_arm("rules-only"))
    assert row.status == TraceStatus.INCOMPLETE_REPO, (row.status, row.error)
    assert "Could not reset index file" in row.repo_note and not row.repo_available
    assert [s.stage for s in row.stages][:1] == ["no_change"]
