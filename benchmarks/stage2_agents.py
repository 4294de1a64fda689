"""Stage 2 without a model on three agents' dev-split patches, per probe source, before and after the wider selection.

The traces run through `cascade bench run` (arm full-cascade, ``benchmarks/data/stage2_exhaustive.yaml``: every
regression chunk and probe source runs even after a reject, the decision unchanged; each verdict kept with
``--reports``); this script chooses the subset and reads the runs back. "Before" is the decision with only what
Stage 2 had before the wider regression selection and the issue source — the first regression chunk (the 2 nearby
files), the trace and pr_tests sources, stages 0-1 and trace safety; "after" adds the wider regression chunks and the
issue source (and the trace source on moatless trajectories, when a reader for them exists).

    python3 -m benchmarks.stage2_agents plan OUT --data ../shared/data/swebench --repos-dir /work/.mirror
    bash OUT/run.sh                  # one `cascade bench run` per set into OUT/<set>/ (resumable: re-run it)
    python3 -m benchmarks.stage2_agents report OUT     # OUT/records.jsonl (one line per trace) and OUT/report.md

Subset (fixed, stated in the report): every trace of CodeR, moatless-gpt4o and moatless-claude35 on the 8 fetchable
non-sympy repositories, plus a sympy sample (every 10th sympy Lite instance id in sorted order) of the same agents,
and the gold patches and (at most two per instance, in file order) resolved-submission patches of the same instances
as acceptable controls (``plan`` writes those to OUT/resolved.preds.jsonl). ``--repo`` narrows the subset.
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from cascade.bench.data import DEV_AGENTS, DevData
from cascade.bench.repos import RepoResolver
from cascade.bench.results import read_rows
from cascade.bench.rows import TraceRow, TraceStatus
from cascade.bench.worker import report_name
from cascade.models import Verdict

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "benchmarks" / "data" / "stage2_exhaustive.yaml"
AGENTS = DEV_AGENTS
SYMPY_EVERY = 10
RESOLVED_PER_INSTANCE = 2  # the first two resolved submissions per instance, in file order
TIMEOUT_SECONDS = 7200  # exhaustive Stage 2 on sympy runs long: a trace is cut only when something hangs
NOT_RUN_HERE = "Stage 2 not run: the harness table cannot test"  # cascade/bench/worker.py, NotRunHere's reason


def subset(data: DevData, repos: RepoResolver, only: set[str]) -> list[str]:
    """The chosen Lite instance ids whose repository is under --repos-dir."""
    tasks = {i: r for i, r in data.tasks("lite").items() if repos.resolve(r.repo).path is not None}
    tasks = {i: r for i, r in tasks.items() if not only or r.repo in only}
    sympy = sorted(i for i, r in tasks.items() if r.repo == "sympy/sympy")
    return sorted({i for i, r in tasks.items() if r.repo != "sympy/sympy"} | set(sympy[::SYMPY_EVERY]))


def plan(out: Path, data: DevData, repos_dir: str, only: set[str]) -> None:
    """OUT/ids.txt, OUT/resolved.preds.jsonl and OUT/run.sh: the `cascade bench run` of each set on the subset."""
    ids = subset(data, RepoResolver(repos_dir=repos_dir), only)
    out.mkdir(parents=True, exist_ok=True)
    (out / "ids.txt").write_text("".join(f"{i}\n" for i in ids))
    per_instance: dict[str, int] = defaultdict(int)
    with (out / "resolved.preds.jsonl").open("w", encoding="utf-8") as f:
        for pred in data.resolved_submissions("lite"):
            if pred.instance_id in ids and per_instance[pred.instance_id] < RESOLVED_PER_INSTANCE:
                per_instance[pred.instance_id] += 1
                f.write(pred.model_dump_json() + "\n")
    tasks = ["--tasks", str(data.tasks_file("lite"))]
    sets = {**{agent: data.run_arguments(agent) for agent in AGENTS}, "gold": [*tasks, "--gold"],
            "resolved": [*tasks, "--predictions", str(out / "resolved.preds.jsonl")]}  # fmt: skip
    lines = ["#!/bin/bash", f"# made by: {shlex.join(['python3', '-m', 'benchmarks.stage2_agents', *sys.argv[1:]])}",
             "set -e", 'IDS=$(sed "s/^/--instance /" "$(dirname "$0")/ids.txt")']  # fmt: skip
    for name, arguments in sets.items():
        command = ["cascade", "bench", "run", *arguments, "--repos-dir", repos_dir, "--arm", "full-cascade",
                   "--config", str(CONFIG), "--timeout", str(TIMEOUT_SECONDS), "--jobs", "2", "--quiet",
                   "--output", str(out / name), "--reports", str(out / name / "reports")]  # fmt: skip
        lines.append(f"{shlex.join(command)} $IDS")
    (out / "run.sh").write_text("\n".join(lines) + "\n")
    print(f"{len(ids)} instance(s); run: bash {out / 'run.sh'}")


def records(out: Path) -> list[dict[str, Any]]:
    """One record per trace of OUT/<set>/ (its row and its verdict in reports/), in the shape the report reads."""
    found: list[dict[str, Any]] = []
    for name in [*AGENTS, "gold", "resolved"]:
        results = out / name / "results.jsonl"
        for row in read_rows(results) if results.is_file() else []:
            found.append(record_of(name, row, out / name / "reports" / report_name(row)))
    return found


def record_of(name: str, row: TraceRow, report: Path) -> dict[str, Any]:
    key = f"resolved:{row.model}:{row.instance_id}" if name == "resolved" else f"{name}:{row.instance_id}"
    record: dict[str, Any] = {"key": key, "set": name, "iid": row.instance_id, "label": row.label.value,
                              "repo": row.repo, "has_trace": row.trace_loaded}  # fmt: skip
    if row.status != TraceStatus.OK or not report.is_file():
        return {**record, "status": "error", "error": (row.error or "no report")[:500], "seconds": row.cost.seconds}
    verdict = Verdict.model_validate_json(report.read_text(encoding="utf-8"))
    unavailable = next((s.reason for s in verdict.stages if s.stage == "probes" and NOT_RUN_HERE in s.reason), None)
    if unavailable:
        record["stage2_unavailable"] = unavailable
    record.update(status="ok", decision=verdict.decision.value, deciding_stage=verdict.deciding_stage,
                  seconds=round(row.cost.seconds, 1))  # fmt: skip
    record["stages"] = {s.stage: {"outcome": s.outcome.value, "reason": s.reason[:300], "seconds": s.cost.seconds}
                        for s in verdict.stages}  # fmt: skip
    record["findings"] = findings(verdict)
    return record


def findings(verdict: Any) -> list[dict[str, Any]]:
    """Grounded evidence of Stage 2 with its source and whether it rejects; other stages' decisions as sources."""
    out: list[dict[str, Any]] = []
    for stage in verdict.stages:
        if stage.stage != "probes":
            if stage.outcome.value == "reject":
                out.append({"source": stage.stage, "verdict": "reject", "summary": stage.reason[:300]})
            continue
        for e in stage.evidence:
            d = e.details.model_dump()
            if e.kind.value == "side_effect":  # grounded = harmful records; otherwise allowed ones as context
                verdict = "reject" if e.grounded else "evidence"
                out.append({"source": "side_effect", "verdict": verdict, "summary": e.summary[:300]})
            elif e.kind.value in ("probe", "regression"):
                source = d.get("source", e.kind.value)
                if source == "regression":
                    source = f"regression@{0 if d.get('chunk', 0) == 0 else 'wider'}"
                out.append({"source": source, "verdict": d.get("verdict", "evidence"), "summary": e.summary[:300],
                            "selected_by": d.get("selected_by")})  # fmt: skip
            elif e.kind.value == "info" and ("not kept" in e.summary or "discarded" in e.summary):
                out.append({"source": "info", "verdict": "none", "summary": e.summary[:200]})
    return out


