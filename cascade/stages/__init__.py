"""The stages of the cascade, cheapest first."""

from __future__ import annotations

from cascade.config import CascadeConfig
from cascade.stages.base import Stage
from cascade.stages.hygiene import HygieneStage
from cascade.stages.no_change import NoChangeStage
from cascade.stages.probes import ProbesStage
from cascade.stages.reviewer import ReviewerStage
from cascade.stages.static import StaticStage
from cascade.stages.trace_safety import TraceSafetyStage


def default_stages(config: CascadeConfig) -> list[Stage]:
    """The stage list for a config; later stages (probes, reviewer) join here as they land."""
    stages: list[Stage] = [NoChangeStage(), HygieneStage(), TraceSafetyStage()]
    if config.stage1.enabled:
        stages.append(StaticStage())
    if config.stage2.enabled:
        stages.append(ProbesStage())
    if config.reviewer.enabled:
        stages.append(ReviewerStage())  # last: skipped (and says so) when no llm.model is configured
    return stages


__all__ = ["Stage", "default_stages"]
