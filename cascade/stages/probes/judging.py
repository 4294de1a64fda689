"""Judging Stage 2's runs: plain results in, evidence and reject/accept reasons out; nothing here runs anything.

* Regression: a test passing on base that fails on the patch, confirmed by a re-run, is patch-caused. Crash-class →
  reject; assertion-class → grounded evidence only (correct fixes often break a test that pinned the old behaviour).
* Probe: kept only for its tests that fail behaviourally on base and whose patched run executes a changed line. Still
  failing on the patch → reject; passing → evidence, or an accept under ``probe_pass: accept`` for an independent
  source.
* Side effects outside the worktree in any run → reject, with the records as evidence.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from cascade.config import ProbesConfig
from cascade.execution.outcomes import raised_in_installed_package
from cascade.execution.runner import PytestRun, TestResult, executed_lines
from cascade.models import (
    Evidence,
    EvidenceKind,
    NoDetails,
    Outcome,
    ProbeDetails,
    ProbeRunSide,
    RegressionDetails,
    RunNote,
    SideEffectDetails,
    StageResult,
)
from cascade.probesources.base import ProbeCandidate, ProbeFeedback
from cascade.safety import SideEffect

EXCERPT = 1500
MAX_ALLOWED_RECORDS = 50  # allowed side-effect records kept as context (the total is counted)


class Judgement(BaseModel):
    """One finding: its evidence, and the reason it rejects or supports an accept, if it does."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    evidence: Evidence
    reject: str | None = None
    accept: str | None = None


class Findings(BaseModel):
    """Everything Stage 2 found so far, in report order."""

    model_config = ConfigDict(extra="forbid")

    evidence: list[Evidence] = Field(default_factory=list)
    rejects: list[str] = Field(default_factory=list)
    accepts: list[str] = Field(default_factory=list)
    side_effects: list[SideEffect] = Field(default_factory=list)
    tests_ran: int = Field(default=0, description="Tests that got to judge code (passed or failed behaviourally).")
    first_cause: str | None = Field(default=None, description="Why the first run that judged nothing did not.")
    notes: list[str] = Field(default_factory=list, description="How runs were weaker than asked (never silent).")

    def note_run(self, run: PytestRun) -> None:
        """Count what a run judged; remember why the first run that judged nothing did not."""
        judged = sum(t.status in ("pass", "behavioural_fail") for t in run.tests)
        self.tests_ran += judged
        if not judged and self.first_cause is None:
            errors = [t for t in run.tests if t.status == "setup_error"]
            self.first_cause = run.run_error or (
                f"{errors[0].reason} in {errors[0].test_id}" if errors else "no test collected"
            )
        self.notes += [n for n in run.result.notes if n not in self.notes]

    def add(self, judgement: Judgement, reject_first: bool = False) -> None:
        self.evidence.append(judgement.evidence)
        if judgement.reject:
            self.rejects.insert(0 if reject_first else len(self.rejects), judgement.reject)
        if judgement.accept:
            self.accepts.append(judgement.accept)


def short(text: str) -> str:
    return text if len(text) <= EXCERPT else "…" + text[-EXCERPT:]


def info(summary: str, *runs: PytestRun) -> Judgement:
    """An ungrounded note, with the commands and the log tail of the runs it is about."""
    details = RunNote(commands=[r.command for r in runs], log_excerpt=short(runs[-1].log_excerpt())) if runs else None
    evidence = Evidence(kind=EvidenceKind.INFO, grounded=False, summary=summary, details=details or NoDetails())
    return Judgement(evidence=evidence)


# -- regression ------------------------------------------------------------------------------------------------------


def broken_tests(base_run: PytestRun, patched_run: PytestRun) -> list[TestResult]:
    """Tests passing on base that fail behaviourally on the patch, plus collection crashes of files that collected."""
    base = base_run.by_id()
    broken = [t for t in patched_run.tests if t.status == "behavioural_fail" and passed(base.get(t.test_id))]
    for t in patched_run.tests:
        if is_collection_error(t) and t.test_id not in base and collected_and_passed(base_run.tests, t.test_id):
            broken.append(t.model_copy(update={"status": "behavioural_fail", "failure_class": "crash"}))
    return broken


