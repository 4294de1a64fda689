"""Official tests — the task's own FAIL_TO_PASS and PASS_TO_PASS tests, graded as the SWE-bench harness grades.

Not a gate stage, and no input of the gate: a patch under review has no official tests. It is the benchmark's
upper-bound diagnostic and a way to grade SWE-bench predictions on a laptop without the harness's Docker images
(`cascade bench run --arm official-tests`, which builds this stage with each case's own tests). In a worktree of its
own: the patch, then the test_patch's files reset to base and the test_patch applied; those test files run in the
sandbox (`cascade/execution/official.py`), in the repository's environment from the SWE-bench table
(`cascade/execution/envs.py`) or, for other repositories, the configured one.

Resolved → accept; a listed test that fails, errors or is absent → reject, as the harness counts it (the evidence
says which, and whether it failed behaviourally or in setup; a run that ended without a report lists them all as
missing); a run cut short by the time limit, or listed tests that fail only because the sandbox has no network (the
harness's runs have one) → uncertain.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from cascade.context import ReviewContext
from cascade.errors import CascadeError
from cascade.execution.envs import Environment, ensure_environment
from cascade.execution.extensions import ensure_extensions, install_products
from cascade.execution.official import OfficialGrade, prepare_official_tree, run_official_tests
from cascade.execution.repo_specs import spec_for_repo
from cascade.git import git
from cascade.models import Evidence, EvidenceKind, OfficialTests, OfficialTestsDetails, Outcome, StageResult
from cascade.sandbox.base import Sandbox
from cascade.stages.probes.environment import make_environment, make_sandbox
from cascade.workspace import apply_patch

LISTED = 8  # failing tests named in the reason; the evidence lists them all


class OfficialTestsStage:
    name = "official_tests"
    needs_sandbox = True
    title = "Official tests — the task's FAIL_TO_PASS and PASS_TO_PASS, graded as SWE-bench does"

    def __init__(self, tests: OfficialTests | None = None, sandbox: Sandbox | None = None) -> None:
        self._tests = tests  # the case's; None: nothing to grade (the stage says so)
        self._sandbox = sandbox  # None: the configured backend

    def run(self, ctx: ReviewContext) -> StageResult:
        tests = self._tests
        if tests is None:
            return StageResult.skipped(self.name, "no official tests given (a task row's test_patch and test lists)")
        if not ctx.patch.files:
            return _result(Outcome.REJECT, "empty patch: the harness does not resolve an empty patch", grounded=True)
        if ctx.workspace is None:
            return StageResult.skipped(self.name, ctx.unavailable_reason() or "repository unavailable")
        try:
            with _tree(ctx.workspace.repo, ctx.workspace.base_commit) as tree:
                apply_patch(tree, ctx.patch.text)
                prepare_official_tree(tree, ctx.workspace.base_commit, tests.test_patch)
                env = _environment(ctx, tests, Path(ctx.workspace.base_dir), tree)
                grade = run_official_tests(
                    self._sandbox or make_sandbox(ctx.config),
                    env,
                    tree,
                    tests,
                    timeout_seconds=ctx.config.sandbox.timeout_seconds,
                )
        except CascadeError as exc:
            return _result(Outcome.UNCERTAIN, f"official tests could not run: {exc}")
        return _decide(grade, env, tests)


@contextmanager
def _tree(repo: Path, commit: str) -> Iterator[Path]:
    """A worktree of its own, so the test_patch never reaches the trees other stages read."""
    tmp = Path(tempfile.mkdtemp(prefix="cascade-official-"))
    tree = tmp / f"official-{tmp.name}"
    git(repo, "worktree", "add", "--detach", "--force", str(tree), commit)
    try:
        yield tree
    finally:
        git(repo, "worktree", "remove", "--force", str(tree), check=False)
        shutil.rmtree(tmp, ignore_errors=True)


def _environment(ctx: ReviewContext, tests: OfficialTests, base: Path, tree: Path) -> Environment:
    """The repository's SWE-bench environment (or the configured one), with its compiled extensions in ``tree``
    when its tests need them (astropy: built once per environment and extension sources)."""
    spec = spec_for_repo(tests.repo, tests.version)
    if spec is None:
        return make_environment(ctx.config, ctx.request.repo, base)
    cfg = ctx.config.env
    cache = Path(cfg.cache_dir).expanduser() if cfg.cache_dir else None
    env = ensure_environment(spec, project_tree=base, cache_dir=cache, timeout=cfg.setup_timeout_seconds)
    if spec.build_extensions:
        changed = [f.path for f in ctx.patch.files]
        builds = cache / "builds" if cache else None
        build = ensure_extensions(env, base, changed, cache_dir=builds, timeout=max(cfg.setup_timeout_seconds, 1800))
        install_products(build, tree)
    return env


def _decide(grade: OfficialGrade, env: Environment, tests: OfficialTests) -> StageResult:
    counts = f"{len(tests.fail_to_pass)} FAIL_TO_PASS, {len(tests.pass_to_pass)} PASS_TO_PASS"
    skipped = sum(s == "skipped" for s in grade.statuses.values())
    evidence = Evidence(
        kind=EvidenceKind.OFFICIAL_TESTS,
        grounded=grade.run_error is None,
        summary=f"official tests ({counts}) in {env.description}",
        details=OfficialTestsDetails(
            resolved=grade.resolved,
            fail_to_pass_failed={t: grade.statuses[t] for t in grade.fail_to_pass_failed},
            pass_to_pass_failed={t: grade.statuses[t] for t in grade.pass_to_pass_failed},
            skipped=skipped,
            files=grade.files,
            run_error=grade.run_error,
            run_note=grade.run_note,
            log_excerpt=grade.log_excerpt,
        ),
        commands=[grade.command],
    )
    if grade.run_error is not None:
        return _result(Outcome.UNCERTAIN, f"the official tests gave no report: {grade.run_error}", [evidence])
    if grade.only_for_want_of_network:
        reason = f"not gradable here: {len(grade.failed)} listed test(s) need the network, which the sandbox lacks"
        return _result(Outcome.UNCERTAIN, reason, [evidence])
    if grade.resolved:
        note = f" ({skipped} skipped)" if skipped else ""
        return _result(Outcome.ACCEPT, f"resolved: all {counts} tests pass{note}", [evidence], grounded=True)
    failed = [*grade.fail_to_pass_failed, *grade.pass_to_pass_failed]
    named = ", ".join(f"{t} ({grade.statuses[t]})" for t in failed[:LISTED])
    more = f" and {len(failed) - LISTED} more" if len(failed) > LISTED else ""
    reason = (
        f"not resolved: {len(grade.fail_to_pass_failed)}/{len(tests.fail_to_pass)} FAIL_TO_PASS and "
        f"{len(grade.pass_to_pass_failed)}/{len(tests.pass_to_pass)} PASS_TO_PASS tests fail: {named}{more}"
        + (f" (the run: {grade.run_note})" if grade.run_note else "")
    )
    return _result(Outcome.REJECT, reason, [evidence], grounded=True)


def _result(
    outcome: Outcome, reason: str, evidence: list[Evidence] | None = None, grounded: bool = False
) -> StageResult:
    if evidence is None:
        kind = EvidenceKind.UNAVAILABLE if outcome == Outcome.SKIPPED else EvidenceKind.OFFICIAL_TESTS
        evidence = [Evidence(kind=kind, grounded=grounded, summary=reason)]
    return StageResult(stage=OfficialTestsStage.name, outcome=outcome, reason=reason, evidence=evidence)
