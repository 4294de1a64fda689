"""The regression check: existing tests run on both trees; a confirmed patch-caused failure is evidence.

The nearby files (the first chunk of the selection in `cascade/execution/test_selection.py`) always run; the wider
selection (importers, tests named after changed functions, one-hop importers) follows in chunks while
``regression_budget_seconds`` lasts.
"""

from __future__ import annotations

import time

from cascade.execution.runner import PytestRun, TestResult
from cascade.execution.test_selection import chunked, regression_plan
from cascade.models import FileKind, Patch, RegressionDetails
from cascade.stages.probes import judging
from cascade.stages.probes.attribution import TouchedTests
from cascade.stages.probes.hooks import without_pr_hooks
from cascade.stages.probes.session import Session

MIN_CHUNK_SECONDS = 10  # a wider regression chunk is started only with this much of its budget left


def check_regressions(session: Session, patch: Patch, max_files: int) -> None:
    """The nearby files first (as Stage 2 always did), then the wider selection in chunks under the budget."""
    plan = regression_plan(patch, session.base, session.patched, max_files)
    files, wider = plan.nearby, plan.wider
    if not files:
        session.info("regression: no existing test file near the change")
        return
    reasons = {s.target: s.reason for s in wider}
    cfg = session.config.probes
    _run_chunk(session, patch, files, 0, None, reasons)
    started = time.perf_counter()
    chunks = chunked(wider)
    for index, chunk in enumerate(chunks, 1):
        if session.findings.rejects and not cfg.exhaustive:
            return
        remaining = cfg.regression_budget_seconds - (time.perf_counter() - started)
        if remaining < MIN_CHUNK_SECONDS:
            left = sum(len(c) for c in chunks[index - 1 :])
            session.info(f"regression: budget of {cfg.regression_budget_seconds:g} s spent; {left} target(s) not run")
            return
        _run_chunk(session, patch, chunk, index, remaining / 2, reasons)


def _run_chunk(
    session: Session, patch: Patch, targets: list[str], index: int, timeout: float | None, reasons: dict[str, str]
) -> None:
    """Run ``targets`` on base (with the PR's own version of any test file it modifies, so both sides run the same
    tests) and, when the base run gave results, on the patch."""
    modified = {f.path for f in patch.files if f.kind == FileKind.TEST and not f.is_removed}
    files = {t.split("::", 1)[0] for t in targets} & modified
    pr_versions = {p: (session.patched / p).read_text(encoding="utf-8", errors="replace") for p in sorted(files)}
    touched = TouchedTests(session.base, pr_versions, set(pr_versions))
    where = ", ".join(targets)
    base_run = session.pytest(session.base, targets, whole_files=True, timeout=timeout, place=pr_versions)
    if base_run.run_error:  # nothing to compare against: the patched run would cost the same and say nothing
        session.attribute(base_run, None, touched)
        session.info(f"regression check inconclusive on {where}: the base run gave no result ({base_run.run_error}); "
                     "not run on the patch", base_run)  # fmt: skip
        return
    patched_run = session.pytest(session.patched, targets, whole_files=True, timeout=timeout)
    session.attribute(base_run, patched_run, touched)
    if patched_run.run_error:
        session.info(f"regression check inconclusive on {where}: {patched_run.run_error}", base_run, patched_run)
        return
    suspects = judging.broken_tests(base_run, patched_run)
    confirmed = _confirm(session, suspects, pr_versions, touched) if suspects else []
    if session.pr_hooks and not any(t.failure_class == "crash" for t in confirmed):
        confirmed += _without_pr_hooks(session, targets, base_run, pr_versions, touched, timeout)
    evidence = session.findings.evidence
    known = {e.details.test_id for e in evidence if isinstance(e.details, RegressionDetails)}
    confirmed = [t for t in confirmed if t.test_id not in known]  # a file of a later chunk may re-run a test
    for test in confirmed:
        selected_by = next((r for t, r in reasons.items() if test.test_id.startswith(t)), "name_or_import")
        session.findings.add(judging.regression(test, base_run, patched_run, selected_by, index))
    if not confirmed:
        passed = sum(1 for t in base_run.tests if t.status == "pass")
        session.info(f"regression: {passed} nearby test(s) passing on base still pass on the patch ({where})")


def _confirm(
    session: Session,
    suspects: list[TestResult],
    pr_versions: dict[str, str],
    touched: TouchedTests,
    patched_place: dict[str, str] | None = None,
) -> list[TestResult]:
    """Re-run each suspect once on both trees: it must pass on base and fail the same way on the patch again."""
    ids = [t.test_id for t in suspects]
    base_again = session.pytest(session.base, ids, place=pr_versions)
    patched_again = session.pytest(session.patched, ids, place=patched_place)
    session.attribute(base_again, patched_again, touched)
    return judging.confirmed(suspects, base_again, patched_again)


def _without_pr_hooks(
    session: Session,
    targets: list[str],
    base_run: PytestRun,
    pr_versions: dict[str, str],
    touched: TouchedTests,
    timeout: float | None,
) -> list[TestResult]:
    """The patched run repeated with the PR's outcome-changing hooks removed (`hooks.py`): a crash-class regression
    only this run shows was hidden by them."""
    placed = without_pr_hooks(session.pr_hooks, session.base)
    rerun = session.pytest(session.patched, targets, whole_files=True, timeout=timeout, place=placed)
    session.attribute(base_run, rerun, touched, judge_base=False)
    hooks = "; ".join(h.describe() for h in session.pr_hooks)
    if rerun.run_error or not any(t.status == "pass" for t in rerun.tests):
        why = rerun.run_error or "no test passed without them (the tests need the PR's conftest)"
        session.info(f"regression without the PR's hooks ({hooks}) not possible on {', '.join(targets)}: {why}", rerun)
        return []
    crashes = [t for t in judging.broken_tests(base_run, rerun) if t.failure_class == "crash"]
    found = _confirm(session, crashes, pr_versions, touched, patched_place=placed) if crashes else []
    return [t.model_copy(update={"message": f"{t.message} [shown only without the PR's hooks: {hooks}]"})
            for t in found]  # fmt: skip
