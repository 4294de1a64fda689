"""Stage 1 — patch-caused static errors (docs/architecture.md, Stages).

ruff (the selectors in ``static.ruff_select``) and pyright run, each once per tree, over the changed Python files
and their in-repo dependents, in the base and the patched worktree (concurrently). Diagnostics are fingerprinted
without line numbers and compared as multisets; what only the patched tree has is patch-caused. Only rule classes in
``static.reject_rules`` reject (see ``cascade.static.rules`` for the classes and the in-repo qualifiers); every
other patch-caused diagnostic is reported as grounded evidence for later stages. A missing, crashing or
timed-out tool yields ``unavailable`` evidence and a limitation the verdict's reason repeats, never a reject; with
``require_tools`` it ends the review (exit 3) instead.
"""

from __future__ import annotations

import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from pydantic import JsonValue

from cascade.config import StaticConfig
from cascade.context import ReviewContext
from cascade.errors import RequiredToolUnavailable
from cascade.models import (
    Diagnostic,
    Evidence,
    EvidenceKind,
    FileKind,
    Outcome,
    StageResult,
    StaticDetails,
    StaticTargetsNote,
    ToolFailure,
    ToolTiming,
)
from cascade.static.dependents import Targets, find_targets
from cascade.static.excluded import RepositoryExcludes
from cascade.static.fingerprint import fingerprint_all, new_diagnostics
from cascade.static.pyright import run_pyright
from cascade.static.reuse import StaticBaseRuns, reused, static_base_key, storable
from cascade.static.ruff import run_ruff
from cascade.static.rules import AddedLines, RepoLayout, library_lines, rule_class
from cascade.static.sources import forget_sources
from cascade.static.toolrun import ToolRun

MAX_LISTED = 200  # diagnostics listed per evidence item; counts always cover all


def python_version(cfg: StaticConfig) -> str:
    return cfg.python_version or f"{sys.version_info.major}.{sys.version_info.minor}"


def run_tools(tree: Path, files: list[str], cfg: StaticConfig) -> list[ToolRun]:
    """ruff then pyright over one tree."""
    version = python_version(cfg)
    ruff_target = "py" + version.replace(".", "")
    return [
        run_ruff(tree, files, cfg.ruff_select, ruff_target, cfg.timeout_seconds),
        run_pyright(tree, files, version, cfg.timeout_seconds),
    ]


class StaticStage:
    name = "static"
    needs_sandbox = False
    title = "Stage 1 — patch-caused static errors"

    def run(self, ctx: ReviewContext) -> StageResult:
        reason = ctx.unavailable_reason()
        if reason is not None or ctx.workspace is None:
            return StageResult.skipped(self.name, reason or "no checkout")
        cfg = ctx.config.static
        base, patched = ctx.workspace.base_dir, ctx.workspace.patched_dir
        targets = find_targets(ctx.patch, base, patched, cfg.max_dependents, ctx.config.no_change, cfg.timeout_seconds)
        if not targets.changed:
            summary = "no Python file changed: nothing for ruff or pyright to check"
            evidence = Evidence(kind=EvidenceKind.INFO, grounded=True, summary=summary)
            return StageResult(stage=self.name, outcome=Outcome.PASS, reason=summary, evidence=[evidence])
        forget_sources()
        store = ctx.store
        key = static_base_key(str(ctx.workspace.repo), ctx.workspace.base_commit, targets.base_files, cfg,
                              python_version(cfg))  # fmt: skip
        lookup = store.get(key, StaticBaseRuns) if store else None
        stored = lookup.value if lookup else None
        pool = ThreadPoolExecutor(max_workers=2 if cfg.parallel_trees else 1)
        try:
            base_job = None if stored else pool.submit(run_tools, base, targets.base_files, cfg)
            patched_job = pool.submit(run_tools, patched, targets.patched_files, cfg)
            base_runs = reused(stored, base) if stored else (base_job.result() if base_job else [])
            patched_runs = patched_job.result()
        finally:  # both results are in, or Ctrl-C: never wait for a tool run nobody will read (cascade/interrupt.py)
            pool.shutdown(wait=False, cancel_futures=True)
        fresh = storable(base_runs) if store and not stored else None
        if store and fresh:
            store.put(key, fresh)
        layout = RepoLayout(patched)
        tests = {f.path for f in ctx.patch.files if f.kind == FileKind.TEST}
        library = library_lines(targets.added_lines, layout, tests)
        excludes = RepositoryExcludes(base)
        result = judge(targets, base_runs, patched_runs, layout, cfg, self.name, library=library, excludes=excludes)
        if stored:
            result.cost.reuse.append(f"{self.name}: base-tree diagnostics from the result store")
        elif lookup and lookup.status == "ignored":
            result.cost.reuse.append(f"{self.name}: a stored base-tree entry was ignored ({lookup.why}); recomputed")
        return result


