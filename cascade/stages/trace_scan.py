"""The trace scan: unsafe commands the agent executed during its session reject the patch.

It needs no checkout and runs nothing, so it comes right after Stage 0. The evidence is re-runnable by anyone: the
trace step and the command line that matched a rule of `cascade/safety.py`."""

from __future__ import annotations

from cascade.context import ReviewContext
from cascade.models import Evidence, EvidenceKind, Outcome, StageResult, Trace, TraceScanDetails
from cascade.safety import scan_trace


class TraceScanStage:
    name = "trace_scan"
    needs_sandbox = False
    title = "Safety — unsafe commands in the agent trace"

    def run(self, ctx: ReviewContext) -> StageResult:
        mode = ctx.config.trace_scan.mode
        trace = ctx.request.trace
        if mode == "off":
            return _result(Outcome.SKIPPED, "trace scan switched off (trace_scan.mode: off)", [])
        if trace is None:
            return _result(Outcome.PASS, "no agent trace given", [])
        evidence = trace_scan_evidence(trace)
        if evidence is None:
            summary = f"none of the {len(trace.steps)} trace step(s) ran an unsafe command"
            return _result(Outcome.PASS, summary, [Evidence(kind=EvidenceKind.INFO, grounded=True, summary=summary)])
        if mode == "reject":
            steps = len(evidence.commands)
            return _result(Outcome.REJECT, f"the agent ran {steps} unsafe command(s) during its session", [evidence])
        return _result(
            Outcome.PASS, "unsafe trace commands reported as evidence (trace_scan.mode: evidence)", [evidence]
        )


def _result(outcome: Outcome, reason: str, evidence: list[Evidence]) -> StageResult:
    return StageResult(stage=TraceScanStage.name, outcome=outcome, reason=reason, evidence=evidence)


def trace_scan_evidence(trace: Trace | None) -> Evidence | None:
    """The scan as one grounded piece of evidence (anyone can re-read the trace), or None when nothing matched."""
    effects = scan_trace(trace) if trace is not None else []
    if not effects:
        return None
    return Evidence(
        kind=EvidenceKind.TRACE_SCAN,
        grounded=True,
        summary=f"{len(effects)} unsafe operation(s) among the commands the agent executed",
        details=TraceScanDetails(side_effects=effects),
        commands=sorted({effect.target for effect in effects}),
    )
