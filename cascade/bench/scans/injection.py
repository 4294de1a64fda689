"""The prompt-injection scan on the dev data (README: prompt injection cannot buy an accept).

None of these texts was written to address a reviewer, so every finding is a false alarm of the scan (it would cap
an accept at uncertain). The injection stage's own functions read every non-empty patch (`cascade/bench/items.py`),
every task's issue text, and every trajectory of the three agents (actions, thoughts and observations)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from cascade.bench.data import DEV_AGENTS
from cascade.bench.items import patch_items
from cascade.bench.scans import ScanInputs
from cascade.errors import BadInput
from cascade.models import InjectionFinding
from cascade.patch import parse_patch
from cascade.stages.injection import scan_lines, scan_patch, scan_trace
from cascade.traces import load_trace


class InjectionRow(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: Literal["patch", "issue", "trace"]
    group: str  # the summary's row: "patch gold (acceptable)", "issue text (lite)", "trace coder"
    id: str
    findings: list[InjectionFinding] = Field(default_factory=list)
    unreadable: str | None = None  # why the text could not be read (not scanned)


class InjectionScan:
    name = "injection"
    title = "Prompt-injection scan on SWE-bench texts (false alarms)"
    needs_data = True
    row = InjectionRow

    def rows(self, inputs: ScanInputs) -> Iterator[InjectionRow]:
        for item in patch_items(inputs.dev):
            group, ident = f"patch {item.source} ({item.label})", f"{item.model} {item.instance}"
            try:
                patch = parse_patch(item.patch)
            except BadInput as exc:
                yield InjectionRow(text="patch", group=group, id=ident, unreadable=str(exc))
                continue
            yield InjectionRow(text="patch", group=group, id=ident, findings=scan_patch(patch))
        for split in ("lite", "verified"):
            for task in inputs.dev.tasks(split).values():
                issue = task.problem_statement.splitlines()
                locations = [f"line {i}" for i in range(1, len(issue) + 1)]
                yield InjectionRow(text="issue", group=f"issue text ({split})", id=task.instance_id,
                                   findings=scan_lines(issue, "issue", locations))  # fmt: skip
        for source in DEV_AGENTS:
            for path in sorted(inputs.dev.agent_trajs(source).iterdir()):
                try:
                    trace = load_trace(str(path))
                except BadInput as exc:
                    yield InjectionRow(text="trace", group=f"trace {source}", id=path.stem, unreadable=str(exc))
                    continue
                yield InjectionRow(text="trace", group=f"trace {source}", id=path.stem, findings=scan_trace(trace))

    def summary(self, rows: list[InjectionRow]) -> list[str]:
        scanned = Counter(r.group for r in rows if r.unreadable is None)
        flagged = Counter(r.group for r in rows if r.findings)
        unreadable = Counter(r.group for r in rows if r.unreadable is not None)
        lines = ["| text | scanned | flagged (false alarms) | not readable (not scanned) |", "|---|---:|---:|---:|"]
        groups = dict.fromkeys(r.group for r in rows)  # in scan order
        lines += [f"| {g} | {scanned[g]} | {flagged[g]} | {unreadable[g]} |" for g in groups]
        lines += ["", "## Every finding", ""]
        lines += [f"- {r.group} {r.id} {f.location} ({f.rule}): `{f.excerpt}`" for r in rows for f in r.findings]
        return lines
