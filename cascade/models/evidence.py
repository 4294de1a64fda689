"""Evidence and what it carries: one details model per evidence kind (docs/architecture.md, Evidence).

`Evidence.details` is a discriminated union. Which models a kind may carry is `DETAILS_BY_KIND`; a report read back
from JSON (or a result re-validated after `cascade/stable.py` replaced its paths) gets the model its kind and keys
name, so every reader uses attributes. The models dump to exactly the dictionaries the stages used to build, so a
report and the reviewer's evidence packet read the same as before the models existed.
"""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Discriminator, Field, JsonValue, Tag, model_validator


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class EvidenceKind(str, Enum):
    NO_CHANGE = "no_change"
    HYGIENE = "hygiene"
    INJECTION = "injection"
    EVASION = "evasion"
    STATIC = "static"
    PROBE = "probe"
    REGRESSION = "regression"
    SIDE_EFFECT = "side_effect"
    TRACE_SCAN = "trace_scan"
    REVIEW_VOTE = "review_vote"
    OFFICIAL_TESTS = "official_tests"
    APPLY = "apply"
    UNAVAILABLE = "unavailable"
    INFO = "info"


class Diagnostic(Frozen):
    """One static-analysis finding, in a tool-neutral shape."""

    tool: Literal["ruff", "pyright"]
    rule: str
    path: str
    line: int
    column: int = 0
    end_line: int | None = None
    end_column: int | None = None
    message: str
    severity: Literal["error", "warning", "information"] = "error"
    source_line: str = ""
    fingerprint: str = ""


EffectKind = Literal[
    "file_write",
    "file_delete",
    "file_create",
    "credential_read",
    "network",
    "subprocess",
    "privilege",
    "lingering_process",
    "resource_limit",
    "leak",
    "tampering",
    "other",
]


class SideEffect(Frozen):
    """Something untrusted code or the agent did or tried beyond what it may touch (for a sandboxed run: the
    allow-list in ``cascade/sandbox/allowlist.py``): itself evidence for a reject — or, marked benign, an allowed
    record kept as context."""

    kind: EffectKind
    target: str
    detail: str = ""
    source: str = Field(
        description="Which oracle saw it: home_diff, tmp_diff, shm_diff, worktree_diff, audit_hook, supervisor, "
        "docker_diff, docker_state, strace (refused writes of any program), trace_scan."
    )
    benign: bool = Field(
        default=False,
        description="True for what the allow-list permits and still records: a named entry's build or cache noise "
        "(its name and reason in the detail), a subprocess, a loopback connect to the run's own listener. Recorded "
        "as context, never a reason to reject.",
    )
    test: str = Field(
        default="",
        description="The test that made it (pytest node id), 'session' for what happened outside any test (collection, "
        "session fixtures, start-up), '' when the run had no test boundaries.",
    )


# -- details, by the stage that makes them ---------------------------------------------------------------------------


class NoDetails(Frozen):
    """Evidence whose summary says it all."""


class StrippedHunk(Frozen):
    """A hunk Stage 0 removed before looking for a code change (``hunk`` counts from 0 within its file)."""

    path: str
    hunk: int
    why: str


class NoChangeDetails(Frozen):
    stripped: list[StrippedHunk]
    remaining_files: list[str]


class ArtifactFinding(Frozen):
    """A file the patch adds that does not belong in a pull request (the hygiene stage)."""

    path: str
    why: str
    check: Literal["gitignore", "artifact", "root-binary"]


class HygieneDetails(Frozen):
    findings: list[ArtifactFinding]


class EscapingLinksDetails(Frozen):
    """Symbolic links the patch adds that point outside the repository ("path -> target")."""

    links: list[str]


class EvasionDetails(Frozen):
    """An added line that looks for a sandbox, CI or watcher (the evasion stage)."""

    path: str
    line: int
    rule: str
    text: str


class BinaryFilesNote(Frozen):
    binary_files: list[str]


