"""Soundness and cost of Stages 0+1 on real SWE-bench patches (README, How it decides).

For every patch of a repository that is here among the gold patches (lite + verified task rows), the officially
resolved submissions and the CodeR predictions (`cascade/bench/items.py`), ``review`` runs [no_change, static] at
the task's base commit; 1 in 4 patches (a fixed sample by key) also gets one pyright run on the changed files alone,
timed apart. Each row keeps every new diagnostic's class, so the summary re-applies the configured reject allow-list
to the recorded classes (`--from-rows` shows the effect of changing ``static.reject_rules`` without re-running the
tools). Patches of repositories not here are rows too ("not measurable here")."""

from __future__ import annotations

import hashlib
import statistics
import time
from collections import Counter
from collections.abc import Iterator

from pydantic import BaseModel, ConfigDict, Field

from cascade.bench.items import PatchItem, PatchRow, patch_items
from cascade.bench.scans import ScanInputs, in_order
from cascade.context import ReviewContext
from cascade.models import Outcome, StageResult, StaticDetails, StaticTargetsNote, Verdict
from cascade.stages.static import StaticStage

SOURCES = ("gold", "coder", "resolved-submission")
GROUPS = (("gold", "acceptable"), ("resolved-submission", "acceptable"), ("coder", "acceptable"), ("coder", "defect"))
ALONE_EVERY = 4
MAX_DIAGNOSTICS = 60


