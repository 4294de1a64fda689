"""Probe sources: the `ProbeSource` protocol (`base.py`) and one module per source, registered by name below.

A source proposes pytest files; Stage 2 (`cascade/stages/probes/`) validates every candidate the same way whatever
its source. To add a source: implement the protocol in a new module and add it to `default_probe_sources`.
"""

from __future__ import annotations

from cascade.config import CascadeConfig
from cascade.probesources.base import ProbeCandidate, ProbeFeedback, ProbeOrigin, ProbeSource
from cascade.probesources.generated import GeneratedProbeSource
from cascade.probesources.issue import IssueProbeSource
from cascade.probesources.pr_tests import PrTestProbeSource
from cascade.probesources.trace import TraceProbeSource


def default_probe_sources(config: CascadeConfig) -> list[ProbeSource]:
    """The sources the config enables, in its order (the LLM generator says why not when no model is set)."""
    available: dict[str, ProbeSource] = {
        "generated": GeneratedProbeSource(config),
        "issue": IssueProbeSource(),
        "trace": TraceProbeSource(),
        "pr_tests": PrTestProbeSource(),
    }
    return [available[name] for name in config.probes.sources if name in available]


__all__ = [
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
