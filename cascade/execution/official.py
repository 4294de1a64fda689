"""Grade a patched tree with a task's official tests, the way the SWE-bench harness grades a prediction.

The harness resets the files its ``test_patch`` touches to the base commit (an agent's edits to them are discarded),
applies ``test_patch``, runs those test files and reads each test's status from the log. A prediction is *resolved*
when every FAIL_TO_PASS and every PASS_TO_PASS test passes; a listed test that is absent from the run, fails or
errors counts against it, a skipped one (and an expected failure) does not. Here the run is pytest in the sandbox
(`cascade/execution/runner.py`) and statuses come from its junit report.

Listed names are pytest node ids, except where the harness's log parser shortened them: sympy lists bare function
names (its own runner prints no file), and pytest's ``-rA`` lines are split at the first space, which cuts a
parametrised id such as ``test_x[a b]`` to ``test_x[a``. Both are matched to the node ids of the run.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from cascade.execution.envs import Environment
from cascade.execution.runner import NEEDS_NETWORK, PytestRun, TestResult, run_pytest
from cascade.git import git, run_git
from cascade.models import OfficialTests
from cascade.patch import parse_patch
from cascade.sandbox.base import Sandbox
from cascade.workspace import apply_patch

ListedStatus = Literal["pass", "fail", "setup_error", "needs_network", "skipped", "missing"]
_FAILING: tuple[ListedStatus, ...] = ("fail", "setup_error", "needs_network", "missing")


class OfficialGrade(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    resolved: bool = Field(description="The run reported, and every listed test in it passed or was skipped.")
    statuses: dict[str, ListedStatus] = Field(description="Each FAIL_TO_PASS and PASS_TO_PASS test's status.")
    fail_to_pass_failed: list[str]
    pass_to_pass_failed: list[str]
    run_error: str | None = Field(default=None, description="The run was cut short by the time limit: no grade.")
    run_note: str | None = Field(default=None, description="A run's abnormal end (pytest exit code 3, no report).")
    command: str
    files: list[str] = Field(description="The test files run: those of test_patch, as the harness runs them.")
    log_excerpt: str = ""

    @property
    def failed(self) -> list[str]:
        return [*self.fail_to_pass_failed, *self.pass_to_pass_failed]

    @property
    def only_for_want_of_network(self) -> bool:
        """Every listed test that failed failed because the sandbox has no network: nothing says the patch is wrong
        (the harness, which has a network, would have run them)."""
        return bool(self.failed) and all(self.statuses[t] == "needs_network" for t in self.failed)


def test_patch_files(test_patch: str) -> list[str]:
    """Repository paths the test_patch touches (old and new names)."""
    files = parse_patch(test_patch).files
    return sorted({p for f in files for p in (f.source_path, f.target_path) if p})


def prepare_official_tree(tree: Path, base_commit: str, test_patch: str) -> None:
    """Reset the test_patch's files to ``base_commit`` and apply the test_patch, as the harness does."""
    for path in test_patch_files(test_patch):
        exists = run_git(tree, "cat-file", "-e", f"{base_commit}:{path}").returncode == 0
        if exists:
            git(tree, "checkout", base_commit, "--", path)
        else:
            (tree / path).unlink(missing_ok=True)
    apply_patch(tree, test_patch)


def node_ids(names: Iterable[str], files: list[str], tree: Path) -> tuple[list[str], list[str]]:
    """Runnable node ids for listed names: ids as they are; a bare function name (sympy) found as ``def name(`` in
    one of ``files``. Returns (ids, names not found)."""
    ids: list[str] = []
    missing: list[str] = []
    texts = {f: (tree / f).read_text(errors="replace") for f in files if f.endswith(".py") and (tree / f).is_file()}
    for name in names:
        if "::" in name:
            ids.append(name)
            continue
        found = next((f for f, text in texts.items() if f"def {name}(" in text), None)
        if found:
            ids.append(f"{found}::{name}")
        else:
            missing.append(name)
    return ids, missing


class _Results:
    """The run's results, looked up by a listed name however the harness wrote it."""

    def __init__(self, tests: list[TestResult]) -> None:
        self.by_id: dict[str, list[TestResult]] = {}
        self.by_function: dict[str, list[TestResult]] = {}
        for test in tests:
            self.by_id.setdefault(test.test_id, []).append(test)
            self.by_function.setdefault(test.test_id.rsplit("::", 1)[-1], []).append(test)

    def matching(self, listed: str) -> list[TestResult]:
        if listed in self.by_id:
            return self.by_id[listed]
        if "::" not in listed:
            return self.by_function.get(listed, [])
        return [t for test_id, ts in self.by_id.items() if test_id.startswith(listed + " ") for t in ts]

    def status(self, listed: str) -> ListedStatus:
        found = self.matching(listed)
        if not found:
            return "missing"
        if any(t.status == "behavioural_fail" for t in found):
            return "fail"
        if any(t.status == "setup_error" and t.reason != NEEDS_NETWORK for t in found):
            return "setup_error"
        if any(t.status == "setup_error" for t in found):
            return "needs_network"
        return "skipped" if all(t.status == "skipped" for t in found) else "pass"


def grade(run: PytestRun, tests: OfficialTests, files: list[str]) -> OfficialGrade:
    results = _Results(run.tests)
    statuses: dict[str, ListedStatus] = {
        name: results.status(name) for name in (*tests.fail_to_pass, *tests.pass_to_pass)
    }
    f2p_failed = [t for t in tests.fail_to_pass if statuses[t] in _FAILING]
    p2p_failed = [t for t in tests.pass_to_pass if statuses[t] in _FAILING]
    # What pytest reported is authoritative even after an abnormal exit, and a run that ended without a report (the
    # patch breaks the package's import, so conftest cannot load) lists every test as missing: the harness reads its
    # log the same way. Only a run the time limit cut short leaves nothing to grade.
    no_report = run.run_error if run.result.timed_out else None
    return OfficialGrade(
        resolved=no_report is None and not f2p_failed and not p2p_failed,
        statuses=statuses,
        fail_to_pass_failed=f2p_failed,
        pass_to_pass_failed=p2p_failed,
        run_error=no_report,
        run_note=run.run_error if no_report is None else None,
        command=run.command,
        files=files,
        log_excerpt="" if not (f2p_failed or p2p_failed or run.run_error) else run.log_excerpt()[-1500:],
    )


def run_official_tests(
    sandbox: Sandbox, env: Environment, tree: Path, tests: OfficialTests, *, timeout_seconds: float
) -> OfficialGrade:
    """Run the test_patch's test files in ``tree`` (already prepared) and grade the listed tests."""
    files = [f for f in test_patch_files(tests.test_patch) if f.endswith(".py") and (tree / f).is_file()]
    run = run_pytest(sandbox, env, tree, files, tag="official", timeout_seconds=timeout_seconds)
    return grade(run, tests, files)
