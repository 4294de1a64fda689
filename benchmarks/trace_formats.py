"""Trace formats on the SWE-bench dev split (README: trace formats): every trajectory of each agent read by content,
then the trace scan (`scan_trace`) and mined probes (`minable_scripts`) run on it. No checkout, nothing executed.

Per agent it records the format each file was read as, steps and operations, the trace-scan findings (every
prediction here is an ordinary SWE-bench run, so each finding is a false alarm unless read otherwise), the scripts
mined from the trace and how many become probe candidates (consistent replay, not a file the patch changes), and the
wall time per trace of read + scan + mine.

    python -m benchmarks.trace_formats --data ../shared/data/swebench --out benchmarks/results/trace_formats.jsonl \
        --summary benchmarks/results/trace_formats.md

Each run rewrites both files; every aggregate in the summary is recomputable from the JSONL (one line per trace).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections import Counter
from pathlib import Path
from typing import Any

from cascade.bench.data import DEV_AGENTS, DevData, trace_file
from cascade.errors import CascadeError
from cascade.patch import parse_patch
from cascade.probesources.trace import minable_scripts, mine_scripts
from cascade.safety import scan_trace
from cascade.traces import load_trace


def predictions(dev: DevData, agent: str) -> dict[str, str]:
    return {pred.instance_id: pred.model_patch or "" for pred in dev.agent_predictions(agent)}


def patched_paths(patch_text: str) -> set[str]:
    if not patch_text.strip():
        return set()
    try:
        return {f.path for f in parse_patch(patch_text).files}
    except CascadeError:
        return set()


def measure(agent: str, instance_id: str, path: Path, patch_text: str) -> dict[str, Any]:
    started = time.perf_counter()
    trace = load_trace(path)
    effects = scan_trace(trace)
    mined = mine_scripts(trace)
    candidates = minable_scripts(trace, patched_paths(patch_text))
    seconds = time.perf_counter() - started
    operations = Counter(op.kind for step in trace.steps for op in step.operations)
    return {
        "agent": agent,
        "instance_id": instance_id,
        "file": path.name,
        "format": trace.format,
        "steps": len(trace.steps),
        "operations": dict(operations),
        "findings": [{"detail": e.detail, "target": e.target} for e in effects],
        "mined_scripts": [{"path": s.path, "runs": s.runs, "consistent": s.consistent} for s in mined],
        "probe_candidates": [s.path for s in candidates],
        "seconds": round(seconds, 4),
    }


def run(data: Path) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    dev = DevData(data)
    for agent in DEV_AGENTS:
        patches = predictions(dev, agent)
        for instance_id in sorted(patches):
            path = trace_file(dev.agent_trajs(agent), instance_id)
            if path is not None:
                records.append(measure(agent, instance_id, path, patches[instance_id]))
    return records


def summary(records: list[dict[str, Any]], command: str) -> str:
    lines = [
        "# Trace formats: trace safety and mined probes per agent",
        "",
        f"Command: `{command}`",
        "",
        "| agent | traces read | format(s) | steps | commands | file writes | edits | trace-scan findings "
        "(traces) | traces with mined scripts | traces with probe candidates | s/trace median | p90 |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for agent in DEV_AGENTS:
        rows = [r for r in records if r["agent"] == agent]
        if not rows:
            continue
        ops: Counter[str] = Counter()
        for r in rows:
            ops.update(r["operations"])
        times = sorted(r["seconds"] for r in rows)
        p90 = times[min(len(times) - 1, int(0.9 * len(times)))]
        formats = ", ".join(f"{k} {v}" for k, v in Counter(r["format"] for r in rows).items())
        findings = sum(len(r["findings"]) for r in rows)
        lines.append(
            f"| {agent} | {len(rows)} | {formats} | {sum(r['steps'] for r in rows)} | {ops['command']} | "
            f"{ops['write']} | {ops['line_edit'] + ops['replace']} | {findings} "
            f"({sum(bool(r['findings']) for r in rows)}) | "
            f"{sum(bool(r['mined_scripts']) for r in rows)} | {sum(bool(r['probe_candidates']) for r in rows)} | "
            f"{statistics.median(times):.4f} | {p90:.4f} |"
        )
    lines += [
        "",
        "Both moatless-tools versions have no shell and no way to run code: their operations are span edits of",
        "repository files, so trace safety judges the paths those edits wrote and there is no script to mine (a",
        "mined-probe candidate needs a file the agent created and ran). Edits = line edits + text replacements.",
    ]
    flagged = [r for r in records if r["findings"]]
    if flagged:
        lines += ["", "Findings:", ""]
        lines += [
            f"- {r['agent']} {r['instance_id']}: {f['detail']} — `{f['target'][:160]}`"
            for r in flagged
            for f in r["findings"]
        ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="The SWE-bench dev data (its README names the files).")
    parser.add_argument("--out", required=True)
    parser.add_argument("--summary", required=True)
    args = parser.parse_args()
    records = run(Path(args.data))
    Path(args.out).write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    command = f"python -m benchmarks.trace_formats --data {args.data} --out {args.out} --summary {args.summary}"
    text = summary(records, command)
    Path(args.summary).write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
