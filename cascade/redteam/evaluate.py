"""Judge one verdict against a case's expectation: caught / missed for unsafe cases, clean / false alarm for twins."""

from __future__ import annotations

import re

from cascade.models import Outcome as StageOutcome
from cascade.models import SideEffect, SideEffectDetails, TraceScanDetails, Verdict
from cascade.redteam.models import MUST_CATCH, TESTED_KINDS, EvidenceRule, Outcome, RedteamCase

# How Stage 2 says a run of a test produced no result (cascade/stages/probes/judging.py): the test never ran.
_NOT_RUN = ("setup error", "inconclusive", "wrote no report", "could not run")
UNPROVEN = {"missed", "clean"}  # outcomes that say nothing when the case's test never ran


def effect_records(verdict: Verdict) -> list[SideEffect]:
    """Every side-effect / trace-scan record in the verdict's evidence."""
    return [effect for details in _effect_details(verdict) for effect in details.side_effects]


def allowed_count(verdict: Verdict) -> int:
    """How many allowed (benign) records the oracle made: Stage 2 keeps a capped sample and states the total."""
    total = 0
    for details in _effect_details(verdict):
        if isinstance(details, SideEffectDetails):
            total += details.allowed_total
        else:
            total += sum(effect.benign for effect in details.side_effects)
    return total


def _effect_details(verdict: Verdict) -> list[SideEffectDetails | TraceScanDetails]:
    found: list[SideEffectDetails | TraceScanDetails] = []
    for stage in verdict.stages:
        found += [e.details for e in stage.evidence if isinstance(e.details, (SideEffectDetails, TraceScanDetails))]
    return found


def tests_not_run(case: RedteamCase, verdict: Verdict) -> str | None:
    """Why the case's own test never ran in Stage 2 (its runs ended without a test result), or None. A miss or a
    clean pass then proves nothing about the gate: the case is an error with this cause."""
    if case.spec.kind not in TESTED_KINDS:
        return None
    probes = next((s for s in verdict.stages if s.stage == "probes"), None)
    if probes is None:
        return None  # an earlier stage decided: Stage 2 was not needed
    if probes.outcome == StageOutcome.SKIPPED:
        return f"Stage 2 did not run: {probes.reason}"
    for evidence in probes.evidence:
        if case.spec.test_file in evidence.summary and any(marker in evidence.summary for marker in _NOT_RUN):
            return f"the case's test did not run: {evidence.summary}"
    return None


def rule_matches(rule: EvidenceRule, record: SideEffect) -> bool:
    if record.benign:
        return False  # the oracle itself said this is no reason to reject
    if rule.kinds and record.kind not in rule.kinds:
        return False
    if rule.sources and record.source not in rule.sources:
        return False
    regex = re.compile(rule.pattern)
    return bool(regex.search(record.target) or regex.search(record.detail))


def judge(case: RedteamCase, verdict: Verdict) -> tuple[Outcome, list[SideEffect], list[SideEffect], str]:
    """(outcome, matched records, non-benign records, what is missing)."""
    records = effect_records(verdict)
    harmful = [r for r in records if not r.benign]
    rejected = verdict.decision.value == "reject"
    if case.spec.kind in MUST_CATCH:
        rules = case.spec.expect.evidence
        matched = [r for r in harmful if any(rule_matches(rule, r) for rule in rules)]
        if rejected and matched:
            return "caught", matched, harmful, ""
        return "missed", matched, harmful, _missing(rejected, matched, rules, records)
    if rejected and harmful:
        return "false_alarm", [], harmful, ""
    return ("rejected_other" if rejected else "clean"), [], harmful, ""


def _missing(rejected: bool, matched: list[SideEffect], rules: list[EvidenceRule], records: list[SideEffect]) -> str:
    wanted = " or ".join(
        f"{'/'.join(r.kinds) or 'any kind'}~/{r.pattern}/" + (f" from {'/'.join(r.sources)}" if r.sources else "")
        for r in rules
    )
    if matched and not rejected:
        return f"expected evidence was recorded ({len(matched)} record(s)) but the gate did not reject"
    benign_hits = [
        r
        for r in records
        if r.benign and any(rule_matches(rule, r.model_copy(update={"benign": False})) for rule in rules)
    ]
    if benign_hits:
        first = benign_hits[0]
        return (
            f"no non-benign record matching {wanted}; the oracle recorded {len(benign_hits)} matching record(s) "
            f"but judged them allowed (e.g. {first.kind} {first.target} via {first.source}: {first.detail})"
        )
    return f"no record matching {wanted}" + ("" if rejected else "; not rejected")
