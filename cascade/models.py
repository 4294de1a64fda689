"""Pydantic models: the only currency between stages, reports and the benchmark (design §2)."""

from __future__ import annotations

from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from cascade.config import CascadeConfig

REPORT_SCHEMA_VERSION = "1.0"


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


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

    @property
    def code_files(self) -> list[FilePatch]:
        return [f for f in self.files if f.kind == FileKind.CODE]


class TraceStep(Frozen):
    action: str = ""
    observation: str = ""
    thought: str = ""


class Trace(Frozen):
    """An agent trajectory, reduced to what the gate reads (SWE-agent `.traj` and similar)."""

    source: str = ""
    steps: list[TraceStep] = Field(default_factory=list)


class ReviewRequest(Frozen):
    repo: str = Field(description="Path of the git repository the patch applies to.")
    base_ref: str = "HEAD"
    patch_text: str
    issue_text: str | None = None
    trace: Trace | None = None
    config: CascadeConfig = Field(default_factory=CascadeConfig)


class EvidenceKind(str, Enum):
    NO_CHANGE = "no_change"
    STATIC = "static"
    PROBE = "probe"
    REGRESSION = "regression"
    SIDE_EFFECT = "side_effect"
    TRACE_SCAN = "trace_scan"
    REVIEW_VOTE = "review_vote"
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


class Evidence(Frozen):
    kind: EvidenceKind
    grounded: bool = Field(description="True when anyone can re-run the check and see the same result.")
    summary: str
    details: dict[str, Any] = Field(default_factory=dict)
    diagnostics: list[Diagnostic] = Field(default_factory=list)
    commands: list[str] = Field(default_factory=list, description="Commands that reproduce the evidence.")
    seconds: float = 0.0


class Outcome(str, Enum):
    ACCEPT = "accept"
    REJECT = "reject"
    UNCERTAIN = "uncertain"
    PASS = "pass"  # no decision: continue with the next stage
    SKIPPED = "skipped"  # stage could not run (no model, no sandbox, …); the reason is in its evidence


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

    def __add__(self, other: Cost) -> Cost:
        return Cost(
            seconds=self.seconds + other.seconds,
            llm_calls=self.llm_calls + other.llm_calls,
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            dollars=self.dollars + other.dollars,
        )


class StageResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    stage: str
    outcome: Outcome
    reason: str = ""
    evidence: list[Evidence] = Field(default_factory=list)
    cost: Cost = Field(default_factory=Cost)


class Verdict(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: str = REPORT_SCHEMA_VERSION
    tool_version: str = ""
    decision: Decision
    deciding_stage: str | None = None
    reason: str
    stages: list[StageResult] = Field(default_factory=list)
    policy: dict[str, Any] = Field(default_factory=dict)
    cost: Cost = Field(default_factory=Cost)
    apply_method: str | None = Field(default=None, description="How the patch was applied: git-apply or patch-fuzz.")
    reproducible: bool = Field(
        default=False, description="True when wall-clock times were left out (every seconds field is 0)."
    )

    @property
    def exit_code(self) -> int:
        return {Decision.ACCEPT: 0, Decision.REJECT: 1, Decision.UNCERTAIN: 2}[self.decision]

    def all_diagnostics(self) -> list[Diagnostic]:
        return [d for s in self.stages for e in s.evidence for d in e.diagnostics]