def judge(
    targets: Targets,
    base_runs: list[ToolRun],
    patched_runs: list[ToolRun],
    layout: RepoLayout,
    cfg: StaticConfig,
    stage: str,
    *,
    library: AddedLines | None = None,
    excludes: RepositoryExcludes | None = None,
) -> StageResult:
    """Compare the trees tool by tool and decide; ``library``: the added lines of library code (not tests);
    ``excludes``: files the repository keeps out of its own linting (test data), never a reason to reject."""
    evidence: list[Evidence] = [_targets_evidence(targets, base_runs + patched_runs)]
    new: list[Diagnostic] = []
    commands: dict[str, list[str]] = {}
    failed: list[Evidence] = []
    failed_tools: list[str] = []
    for base_run, patched_run in zip(base_runs, patched_runs, strict=True):
        if not (base_run.ok and patched_run.ok):
            failed.append(_unavailable(base_run, patched_run))
            failed_tools.append(base_run.tool)
            continue
        before = fingerprint_all(base_run.diagnostics, targets.renamed)
        after = fingerprint_all(patched_run.diagnostics, targets.renamed)
        new += new_diagnostics(before, after)
        commands[patched_run.tool] = [base_run.command(), patched_run.command()]
    if failed and cfg.require_tools:
        raise RequiredToolUnavailable(f"static: {failed[0].summary} (required by --require-tools / require_tools)")
    evidence += failed
    ran = [r.tool for r in patched_runs if r.ok]
    limitations = [_limitation(tool, ran) for tool in failed_tools]
    classes = {d.fingerprint: rule_class(d, layout, targets.added_lines, library) for d in new}
    kept_out = set(excludes.among(d.path for d in new)) if excludes else set()
    rejecting = [d for d in new if classes[d.fingerprint] in set(cfg.reject_rules) and d.path not in kept_out]
    others = [d for d in new if d not in rejecting]
    if kept_out:
        summary = (
            f"{len(kept_out)} file(s) with new diagnostics are excluded from linting by the repository's own "
            f"settings at base (test data, not a reason to reject): {', '.join(sorted(kept_out)[:5])}"
        )
        evidence.append(Evidence(kind=EvidenceKind.INFO, grounded=True, summary=summary))
    configs = {r.tool: r.config for r in patched_runs if r.config}
    if others:
        evidence.append(_diagnostics_evidence(others, classes, commands, configs, rejecting=False))
    if rejecting:
        evidence.insert(0, _diagnostics_evidence(rejecting, classes, commands, configs, rejecting=True))
        return StageResult(
            stage=stage, outcome=Outcome.REJECT, reason=evidence[0].summary, evidence=evidence, limitations=limitations
        )
    summary = f"no patch-caused error in a reject class ({len(new)} new diagnostic(s) in other classes)"
    if not ran:
        summary = "no static tool could run"
    if limitations:
        summary += f" — {'; '.join(limitations)}"
    return StageResult(stage=stage, outcome=Outcome.PASS, reason=summary, evidence=evidence, limitations=limitations)


def _limitation(tool: str, ran: list[str]) -> str:
    checked = f"checked with {' and '.join(ran)} only" if ran else "no static check ran"
    return f"{tool} unavailable — {checked}"


def _targets_evidence(targets: Targets, runs: list[ToolRun]) -> Evidence:
    summary = f"checked {len(targets.changed)} changed file(s) and {len(targets.dependents)} dependent(s)"
    details = StaticTargetsNote(
        changed=targets.changed,
        dependents=targets.dependents,
        names=targets.names,
        renamed=targets.renamed,
        tool_seconds=[ToolTiming(tool=r.tool, tree=r.tree, seconds=r.seconds) for r in runs],
    )
    return Evidence(kind=EvidenceKind.INFO, grounded=True, summary=summary, details=details)


def _unavailable(base_run: ToolRun, patched_run: ToolRun) -> Evidence:
    error = base_run.error or patched_run.error or "unknown failure"
    commands = [r.command() for r in (base_run, patched_run) if r.argv]
    return Evidence(
        kind=EvidenceKind.UNAVAILABLE,
        grounded=False,
        summary=f"{base_run.tool} unavailable: {error}",
        details=ToolFailure(tool=base_run.tool, base_error=base_run.error, patched_error=patched_run.error),
        commands=commands,
    )


def _diagnostics_evidence(
    diagnostics: list[Diagnostic],
    classes: dict[str, str],
    commands: dict[str, list[str]],
    configs: dict[str, dict[str, JsonValue]],
    *,
    rejecting: bool,
) -> Evidence:
    counts = Counter(classes[d.fingerprint] for d in diagnostics)
    listed = ", ".join(f"{cls} ×{n}" for cls, n in counts.most_common())
    if rejecting:
        first = diagnostics[0]
        summary = (
            f"{len(diagnostics)} patch-caused error(s) in reject classes ({listed}); "
            f"first: {first.path}:{first.line}: {first.message.splitlines()[0]}"
        )
    else:
        summary = f"{len(diagnostics)} patch-caused diagnostic(s) outside the reject allow-list ({listed})"
    tools = sorted({d.tool for d in diagnostics})
    return Evidence(
        kind=EvidenceKind.STATIC,
        grounded=True,
        summary=summary,
        diagnostics=diagnostics[:MAX_LISTED],
        commands=[c for t in tools for c in commands.get(t, [])],
        details=StaticDetails(
            counts_by_class=dict(counts),
            class_of={d.fingerprint: classes[d.fingerprint] for d in diagnostics[:MAX_LISTED]},
            total=len(diagnostics),
            tool_configs={t: configs[t] for t in tools if t in configs},
            rejecting=rejecting,
        ),
    )
