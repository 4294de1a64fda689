"""Stage 2 on the SWE-bench dev split: environment fidelity (a) and Stage 2 as a gate (b)–(c).

(a) ``fidelity`` — environment fidelity: for each Lite task row of a fetchable repository, the official FAIL_TO_PASS
    tests run in the sandbox on base + test_patch (they should fail) and on base + test_patch + gold patch (they
    should pass); agreement per repository.
(b)/(c) ``gate`` — Stage 2 alone (``ProbesStage``) on CodeR predictions with their trajectories (mined probes;
    rejections of defects), on gold patches and on officially resolved submissions (rejections: target zero).

    python -m benchmarks.stage2_fidelity fidelity --data D --repos-dir R --repo sympy/sympy --out ….jsonl
    python -m benchmarks.stage2_fidelity gate --data D --repos-dir R --set gold --repo sympy/sympy --shard 0/2
    python -m benchmarks.stage2_fidelity report --data D --repos-dir R --results benchmarks/results

Needs Python 3.9 for the old repositories (scripts/install-python39.sh) and the repositories under --repos-dir.
Each command appends one JSON line per item and skips items already in its output, so runs can be resumed.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from cascade.bench.data import DevData, trace_file
from cascade.bench.repos import RepoResolver
from cascade.config import parse_config
from cascade.errors import CascadeError
from cascade.execution.envs import EnvironmentUnavailable, EnvSpec, ensure_environment
from cascade.execution.official import node_ids
from cascade.execution.repo_specs import spec_for_repo
from cascade.execution.runner import TestResult, run_pytest
from cascade.git import git
from cascade.models import EvidenceKind, ReviewRequest
from cascade.patch import parse_patch
from cascade.pipeline import review
from cascade.sandbox.select import get_sandbox
from cascade.stages import make_stage
from cascade.traces import load_trace
from cascade.workspace import apply_patch

REPOS = RepoResolver()  # --repos-dir, set in main


def mirror_of(repo: str) -> Path:
    path = REPOS.resolve(repo).path
    if path is None:
        raise CascadeError(f"{repo}: {REPOS.resolve(repo).note}")
    return Path(path)


def load_rows(data: Path, repos: set[str]) -> list[dict[str, Any]]:
    """Lite task rows (as dicts: the fields as published) of the chosen repositories found under --repos-dir."""
    rows = [row.model_dump() for row in DevData(data).tasks("lite").values()]
    return [r for r in rows if r["repo"] in repos and REPOS.resolve(r["repo"]).path is not None]


def done_keys(out: Path) -> set[str]:
    if not out.is_file():
        return set()
    return {json.loads(line)["key"] for line in out.read_text().splitlines() if line.strip()}


def append(out: Path, record: dict[str, Any]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(record) + "\n")


def shard_of(items: list[Any], shard: str) -> list[Any]:
    index, total = (int(x) for x in shard.split("/"))
    return items[index::total]


# ------------------------------------------------------------------------------------------------------------------
# (a) environment fidelity


class Checkout:
    """A detached worktree of the mirror at one commit, removed afterwards."""

    def __init__(self, repo: str, commit: str) -> None:
        self.mirror = mirror_of(repo)
        self.dir = Path(tempfile.mkdtemp(prefix="s2fid-")) / "tree"
        git(self.mirror, "worktree", "add", "--detach", "--force", str(self.dir), commit)

    def __enter__(self) -> Path:
        return self.dir

    def __exit__(self, *exc: object) -> None:
        git(self.mirror, "worktree", "remove", "--force", str(self.dir), check=False)
        shutil.rmtree(self.dir.parent, ignore_errors=True)


def f2p_node_ids(row: dict[str, Any], tree: Path) -> tuple[list[str], list[str]]:
    """Node ids of the FAIL_TO_PASS tests; sympy lists bare function names, found in the test_patch's files."""
    files = [f.path for f in parse_patch(row["test_patch"]).files if f.path.endswith(".py")]
    return node_ids(json.loads(row["FAIL_TO_PASS"]), files, tree)


def env_spec(repo: str, version: str | None = None) -> EnvSpec:
    spec = spec_for_repo(repo, version)
    if spec is None:
        raise EnvironmentUnavailable(f"{repo}: no environment spec")
    return spec


