"""Soundness and cost of Stages 0+1 on real SWE-bench patches (README, How it decides).

For every patch of a fetchable repository among the gold patches (lite + verified task rows), the officially
resolved submissions and the CodeR predictions, run ``review`` with [NoChangeStage, StaticStage] at the task's
base commit. Writes one JSON line per patch and a Markdown summary:

    python -m benchmarks.static_soundness --data ../shared/data/swebench --repos /work/.mirror --jobs 2 \
        --out benchmarks/results/static_soundness

``--summary-only`` rebuilds the Markdown from an existing JSONL (the allow-list is re-applied to the recorded
rule classes, so the effect of changing ``reject_rules`` is visible without re-running the tools).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from cascade.bench.data import DevData, TaskRow
from cascade.bench.repos import RepoResolver
from cascade.config import DEFAULT_REJECT_RULES, CascadeConfig, StaticConfig
from cascade.context import ReviewContext
from cascade.errors import CascadeError
from cascade.models import Outcome, ReviewRequest, StageResult, StaticTargetsNote, Verdict
from cascade.pipeline import review
from cascade.stages import make_stage
from cascade.stages.static import StaticStage, python_version
from cascade.static.pyright import run_pyright

ACCEPTABLE = "acceptable"
DEFECT = "defect"


class Item(BaseModel):
    model_config = ConfigDict(extra="forbid")

    instance: str
    source: str  # gold | resolved-submission | coder
    model: str = ""
    label: str  # acceptable | defect
    repo: str
    base_commit: str
    patch: str

    @property
    def key(self) -> str:
        digest = hashlib.sha256(self.patch.encode()).hexdigest()[:12]
        return f"{self.source}:{self.instance}:{digest}"


class Record(BaseModel):
    model_config = ConfigDict(extra="forbid")

    key: str
    instance: str
    source: str
    model: str
    label: str
    decision: str
    deciding_stage: str | None = None
    reason: str = ""
    new_by_class: dict[str, int] = Field(default_factory=dict)
    new_diagnostics: list[dict[str, Any]] = Field(default_factory=list)
    unavailable: list[str] = Field(default_factory=list)
    changed: int = 0
    dependents: int = 0
    stage1_seconds: float | None = None
    base_from_cache: bool = False
    pyright_alone_seconds: float | None = None
    error: str | None = None


class TimedStaticStage(StaticStage):
    """Stage 1, timed on its own, followed (outside that time) by one pyright run on the changed files alone."""

    def __init__(self, measure_alone: bool = True) -> None:
        self.measure_alone = measure_alone
        self.stage_seconds: float | None = None
        self.pyright_alone_seconds: float | None = None

    def run(self, ctx: ReviewContext) -> StageResult:
        started = time.perf_counter()
        result = super().run(ctx)
        self.stage_seconds = round(time.perf_counter() - started, 3)
        if ctx.workspace is not None and self.measure_alone:
            changed = [f.target_path for f in ctx.patch.files if f.is_python and f.target_path and not f.is_removed]
            changed = [p for p in changed if (ctx.workspace.patched_dir / p).is_file()]
            if changed:
                cfg = ctx.config.static
                alone = run_pyright(ctx.workspace.patched_dir, changed, python_version(cfg), cfg.timeout_seconds)
                self.pyright_alone_seconds = alone.seconds if alone.ok else None
        return result


def _own_records(path: Path) -> list[dict[str, Any]]:
    """This script's own output lines (not the SWE-bench data, which cascade.bench.data reads)."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def load_items(data: Path, repos: Path, unfetchable: Counter[str] | None = None) -> list[Item]:
    """Every non-empty patch of a fetched repository; ``unfetchable`` counts, per source, those left out."""
    dev = DevData(data)
    tasks = {**dev.tasks("verified"), **dev.tasks("lite")}
    resolver = RepoResolver(repos_dir=str(repos))
    items: list[Item] = []

    def add(instance: str, source: str, label: str, patch: str, model: str = "", task: TaskRow | None = None):
        task = task or tasks.get(instance)
        if task is None or not patch.strip():
            return
        if resolver.resolve(task.repo).path is None:
            if unfetchable is not None:
                unfetchable[source] += 1
            return
        items.append(
            Item(
                instance=instance,
                source=source,
                model=model,
                label=label,
                repo=task.repo,
                base_commit=task.base_commit,
                patch=patch,
            )
        )

    for split in ("lite", "verified"):
        for row in dev.tasks(split).values():
            add(row.instance_id, "gold", ACCEPTABLE, row.patch, "gold", row)
    resolved = dev.agent_resolved("coder")
    for pred in dev.agent_predictions("coder"):
        label = ACCEPTABLE if pred.instance_id in resolved else DEFECT
        add(pred.instance_id, "coder", label, pred.model_patch or "", pred.model_name_or_path)
    for split in ("lite", "verified"):
        for pred in dev.resolved_submissions(split):
            add(pred.instance_id, "resolved-submission", ACCEPTABLE, pred.model_patch or "", pred.model_name_or_path)
    unique: dict[str, Item] = {}
    for item in items:
        unique.setdefault(item.key, item)
    # gold and CodeR first, then the resolved submissions; a fixed pseudo-random order inside each, so a partial
    # run still covers every repository in proportion
    return sorted(
        unique.values(),
        key=lambda i: (i.source == "resolved-submission", hashlib.sha256(i.key.encode()).hexdigest()),
    )


