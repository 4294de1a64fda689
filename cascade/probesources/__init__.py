"""Probe sources: the `ProbeSource` protocol (`base.py`) and one module per source, registered by name below.

A source proposes pytest files; Stage 2 (`cascade/stages/probes/`) validates every candidate the same way whatever
its source. To add a source: implement the protocol in a new module and add one line to `PROBE_SOURCES`, the one
list of names (``probes.sources`` in the config accepts exactly these).
"""

from __future__ import annotations

from collections.abc import Callable

from cascade.config import CascadeConfig
from cascade.probesources.base import ProbeCandidate, ProbeFeedback, ProbeOrigin, ProbeSource
from cascade.probesources.generated import GeneratedProbeSource
from cascade.probesources.issue import IssueProbeSource
from cascade.probesources.pr_tests import PrTestProbeSource
from cascade.probesources.trace import TraceProbeSource

PROBE_SOURCES: dict[str, Callable[[CascadeConfig], ProbeSource]] = {
    "generated": GeneratedProbeSource,
    "issue": lambda config: IssueProbeSource(),
    "trace": lambda config: TraceProbeSource(),
    "pr_tests": lambda config: PrTestProbeSource(),
}


def default_probe_sources(config: CascadeConfig) -> list[ProbeSource]:
    """The sources the config enables, in its order (the LLM generator says why not when no model is set)."""
    return [PROBE_SOURCES[name](config) for name in config.probes.sources if name in PROBE_SOURCES]


__all__ = [
    "PROBE_SOURCES",
    "GeneratedProbeSource",
    "IssueProbeSource",
    "PrTestProbeSource",
    "ProbeCandidate",
    "ProbeFeedback",
    "ProbeOrigin",
    "ProbeSource",
    "TraceProbeSource",
    "default_probe_sources",
]
