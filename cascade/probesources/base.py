"""The probe-source interface shared by mined probes (trace, PR tests) and the LLM generator (Stage 2).

Stage 2 asks each source for candidates, validates every candidate on the *base* tree (kept only if it fails
behaviourally), then runs the kept ones on the *patched* tree. A source that can repair its candidates (the LLM
generator) gets the base-side results of the previous round as feedback, up to ``max_rounds`` rounds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from cascade.context import ReviewContext

ProbeOrigin = str  # the registered name of the source (cascade/probesources/__init__.py, PROBE_SOURCES)
OutcomeClass = Literal["pass", "behavioural_fail", "setup_error"]


class ProbeCandidate(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    origin: ProbeOrigin
    name: str = Field(description="Short identifier shown in reports.")
    path: str = Field(description="Path, relative to the worktree root, where the pytest file is written.")
    content: str = Field(description="The pytest file's text.")
    may_accept: bool = Field(
        description="Only independent probes (the LLM generator) may support an accept; mined and PR probes "
        "share the agent's blind spots, so they may reject but never accept."
    )


class ProbeFeedback(BaseModel):
    """What one candidate did on the base tree: the only feedback a generator may see (never the patched run)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    candidate: ProbeCandidate
    outcome: OutcomeClass
    message: str = Field(description="Why it was not kept: e.g. 'passed on base', or the setup error's log excerpt.")


@runtime_checkable
class ProbeSource(Protocol):
    @property
    def name(self) -> ProbeOrigin:
        """Which kind of probe this source yields."""
        ...

    @property
    def is_pr_code(self) -> bool:
        """Whether its probes are the pull request's own code (its tests): then every side effect of a probe run
        counts, and only the tests the patch added or changed are probes."""
        ...

    @property
    def max_rounds(self) -> int:
        """How many propose/validate rounds Stage 2 runs (1 for mined sources, ≤3 for the generator)."""
        ...

    def available(self, ctx: ReviewContext) -> str | None:
        """None when the source can propose for this review; otherwise why not (no trace, no model, …)."""
        ...

    def propose(self, ctx: ReviewContext, feedback: list[ProbeFeedback]) -> list[ProbeCandidate]:
        """Candidates for this round; ``feedback`` holds the base-side results of the previous round."""
        ...
