"""Stage 2 without a model on three agents' dev-split patches, per probe source, before and after the wider selection.

One run gives both sides: the stages run with ``stage2.exhaustive`` (every regression chunk and probe source runs even
after a reject; the decision is unchanged), and each grounded reject records its source. "Before" is the decision with
only what Stage 2 had before the wider regression selection and the issue source — the first regression chunk (the 2
nearby files), the trace and pr_tests sources, stages 0-1 and trace safety; "after" adds the wider regression chunks and
the issue source (and the trace source on moatless trajectories, when a reader for them exists).

    python -m benchmarks.stage2_agents run --data ../shared/data/swebench --repos-dir /work/.mirror \
        --out benchmarks/results/stage2_agents.jsonl --jobs 2
    python -m benchmarks.stage2_agents report --data ../shared/data/swebench --repos-dir /work/.mirror \
        --out benchmarks/results/stage2_agents.jsonl

Subset (fixed, stated in the report): every trace of CodeR, moatless-gpt4o and moatless-claude35 on the 8 fetchable
non-sympy repositories, plus a sympy sample (every 10th sympy Lite instance id in sorted order) of the same agents,
and the gold patches and (at most two per instance, in file order) resolved-submission patches of the same instances
as acceptable controls.
Each line of the JSONL is one trace; items already there are skipped, so a run can be resumed.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from collections import defaultdict
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from cascade.bench.data import DEV_AGENTS, DevData, TaskRow, trace_file
from cascade.bench.repos import RepoResolver
from cascade.probesources.issue import extract_examples

# Where the data and the repositories are (--data, --repos-dir): set once in main, before the worker processes fork.
DATA = DevData(".")
REPOS = RepoResolver()
AGENTS = DEV_AGENTS
SYMPY_EVERY = 10
RESOLVED_PER_INSTANCE = 2  # the first two resolved submissions per instance, in file order
SOURCES = ["generated", "issue", "trace", "pr_tests"]  # generated says "no model" and proposes nothing


def task_rows() -> dict[str, TaskRow]:
    """The Lite rows of the repositories found under --repos-dir."""
    return {iid: row for iid, row in DATA.tasks("lite").items() if REPOS.resolve(row.repo).path is not None}


def subset(tasks: dict[str, TaskRow]) -> set[str]:
    sympy = sorted(i for i, r in tasks.items() if r.repo == "sympy/sympy")
    return {i for i, r in tasks.items() if r.repo != "sympy/sympy"} | set(sympy[::SYMPY_EVERY])


def items() -> Iterator[dict[str, Any]]:
    tasks = task_rows()
    chosen = subset(tasks)
    for agent in AGENTS:
        resolved = DATA.agent_resolved(agent)
        for pred in DATA.agent_predictions(agent):
            iid = pred.instance_id
            if iid in chosen:
                traj = trace_file(DATA.agent_trajs(agent), iid)
                label = "acceptable" if iid in resolved else "defect"
                yield {"key": f"{agent}:{iid}", "set": agent, "iid": iid, "patch": pred.model_patch or "",
                       "label": label, "trace": str(traj) if traj else None}  # fmt: skip
    for iid in sorted(chosen):
        yield {"key": f"gold:{iid}", "set": "gold", "iid": iid, "patch": tasks[iid].patch, "label": "acceptable"}
    per_instance: dict[str, int] = defaultdict(int)
    for pred in DATA.resolved_submissions("lite"):
        if pred.instance_id in chosen and per_instance[pred.instance_id] < RESOLVED_PER_INSTANCE:
            per_instance[pred.instance_id] += 1
            key = f"resolved:{pred.model_name_or_path}:{pred.instance_id}"
            yield {"key": key, "set": "resolved", "iid": pred.instance_id, "patch": pred.model_patch or "",
                   "label": "acceptable"}  # fmt: skip


def review_item(item: dict[str, Any]) -> dict[str, Any]:
    from cascade.config import parse_config
    from cascade.errors import CascadeError
    from cascade.execution.repo_specs import spec_for_repo
    from cascade.models import ReviewRequest
    from cascade.pipeline import review
    from cascade.stages import default_stages
    from cascade.traces import load_trace

    row = task_rows()[item["iid"]]
    spec = spec_for_repo(row.repo, row.version)
    env = {"python": spec.python, "packages": spec.packages, "install_project": spec.install_project,
           "extras": spec.extras, "build_extensions": spec.build_extensions} if spec else {}  # fmt: skip
    stage2: dict[str, Any] = {"exhaustive": True, "sources": SOURCES}
    record: dict[str, Any] = {k: item[k] for k in ("key", "set", "iid", "label")}
    if spec is not None and spec.unsupported:  # stages 0-1 still decide; Stage 2 says why it cannot run
        stage2["enabled"] = False
        record["stage2_unavailable"] = spec.unsupported
    config = parse_config({"env": env, "probes": stage2})
    trace = None
    if item.get("trace"):
        try:
            trace = load_trace(item["trace"])
        except CascadeError:
            trace = None
    request = ReviewRequest(
        repo=REPOS.resolve(row.repo).path or row.repo, base_ref=row.base_commit,
        patch_text=item["patch"], issue_text=row.problem_statement, trace=trace, config=config,
    )  # fmt: skip
    record.update(repo=row.repo, has_trace=trace is not None)
    started = time.perf_counter()
    try:
        verdict = review(request, stages=default_stages(config))
    except CascadeError as exc:
        return {
            **record,
            "status": "error",
            "error": str(exc)[:500],
            "seconds": round(time.perf_counter() - started, 1),
        }
    record.update(status="ok", decision=verdict.decision.value, deciding_stage=verdict.deciding_stage)
    record["seconds"] = round(time.perf_counter() - started, 1)
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


def interleaved(todo: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Instances whose issue text has a runnable failing example first, then the rest; within each group, instances
    round-robin over repositories, each instance's agents and controls together: a run cut short still covers every
    repository with both defects and acceptable patches."""
    tasks = task_rows()
    by_repo: dict[str, list[str]] = defaultdict(list)
    for iid in sorted({i["iid"] for i in todo}):
        by_repo[tasks[iid].repo].append(iid)
    order: list[str] = []
    for rank in range(max((len(v) for v in by_repo.values()), default=0)):
        order += [iids[rank] for _, iids in sorted(by_repo.items()) if rank < len(iids)]
    position = {iid: n for n, iid in enumerate(order)}
    examples = {iid for iid in position if extract_examples(tasks[iid].problem_statement)}
    # Instances whose issue shows a runnable failing example first: there every source can act (the run is long).
    return sorted(todo, key=lambda i: (i["iid"] not in examples, position[i["iid"]]))