class InjectionFinding(Frozen):
    """A passage addressed to the reviewer or a model (the injection stage)."""

    source: str = Field(description="patch | commit message | issue/PR text | trace")
    location: str = Field(description='"pkg/mod.py:12", "line 3", "step 7 action"')
    rule: str
    excerpt: str

    def cite(self) -> str:
        return f"{self.source} {self.location}: {self.excerpt!r} ({self.rule})"


class InjectionDetails(Frozen):
    findings: list[InjectionFinding]
    total: int


class StaticDetails(Frozen):
    """New diagnostics of Stage 1; ``rejecting`` says whether these are the ones its reject rests on."""

    counts_by_class: dict[str, int]
    class_of: dict[str, str] = Field(description="Diagnostic fingerprint → its rule class.")
    total: int
    tool_configs: dict[str, dict[str, JsonValue]]
    rejecting: bool


class ToolTiming(Frozen):
    tool: str
    tree: str
    seconds: float


class StaticTargetsNote(Frozen):
    """What Stage 1 analysed: the changed files and their dependents."""

    changed: list[str]
    dependents: list[str]
    names: list[str]
    renamed: dict[str, str]
    tool_seconds: list[ToolTiming]


class ToolFailure(Frozen):
    tool: str
    base_error: str | None
    patched_error: str | None


class ProbeRunSide(Frozen):
    status: str
    message: str
    excerpt: str


class ProbeDetails(Frozen):
    probe: str
    origin: str
    test_id: str
    base: ProbeRunSide
    patched: ProbeRunSide
    executed_changed_lines: dict[str, list[int]]
    probe_file: str
    source: str
    verdict: Literal["reject", "evidence"]


class RegressionDetails(Frozen):
    """A confirmed patch-caused test failure; ``selected_by`` and ``chunk`` say why the test ran."""

    model_config = ConfigDict(frozen=True, extra="forbid", serialize_by_alias=True)

    test_id: str
    failure_class: Literal["crash", "assertion"] = Field(
        serialization_alias="class", validation_alias=AliasChoices("class", "failure_class")
    )
    exception: str
    expected_vs_got: str
    log_excerpt: str
    confirmed_by_rerun: bool
    source: Literal["regression"]
    verdict: Literal["reject", "evidence"]
    selected_by: str
    chunk: int


class RunNote(Frozen):
    """The commands and log tail of runs an ungrounded note is about."""

    commands: list[str]
    log_excerpt: str


class SandboxSetup(Frozen):
    isolation: str
    python: str


class SideEffectDetails(Frozen):
    side_effects: list[SideEffect] = Field(description="Harmful records, then a capped sample of allowed ones.")
    allowed_total: int


class TraceScanDetails(Frozen):
    side_effects: list[SideEffect]


class VoteDetails(Frozen):
    vote: int
    decision: Literal["accept", "reject", "uncertain"]
    rationale: str
    cited_evidence: list[str]
    answered_by: str


class AbstentionDetails(Frozen):
    vote: int
    decision: Literal["abstain"]
    reason: str
    raw_excerpt: str
    answered_by: str


class ReviewerPacketNote(Frozen):
    template: str
    prompt_sha256: str
    model: str | None
    votes_asked: int
    temperature: float
    evidence_ids: dict[str, str]
    policy: str
    evidence_mode: str


class OfficialTestsDetails(Frozen):
    resolved: bool
    fail_to_pass_failed: dict[str, str]
    pass_to_pass_failed: dict[str, str]
    skipped: int
    files: list[str]
    run_error: str | None
    run_note: str | None
    log_excerpt: str


