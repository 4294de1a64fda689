"""Summarise `cascade bench run` over real pull requests (gold + test_patch, merged fix commits) per repository.

Reads each run's ``results.jsonl`` and the full verdicts ``--reports`` wrote, and prints a markdown table per run:
rows, rejects (by deciding stage, with the deciding records), what Stage 2 could not conclude (skipped, runs that
crashed or timed out, PR tests that errored on base) and wall time. Regenerate the runs with the commands in each
directory's ``COMMAND.txt``; then::

    python3 benchmarks/real_prs.py DIR [DIR ...] > benchmarks/results/real_prs.md
"""

from __future__ import annotations

import re
import statistics
import sys
from collections import Counter, defaultdict
from pathlib import Path

from cascade.bench.results import read_rows
from cascade.bench.rows import TraceRow
from cascade.bench.worker import report_name
from cascade.models import Decision, Outcome, SideEffectDetails, TraceScanDetails, Verdict

_CAUSE = re.compile(r"(crash: [^)(:]+?(?:\(exit code \d+\))|timeout|setup error on base \((?:[^()]|\([^()]*\))*\))")


def _verdict(directory: Path, row: TraceRow) -> Verdict | None:
    path = directory / "reports" / report_name(row)
    return Verdict.model_validate_json(path.read_text(encoding="utf-8")) if path.is_file() else None


def _records(verdict: Verdict) -> Counter[str]:
    """Harmful side-effect records of the deciding Stage 2 result, by kind and detail (targets dropped)."""
    found: Counter[str] = Counter()
    for stage in verdict.stages:
        for evidence in stage.evidence:
            if not isinstance(evidence.details, SideEffectDetails | TraceScanDetails):
                continue
            for effect in evidence.details.side_effects:
                if not effect.benign:
                    found[f"{effect.kind} ({effect.source}): {effect.detail[:70]}"] += 1
    return found


def _inconclusive(verdict: Verdict) -> Counter[str]:
    """Why Stage 2 could not conclude: a skipped stage's reason, or the causes of runs that ran nothing."""
    causes: Counter[str] = Counter()
    for stage in verdict.stages:
        if stage.stage != "probes":
            continue
        if stage.outcome is Outcome.SKIPPED:
            causes[f"skipped: {(stage.reason or '')[:160]}"] += 1
        for evidence in stage.evidence:
            summary = evidence.summary
            if "not kept: setup error" in summary:
                match = _CAUSE.search(summary)
                causes[match.group(1) if match else summary[:80]] += 1
            elif "inconclusive on" in summary:  # "regression check inconclusive on <targets>: <cause>"
                causes[re.sub(r"[\d.]+s$", "…s", summary.rsplit(": ", 1)[-1])[:80]] += 1
    return causes


def _environment(verdict: Verdict) -> str | None:
    """Python and dependency sources of the Stage 2 setup line (``… uv venv X (Python 3.11.2; …; from: …)``)."""
    for stage in verdict.stages:
        for evidence in stage.evidence if stage.stage == "probes" else []:
            match = re.search(r"\(Python (\d+\.\d+)[^;]*;(?:.*?; from: (.*)\))?", evidence.summary)
            if evidence.summary.startswith("ran in sandbox") and match:
                sources = re.sub(r" \(\d+ pins, as constraints\)", " (pins)", match.group(2) or "harness table")
                return f"Python {match.group(1)}: {sources[:150]}"
    return None


def _deciding(row: TraceRow, verdict: Verdict | None) -> str:
    if verdict is None:
        return row.evidence[:200]
    stage = next((s for s in verdict.stages if s.stage == row.deciding_stage), None)
    reason = (stage.reason or "") if stage else row.evidence
    records = _records(verdict) if row.deciding_stage == "probes" else Counter()
    listed = "; ".join(f"{n} × {what}" for what, n in records.most_common(3))
    return f"{row.deciding_stage}: {reason[:160]}" + (f" — {listed}" if listed else "")


def summarise(directory: Path) -> str:
    rows = read_rows(directory / "results.jsonl")
    by_repo: dict[str, list[TraceRow]] = defaultdict(list)
    for row in rows:
        by_repo[row.repo].append(row)
    header = "| repository | rows | rejected | rows with runs that ran nothing | causes (runs) | row s (sum / median) |"
    lines = [f"### `{directory.name}` ({len(rows)} rows)", "", header, "|---|---|---|---|---|---|"]
    details: list[str] = []
    for repo, group in sorted(by_repo.items()):
        verdicts = {r.key: _verdict(directory, r) for r in group}  # one instance has a row per model
        rejects = [r for r in group if r.decision is Decision.REJECT]
        causes: Counter[str] = Counter()
        stuck = 0
        for row in group:
            verdict = verdicts[row.key]
            found = _inconclusive(verdict) if verdict else Counter()
            stuck += bool(found)
            causes.update(found)
        seconds = [r.cost.seconds for r in group]
        cause_text = "; ".join(f"{n} × {c}" for c, n in causes.most_common(4)) or "—"
        lines.append(f"| {repo} | {len(group)} | {len(rejects)} | {stuck} | {cause_text} | "
                     f"{sum(seconds):.0f} / {statistics.median(seconds):.0f} |")  # fmt: skip
        details += [f"- `{r.instance_id}` ({r.model}): {_deciding(r, verdicts[r.key])}" for r in rejects]
    envs = sorted({(r.repo, e) for r in rows if (v := _verdict(directory, r)) and (e := _environment(v))})
    environments = [f"- {repo}: {env}" for repo, env in envs] or ["None recorded."]
    return "\n".join(
        [
            *lines,
            "",
            "Rejects and their deciding evidence:",
            "",
            *(details or ["None."]),
            "",
            "Stage 2 environments (Python: where the dependencies came from):",
            "",
            *environments,
            "",
        ]
    )


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 3
    print("\n".join(summarise(Path(d)) for d in argv))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
