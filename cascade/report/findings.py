"""Findings with a place in the code, for line-anchored review comments: new static diagnostics at their line, and
failing tests at the lines of their traceback (innermost first, so a comment lands on the changed code when the
diff holds it, else on the test). Read out of a `Verdict` like every other view (`cascade/report/view.py`)."""

from __future__ import annotations

import hashlib
import re

from pydantic import BaseModel, ConfigDict

from cascade.models import Decision, Evidence, EvidenceKind, ProbeDetails, RegressionDetails, Verdict
from cascade.report import view

# pytest's traceback entries: "pkg/calc.py:2: AttributeError" or "tests/test_calc.py:5: " (a relative path)
_TRACEBACK_LOCATION = re.compile(r"^(?P<path>[\w./-]+\.py):(?P<line>\d+): ", re.M)
_FAILING_TESTS = (EvidenceKind.REGRESSION, EvidenceKind.PROBE)


class Location(BaseModel):
    model_config = ConfigDict(frozen=True)

    path: str
    line: int


class Finding(BaseModel):
    """One finding and the places it may be shown at, best first."""

    model_config = ConfigDict(frozen=True)

    key: str  # stable across runs of the same commit: finds a posted comment again
    locations: list[Location]
    decides: bool  # the verdict's reject rests on it
    title: str
    detail: str = ""  # a log excerpt or the tool's message, shown as code


def _key(*parts: object) -> str:
    return hashlib.sha256("\0".join(str(p) for p in parts).encode()).hexdigest()[:16]


def static_findings(verdict: Verdict) -> list[Finding]:
    found: list[Finding] = []
    for row in view.diagnostic_rows(verdict):
        d = row.diagnostic
        role = "decides the reject" if row.decides else "new, reported as context"
        title = f"`{row.rule_label}` at {row.location} ({role})"
        found.append(
            Finding(
                key=_key("static", d.fingerprint or d.path, d.line, d.rule),
                locations=[Location(path=d.path, line=d.line)],
                decides=row.decides,
                title=title,
                detail=d.message,
            )
        )
    return found


def traceback_locations(log: str) -> list[Location]:
    """The traceback's file:line entries, innermost first, without repeats."""
    found = [
        Location(path=m["path"].removeprefix("./"), line=int(m["line"])) for m in _TRACEBACK_LOCATION.finditer(log)
    ]
    return list(dict.fromkeys(reversed(found)))


def _failing_log(e: Evidence) -> str | None:
    """The failure's log of a test that fails on the patch: a regression, or a probe still failing there."""
    details = e.details
    if isinstance(details, RegressionDetails):
        return details.log_excerpt
    if isinstance(details, ProbeDetails) and details.patched.status == "behavioural_fail":
        return details.patched.excerpt or details.patched.message
    return None


def _failing_test(stage: str, e: Evidence, decides: bool) -> Finding | None:
    if not isinstance(e.details, (RegressionDetails, ProbeDetails)):
        return None
    test_id = e.details.test_id
    log = _failing_log(e)
    if not test_id or log is None:
        return None
    locations = traceback_locations(log)
    test_file = test_id.split("::", 1)[0]
    if test_file.endswith(".py") and all(loc.path != test_file for loc in locations):
        locations.append(Location(path=test_file, line=1))
    role = "decides the reject" if decides else "reported as context"
    title = f"failing test `{test_id}` ({stage}, {role}): {e.summary}"
    return Finding(key=_key("test", test_id, e.summary), locations=locations, decides=decides, title=title, detail=log)


def _rejects(e: Evidence) -> bool:
    return isinstance(e.details, (RegressionDetails, ProbeDetails)) and e.details.verdict == "reject"


def test_findings(verdict: Verdict) -> list[Finding]:
    found: list[Finding] = []
    for s in verdict.stages:
        rejected_here = verdict.deciding_stage == s.stage and verdict.decision == Decision.REJECT
        for e in s.evidence:
            if e.kind in _FAILING_TESTS and e.grounded:
                finding = _failing_test(s.stage, e, rejected_here and _rejects(e))
                if finding is not None and finding.locations:
                    found.append(finding)
    return found


def located_findings(verdict: Verdict) -> list[Finding]:
    """Every finding with a place in the code, deciding ones first."""
    found = static_findings(verdict) + test_findings(verdict)
    return sorted(found, key=lambda f: not f.decides)