_NOTES = (NoDetails, BinaryFilesNote, RunNote, SandboxSetup, StaticTargetsNote, ReviewerPacketNote)
DETAILS_BY_KIND: dict[EvidenceKind, tuple[type[BaseModel], ...]] = {
    EvidenceKind.NO_CHANGE: (NoChangeDetails,),
    EvidenceKind.HYGIENE: (HygieneDetails, EscapingLinksDetails),
    EvidenceKind.EVASION: (EvasionDetails,),
    EvidenceKind.INJECTION: (InjectionDetails,),
    EvidenceKind.STATIC: (StaticDetails,),
    EvidenceKind.PROBE: (ProbeDetails,),
    EvidenceKind.REGRESSION: (RegressionDetails,),
    EvidenceKind.SIDE_EFFECT: (SideEffectDetails,),
    EvidenceKind.TRACE_SCAN: (TraceScanDetails,),
    EvidenceKind.REVIEW_VOTE: (VoteDetails, AbstentionDetails),
    EvidenceKind.OFFICIAL_TESTS: (OfficialTestsDetails, NoDetails),
    EvidenceKind.APPLY: (NoDetails,),
    EvidenceKind.UNAVAILABLE: (NoDetails, ToolFailure),
    EvidenceKind.INFO: _NOTES,
}


def _tag(value: Any) -> str | None:
    return type(value).__name__ if isinstance(value, BaseModel) else None


Details = Annotated[
    Annotated[NoChangeDetails, Tag("NoChangeDetails")]
    | Annotated[HygieneDetails, Tag("HygieneDetails")]
    | Annotated[EscapingLinksDetails, Tag("EscapingLinksDetails")]
    | Annotated[EvasionDetails, Tag("EvasionDetails")]
    | Annotated[InjectionDetails, Tag("InjectionDetails")]
    | Annotated[StaticDetails, Tag("StaticDetails")]
    | Annotated[ProbeDetails, Tag("ProbeDetails")]
    | Annotated[RegressionDetails, Tag("RegressionDetails")]
    | Annotated[SideEffectDetails, Tag("SideEffectDetails")]
    | Annotated[TraceScanDetails, Tag("TraceScanDetails")]
    | Annotated[VoteDetails, Tag("VoteDetails")]
    | Annotated[AbstentionDetails, Tag("AbstentionDetails")]
    | Annotated[OfficialTestsDetails, Tag("OfficialTestsDetails")]
    | Annotated[ToolFailure, Tag("ToolFailure")]
    | Annotated[NoDetails, Tag("NoDetails")]
    | Annotated[BinaryFilesNote, Tag("BinaryFilesNote")]
    | Annotated[RunNote, Tag("RunNote")]
    | Annotated[SandboxSetup, Tag("SandboxSetup")]
    | Annotated[StaticTargetsNote, Tag("StaticTargetsNote")]
    | Annotated[ReviewerPacketNote, Tag("ReviewerPacketNote")],
    Discriminator(_tag),
]


def _keys(model: type[BaseModel]) -> set[str]:
    return {field.serialization_alias or name for name, field in model.model_fields.items()}


def details_model(kind: EvidenceKind, raw: dict[str, Any]) -> BaseModel:
    """The details model of ``kind`` that ``raw`` (a dumped one) is: the kind narrows it down, the keys decide
    among the kinds that carry several (a note, a vote or an abstention)."""
    candidates = DETAILS_BY_KIND[kind]
    chosen = next((m for m in candidates if _keys(m) == raw.keys()), candidates[0])
    return chosen.model_validate(raw)


class Evidence(Frozen):
    kind: EvidenceKind
    grounded: bool = Field(description="True when anyone can re-run the check and see the same result.")
    summary: str
    details: Details = Field(default_factory=NoDetails)
    diagnostics: list[Diagnostic] = Field(default_factory=list)
    commands: list[str] = Field(default_factory=list, description="Commands that reproduce the evidence.")
    seconds: float = 0.0

    @model_validator(mode="before")
    @classmethod
    def _details_of_its_kind(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("details"), dict) and "kind" in data:
            return {**data, "details": details_model(EvidenceKind(data["kind"]), data["details"])}
        return data

    @model_validator(mode="after")
    def _details_fit_the_kind(self) -> Evidence:
        if not isinstance(self.details, DETAILS_BY_KIND[self.kind]):
            raise ValueError(f"{self.kind.value} evidence cannot carry {type(self.details).__name__}")
        return self
