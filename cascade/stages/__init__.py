"""The stages of the cascade, cheapest first, registered by name (as pre-commit's table of languages).

Every consumer — `default_stages`, the benchmark arms, the `benchmarks/` scripts — asks for a stage by its name;
each stage's config section carries the same name (`CascadeConfig.no_change`, `.static`, `.probes`, …). To add a
stage: one module implementing the `Stage` protocol (`base.py`), one line in `STAGES`, and its name in `GATE` (in
cascade order) when `cascade review` should run it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cascade.config import CascadeConfig
from cascade.errors import BadInput
from cascade.probesources import PROBE_SOURCES
from cascade.sandbox.select import backend_choices
from cascade.stages.base import Stage
from cascade.stages.evasion import EvasionStage
from cascade.stages.hygiene import HygieneStage
from cascade.stages.injection import InjectionStage
from cascade.stages.no_change import NoChangeStage
from cascade.stages.probes import ProbesStage
from cascade.stages.reviewer import ReviewerStage
from cascade.stages.static import StaticStage
from cascade.stages.trace_scan import TraceScanStage

STAGES: dict[str, Callable[..., Stage]] = {
    "no_change": NoChangeStage,
    "hygiene": HygieneStage,
    "injection": InjectionStage,  # never decides; caps an accept at uncertain (cascade.pipeline.cap_accept)
    "evasion": EvasionStage,  # never decides; code that looks for its watcher caps an accept at uncertain too
    "trace_scan": TraceScanStage,  # needs no checkout and runs nothing: right after no_change
    "static": StaticStage,
    "probes": ProbesStage,
    "reviewer": ReviewerStage,  # last: skipped (and says so) when no llm.model is configured
}
GATE = (
    "no_change",
    "hygiene",
    "injection",
    "evasion",
    "trace_scan",
    "static",
    "probes",
    "reviewer",
)  # what `cascade review` runs


def make_stage(name: str, **options: Any) -> Stage:
    """The stage registered as ``name``, built with ``options`` (its constructor's keyword arguments)."""
    try:
        factory = STAGES[name]
    except KeyError:
        raise BadInput(f"unknown stage {name!r}; known stages: {', '.join(STAGES)}") from None
    return factory(**options)


def make_stages(*names: str) -> list[Stage]:
    return [make_stage(name) for name in names]


def enabled(config: CascadeConfig, name: str) -> bool:
    """A stage runs unless its config section says ``enabled: false`` (no_change, hygiene, injection and
    trace_scan have none)."""
    return bool(getattr(getattr(config, name, None), "enabled", True))


def check_names(config: CascadeConfig, source: str = "config") -> None:
    """The names the config gives registered things — the sandbox backend, the probe sources — are registered ones
    (the registries are the one list of names: cascade/sandbox/select.py, cascade/probesources/__init__.py)."""
    backends = backend_choices()
    if config.sandbox.backend not in backends:
        raise BadInput(
            f"{source}: invalid value for 'sandbox.backend': {config.sandbox.backend!r} is not one of "
            + ", ".join(backends)
        )
    unknown = [name for name in config.probes.sources if name not in PROBE_SOURCES]
    if unknown:
        raise BadInput(
            f"{source}: invalid value for 'probes.sources': {unknown[0]!r} is not one of " + ", ".join(PROBE_SOURCES)
        )


def default_stages(config: CascadeConfig) -> list[Stage]:
    """Every gate stage the config enables, in cascade order."""
    return [make_stage(name) for name in GATE if enabled(config, name)]


__all__ = ["GATE", "STAGES", "Stage", "check_names", "default_stages", "enabled", "make_stage", "make_stages"]