def sampled(item: Item, every: int) -> bool:
    """Deterministic 1-in-``every`` sample (by key) of the patches that also get a pyright-alone timing."""
    return every > 0 and int(hashlib.sha256(item.key.encode()).hexdigest()[-6:], 16) % every == 0


def _base_cached(verdict: Verdict) -> bool:
    notes = [e.details for s in verdict.stages if s.stage == "static" for e in s.evidence]
    return any(isinstance(d, StaticTargetsNote) and d.base_from_cache for d in notes)


def _static_details(verdict: Verdict) -> tuple[dict[str, int], list[dict[str, Any]], list[str], int, int]:
    counts: Counter[str] = Counter()
    diags: list[dict[str, Any]] = []
    unavailable: list[str] = []
    changed = dependents = 0
    for stage in verdict.stages:
        if stage.stage != "static":
            continue
        if stage.outcome == Outcome.SKIPPED:
            unavailable.append(f"stage skipped: {stage.reason}")
        for ev in stage.evidence:
            if ev.kind.value == "unavailable":
                unavailable.append(ev.summary)
            if ev.kind.value == "info":
                changed = len(ev.details.model_dump().get("changed", []))
                dependents = len(ev.details.model_dump().get("dependents", []))
            if ev.kind.value == "static":
                counts.update(ev.details.model_dump().get("counts_by_class", {}))
                class_of = ev.details.model_dump().get("class_of", {})
                diags += [
                    {
                        "class": class_of.get(d.fingerprint, ""),
                        "path": d.path,
                        "line": d.line,
                        "message": d.message.splitlines()[0][:200],
                        "source_line": d.source_line.strip()[:160],
                    }
                    for d in ev.diagnostics
                ]
    return dict(counts), diags[:60], unavailable, changed, dependents


def evaluate(item: Item, repos: Path, measure_alone: bool = True, cache_dir: str | None = None) -> Record:
    """Review one patch; the record keeps every new diagnostic's class, so any allow-list can be re-applied."""
    stage = TimedStaticStage(measure_alone)
    base = Record(
        key=item.key, instance=item.instance, source=item.source, model=item.model, label=item.label, decision="error"
    )
    repo = RepoResolver(repos_dir=str(repos)).resolve(item.repo).path or item.repo
    config = CascadeConfig(static=StaticConfig(cache_dir=cache_dir))
    request = ReviewRequest(repo=str(repo), base_ref=item.base_commit, patch_text=item.patch, config=config)
    try:
        verdict = review(request, stages=[make_stage("no_change"), stage])
    except CascadeError as exc:
        lines = str(exc).splitlines() or [type(exc).__name__]
        return base.model_copy(update={"error": lines[0] if len(lines) == 1 else f"{lines[0]} … {lines[-1]}"})
    counts, diags, unavailable, changed, dependents = _static_details(verdict)
    return base.model_copy(
        update={
            "decision": verdict.decision.value,
            "deciding_stage": verdict.deciding_stage,
            "reason": verdict.reason[:300],
            "new_by_class": counts,
            "new_diagnostics": diags,
            "unavailable": unavailable,
            "changed": changed,
            "dependents": dependents,
            "stage1_seconds": stage.stage_seconds,
            "pyright_alone_seconds": stage.pyright_alone_seconds,
            "base_from_cache": _base_cached(verdict),
        }
    )


def _evaluate_job(item_json: str, repos: str, measure_alone: bool, cache_dir: str | None) -> str:
    return evaluate(Item.model_validate_json(item_json), Path(repos), measure_alone, cache_dir).model_dump_json()


