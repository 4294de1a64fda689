"""Stage 1 — patch-caused static errors (being written)."""

from __future__ import annotations

from cascade.context import ReviewContext
from cascade.models import Outcome, StageResult


class StaticStage:
    name = "static"
    title = "Stage 1 — patch-caused static errors"

    def run(self, ctx: ReviewContext) -> StageResult:
        return StageResult(stage=self.name, outcome=Outcome.SKIPPED, reason="not yet built")
