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
from cascade.stages.probes.session import Session, placed_many

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
    """Run ``targets`` on base (with the PR's own version of any test file it modifies) and on the patch."""
    modified = {f.path for f in patch.files if f.kind == FileKind.TEST and not f.is_removed}
    files = {t.split("::", 1)[0] for t in targets} & modified
    pr_versions = {p: (session.patched / p).read_text(encoding="utf-8", errors="replace") for p in sorted(files)}
    # What the project's own tests do on base too (astropy makes ~/.astropy on import) is not the patch's doing; with
    # a PR version of a test file on both sides, everything counts (the PR's test code is untrusted on both).
    project_tests = not pr_versions
    count = not project_tests
    with placed_many(session.base, pr_versions):  # both sides run the same tests
        base_run = session.pytest(session.base, targets, whole_files=True, timeout=timeout, count_effects=count)
        patched_run = session.pytest(session.patched, targets, whole_files=True, timeout=timeout, count_effects=count)
        if project_tests:
            _note_added_effects(session, base_run, patched_run)
        if base_run.run_error or patched_run.run_error:
            why = base_run.run_error or patched_run.run_error
            session.info(f"regression check inconclusive on {', '.join(targets)}: {why}", base_run, patched_run)
            return
        suspects = judging.broken_tests(base_run, patched_run)
        confirmed = _confirm(session, suspects, count) if suspects else []
    evidence = session.findings.evidence
    known = {e.details.test_id for e in evidence if isinstance(e.details, RegressionDetails)}
    confirmed = [t for t in confirmed if t.test_id not in known]  # a file of a later chunk may re-run a test
    for test in confirmed:
        selected_by = next((r for t, r in reasons.items() if test.test_id.startswith(t)), "name_or_import")
        session.findings.add(judging.regression(test, base_run, patched_run, selected_by, index))
    if not confirmed:
        passed = sum(1 for t in base_run.tests if t.status == "pass")
        where = ", ".join(targets)
        session.info(f"regression: {passed} nearby test(s) passing on base still pass on the patch ({where})")


def _confirm(session: Session, suspects: list[TestResult], count_effects: bool) -> list[TestResult]:
    """Re-run each suspect once on both trees: it must pass on base and fail the same way on the patch again."""
    ids = [t.test_id for t in suspects]
    base_again = session.pytest(session.base, ids, count_effects=count_effects)
    patched_again = session.pytest(session.patched, ids, count_effects=count_effects)
    if not count_effects:
        _note_added_effects(session, base_again, patched_again)
    return judging.confirmed(suspects, base_again, patched_again)


def _note_added_effects(session: Session, base_run: PytestRun, patched_run: PytestRun) -> None:
    """Side effects of the patched run that the base run of the same tests did not have: the patch's doing."""
    baseline = {(e.kind, e.target) for e in base_run.result.side_effects}
    added = [e for e in patched_run.result.side_effects if (e.kind, e.target) not in baseline]
    session.note_side_effects(added, session.patched)