def _keep_records(out: Path, redo_classes: list[str]) -> set[str]:
    """Keys already measured; records with a class in ``redo_classes`` (prefix match) are dropped to re-run."""
    if not out.exists():
        return set()
    rows = _own_records(out)
    keep = [r for r in rows if not any(c.startswith(p) for c in r["new_by_class"] for p in redo_classes)]
    keep = [r for r in keep if not (redo_classes and r.get("error") is None and r.get("unavailable"))]
    # a worktree that could not be created (a race between concurrent `git worktree add`) is retried
    keep = [r for r in keep if not (r.get("error") or "").startswith("git worktree add failed")]
    if len(keep) != len(rows):
        out.write_text("".join(json.dumps(r) + "\n" for r in keep), encoding="utf-8")
    return {r["key"] for r in keep}


def run(
    items: list[Item], repos: Path, jobs: int, out: Path, alone_every: int, redo: list[str], cache_dir: str | None
) -> None:
    done = _keep_records(out, redo)
    todo = [i for i in items if i.key not in done]
    print(f"{len(items)} patches, {len(done)} already done, {len(todo)} to run", file=sys.stderr)
    with ProcessPoolExecutor(max_workers=jobs) as pool, out.open("a", encoding="utf-8") as fh:
        futures = [
            pool.submit(_evaluate_job, i.model_dump_json(), str(repos), sampled(i, alone_every), cache_dir)
            for i in todo
        ]
        for n, future in enumerate(as_completed(futures), 1):
            record = Record.model_validate_json(future.result())
            fh.write(record.model_dump_json() + "\n")
            fh.flush()
            print(f"[{n}/{len(todo)}] {record.key} {record.decision} {record.stage1_seconds}s", file=sys.stderr)


def static_rejects(record: Record, allow: set[str]) -> list[str]:
    return sorted(c for c, n in record.new_by_class.items() if n and c in allow)


def decision_under(record: Record, allow: set[str]) -> str:
    """The decision with ``allow`` as the reject allow-list (Stage 0 rejects stand as recorded)."""
    if record.error:
        return "error"
    if record.deciding_stage == "no_change":
        return "reject:no_change"
    return "reject:static" if static_rejects(record, allow) else "pass"


def summarize(records: list[Record], allow: set[str], planned: Counter[str], unfetchable: Counter[str]) -> str:
    lines = ["# Stage 0+1 soundness on SWE-bench patches", ""]
    lines.append(f"Allow-list ({len(allow)} classes): " + ", ".join(f"`{c}`" for c in sorted(allow)))
    lines.append("")
    done = Counter(r.source for r in records)
    lines.append(
        "Patches measured / planned (fetchable repositories, non-empty, de-duplicated): "
        + ", ".join(f"{src} {done[src]}/{planned[src]}" for src in sorted(planned))
    )
    lines.append(
        "Not measurable here (repository not fetchable; Stage 1 needs a checkout): "
        + ", ".join(f"{src} {n}" for src, n in sorted(unfetchable.items()))
    )
    with_dependents = [r.dependents for r in records if r.dependents]
    lines.append(
        f"Patches whose targets included in-repo dependents: {len(with_dependents)} "
        f"(dependents per such patch: max {max(with_dependents, default=0)})"
    )
    lines.append("")
    lines += _group_table(records, allow)
    lines += _false_rejects(records, allow)
    lines += _class_table(records, allow)
    lines += _timing(records)
    return "\n".join(lines) + "\n"


def _group_table(records: list[Record], allow: set[str]) -> list[str]:
    groups = [("gold", ACCEPTABLE), ("resolved-submission", ACCEPTABLE), ("coder", ACCEPTABLE), ("coder", DEFECT)]
    out = [
        "| patches | n | reject by Stage 0 | reject by Stage 1 | errors (did not apply) | tool unavailable |",
        "|---|---|---|---|---|---|",
    ]
    for source, label in groups:
        group = [r for r in records if r.source == source and r.label == label]
        decisions = Counter(decision_under(r, allow) for r in group)
        unavailable = sum(1 for r in group if r.unavailable)
        out.append(
            f"| {source} ({label}) | {len(group)} | {decisions['reject:no_change']} | "
            f"{decisions['reject:static']} | {decisions['error']} | {unavailable} |"
        )
    return [*out, ""]


