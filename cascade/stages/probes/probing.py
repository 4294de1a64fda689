"""The probe loop: each source's candidates are validated on base, and the kept tests judged on the patch."""

from __future__ import annotations

from collections.abc import Sequence

from cascade.context import ReviewContext
from cascade.execution.runner import TestResult
from cascade.models import Patch
from cascade.probesources.base import ProbeCandidate, ProbeFeedback, ProbeSource
from cascade.stages.probes import judging
from cascade.stages.probes.attribution import TouchedTests
from cascade.stages.probes.changes import test_name, touched_test_names
from cascade.stages.probes.session import Session

MAX_KEPT_TESTS = 5  # per probe file: each kept test runs alone on the patched tree (per-test coverage)


def run_probes(session: Session, ctx: ReviewContext, sources: Sequence[ProbeSource]) -> None:
    """Sources in order, until one yields a reject (all of them when ``exhaustive``); a source that can repair
    gets the base-side feedback."""
    for source in sources:
        why_not = source.available(ctx)
        if why_not:
            session.info(f"probe source '{source.name}' not used: {why_not}")
            continue
        _run_source(session, ctx, source)
        if session.findings.rejects and not session.config.probes.exhaustive:
            return


def _run_source(session: Session, ctx: ReviewContext, source: ProbeSource) -> None:
    feedback: list[ProbeFeedback] = []
    for _ in range(max(1, source.max_rounds)):
        candidates = source.propose(ctx, feedback)
        if not candidates:
            return
        feedback = [_try_candidate(session, ctx.patch, c, source.is_pr_code) for c in candidates]
        stop = session.findings.rejects and not session.config.probes.exhaustive
        if stop or all(f.outcome == "behavioural_fail" for f in feedback):
            return


def _try_candidate(session: Session, patch: Patch, cand: ProbeCandidate, own: bool) -> ProbeFeedback:
    # A probe that is not the patch's own code (the example, the agent's script, a generated test) may do
    # things by itself (sns.load_dataset downloads): what it does on base too is the probe's doing, not the patch's.
    # The PR's own tests are its code: what the tests it touched do counts on both trees (attribution.py).
    placed = {cand.path: cand.content}
    touched = TouchedTests(session.base, placed, {cand.path} if own else set())
    base_run = session.pytest(session.base, [cand.path], place=placed)
    tests = [t for t in base_run.tests if t.test_id.startswith(cand.path)] or base_run.tests
    if own:
        tests = _tests_the_pr_touched(session, patch, cand.path, tests)
    kept = [t for t in tests if t.status == "behavioural_fail"][:MAX_KEPT_TESTS]
    if base_run.run_error or not kept:
        session.attribute(base_run, None, touched)
        feedback, note = judging.not_kept(cand, base_run, tests)
        session.findings.add(note)
        return feedback
    session.info(f"probe {cand.name} ({cand.origin}): {len(kept)} test(s) fail behaviourally on base", base_run)
    for index, test in enumerate(kept):
        run = session.pytest(session.patched, [test.test_id], coverage=True, place=placed)
        session.attribute(base_run, run, touched, judge_base=index == 0)
        policy = session.config.probes
        session.findings.add(judging.probe(cand, test, base_run, run, session.changed, session.patched, policy))
    return ProbeFeedback(candidate=cand, outcome="behavioural_fail", message="kept: fails behaviourally on base")


def _tests_the_pr_touched(session: Session, patch: Patch, path: str, tests: list[TestResult]) -> list[TestResult]:
    """Only the tests whose definition the PR added or changed (plus file-level errors, e.g. collection): an old
    test that already failed on base (for reasons of the environment) is not the PR's probe."""
    changed = {n for f in patch.files if f.path == path for h in f.hunks for n in h.changed_target_lines}
    touched = touched_test_names((session.patched / path).read_text(encoding="utf-8", errors="replace"), changed)
    return [t for t in tests if "::" not in t.test_id or test_name(t.test_id) in touched]
