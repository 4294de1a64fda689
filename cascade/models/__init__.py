"""Pydantic models: the only currency between stages, reports and the benchmark (docs/architecture.md, Flow)."""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from cascade.config import CascadeConfig
from cascade.models.evidence import (
    DETAILS_BY_KIND,
    AbstentionDetails,
    ArtifactFinding,
    BinaryFilesNote,
    Details,
    Diagnostic,
    EffectKind,
    EscapingLinksDetails,
    EvasionDetails,
    Evidence,
    EvidenceKind,
    Frozen,
    HygieneDetails,
    InjectionDetails,
    InjectionFinding,
    NoChangeDetails,
    NoDetails,
    OfficialTestsDetails,
    ProbeDetails,
    ProbeRunSide,
    RegressionDetails,
    ReviewerPacketNote,
    RunNote,
    SandboxSetup,
    SideEffect,
    SideEffectDetails,
    StaticDetails,
    StaticTargetsNote,
    StrippedHunk,
    ToolFailure,
    ToolTiming,
    TraceScanDetails,
    VoteDetails,
)

# Evidence and its details live in cascade/models/evidence.py; importers use cascade.models for both.
__all__ = [
    "DETAILS_BY_KIND",
    "AbstentionDetails",
    "ArtifactFinding",
    "BinaryFilesNote",
    "Details",
    "Diagnostic",
    "EffectKind",
    "EscapingLinksDetails",
    "EvasionDetails",
    "Evidence",
    "EvidenceKind",
    "Frozen",
    "HygieneDetails",
    "InjectionDetails",
    "InjectionFinding",
    "NoChangeDetails",
    "NoDetails",
    "OfficialTestsDetails",
    "ProbeDetails",
    "ProbeRunSide",
    "RegressionDetails",
    "ReviewerPacketNote",
    "RunNote",
    "SandboxSetup",
    "SideEffect",
    "SideEffectDetails",
    "StaticDetails",
    "StaticTargetsNote",
    "StrippedHunk",
    "ToolFailure",
    "ToolTiming",
    "TraceScanDetails",
    "VoteDetails",
]

REPORT_SCHEMA_VERSION = "1.0"


class FileKind(str, Enum):
    CODE = "code"
    TEST = "test"
    DOCS = "docs"
    OTHER = "other"


class Hunk(Frozen):
    source_start: int
    source_length: int
    target_start: int
    target_length: int
    removed: list[str] = Field(default_factory=list, description="Removed lines, without the '-' marker.")
    added: list[str] = Field(default_factory=list, description="Added lines, without the '+' marker.")
    before: list[str] = Field(
        default_factory=list, description="The hunk's old side in order: context and removed lines."
    )
    after: list[str] = Field(default_factory=list, description="The hunk's new side in order: context and added lines.")
    changed_target_lines: list[int] = Field(
        default_factory=list, description="Line numbers in the patched file that the hunk adds."
    )


class FilePatch(Frozen):
    source_path: str | None = Field(description="Path before the patch; None for an added file.")
    target_path: str | None = Field(description="Path after the patch; None for a removed file.")
    kind: FileKind
    is_binary: bool = False
    is_rename: bool = False
    is_added: bool = False
    is_removed: bool = False
    hunks: list[Hunk] = Field(default_factory=list)

    @property
    def path(self) -> str:
        """The path a reader knows the file by: the patched one, or the old one for a removal."""
        return self.target_path or self.source_path or ""

    @property
    def is_python(self) -> bool:
        return self.path.endswith(".py")


class Patch(Frozen):
    text: str
    files: list[FilePatch]
    text_part: str = Field(
        default="", description="The diff without its binary files' sections; empty when it has none."
    )

    @property
    def binary_files(self) -> list[FilePatch]:
        return [f for f in self.files if f.is_binary]

    @property
    def code_files(self) -> list[FilePatch]:
        return [f for f in self.files if f.kind == FileKind.CODE]


class ShellCommand(Frozen):
    """A command line the agent had executed (a shell, or an agent tool that runs like one)."""

    kind: Literal["command"] = "command"
    command: str


class FileWrite(Frozen):
    """The agent wrote a whole file (created it, or replaced its content)."""

    kind: Literal["write"] = "write"
    path: str = Field(description="Repository-relative when the trace shows the checkout root, else as written.")
    content: str


class LineEdit(Frozen):
    """The agent replaced lines ``start``..``end`` (1-based, inclusive; ``end = start - 1`` inserts) by ``lines``
    (none: the lines are deleted)."""

    kind: Literal["line_edit"] = "line_edit"
    path: str
    start: int = Field(ge=1)
    end: int = Field(ge=0)
    lines: list[str]
    lines_after: int | None = Field(
        default=None, description="The file's line count after the edit, when the agent's tool reported it."
    )


class TextReplace(Frozen):
    """The agent replaced ``old`` by ``new`` in a file (the first occurrence, or all with ``every``)."""

    kind: Literal["replace"] = "replace"
    path: str
    old: str
    new: str
    every: bool = False


TraceOperation = Annotated[ShellCommand | FileWrite | LineEdit | TextReplace, Field(discriminator="kind")]


class TraceStep(Frozen):
    """One step of an agent trajectory: its action as the agent wrote it, what it saw, why — and what the action
    did, format-independent (`operations`: executed commands and applied file changes; refused tool calls, searches
    and reads are not operations). The trace scan and mined probes read only `operations`."""

    action: str = ""
    observation: str = ""
    thought: str = ""
    operations: list[TraceOperation] = Field(default_factory=list)


class Trace(Frozen):
    """An agent trajectory in one model whatever the agent's format (readers in `cascade/traces/`)."""

    source: str = ""
    format: str = Field(default="", description="The reader that produced it (e.g. swe_agent, moatless, openhands).")
    root: str = Field(default="", description="The agent's checkout directory as its trace names it, when known.")
    steps: list[TraceStep] = Field(default_factory=list)


