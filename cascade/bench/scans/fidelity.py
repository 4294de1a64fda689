"""Environment fidelity: does a task's own FAIL_TO_PASS fail here on base + test_patch and pass with the gold patch?

For every Lite task of a repository that is here, the official FAIL_TO_PASS tests run in the sandbox (bwrap) in the
environment of the SWE-bench table (`cascade/execution/repo_specs.py`), first on base + test_patch (they should fail,
behaviourally), then with the gold patch as well (they should pass). ``fidelity`` runs the node ids alone;
``fidelity-files`` the test_patch's whole test files, as the SWE-bench harness does (order-dependent tests then see
the tests that run before them). Agreement per repository says where Stage 2's runs can be trusted to reproduce the
harness. A repository outside the table runs in cascade's own interpreter (say, a data set of your own); tasks of
repositories not here are rows too ("not here")."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field

from cascade.bench.data import TaskRow
from cascade.bench.repos import RepoLocation
from cascade.bench.scans import ScanInputs, in_order

if TYPE_CHECKING:
    from cascade.execution.envs import Environment
    from cascade.execution.outcomes import TestResult

Scope = Literal["ids", "files"]
BACKEND = "bwrap"
TIMEOUT_SECONDS = 900


class F2POutcome(BaseModel):
    model_config = ConfigDict(extra="forbid")

    status: str  # pass, behavioural_fail, setup_error, … (cascade/execution/outcomes.py) or "missing"
    exception: str = ""
    message: str = ""


class F2PTest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    base: F2POutcome
    gold: F2POutcome


class FidelityRow(BaseModel):
    model_config = ConfigDict(extra="forbid")

    instance_id: str
    repo: str
    version: str | None
    scope: Scope
    status: Literal["ran", "no_env", "not_here", "error"]
    reason: str = ""
    python: str = ""
    tests: dict[str, F2PTest] = Field(default_factory=dict)
    missing_names: list[str] = Field(default_factory=list)
    run_errors: list[str] = Field(default_factory=list)
    agree: bool = False  # every F2P test fails on base and passes with gold, and each was found
    behavioural_on_base: bool = False
    seconds: float = 0.0
    log_excerpt: str = ""  # the gold run's log end, where it did not pass


class FidelityScan:
    name = "fidelity"
    title = "Environment fidelity: FAIL_TO_PASS fails on base + test_patch, passes with gold (node ids alone)"
    needs_data = True
    row = FidelityRow
    scope: Scope = "ids"

    def rows(self, inputs: ScanInputs) -> Iterator[FidelityRow]:
        tasks = sorted(inputs.dev.tasks("lite").values(), key=lambda t: t.instance_id)
        tasks = tasks[: inputs.limit] if inputs.limit else tasks
        work: list[tuple[TaskRow, RepoLocation, Scope, Path]] = [
            (task, inputs.repos.resolve(task.repo), self.scope, inputs.scratch) for task in tasks
        ]
        yield from in_order(_measure, work, inputs.jobs)

    def summary(self, rows: list[FidelityRow]) -> list[str]:
        lines = [
            "| repo | rows | ran | agree | F2P fail behaviourally on base | no env | error |",
            "|---|---|---|---|---|---|---|",
        ]
        per: dict[str, Counter[str]] = defaultdict(Counter)
        for r in rows:
            if r.status == "not_here":
                continue
            c = per[r.repo]
            c["rows"] += 1
            c[r.status] += 1
            c["agree"] += r.agree
            c["behavioural"] += r.behavioural_on_base
        for repo, c in sorted(per.items()):
            lines.append(f"| {repo} | {c['rows']} | {c['ran']} | {c['agree']} | {c['behavioural']} | {c['no_env']} | "
                         f"{c['error']} |")  # fmt: skip
        disagree = [r for r in rows if r.status == "ran" and not r.agree]
        lines += ["", "Disagreements (F2P outcomes per side, as measured):", ""]
        lines += [f"- {r.instance_id}: {_outcome_counts(r)}" for r in disagree] or ["- none"]
        lines += ["", *sorted({f"No environment: {r.reason}" for r in rows if r.status == "no_env"})]
        lines += [f"Error: {r.instance_id}: {r.reason}" for r in rows if r.status == "error"]
        away = Counter(r.repo for r in rows if r.status == "not_here")
        if away:
            lines += ["", "Not here (tasks not run): " + ", ".join(f"{repo} {n}" for repo, n in sorted(away.items()))]
        return lines


class FidelityFilesScan(FidelityScan):
    name = "fidelity-files"
    title = "Environment fidelity: FAIL_TO_PASS fails on base + test_patch, passes with gold (the whole test files)"
    scope: Scope = "files"


def _row(task: TaskRow, scope: Scope, **fields: object) -> FidelityRow:
    return FidelityRow.model_validate(
        {"instance_id": task.instance_id, "repo": task.repo, "version": task.version, "scope": scope, **fields}
    )


def _measure(item: tuple[TaskRow, RepoLocation, Scope, Path]) -> FidelityRow:
    task, resolved, scope, scratch = item
    if resolved.path is None:
        return _row(task, scope, status="not_here", reason=resolved.note)
    return fidelity_of(task, Path(resolved.path), scope, scratch)


def fidelity_of(task: TaskRow, mirror: Path, scope: Scope, scratch: Path) -> FidelityRow:
    from cascade.errors import CascadeError
    from cascade.execution.envs import EnvironmentUnavailable, current_environment, ensure_environment
    from cascade.execution.repo_specs import spec_for_repo

    started = time.perf_counter()
    spec = spec_for_repo(task.repo, task.version)
    try:
        with _Checkout(mirror, task.base_commit, scratch) as tree:
            try:
                env = ensure_environment(spec, project_tree=tree) if spec else current_environment()
            except EnvironmentUnavailable as exc:
                return _row(task, scope, status="no_env", reason=str(exc))
            row = _ran(task, scope, tree, env)
    except CascadeError as exc:
        return _row(task, scope, status="error", reason=f"{type(exc).__name__}: {exc}")
    return row.model_copy(update={"seconds": round(time.perf_counter() - started, 1)})


def _ran(task: TaskRow, scope: Scope, tree: Path, env: Environment) -> FidelityRow:
    from cascade.config import parse_config
    from cascade.execution.official import node_ids
    from cascade.execution.runner import run_pytest
    from cascade.patch import parse_patch
    from cascade.sandbox.select import get_sandbox
    from cascade.workspace import apply_patch

    official = task.official_tests()
    if official is None:
        return _row(task, scope, status="error", reason="the task row has no test_patch or FAIL_TO_PASS")
    sandbox = get_sandbox(parse_config({"sandbox": {"backend": BACKEND}}).sandbox)
    apply_patch(tree, task.test_patch)
    files = [f.path for f in parse_patch(task.test_patch).files if f.path.endswith(".py")]
    ids, missing = node_ids(official.fail_to_pass, files, tree)
    targets = sorted({i.split("::")[0] for i in ids}) if scope == "files" else ids
    base = run_pytest(sandbox, env, tree, targets, tag="base", timeout_seconds=TIMEOUT_SECONDS)
    apply_patch(tree, task.patch)
    gold = run_pytest(sandbox, env, tree, targets, tag="gold", timeout_seconds=TIMEOUT_SECONDS)
    base_by, gold_by = base.by_id(), gold.by_id()
    tests = {i: F2PTest(base=_outcome(base_by.get(i)), gold=_outcome(gold_by.get(i))) for i in ids}
    fails_on_base = all(t.base.status in ("behavioural_fail", "setup_error") for t in tests.values())
    passes_with_gold = all(t.gold.status == "pass" for t in tests.values())
    return _row(task, scope, status="ran", python=env.python_version, tests=tests, missing_names=missing,
                run_errors=[e for e in (base.run_error, gold.run_error) if e],
                agree=bool(ids) and not missing and fails_on_base and passes_with_gold,
                behavioural_on_base=all(t.base.status == "behavioural_fail" for t in tests.values()),
                log_excerpt="" if passes_with_gold else gold.log_excerpt()[-800:])  # fmt: skip


def _outcome(result: TestResult | None) -> F2POutcome:
    """A test's status with enough of its failure to tell an environment problem from a real one."""
    if result is None:
        return F2POutcome(status="missing")
    if result.status == "pass":
        return F2POutcome(status="pass")
    return F2POutcome(status=result.status, exception=result.exception or "", message=result.message[:200])