def fidelity_row(row: dict[str, Any], backend: str, scope: str = "ids") -> dict[str, Any]:
    """``scope``: run the F2P node ids alone ("ids") or, as the SWE-bench harness does, the test_patch's whole test
    files ("files"; order-dependent tests then see the tests that run before them)."""
    record: dict[str, Any] = {"key": row["instance_id"], "repo": row["repo"], "version": row["version"], "scope": scope}
    started = time.perf_counter()
    sandbox = get_sandbox(parse_config({"sandbox": {"backend": backend}}).sandbox)
    with Checkout(row["repo"], row["base_commit"]) as tree:
        try:
            env = ensure_environment(env_spec(row["repo"], row["version"]), project_tree=tree)
        except EnvironmentUnavailable as exc:
            return {**record, "status": "no_env", "reason": str(exc)}
        apply_patch(tree, row["test_patch"])
        ids, missing = f2p_node_ids(row, tree)
        targets = sorted({i.split("::")[0] for i in ids}) if scope == "files" else ids
        base = run_pytest(sandbox, env, tree, targets, tag="base", timeout_seconds=900)
        apply_patch(tree, row["patch"])
        gold = run_pytest(sandbox, env, tree, targets, tag="gold", timeout_seconds=900)
    base_by, gold_by = base.by_id(), gold.by_id()
    tests = {i: {"base": _outcome(base_by.get(i)), "gold": _outcome(gold_by.get(i))} for i in ids}
    fails_on_base = all(t["base"]["status"] in ("behavioural_fail", "setup_error") for t in tests.values())
    behavioural_on_base = all(t["base"]["status"] == "behavioural_fail" for t in tests.values())
    passes_with_gold = all(t["gold"]["status"] == "pass" for t in tests.values())
    return {
        **record,
        "status": "ran",
        "python": env.python_version,
        "tests": tests,
        "missing_names": missing,
        "run_errors": [e for e in (base.run_error, gold.run_error) if e],
        "agree": bool(ids) and not missing and fails_on_base and passes_with_gold,
        "behavioural_on_base": behavioural_on_base,
        "seconds": round(time.perf_counter() - started, 1),
        "log_excerpt": "" if passes_with_gold else gold.log_excerpt()[-800:],
    }


def _outcome(result: TestResult | None) -> dict[str, str]:
    """A test's status with enough of its failure to tell an environment problem from a real one."""
    if result is None:
        return {"status": "missing"}
    if result.status == "pass":
        return {"status": "pass"}
    return {"status": result.status, "exception": result.exception, "message": result.message[:200]}


# ------------------------------------------------------------------------------------------------------------------
# (b)/(c) Stage 2 as a gate