def _false_rejects(records: list[Record], allow: set[str]) -> list[str]:
    out = ["## Rejections", ""]
    for r in records:
        decision = decision_under(r, allow)
        if not decision.startswith("reject"):
            continue
        classes = static_rejects(r, allow)
        first = next((d for d in r.new_diagnostics if d["class"] in classes), None)
        where = f" — `{first['path']}:{first['line']}` {first['message']}" if first else ""
        out.append(f"- {r.label} {r.source} {r.model} {r.instance}: {decision} {', '.join(classes)}{where}")
    return [*out, ""]


def _class_table(records: list[Record], allow: set[str]) -> list[str]:
    out = [
        "## New diagnostics per rule class",
        "",
        "| class | in allow-list | acceptable patches with it | defect patches with it |",
        "|---|---|---|---|",
    ]
    acceptable: Counter[str] = Counter()
    defect: Counter[str] = Counter()
    for r in records:
        for cls, n in r.new_by_class.items():
            if n:
                (acceptable if r.label == ACCEPTABLE else defect)[cls] += 1
    for cls in sorted(set(acceptable) | set(defect) | allow, key=lambda c: (-acceptable[c], c)):
        out.append(f"| `{cls}` | {'yes' if cls in allow else 'no'} | {acceptable[cls]} | {defect[cls]} |")
    return [*out, ""]


def _timing(records: list[Record]) -> list[str]:
    out = ["## Time (this machine: 2 shared cores, other jobs running)", ""]
    for cached, what in ((False, "both trees analysed"), (True, "base tree's runs from static.cache_dir")):
        timed = [r for r in records if r.stage1_seconds is not None and r.base_from_cache is cached]
        if not timed:
            continue
        seconds = [r.stage1_seconds or 0.0 for r in timed]
        out.append(
            f"- Stage 1 wall time ({what}): median {statistics.median(seconds):.2f} s over {len(timed)} patches "
            f"(p90 {_quantile(seconds, 0.9):.2f} s)"
        )
        paired = [r for r in timed if r.pyright_alone_seconds]
        if paired:
            alone = statistics.median(r.pyright_alone_seconds or 0.0 for r in paired)
            ratios = [(r.stage1_seconds or 0.0) / (r.pyright_alone_seconds or 1.0) for r in paired]
            out.append(
                f"  - one pyright run on the same changed files alone: median {alone:.2f} s; per-patch ratio "
                f"Stage 1 / pyright-alone: median {statistics.median(ratios):.2f} over {len(paired)} patches"
            )
    return [*out, ""]


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--data", type=Path, required=True, help="The SWE-bench dev data (its README names the files).")
    parser.add_argument("--repos", type=Path, required=True, help="Repositories, as `cascade bench run --repos-dir`.")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("benchmarks/results/static_soundness"),
        help="output prefix: writes PREFIX.jsonl and PREFIX.md",
    )
    parser.add_argument("--limit", type=int, default=0, help="only the first N patches (0 = all)")
    parser.add_argument(
        "--alone-every",
        type=int,
        default=4,
        help="also time one pyright run on the changed files alone for 1 in N patches (0 = never)",
    )
    parser.add_argument(
        "--redo-class", action="append", default=[], help="re-run recorded patches with a new diagnostic of this class"
    )
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=None,
        help="static.cache_dir: reuse base-tree runs across patches of one task (timed runs are reported apart)",
    )
    parser.add_argument("--summary-only", action="store_true", help="rebuild the Markdown from the JSONL")
    args = parser.parse_args(argv)
    if not DevData(args.data).has("lite"):
        print(f"no SWE-bench data at {args.data}", file=sys.stderr)
        return 3
    jsonl, markdown = args.out.with_suffix(".jsonl"), args.out.with_suffix(".md")
    jsonl.parent.mkdir(parents=True, exist_ok=True)
    unfetchable: Counter[str] = Counter()
    items = load_items(args.data, args.repos, unfetchable)
    if not args.summary_only:
        chosen = items[: args.limit] if args.limit else items
        cache = str(args.cache_dir) if args.cache_dir else None
        run(chosen, args.repos, args.jobs, jsonl, args.alone_every, args.redo_class, cache)
    lines = jsonl.read_text(encoding="utf-8").splitlines() if jsonl.exists() else []
    records = [Record.model_validate_json(line) for line in lines if line.strip()]
    allow = set(CascadeConfig().static.reject_rules or DEFAULT_REJECT_RULES)
    planned = Counter(i.source for i in items)
    markdown.write_text(summarize(records, allow, planned, unfetchable), encoding="utf-8")
    print(f"wrote {jsonl} and {markdown}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
