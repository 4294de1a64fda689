"""The prompt-injection scan on SWE-bench data (README: prompt injection cannot buy an accept).

None of these texts was written to address a reviewer, so every finding here is a false alarm of the scan (it
would cap an accept at uncertain). Scans, with the stage's own functions: every non-empty patch (gold rows of
Lite and Verified, resolved submissions, the three agents' predictions), every task's issue text, and every
trajectory of the three agents (actions and thoughts, read by ``cascade.traces``)::

    python -m benchmarks.injection_scan --data ../shared/data/swebench --out benchmarks/results/injection_scan
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks.undefined_names import load_items
from cascade.bench.data import DEV_AGENTS, DevData
from cascade.errors import BadInput
from cascade.models import InjectionFinding
from cascade.patch import parse_patch
from cascade.stages.injection import scan_lines, scan_patch, scan_trace
from cascade.traces import load_trace


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True, help="Output path without extension (.jsonl, .md).")
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    scanned: Counter[str] = Counter()

    def record(kind: str, ident: str, findings: list[InjectionFinding]) -> None:
        scanned[kind] += 1
        rows.extend({"kind": kind, "id": ident, **f.model_dump()} for f in findings)

    for item in load_items(args.data, args.data, Counter(), require_mirror=False):
        try:
            patch = parse_patch(item.patch)
        except BadInput:
            continue
        record(f"patch {item.source} ({item.label})", f"{item.model} {item.instance}", scan_patch(patch))
    dev = DevData(args.data)
    for split in ("lite", "verified"):
        for task in dev.tasks(split).values():
            issue = task.problem_statement.splitlines()
            locations = [f"line {i}" for i in range(1, len(issue) + 1)]
            record(f"issue text ({split})", task.instance_id, scan_lines(issue, "issue", locations))
    for source in DEV_AGENTS:
        for path in sorted(dev.agent_trajs(source).iterdir()):
            try:
                trace = load_trace(str(path))
            except BadInput:
                continue
            record(f"trace {source}", path.stem, scan_trace(trace))
    args.out.with_suffix(".jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    flagged = Counter(r["kind"] for r in {(r["kind"], r["id"]): r for r in rows}.values())
    lines = [
        "# Prompt-injection scan on SWE-bench texts (false alarms)",
        "",
        f"Command: `python {' '.join(sys.argv)}`",
        "",
        "| text | scanned | flagged (false alarms) |",
        "|---|---:|---:|",
        *[f"| {kind} | {n} | {flagged[kind]} |" for kind, n in scanned.items()],
        "",
        "## Every finding",
        "",
        *[f"- {r['kind']} {r['id']} {r['location']} ({r['rule']}): `{r['excerpt']}`" for r in rows],
    ]
    args.out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