def gate_items(data: Path, which: str, rows: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    by_id = {r["instance_id"]: r for r in rows}
    if which == "gold":
        for r in rows:
            yield {"key": f"gold:{r['instance_id']}", "row": r, "patch": r["patch"], "label": "acceptable"}
    elif which == "coder":
        dev = DevData(data)
        resolved = dev.agent_resolved("coder")
        for pred in dev.agent_predictions("coder"):
            iid = pred.instance_id
            if iid in by_id and (pred.model_patch or "").strip():
                traj = trace_file(dev.agent_trajs("coder"), iid)
                label = "acceptable" if iid in resolved else "defect"
                yield {"key": f"coder:{iid}", "row": by_id[iid], "patch": pred.model_patch, "label": label,
                       "trace": str(traj) if traj is not None else None}  # fmt: skip
    elif which == "resolved":
        for pred in DevData(data).resolved_submissions("lite"):
            if pred.instance_id in by_id and (pred.model_patch or "").strip():
                key = f"resolved:{pred.model_name_or_path}:{pred.instance_id}"
                row = by_id[pred.instance_id]
                yield {"key": key, "row": row, "patch": pred.model_patch, "label": "acceptable"}


def gate_item(item: dict[str, Any], backend: str) -> dict[str, Any]:
    row = item["row"]
    record: dict[str, Any] = {"key": item["key"], "repo": row["repo"], "label": item["label"]}
    spec = env_spec(row["repo"], row["version"])
    config = parse_config(
        {
            "sandbox": {"backend": backend},
            "env": {"python": spec.python, "packages": spec.packages, "install_project": spec.install_project,
                    "extras": spec.extras},
            "probes": {"sources": ["trace", "pr_tests"]},
        }
    )  # fmt: skip
    trace = load_trace(item["trace"]) if item.get("trace") else None
    request = ReviewRequest(
        repo=str(mirror_of(row["repo"])), base_ref=row["base_commit"], patch_text=item["patch"], trace=trace,
        config=config,
    )  # fmt: skip
    started = time.perf_counter()
    if spec.unsupported:
        return {**record, "outcome": "skipped", "reason": spec.unsupported}
    try:
        # One nearby test file (test_<module>.py first), as Stage 2's first measurement did; it bounds the run time.
        verdict = review(request, stages=[make_stage("probes", max_regression_files=1)])
    except CascadeError as exc:
        return {**record, "outcome": "error", "reason": str(exc)}
    stage = verdict.stages[0]
    return {
        **record,
        "outcome": stage.outcome.value,
        "reason": stage.reason,
        "seconds": round(time.perf_counter() - started, 1),
        "has_trace": trace is not None,
        "evidence": [
            {"kind": e.kind.value, "summary": e.summary[:400], "details": _slim(e.details.model_dump())}
            for e in stage.evidence
            if e.kind != EvidenceKind.INFO or "probe" in e.summary or "regression" in e.summary
        ],
    }


def _slim(details: dict[str, Any]) -> dict[str, Any]:
    keep = ("test_id", "class", "exception", "origin", "probe", "executed_changed_lines", "expected_vs_got")
    slim = {k: details[k] for k in keep if k in details}
    for side in ("base", "patched"):
        if isinstance(details.get(side), dict):
            slim[side] = {"status": details[side].get("status"), "message": str(details[side].get("message"))[:300]}
    if "side_effects" in details:
        slim["side_effects"] = details["side_effects"][:10]
    return slim


# ------------------------------------------------------------------------------------------------------------------
# report


def read(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def fidelity_lines(fid: list[dict[str, Any]], how: str) -> list[str]:
    lines: list[str] = []
    lines += [
        f"## (a) Environment fidelity (FAIL_TO_PASS fail on base+test_patch, pass with gold; {how})",
        "",
        "| repo | rows | ran | agree | F2P fail behaviourally on base | no env |",
        "|---|---|---|---|---|---|",
    ]
    per: dict[str, Counter[str]] = defaultdict(Counter)
    for r in fid:
        c = per[r["repo"]]
        c["rows"] += 1
        c["ran"] += r["status"] == "ran"
        c["agree"] += bool(r.get("agree"))
        c["behavioural"] += bool(r.get("behavioural_on_base"))
        c["no_env"] += r["status"] == "no_env"
    for repo, c in sorted(per.items()):
        lines.append(f"| {repo} | {c['rows']} | {c['ran']} | {c['agree']} | {c['behavioural']} | {c['no_env']} |")
    disagree = [r for r in fid if r["status"] == "ran" and not r.get("agree")]
    lines += ["", "Disagreements (F2P outcomes per side, as measured):", ""]
    lines += [f"- {r['key']}: {_outcome_counts(r)}" for r in disagree] or ["- none"]
    no_env = sorted({r.get("reason", "") for r in fid if r["status"] == "no_env"})
    lines += ["", *(f"No environment: {reason}" for reason in no_env), ""]
    return lines


FIDELITY_FILES = {
    "stage2_fidelity.jsonl": "F2P node ids run alone",
    "stage2_fidelity_files.jsonl": "the test_patch's whole test files run, as the SWE-bench harness does",
}


def report(results: Path) -> str:
    lines = ["# Stage 2 on the dev split: environment fidelity and Stage 2 as a gate", ""]
    for name, how in FIDELITY_FILES.items():
        fid = read(results / name)
        if fid:
            lines += fidelity_lines(fid, how)
    for which in ("gold", "resolved", "coder"):
        rows = read(results / f"stage2_gate_{which}.jsonl")
        if not rows:
            continue
        lines += [f"## Stage 2 on {which} patches", "", "| label | n | reject | accept | pass | skipped/error |",
                  "|---|---|---|---|---|---|"]  # fmt: skip
        for label in ("acceptable", "defect"):
            sel = [r for r in rows if r["label"] == label]
            if not sel:
                continue
            c = Counter(r["outcome"] for r in sel)
            other = c["skipped"] + c["error"]
            lines.append(f"| {label} | {len(sel)} | {c['reject']} | {c['accept']} | {c['pass']} | {other} |")
        lines += ["", *gate_repo_lines(rows)]
        if which == "coder":
            lines += ["", *coder_probe_lines(rows)]
        rejected = [f"{r['key']} ({r['label']}): {r['reason'][:200]}" for r in rows if r["outcome"] == "reject"]
        lines += ["", "Rejections:", *(f"- {x}" for x in rejected or ["none"]), ""]
    return "\n".join(lines) + "\n"


def gate_repo_lines(rows: list[dict[str, Any]]) -> list[str]:
    lines = ["| repo | n | reject | accept | pass | skipped/error |", "|---|---|---|---|---|---|"]
    for repo in sorted({r["repo"] for r in rows}):
        c = Counter(r["outcome"] for r in rows if r["repo"] == repo)
        n, other = sum(c.values()), c["skipped"] + c["error"]
        lines.append(f"| {repo} | {n} | {c['reject']} | {c['accept']} | {c['pass']} | {other} |")
    return lines


def _outcome_counts(record: dict[str, Any]) -> str:
    """``base: 4 behavioural_fail (ConnectionError); gold: …`` — enough to tell an environment problem at a glance."""
    sides = []
    for side in ("base", "gold"):
        counts: Counter[str] = Counter()
        for outcome in record.get("tests", {}).values():
            result = outcome[side] if isinstance(outcome[side], dict) else {"status": outcome[side]}
            exc = f" ({result['exception']})" if result.get("exception") else ""
            counts[result["status"] + exc] += 1
        sides.append(f"{side}: " + ", ".join(f"{n} {what}" for what, n in sorted(counts.items())))
    errors = "; run errors: " + ", ".join(record["run_errors"]) if record.get("run_errors") else ""
    return "; ".join(sides) + errors


def coder_probe_lines(rows: list[dict[str, Any]]) -> list[str]:
    with_trace = [r for r in rows if r.get("has_trace")]
    mined = [r for r in with_trace if any(e["details"].get("origin") == "trace" for e in r["evidence"])]
    kept = [r for r in with_trace if any("trace" in e["summary"] and "fail behaviourally on base" in e["summary"]
                                          for e in r["evidence"])]  # fmt: skip
    return [
        f"CodeR traces: {len(with_trace)}; yielding a usable mined probe (kept, relevant, judged on the patch): "
        f"{len(mined)}; failing behaviourally on base (before the relevance filter): {len(kept)}",
        f"Defects rejected: {sum(r['outcome'] == 'reject' for r in rows if r['label'] == 'defect')} of "
        f"{sum(r['label'] == 'defect' for r in rows)}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["fidelity", "gate", "report"])
    parser.add_argument("--set", dest="which", choices=["gold", "coder", "resolved"], default="gold")
    parser.add_argument("--repo", action="append", default=[], help="owner/name; repeatable (default sympy/sympy)")
    parser.add_argument("--data", type=Path, required=True, help="The SWE-bench dev data (its README names the files).")
    parser.add_argument("--repos-dir", required=True, help="Repositories, as `cascade bench run --repos-dir`.")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--results", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--shard", default="0/1", help="i/n: every n-th item from the i-th")
    parser.add_argument("--limit", type=int, default=0)
    parser.add_argument("--backend", default="bwrap", choices=["bwrap", "docker", "none"])
    parser.add_argument("--scope", default="ids", choices=["ids", "files"], help="fidelity: F2P ids or whole files")
    args = parser.parse_args()
    global REPOS
    REPOS = RepoResolver(repos_dir=args.repos_dir)
    if args.command == "report":
        text = report(args.results)
        (args.results / "stage2_summary.md").write_text(text, encoding="utf-8")
        print(text)
        return
    repos = set(args.repo or ["sympy/sympy"])
    rows = load_rows(args.data, repos)
    out = args.out or args.results / (
        "stage2_fidelity.jsonl" if args.command == "fidelity" else f"stage2_gate_{args.which}.jsonl"
    )
    done = done_keys(out)
    if args.command == "fidelity":
        items: list[dict[str, Any]] = [{"key": r["instance_id"], "row": r} for r in rows]
    else:
        items = list(gate_items(args.data, args.which, rows))
    items = [i for i in shard_of(items, args.shard) if i["key"] not in done]
    if args.limit:
        items = items[: args.limit]
    for n, item in enumerate(items, 1):
        try:
            if args.command == "fidelity":
                record = fidelity_row(item["row"], args.backend, args.scope)
            else:
                record = gate_item(item, args.backend)
        except (CascadeError, subprocess.SubprocessError, OSError) as exc:
            record = {"key": item["key"], "repo": item["row"]["repo"], "status": "error", "outcome": "error",
                      "label": item.get("label", ""), "reason": f"{type(exc).__name__}: {exc}"}  # fmt: skip
        append(out, record)
        summary = record.get("agree", record.get("outcome"))
        seconds = record.get("seconds", "-")
        print(f"[{n}/{len(items)}] {item['key']}: {summary} ({seconds}s)", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
