"""The `Stage` protocol: every stage of the gate is one small module implementing it (docs/architecture.md, Stages)."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from cascade.context import ReviewContext
from cascade.models import StageResult


@runtime_checkable
class Stage(Protocol):
    """One check of the cascade. Stages run cheapest first; the first decisive outcome ends the review."""

    @property
    def name(self) -> str:
        """Stable identifier used in reports, configs and the benchmark (e.g. ``no_change``)."""
        ...

    @property
    def title(self) -> str:
        """Short human-readable title (e.g. ``Stage 0 — no code change``)."""
        ...

    @property
    def needs_sandbox(self) -> bool:
        """Whether it runs code in the sandbox (Stage 2, the official tests): the benchmark gives such an arm more
        CPU and memory."""
        ...

    def run(self, ctx: ReviewContext) -> StageResult:
        """Examine the patch and return a result.

        Outcome ``reject``/``accept``/``uncertain`` stops the cascade; ``pass`` hands on to the next stage;
        ``skipped`` records that the stage could not run (missing repository, tool or model) and why, in its
        evidence. A stage must never turn its own error into ``accept``.
        """
        ...
