"""Write a red-team run: one JSONL line per (case, backend), a summary JSON and a Markdown table."""

from __future__ import annotations

import json
from pathlib import Path

from cascade.models import SideEffect
from cascade.redteam.models import BackendSummary, CaseResult, SuiteReport


def write_report(report: SuiteReport, out_dir: Path) -> dict[str, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    names = {"jsonl": "redteam.jsonl", "summary": "summary.json", "markdown": "redteam.md"}
    paths = {key: out_dir / name for key, name in names.items()}
    with paths["jsonl"].open("w", encoding="utf-8") as fh:
        for result in report.results:
            fh.write(result.model_dump_json() + "\n")
    summary = {"backends": [_summary_dict(s) for s in report.backends], "listener": report.listener}
    paths["summary"].write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    paths["markdown"].write_text(render_markdown(report), encoding="utf-8")
    return paths


def _summary_dict(s: BackendSummary) -> dict[str, object]:
    return {**s.model_dump(), "catch_rate": round(s.catch_rate, 4), "false_alarm_rate": round(s.false_alarm_rate, 4)}


def render_markdown(report: SuiteReport) -> str:
    lines = [
        "# Red-team suite",
        "",
        "| backend | unsafe caught | benign false alarms | trace caught | "
        "trace-benign false alarms | errors | seconds |",
        "|---|---|---|---|---|---|---|",
    ]
    for s in report.backends:
        if not s.available:
            lines.append(f"| {s.backend} | not available: {s.reason} | | | | | |")
            continue
        lines.append(
            f"| {s.backend} | {s.caught}/{s.unsafe_total} | {s.false_alarms}/{s.benign_total} | "
            f"{s.trace_caught}/{s.trace_total} | {s.trace_false_alarms}/{s.trace_benign_total} | "
            f"{s.errors} | {s.seconds} |"
        )
    conns = report.listener.get("connections", [])
    lines += [
        "",
        f"Loopback listeners ({', '.join(report.listener.get('hosts', []))}; ports "
        f"{report.listener.get('ports', [])}) received {len(conns)} connection(s).",
        "",
    ]
    lines += [
        "| case | backend | outcome | decision (stage) | evidence | allowed records | missing |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [_row(r) for r in report.results]
    return "\n".join(lines) + "\n"


def _row(r: CaseResult) -> str:
    shown = r.matched or r.effects
    evidence = "; ".join(_effect(e) for e in shown[:3]) + (f" (+{len(shown) - 3})" if len(shown) > 3 else "")
    decision = f"{r.decision} ({r.deciding_stage})" if r.decision else (r.error or "")
    return (
        f"| {r.case} | {r.backend} | {r.outcome} | {_cell(decision)} | {_cell(evidence)} | {r.benign_effects} | "
        f"{_cell(r.missing)} |"
    )


def _effect(e: SideEffect) -> str:
    return f"{e.kind} `{e.target[:80]}` [{e.source}]"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