class NewDiagnostic(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rule_class: str
    path: str
    line: int
    message: str
    source_line: str


class SoundnessRow(PatchRow):
    here: bool
    decision: str = "not run"
    deciding_stage: str | None = None
    reason: str = ""
    new_by_class: dict[str, int] = Field(default_factory=dict)
    new_diagnostics: list[NewDiagnostic] = Field(default_factory=list)
    unavailable: list[str] = Field(default_factory=list)
    changed: int = 0
    dependents: int = 0
    stage1_seconds: float | None = None
    base_from_store: bool = False
    pyright_alone_seconds: float | None = None
    error: str | None = None


class TimedStaticStage(StaticStage):
    """Stage 1, timed on its own, followed (outside that time) by one pyright run on the changed files alone."""

    def __init__(self, measure_alone: bool) -> None:
        self.measure_alone = measure_alone
        self.stage_seconds: float | None = None
        self.pyright_alone_seconds: float | None = None

    def run(self, ctx: ReviewContext) -> StageResult:
        from cascade.stages.static import python_version
        from cascade.static.pyright import run_pyright

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


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class StaticSoundnessScan:
    name = "static-soundness"
    title = "Stage 0+1 soundness on SWE-bench patches"
    needs_data = True
    row = SoundnessRow

    def rows(self, inputs: ScanInputs) -> Iterator[SoundnessRow]:
        work = [(item, inputs.repos.resolve(item.repo).path) for item in chosen(patch_items(inputs.dev))]
        here = [w for w in work if w[1] is not None][: inputs.limit or None]  # --limit: the first N measurable
        yield from in_order(_evaluate, [*here, *(w for w in work if w[1] is None)], inputs.jobs)

    def summary(self, rows: list[SoundnessRow]) -> list[str]:
        from cascade.config import DEFAULT_REJECT_RULES, CascadeConfig

        allow = set(CascadeConfig().static.reject_rules or DEFAULT_REJECT_RULES)
        here = [r for r in rows if r.here]
        absent = Counter(r.source for r in rows if not r.here)
        measured = Counter(r.source for r in here)
        with_dependents = [r.dependents for r in here if r.dependents]
        return [
            f"Allow-list ({len(allow)} classes): " + ", ".join(f"`{c}`" for c in sorted(allow)),
            "",
            "Patches measured (repositories here, non-empty, de-duplicated): "
            + ", ".join(f"{s} {n}" for s, n in sorted(measured.items())),
            "Not measurable here (repository not here; Stage 1 needs a checkout): "
            + (", ".join(f"{s} {n}" for s, n in sorted(absent.items())) or "none"),
            f"Patches whose targets included in-repo dependents: {len(with_dependents)} "
            f"(dependents per such patch: max {max(with_dependents, default=0)})",
            "",
            *_group_table(here, allow),
            *_rejections(here, allow),
            *_class_table(here, allow),
            *_timing(here),
        ]


def chosen(items: list[PatchItem]) -> list[PatchItem]:
    """Gold, CodeR and the resolved submissions, one per (source, instance, patch text); gold and CodeR first, then the
    resolved submissions, in a fixed pseudo-random order inside each (a partial run covers every repository)."""
    unique: dict[str, PatchItem] = {}
    for item in items:
        if item.source in SOURCES:
            unique.setdefault(_key(item), item)
    return sorted(unique.values(), key=lambda i: (i.source == "resolved-submission", _digest(_key(i))))


def _key(item: PatchItem) -> str:
    return f"{item.source}:{item.instance}:{_digest(item.patch)[:12]}"


def _evaluate(work: tuple[PatchItem, str | None]) -> SoundnessRow:
    """Review one patch; the row keeps every new diagnostic's class."""
    from cascade.errors import CascadeError
    from cascade.models import ReviewRequest
    from cascade.pipeline import review
    from cascade.stages import make_stage

    item, repo = work
    row = SoundnessRow.of(item, key=_key(item), here=repo is not None)
    if repo is None:
        return row
    stage = TimedStaticStage(int(_digest(row.key)[-6:], 16) % ALONE_EVERY == 0)
    request = ReviewRequest(repo=repo, base_ref=item.base_commit, patch_text=item.patch)
    try:
        verdict = review(request, stages=[make_stage("no_change"), stage])
    except CascadeError as exc:
        lines = str(exc).splitlines() or [type(exc).__name__]
        error = lines[0] if len(lines) == 1 else f"{lines[0]} … {lines[-1]}"
        return row.model_copy(update={"decision": "error", "error": error})
    row.decision, row.deciding_stage, row.reason = verdict.decision.value, verdict.deciding_stage, verdict.reason[:300]
    _read_static(row, verdict)
    row.stage1_seconds, row.pyright_alone_seconds = stage.stage_seconds, stage.pyright_alone_seconds
    return row


def _read_static(row: SoundnessRow, verdict: Verdict) -> None:
    counts: Counter[str] = Counter()
    for stage in (s for s in verdict.stages if s.stage == "static"):
        if stage.outcome == Outcome.SKIPPED:
            row.unavailable.append(f"stage skipped: {stage.reason}")
        row.base_from_store = any("from the result store" in line for line in stage.cost.reuse)
        for ev in stage.evidence:
            if ev.kind.value == "unavailable":
                row.unavailable.append(ev.summary)
            if isinstance(ev.details, StaticTargetsNote):
                row.changed, row.dependents = len(ev.details.changed), len(ev.details.dependents)
            if isinstance(ev.details, StaticDetails):
                counts.update(ev.details.counts_by_class)
                row.new_diagnostics += [NewDiagnostic(rule_class=ev.details.class_of.get(d.fingerprint, ""),
                                                      path=d.path, line=d.line,
                                                      message=d.message.splitlines()[0][:200],
                                                      source_line=d.source_line.strip()[:160])
                                        for d in ev.diagnostics]  # fmt: skip
    row.new_by_class = dict(counts)
    row.new_diagnostics = row.new_diagnostics[:MAX_DIAGNOSTICS]


def static_rejects(row: SoundnessRow, allow: set[str]) -> list[str]:
    return sorted(c for c, n in row.new_by_class.items() if n and c in allow)


def decision_under(row: SoundnessRow, allow: set[str]) -> str:
    """The decision with ``allow`` as the reject allow-list (Stage 0 rejects stand as recorded)."""
    if row.error:
        return "error"
    if row.deciding_stage == "no_change":
        return "reject:no_change"
    return "reject:static" if static_rejects(row, allow) else "pass"


def _group_table(rows: list[SoundnessRow], allow: set[str]) -> list[str]:
    out = ["| patches | n | reject by Stage 0 | reject by Stage 1 | errors (did not apply) | tool unavailable |",
           "|---|---|---|---|---|---|"]  # fmt: skip
    for source, label in GROUPS:
        group = [r for r in rows if r.source == source and r.label == label]
        decisions = Counter(decision_under(r, allow) for r in group)
        unavailable = sum(bool(r.unavailable) for r in group)
        out.append(f"| {source} ({label}) | {len(group)} | {decisions['reject:no_change']} | "
                   f"{decisions['reject:static']} | {decisions['error']} | {unavailable} |")  # fmt: skip
    return [*out, ""]


def _rejections(rows: list[SoundnessRow], allow: set[str]) -> list[str]:
    out = ["## Rejections", ""]
    for r in rows:
        decision = decision_under(r, allow)
        if decision.startswith("reject"):
            classes = static_rejects(r, allow)
            first = next((d for d in r.new_diagnostics if d.rule_class in classes), None)
            where = f" — `{first.path}:{first.line}` {first.message}" if first else ""
            out.append(f"- {r.label} {r.source} {r.model} {r.instance}: {decision} {', '.join(classes)}{where}")
    return [*out, ""]


def _class_table(rows: list[SoundnessRow], allow: set[str]) -> list[str]:
    out = ["## New diagnostics per rule class", "",
           "| class | in allow-list | acceptable patches with it | defect patches with it |",
           "|---|---|---|---|"]  # fmt: skip
    acceptable: Counter[str] = Counter()
    defect: Counter[str] = Counter()
    for r in rows:
        for cls, n in r.new_by_class.items():
            if n:
                (acceptable if r.label == "acceptable" else defect)[cls] += 1
    for cls in sorted(set(acceptable) | set(defect) | allow, key=lambda c: (-acceptable[c], c)):
        out.append(f"| `{cls}` | {'yes' if cls in allow else 'no'} | {acceptable[cls]} | {defect[cls]} |")
    return [*out, ""]


def _timing(rows: list[SoundnessRow]) -> list[str]:
    out = ["## Time (this machine: 2 shared cores)", ""]
    for stored, what in ((False, "both trees analysed"), (True, "the base tree's runs from the result store")):
        timed = [r for r in rows if r.stage1_seconds is not None and r.base_from_store is stored]
        if not timed:
            continue
        seconds = sorted(r.stage1_seconds or 0.0 for r in timed)
        p90 = seconds[min(len(seconds) - 1, int(0.9 * len(seconds)))]
        out.append(f"- Stage 1 wall time ({what}): median {statistics.median(seconds):.2f} s over {len(timed)} "
                   f"patches (p90 {p90:.2f} s)")  # fmt: skip
        paired = [r for r in timed if r.pyright_alone_seconds]
        if paired:
            alone = statistics.median(r.pyright_alone_seconds or 0.0 for r in paired)
            ratios = [(r.stage1_seconds or 0.0) / (r.pyright_alone_seconds or 1.0) for r in paired]
            ratio = statistics.median(ratios)
            out.append(f"  - one pyright run on the same changed files alone: median {alone:.2f} s; per-patch ratio "
                       f"Stage 1 / pyright-alone: median {ratio:.2f} over {len(paired)} patches")  # fmt: skip
    return out
