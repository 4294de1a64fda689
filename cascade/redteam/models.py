"""Pydantic models of the red-team suite: cases, their expected evidence, per-case results and the summary."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from cascade.models import SideEffect, Trace

CaseKind = Literal["unsafe", "benign", "trace", "trace-benign"]
Backend = str  # a registered sandbox backend (cascade/sandbox/select.py, BACKENDS)
Outcome = Literal["caught", "missed", "clean", "false_alarm", "rejected_other", "error"]

# Kinds whose cases execute unsafe code; never on the `none` backend.
UNSAFE_KINDS: frozenset[str] = frozenset({"unsafe"})
# Kinds that count toward the catch rate (must be rejected with the expected evidence).
MUST_CATCH: frozenset[str] = frozenset({"unsafe", "trace"})
# Kinds judged by what their pull request's test does when it runs: a run that never happened proves nothing.
TESTED_KINDS: frozenset[str] = frozenset({"unsafe", "benign"})


class Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class EvidenceRule(Frozen):
    """One acceptable evidence record: a side-effect kind (any when empty), an oracle source (any when empty) and a
    regular expression searched in the record's target and detail."""

    kinds: list[str] = Field(default_factory=list)
    pattern: str
    sources: list[str] = Field(default_factory=list)

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        re.compile(value)
        return value


class Expectation(Frozen):
    reject: bool
    evidence: list[EvidenceRule] = Field(default_factory=list, description="Any one rule matching suffices.")


class CaseSpec(Frozen):
    """The parsed ``case.yaml``."""

    id: str
    kind: CaseKind
    domain: str
    framing: str
    twin: str
    test_file: str
    loopback_ports: list[int] = Field(default_factory=list)
    expect: Expectation


class RedteamCase(Frozen):
    spec: CaseSpec
    directory: str
    issue_text: str
    patch_text: str
    trace: Trace | None = None

    @property
    def id(self) -> str:
        return self.spec.id


class CaseResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    case: str
    kind: CaseKind
    domain: str
    framing: str
    backend: Backend
    outcome: Outcome
    decision: str | None = None
    deciding_stage: str | None = None
    reason: str = ""
    expected: list[EvidenceRule] = Field(default_factory=list)
    matched: list[SideEffect] = Field(default_factory=list, description="Recorded effects the predicate accepts.")
    effects: list[SideEffect] = Field(default_factory=list, description="Every non-benign recorded effect.")
    benign_effects: int = Field(
        default=0, description="Records the oracle judged allowed (named allow-list entries, subprocesses, listeners)."
    )
    missing: str = Field(default="", description="For a miss: what evidence was expected and not recorded.")
    seconds: float = 0.0
    error: str | None = None


class BackendSummary(BaseModel):
    model_config = ConfigDict(extra="forbid")

    backend: Backend
    available: bool
    reason: str = ""
    preflight: dict[str, Any] = Field(default_factory=dict)
    unsafe_total: int = 0
    caught: int = 0
    benign_total: int = 0
    false_alarms: int = 0
    trace_total: int = 0
    trace_caught: int = 0
    trace_benign_total: int = 0
    trace_false_alarms: int = 0
    errors: int = 0
    seconds: float = 0.0

    @property
    def catch_rate(self) -> float:
        return self.caught / self.unsafe_total if self.unsafe_total else 0.0

    @property
    def false_alarm_rate(self) -> float:
        return self.false_alarms / self.benign_total if self.benign_total else 0.0


class SuiteReport(BaseModel):
    model_config = ConfigDict(extra="forbid")

    backends: list[BackendSummary]
    results: list[CaseResult]
    listener: dict[str, Any] = Field(default_factory=dict, description="Connections the loopback listeners saw.")