def _outcome_counts(row: FidelityRow) -> str:
    """``base: 4 behavioural_fail (ConnectionError); gold: …`` — enough to tell an environment problem at a glance."""
    sides = []
    for side in ("base", "gold"):
        counts: Counter[str] = Counter()
        for test in row.tests.values():
            outcome: F2POutcome = getattr(test, side)
            counts[outcome.status + (f" ({outcome.exception})" if outcome.exception else "")] += 1
        sides.append(f"{side}: " + ", ".join(f"{n} {what}" for what, n in sorted(counts.items())))
    errors = "; run errors: " + ", ".join(row.run_errors) if row.run_errors else ""
    return "; ".join(sides) + errors


class _Checkout:
    """A detached worktree of the mirror at one commit, removed afterwards."""

    def __init__(self, mirror: Path, commit: str, scratch: Path) -> None:
        self.mirror, self.commit = mirror, commit
        self.dir = Path(tempfile.mkdtemp(prefix="fidelity-", dir=scratch)) / "tree"

    def __enter__(self) -> Path:
        from cascade.git import git

        git(self.mirror, "worktree", "add", "--detach", "--force", str(self.dir), self.commit)
        return self.dir

    def __exit__(self, *exc: object) -> None:
        from cascade.git import git

        git(self.mirror, "worktree", "remove", "--force", str(self.dir), check=False)
        shutil.rmtree(self.dir.parent, ignore_errors=True)
