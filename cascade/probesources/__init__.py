"""Probe sources mined from the review's own material: the agent trace and the tests the patch adds."""

from cascade.probesources.pr_tests import PrTestProbeSource
from cascade.probesources.trace import TraceProbeSource

__all__ = ["PrTestProbeSource", "TraceProbeSource"]