def confirmed(suspects: list[TestResult], base_again: PytestRun, patched_again: PytestRun) -> list[TestResult]:
    """The suspects whose re-run passes on base and fails the same way on the patch again."""
    base_ids, patched_ids = base_again.by_id(), patched_again.by_id()
    result: list[TestResult] = []
    for test in suspects:
        again = patched_ids.get(test.test_id)
        if test.reason == "collection error":
            if is_collection_error(again) and collected_and_passed(base_again.tests, test.test_id):
                result.append(test)
        elif passed(base_ids.get(test.test_id)) and again is not None and again.status == test.status:
            result.append(again)
    return result


def regression(
    test: TestResult, base_run: PytestRun, patched_run: PytestRun, selected_by: str, chunk: int
) -> Judgement:
    """A confirmed patch-caused failure; ``selected_by`` and ``chunk`` say why the test was run."""
    crash = test.failure_class == "crash"
    what = test.exception or test.reason
    if crash:
        summary = f"nearby test {test.test_id} passes on base but fails on the patch with {what} (crash-class)"
    else:
        summary = (
            f"nearby test {test.test_id} passes on base but fails on the patch with an assertion "
            "(assertion-class: evidence for review, not a reject)"
        )
    evidence = Evidence(
        kind=EvidenceKind.REGRESSION,
        grounded=True,
        summary=summary,
        details=RegressionDetails(
            test_id=test.test_id,
            failure_class="crash" if crash else "assertion",
            exception=test.exception,
            expected_vs_got=test.message,
            log_excerpt=short(test.excerpt),
            confirmed_by_rerun=True,
            source="regression",
            verdict="reject" if crash else "evidence",
            selected_by=selected_by,
            chunk=chunk,
        ),
        commands=[f"cd <base> && {base_run.command}", f"cd <patched> && {patched_run.command}"],
    )
    return Judgement(evidence=evidence, reject=summary if crash else None)


def is_collection_error(test: TestResult | None) -> bool:
    return test is not None and test.status == "setup_error" and test.reason == "collection error"


def collected_and_passed(tests: list[TestResult], file: str) -> bool:
    """The file collected (no collection error of its own) and at least one of its tests passed."""
    mine = [t for t in tests if t.test_id == file or t.test_id.startswith(file + "::")]
    return not any(is_collection_error(t) for t in mine) and any(t.status == "pass" for t in mine)


def passed(test: TestResult | None) -> bool:
    return test is not None and test.status == "pass"


# -- probes ----------------------------------------------------------------------------------------------------------


def not_kept(cand: ProbeCandidate, run: PytestRun, tests: list[TestResult]) -> tuple[ProbeFeedback, Judgement]:
    """Why a candidate is not a probe (setup error, or it passes on base): the generator's feedback and a note."""
    errors = [t for t in tests if t.status == "setup_error"]
    if run.run_error or errors or not tests:
        detail = run.run_error or (errors[0].reason if errors else "no test collected")
        excerpt = errors[0].excerpt if errors else run.log_excerpt()
        message = f"setup error on base ({detail}): {short(excerpt)}"
        outcome = "setup_error"
    else:
        message, outcome = "passed on base: does not reproduce the issue", "pass"
    note = info(f"probe {cand.name} ({cand.origin}) not kept: {message.splitlines()[0]}", run)
    return ProbeFeedback(candidate=cand, outcome=outcome, message=message), note


def same_failure_in_installed_package(base: TestResult, patched: TestResult) -> str | None:
    """Where both failures were raised, when they are the same exception with the same message at the same place
    inside an installed package (an environment newer or older than the project: dask 2022 under xarray 0.16)."""
    if base.status != "behavioural_fail" or patched.status != "behavioural_fail":
        return None
    if (base.exception, base.message) != (patched.exception, patched.message):
        return None
    where = raised_in_installed_package(base.excerpt)
    return where if where is not None and where == raised_in_installed_package(patched.excerpt) else None


