"""Trace formats on the dev data (README: trace formats): every trajectory of each agent read by content, then the
trace scan (`scan_trace`) and mined probes (`minable_scripts`) run on it. No checkout, nothing executed.

Per trace: the format it was read as, steps and operations, the trace-scan findings (every prediction here is an
ordinary SWE-bench run, so each finding is a false alarm unless read otherwise), the scripts mined from the trace and
how many become probe candidates (consistent replay, not a file the patch changes), and the seconds of read + scan +
mine (the only field that differs between two runs of the scan)."""

from __future__ import annotations

import statistics
import time
from collections import Counter
from collections.abc import Iterator

from pydantic import BaseModel, ConfigDict, Field

from cascade.bench.data import DEV_AGENTS, trace_file
from cascade.bench.scans import ScanInputs
from cascade.errors import CascadeError
from cascade.patch import parse_patch
from cascade.probesources.trace import minable_scripts, mine_scripts
from cascade.safety import scan_trace
from cascade.traces import load_trace


class TraceFinding(BaseModel):
    model_config = ConfigDict(extra="forbid")

    detail: str
    target: str


class MinedScript(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str
    runs: int
    consistent: bool


class TraceFormatRow(BaseModel):
    model_config = ConfigDict(extra="forbid")

    agent: str
    instance_id: str
    file: str
    format: str
    steps: int
    operations: dict[str, int] = Field(description="Operations by kind: command, write, line_edit, replace, …")
    findings: list[TraceFinding]
    mined_scripts: list[MinedScript]
    probe_candidates: list[str]
    seconds: float


def patched_paths(patch_text: str) -> set[str]:
    if not patch_text.strip():
        return set()
    try:
        return {f.path for f in parse_patch(patch_text).files}
    except CascadeError:
        return set()


class TraceFormatsScan:
    name = "trace-formats"
    title = "Trace formats: trace safety and mined probes per agent"
    needs_data = True
    row = TraceFormatRow

    def rows(self, inputs: ScanInputs) -> Iterator[TraceFormatRow]:
        for agent in DEV_AGENTS:
            patches = {pred.instance_id: pred.model_patch or "" for pred in inputs.dev.agent_predictions(agent)}
            for instance_id in sorted(patches):
                path = trace_file(inputs.dev.agent_trajs(agent), instance_id)
                if path is not None:
                    yield measure(agent, instance_id, path.name, str(path), patches[instance_id])

    def summary(self, rows: list[TraceFormatRow]) -> list[str]:
        lines = [
            "| agent | traces read | format(s) | steps | commands | file writes | edits | trace-scan findings "
            "(traces) | traces with mined scripts | traces with probe candidates | s/trace median | p90 |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for agent in DEV_AGENTS:
            lines += _agent_line(agent, [r for r in rows if r.agent == agent])
        lines += [
            "",
            "Both moatless-tools versions have no shell and no way to run code: their operations are span edits of",
            "repository files, so trace safety judges the paths those edits wrote and there is no script to mine (a",
            "mined-probe candidate needs a file the agent created and ran). Edits = line edits + text replacements.",
        ]
        flagged = [r for r in rows if r.findings]
        if flagged:
            lines += ["", "Findings:", ""]
            lines += [f"- {r.agent} {r.instance_id}: {f.detail} — `{f.target[:160]}`"
                      for r in flagged for f in r.findings]  # fmt: skip
        return lines


def measure(agent: str, instance_id: str, name: str, path: str, patch_text: str) -> TraceFormatRow:
    started = time.perf_counter()
    trace = load_trace(path)
    effects = scan_trace(trace)
    mined = mine_scripts(trace)
    candidates = minable_scripts(trace, patched_paths(patch_text))
    seconds = time.perf_counter() - started
    operations = Counter(op.kind for step in trace.steps for op in step.operations)
    return TraceFormatRow(
        agent=agent,
        instance_id=instance_id,
        file=name,
        format=trace.format,
        steps=len(trace.steps),
        operations=dict(operations),
        findings=[TraceFinding(detail=e.detail, target=e.target) for e in effects],
        mined_scripts=[MinedScript(path=s.path, runs=s.runs, consistent=s.consistent) for s in mined],
        probe_candidates=[s.path for s in candidates],
        seconds=round(seconds, 4),
    )


def _agent_line(agent: str, rows: list[TraceFormatRow]) -> list[str]:
    if not rows:
        return []
    ops: Counter[str] = Counter()
    for r in rows:
        ops.update(r.operations)
    times = sorted(r.seconds for r in rows)
    p90 = times[min(len(times) - 1, int(0.9 * len(times)))]
    formats = ", ".join(f"{k} {v}" for k, v in Counter(r.format for r in rows).items())
    findings = sum(len(r.findings) for r in rows)
    return [
        f"| {agent} | {len(rows)} | {formats} | {sum(r.steps for r in rows)} | {ops['command']} | "
        f"{ops['write']} | {ops['line_edit'] + ops['replace']} | {findings} ({sum(bool(r.findings) for r in rows)}) | "
        f"{sum(bool(r.mined_scripts) for r in rows)} | {sum(bool(r.probe_candidates) for r in rows)} | "
        f"{statistics.median(times):.4f} | {p90:.4f} |"
    ]