def run(out: Path, jobs: int, only: set[str] | None, repos: set[str] | None) -> None:
    done = {json.loads(x)["key"] for x in out.read_text().splitlines() if x.strip()} if out.is_file() else set()
    tasks = task_rows()
    todo = [i for i in items() if i["key"] not in done and (not only or i["set"] in only)]
    todo = interleaved([i for i in todo if not repos or tasks[i["iid"]].repo in repos])
    print(f"{len(todo)} trace(s) to run, {len(done)} done", flush=True)
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(review_item, i) for i in todo]
        for future in as_completed(futures):
            record = future.result()
            with out.open("a", encoding="utf-8") as f:
                f.write(json.dumps(record) + "\n")
            print(record["key"], record.get("decision"), record.get("seconds"), flush=True)


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


def report(out: Path) -> str:
    records = [json.loads(x) for x in out.read_text().splitlines() if x.strip()]
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
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["run", "report", "list"])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--sets", default="", help="Comma-separated subset of sets (coder, gold, …); empty = all.")
    parser.add_argument("--repos", default="", help="Comma-separated repositories (owner/name); empty = all.")
    parser.add_argument("--data", required=True, help="The SWE-bench dev data (its README names the files).")
    parser.add_argument("--repos-dir", required=True, help="Repositories, as `cascade bench run --repos-dir`.")
    args = parser.parse_args()
    global DATA, REPOS
    DATA, REPOS = DevData(args.data), RepoResolver(repos_dir=args.repos_dir)
    if args.command == "run":
        sets = set(filter(None, args.sets.split(","))) or None
        run(args.out, args.jobs, sets, set(filter(None, args.repos.split(","))) or None)
    elif args.command == "list":
        for i in items():
            print(i["key"], i["label"])
    else:
        text = report(args.out)
        args.out.with_suffix(".md").write_text(text, encoding="utf-8")
        print(text)


if __name__ == "__main__":
    main()