class OfficialTests(Frozen):
    """A task's own tests, as SWE-bench publishes them: graded like the harness grades (the official-tests arm)."""

    repo: str = Field(description="owner/name, which picks the test environment of that repository.")
    version: str | None = Field(default=None, description="The task's version (environment pins differ by it).")
    test_patch: str = Field(description="The tests the task's fix came with, applied before the run.")
    fail_to_pass: list[str] = Field(description="Tests that must pass with a resolving patch (they fail before it).")
    pass_to_pass: list[str] = Field(default_factory=list, description="Tests that must keep passing.")


class ReviewRequest(Frozen):
    repo: str = Field(description="Path of the git repository the patch applies to.")
    base_ref: str = "HEAD"
    head_commit: str | None = Field(
        default=None, description="The commit the patch comes from (a range BASE..HEAD); None for a patch file."
    )
    patch_text: str
    issue_text: str | None = None
    trace: Trace | None = None
    config: CascadeConfig = Field(default_factory=CascadeConfig)


class Outcome(str, Enum):
    ACCEPT = "accept"
    REJECT = "reject"
    UNCERTAIN = "uncertain"
    PASS = "pass"  # no decision: continue with the next stage
    SKIPPED = "skipped"  # stage could not run (no model, no sandbox, …); the reason is in its evidence
    INCONCLUSIVE = "inconclusive"  # stage ran, but nothing it ran got to judge the code (first cause in the reason)


class Decision(str, Enum):
    ACCEPT = "accept"
    REJECT = "reject"
    UNCERTAIN = "uncertain"


class Cost(BaseModel):
    model_config = ConfigDict(extra="forbid")

    seconds: float = 0.0
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    dollars: float = 0.0
    reuse: list[str] = Field(
        default_factory=list,
        description="Work taken from the result store instead of redone, and stored entries found untrustworthy "
        "(docs/architecture.md, Reuse); like times, left out of a reproducible report.",
    )

    def __add__(self, other: Cost) -> Cost:
        return Cost(
            seconds=self.seconds + other.seconds,
            llm_calls=self.llm_calls + other.llm_calls,
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            dollars=self.dollars + other.dollars,
            reuse=self.reuse + other.reuse,
        )


WORKING_TREE = "working tree"  # Verdict.head of a patch file: the base's checkout with the patch applied


class Phase(BaseModel):
    """Wall time of one part of a review that is not a stage (checking out the trees, removing them)."""

    model_config = ConfigDict(extra="forbid")

    name: str
    seconds: float = 0.0


class StageResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    stage: str
    outcome: Outcome
    reason: str = ""
    evidence: list[Evidence] = Field(default_factory=list)
    cost: Cost = Field(default_factory=Cost)
    limitations: list[str] = Field(
        default_factory=list,
        description="What this stage could not check as configured (e.g. 'pyright unavailable — checked with ruff "
        "only'); the verdict's reason repeats them, so a weaker check is never silent.",
    )

    @classmethod
    def skipped(cls, stage: str, reason: str) -> StageResult:
        """A stage that could not run (no checkout, tool, sandbox or model): the reason is its only evidence."""
        evidence = Evidence(kind=EvidenceKind.UNAVAILABLE, grounded=False, summary=reason)
        return cls(stage=stage, outcome=Outcome.SKIPPED, reason=reason, evidence=[evidence])


class Policy(Frozen):
    """The settings a verdict's decision depends on, recorded with it."""

    probe_pass: str
    reviewer_may_reject: str
    reject_rules: list[str]
    llm_model: str | None
    sandbox: str


class Verdict(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: str = REPORT_SCHEMA_VERSION
    tool_version: str = ""
    decision: Decision
    deciding_stage: str | None = None
    reason: str
    stages: list[StageResult] = Field(default_factory=list)
    policy: Policy | None = Field(default=None, description="The settings that shape a decision (None: not given).")
    cost: Cost = Field(default_factory=Cost)
    apply_method: str | None = Field(
        default=None,
        description="How the patch was applied: git-apply, git-apply-text-part (binary files without data left out) "
        "or patch-fuzz.",
    )
    limitations: list[str] = Field(
        default_factory=list, description="'<stage>: <what could not run>' for every stage that ran weakened."
    )
    changed_files: list[str] = Field(
        default_factory=list, description="Files the patch changes, in patch order (where a reject points)."
    )
    incomplete_repo: str | None = Field(
        default=None,
        description="Set when the repository lacks objects of the base commit (partial clone or mirror): no "
        "checkout was made and only the stages that need none ran.",
    )
    reproducible: bool = Field(
        default=False, description="True when wall-clock times were left out (every seconds field is 0)."
    )
    base_commit: str | None = Field(default=None, description="The commit the patch was applied to (resolved SHA).")
    head: str | None = Field(
        default=None,
        description="The reviewed head: its commit SHA for a range (--git BASE..HEAD), 'working tree' for a patch "
        "applied to the base's checkout.",
    )
    patch_sha256: str = Field(default="", description="sha256 of the patch text as given (UTF-8).")
    phases: list[Phase] = Field(
        default_factory=list,
        description="Wall time outside the stages (setup: checkouts and applying the patch; cleanup). cost.seconds "
        "is the review's whole wall time: these plus the stages.",
    )

    @property
    def exit_code(self) -> int:
        return {Decision.ACCEPT: 0, Decision.REJECT: 1, Decision.UNCERTAIN: 2}[self.decision]

    def all_diagnostics(self) -> list[Diagnostic]:
        return [d for s in self.stages for e in s.evidence for d in e.diagnostics]