def probe(
    cand: ProbeCandidate,
    base_test: TestResult,
    base_run: PytestRun,
    run: PytestRun,
    changed: dict[Path, set[int]],
    patched: Path,
    policy: ProbesConfig,
) -> Judgement:
    """A kept probe test's run on the patched tree (``run``, with coverage of the ``changed`` lines)."""
    relative = {str(p.relative_to(patched)): lines for p, lines in changed.items()}
    hit = {p: sorted(executed_lines(run, p) & lines) for p, lines in relative.items()}
    rel_hit = {p: lines for p, lines in hit.items() if lines}
    hit = rel_hit
    result = run.by_id().get(base_test.test_id)
    label = f"probe {base_test.test_id} ({cand.origin})"
    if not hit and policy.require_coverage_of_change:
        status = result.status if result else run.run_error
        if not run.coverage:  # not measured is not "ran none of it"
            return info(f"{label} discarded: its run on the patch wrote no coverage data (there: {status})", run)
        return info(f"{label} discarded: its run on the patch executes no changed line (there: {status})", run)
    if result is None or result.status in ("setup_error", "skipped") or run.run_error:
        why = run.run_error or (result.reason if result else "no result")
        return info(f"{label} inconclusive on the patch: {why}", run)
    where = same_failure_in_installed_package(base_test, result)
    if where is not None:
        return info(f"{label} inconclusive: it fails the same way on both trees, inside an installed package "
                    f"({where}): the installed versions decide it, not the patch", run)  # fmt: skip
    details = ProbeDetails(
        probe=cand.name,
        origin=cand.origin,
        test_id=base_test.test_id,
        base=ProbeRunSide(status=base_test.status, message=base_test.message, excerpt=short(base_test.excerpt)),
        patched=ProbeRunSide(status=result.status, message=result.message, excerpt=short(result.excerpt)),
        executed_changed_lines=rel_hit,
        probe_file=cand.content if len(cand.content) < 20_000 else cand.content[:20_000],
        source=cand.origin,
        verdict="reject" if result.status == "behavioural_fail" else "evidence",
    )
    commands = [f"cd <base> && {base_run.command}", f"cd <patched> && {run.command}"]
    reject = accept = None
    if result.status == "behavioural_fail":
        first = result.message.splitlines()[0] if result.message else result.reason
        summary = reject = f"{label} fails on base and still fails on the patch: {first}"
    else:
        summary = f"{label} fails on base and passes on the patch"
        if policy.probe_pass == "accept" and cand.may_accept:
            accept = summary
    evidence = Evidence(kind=EvidenceKind.PROBE, grounded=True, summary=summary, details=details, commands=commands)
    return Judgement(evidence=evidence, reject=reject, accept=accept)


# -- side effects and the decision -----------------------------------------------------------------------------------


def side_effects(effects: list[SideEffect]) -> Judgement | None:
    """The oracle's records of every run: harmful ones reject (allowed ones ride along as context); allowed ones
    alone are ungrounded context, with their total counted (only a sample is kept)."""
    harmful = [e for e in effects if not e.benign]
    allowed = [e for e in effects if e.benign][:MAX_ALLOWED_RECORDS]
    if not harmful and not allowed:
        return None
    details = SideEffectDetails(side_effects=harmful + allowed, allowed_total=sum(e.benign for e in effects))
    if not harmful:
        summary = (
            f"{details.allowed_total} allowed record(s) of the runs (allow-list entries, subprocesses, own listeners)"
        )
        return Judgement(evidence=Evidence(kind=EvidenceKind.SIDE_EFFECT, grounded=False, summary=summary,
                                           details=details))  # fmt: skip
    summary = f"untrusted code had {len(harmful)} side effect(s) beyond what a test run may touch"
    evidence = Evidence(kind=EvidenceKind.SIDE_EFFECT, grounded=True, summary=summary, details=details)
    return Judgement(evidence=evidence, reject=summary)


def decide(stage: str, findings: Findings, seconds: float) -> StageResult:
    """Reject, accept, or — when no test got to judge any code — inconclusive (never a pass that ran nothing)."""
    if findings.rejects:
        outcome, reason = Outcome.REJECT, findings.rejects[0]
    elif findings.accepts:
        outcome, reason = Outcome.ACCEPT, findings.accepts[0]
    elif not findings.tests_ran:
        outcome = Outcome.INCONCLUSIVE
        reason = f"no test could run: {findings.first_cause or 'no existing test near the change and no probe'}"
    else:
        outcome = Outcome.PASS
        probes = sum(e.kind == EvidenceKind.PROBE for e in findings.evidence)
        reason = f"no patch-caused failure found ({probes} probe result(s))"
    result = StageResult(stage=stage, outcome=outcome, reason=reason, evidence=findings.evidence,
                         limitations=list(findings.notes))  # fmt: skip
    result.cost.seconds = round(seconds, 3)
    return result