# ------------------------------------------------------------------------------------------------------------------
# report


def wilson(k: int, n: int) -> str:
    if n == 0:
        return "–"
    z, p = 1.96, k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return f"{p:.2f} [{max(0.0, centre - half):.2f}, {min(1.0, centre + half):.2f}]"


def rejecting_sources(record: dict[str, Any]) -> set[str]:
    return {f["source"] for f in record.get("findings", []) if f["verdict"] == "reject" and not allowed_only(f)}


def allowed_only(finding: dict[str, Any]) -> bool:
    """Rows written before the fix of 2026-12-05 marked the oracle's allowed-records summary (ungrounded context,
    never a reject: the row's decision says so) as a reject; its summary says what it is."""
    return finding["source"] == "side_effect" and "allowed record(s)" in finding["summary"]


NEW_SOURCES = {"regression@wider", "issue"}  # what the wider selection and the issue source added to Stage 2


OFF_BY_DEFAULT = {"issue"}  # measured here with the source on; it ships off (see the report's text)
MODES = ("before", "default", "all")  # before the wider selection · after, shipped defaults · after, every source on


def rejects(record: dict[str, Any], sources: set[str] | None, mode: str = "all") -> bool:
    """Whether any of ``sources`` (None: any) rejects this trace under ``mode``: ``before`` counts only what Stage 2
    had before the wider selection, ``default`` what the shipped defaults run, ``all`` every source measured."""
    found = rejecting_sources(record)
    if mode == "before":
        found -= NEW_SOURCES
        if record["set"].startswith("moatless"):
            found -= {"trace"}  # no reader for moatless trajectories before this session
    elif mode == "default":
        found -= OFF_BY_DEFAULT
    return bool(found if sources is None else found & sources)


def source_order(records: list[dict[str, Any]]) -> list[str]:
    stages = ["no_change", "hygiene", "trace_scan", "static"]
    probes = ["side_effect", "regression@0", "regression@wider", "issue", "trace", "pr_tests", "generated"]
    seen = {s for r in records for s in rejecting_sources(r)}
    return (
        [s for s in stages if s in seen or s in stages] + [s for s in probes] + sorted(seen - set(stages) - set(probes))
    )


def decided_by(record: dict[str, Any], order: list[str]) -> str:
    """The source of the reject the default (non-exhaustive) order reports first."""
    found = rejecting_sources(record)
    return next((s for s in order if s in found), "")


def modes_cells(records: list[dict[str, Any]]) -> str:
    """One table cell per mode of MODES: k/n and its interval."""
    n = len(records)
    return " | ".join(f"{k}/{n} {wilson(k, n)}" for k in (sum(rejects(r, None, m) for r in records) for m in MODES))


def repository_lines(ok: list[dict[str, Any]]) -> list[str]:
    """Per repository, all agents together: defects caught after / before, acceptable rejected, Stage 2 not run."""
    lines = ["", "## Per repository (all three agents' defects; gold and resolved as acceptable), after (before)", "",
             "| repository | defects caught, all sources (before) | acceptable rejected, all sources |"
             " traces where Stage 2 could not run |",
             "|---|---|---|---|"]  # fmt: skip
    by_repo: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in ok:
        by_repo[r["repo"]].append(r)
    for repo, rs in sorted(by_repo.items()):
        d = [r for r in rs if r["label"] == "defect"]
        a = [r for r in rs if r["label"] == "acceptable"]
        ca, cb = sum(rejects(r, None) for r in d), sum(rejects(r, None, "before") for r in d)
        oa = sum(rejects(r, None) for r in a)
        unavailable = sum(1 for r in rs if r.get("stage2_unavailable"))
        lines.append(f"| {repo} | {ca}/{len(d)} ({cb}/{len(d)}) | {oa}/{len(a)} | {unavailable}/{len(rs)} |")
    return lines


def report_of(records: list[dict[str, Any]]) -> str:
    ok = [r for r in records if r["status"] == "ok"]
    order = source_order(ok)
    lines = ["# Stage 2 per agent and per source, dev split subset", "",
             f"Traces run: {len(records)} ({len(records) - len(ok)} error rows, excluded below).", ""]  # fmt: skip
    by_set: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in ok:
        by_set[r["set"]].append(r)
    for title, label in (("Catch (defects rejected)", "defect"), ("Over-rejection (acceptable patches rejected)",
                         "acceptable"), ("Coverage (all traces decided)", None)):  # fmt: skip
        lines += [f"## {title}, Wilson 95% CIs", "", "| set | n | before the wider selection | "
                  "after, shipped defaults | after, + issue source |", "|---|---|---|---|---|"]  # fmt: skip
        for name in [*AGENTS, "gold", "resolved"]:
            rs = [r for r in by_set.get(name, []) if label is None or r["label"] == label]
            if rs:
                lines.append(f"| {name} | {len(rs)} | {modes_cells(rs)} |")
        every = [r for r in ok if label is None or r["label"] == label]
        lines += [f"| **all sets** | {len(every)} | {modes_cells(every)} |", ""]
    lines += ["", "## Per source alone (would it reject?): defects rejected / acceptable rejected, per set", "",
              "| source | " + " | ".join(n for n in [*AGENTS, "gold", "resolved"] if by_set.get(n)) + " |",
              "|---|" + "---|" * sum(1 for n in [*AGENTS, "gold", "resolved"] if by_set.get(n))]  # fmt: skip
    for source in order:
        cells = []
        for name in [n for n in [*AGENTS, "gold", "resolved"] if by_set.get(n)]:
            d = [r for r in by_set[name] if r["label"] == "defect"]
            a = [r for r in by_set[name] if r["label"] == "acceptable"]
            kd, ka = sum(rejects(r, {source}) for r in d), sum(rejects(r, {source}) for r in a)
            cells.append(f"{kd}/{len(d)} · {ka}/{len(a)}")
        lines.append(f"| {source} | " + " | ".join(cells) + " |")
    d_all = [r for r in ok if r["label"] == "defect"]
    a_all = [r for r in ok if r["label"] == "acceptable"]
    lines += ["", "All sets together (Wilson 95% CIs):", "", "| source | defects rejected | acceptable rejected |",
              "|---|---|---|"]  # fmt: skip
    for source in order:
        kd, ka = sum(rejects(r, {source}) for r in d_all), sum(rejects(r, {source}) for r in a_all)
        nd, na = len(d_all), len(a_all)
        lines.append(f"| {source} | {kd}/{nd} {wilson(kd, nd)} | {ka}/{na} {wilson(ka, na)} |")
    lines += repository_lines(ok)
    lines += ["", "## Every reject: label, deciding source (default order), all rejecting sources", ""]
    for r in sorted(ok, key=lambda r: r["key"]):
        if rejects(r, None):
            source = decided_by(r, order)
            first = next(f for f in r["findings"] if f["verdict"] == "reject" and f["source"] == source)
            lines.append(f"- {r['key']} ({r['label']}): **{source}** — {first['summary'][:200]}; "
                         f"all: {', '.join(sorted(rejecting_sources(r)))}")  # fmt: skip
    probes_secs = [r["stages"]["probes"]["seconds"] for r in ok if r.get("stages", {}).get("probes", {}).get("seconds")]
    if probes_secs:
        probes_secs.sort()
        p90 = probes_secs[min(len(probes_secs) - 1, math.ceil(0.9 * len(probes_secs)) - 1)]
        median = statistics.median(probes_secs)
        lines += ["", f"Stage 2 wall time per trace where it ran (n={len(probes_secs)}, exhaustive mode, 2 cores "
                  f"shared with the run's other job and other benchmarks: loaded times): median {median:.0f} s, "
                  f"p90 {p90:.0f} s"]  # fmt: skip
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("command", choices=["plan", "report"])
    parser.add_argument("out", type=Path, help="The run's directory: ids.txt, run.sh, one folder per set.")
    parser.add_argument("--data", help="plan: the SWE-bench dev data (its README names the files).")
    parser.add_argument("--repos-dir", help="plan: repositories, as `cascade bench run --repos-dir`.")
    parser.add_argument("--repo", action="append", default=[], help="plan: only this repository; repeatable.")
    args = parser.parse_args()
    if args.command == "plan":
        if not (args.data and args.repos_dir):
            parser.error("plan needs --data and --repos-dir")
        plan(args.out, DevData(args.data), str(Path(args.repos_dir).resolve()), set(args.repo))
        return
    found = records(args.out)
    with (args.out / "records.jsonl").open("w", encoding="utf-8") as f:
        f.writelines(json.dumps(r) + "\n" for r in found)
    text = report_of(found)
    (args.out / "report.md").write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
