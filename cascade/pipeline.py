"""Run the stages in order, stop at the first decision, record per-stage time (docs/architecture.md, Stages)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack

from cascade import __version__
from cascade.config import CascadeConfig
from cascade.context import ReviewContext
from cascade.errors import IncompleteRepository, RequiredToolUnavailable
from cascade.leaks import scrub
from cascade.llm.errors import CassetteMiss
from cascade.models import (
    Cost,
    Decision,
    Evidence,
    EvidenceKind,
    Outcome,
    Patch,
    Policy,
    ReviewRequest,
    SideEffect,
    SideEffectDetails,
    StageResult,
    Verdict,
)
from cascade.patch import parse_patch
from cascade.stable import run_placeholders, stable_result
from cascade.stages import check_names, default_stages
from cascade.stages.base import Stage
from cascade.stages.evasion import evasion_findings
from cascade.stages.injection import injection_findings
from cascade.store import cache_root, open_store
from cascade.workspace import PristineCheckouts, Workspace

_DECISIVE = {Outcome.ACCEPT: Decision.ACCEPT, Outcome.REJECT: Decision.REJECT, Outcome.UNCERTAIN: Decision.UNCERTAIN}
# Stages that only read the trees. Before any other stage runs (Stage 2 runs tests there; the official-tests arm
# builds from the base tree), no file of the trees shares its inode with the pristine checkout any more
# (docs/architecture.md, Checkouts): a stage missing here costs a copy, never the pristine checkout.
READS_TREES_ONLY = frozenset({"no_change", "hygiene", "injection", "trace_scan", "static", "reviewer"})


def run_stage(stage: Stage, ctx: ReviewContext) -> StageResult:
    """Run one stage, timing it; a crash becomes a recorded `skipped` result, never an accept. The result names
    no temporary path of this run (see cascade.stable), so reports are stable and later stages see that too.
    A cassette replay miss ends the review: the replay could not reproduce the recorded run."""
    started = time.perf_counter()
    try:
        if ctx.workspace is not None and stage.name not in READS_TREES_ONLY:
            ctx.workspace.make_private()
        result = stage.run(ctx)
    except (CassetteMiss, RequiredToolUnavailable):
        raise
    except Exception as exc:
        reason = f"stage crashed: {type(exc).__name__}: {exc}"
        result = StageResult.skipped(stage.name, reason)
    result.cost.seconds = round(time.perf_counter() - started, 4)
    workspace = ctx.workspace
    stable = stable_result(result, run_placeholders(workspace.base_dir, workspace.patched_dir) if workspace else {})
    return screened(stable)


def screened(result: StageResult) -> StageResult:
    """Everything a stage reports is scanned before it is kept (docs/architecture.md, "Run model", point 5): a decoy
    credential anywhere in it was copied out of a sandboxed run — a ``leak``, which rejects — and every copy, and any
    common secret format, is redacted."""
    found: list[str] = []
    data = scrub(result.model_dump(mode="json"), found)
    clean = StageResult.model_validate(data)
    if not found:
        return clean
    summary = (
        f"a decoy credential reached this stage's report ({len(found)} place(s)): a secret was copied out of a run"
    )
    record = SideEffect(kind="leak", target="the stage's report", source="report_scan", detail=summary)
    leak = Evidence(kind=EvidenceKind.SIDE_EFFECT, grounded=True, summary=summary,
                    details=SideEffectDetails(side_effects=[record], allowed_total=0))  # fmt: skip
    update: dict[str, object] = {"evidence": [leak, *clean.evidence]}
    if clean.outcome != Outcome.REJECT:
        update |= {"outcome": Outcome.REJECT, "reason": summary}
    return clean.model_copy(update=update)


def decide(results: list[StageResult], policy: Policy, apply_method: str | None) -> Verdict:
    cost = sum((r.cost for r in results), Cost())
    limitations = [f"{r.stage}: {limit}" for r in results for limit in r.limitations]
    for r in results:
        if r.outcome in _DECISIVE:
            decision, reason = cap_accept(_DECISIVE[r.outcome], r.reason, results)
            return Verdict(
                tool_version=__version__,
                decision=decision,
                deciding_stage=r.stage,
                reason=with_limitations(reason, limitations),
                stages=results,
                policy=policy,
                cost=cost,
                apply_method=apply_method,
                limitations=limitations,
            )
    not_run = [f"{r.stage}: {r.reason}" for r in results if r.outcome == Outcome.SKIPPED]
    inconclusive = [f"{r.stage}: {r.reason}" for r in results if r.outcome == Outcome.INCONCLUSIVE]
    reason = "no stage reached a decision"
    if inconclusive:
        reason += "; inconclusive — " + "; ".join(inconclusive)
    if not_run:
        reason += "; could not run — " + "; ".join(not_run)
    return Verdict(
        tool_version=__version__,
        decision=Decision.UNCERTAIN,
        deciding_stage=None,
        reason=with_limitations(reason, limitations),
        stages=results,
        policy=policy,
        cost=cost,
        apply_method=apply_method,
        limitations=limitations,
    )


def with_limitations(reason: str, limitations: list[str]) -> str:
    """The headline reason, followed by every check that ran weakened (a missing tool is never silent)."""
    return reason if not limitations else f"{reason} [{'; '.join(limitations)}]"


def cap_accept(decision: Decision, reason: str, results: list[StageResult]) -> tuple[Decision, str]:
    """Text addressed to the reviewer (cascade/stages/injection.py) makes an accept ``uncertain``, citing it: an
    accept rests on no grounded finding, so it must not be one the reviewed text asked for."""
    found = [*injection_findings(results), *evasion_findings(results)]
    if decision != Decision.ACCEPT or not found:
        return decision, reason
    return Decision.UNCERTAIN, f"accept withheld: {found[0].summary.split(' — ')[0]}; the accept was: {reason}"


def policy_of(request: ReviewRequest) -> Policy:
    cfg = request.config
    return Policy(
        probe_pass=cfg.probes.probe_pass,
        reviewer_may_reject=cfg.reviewer.reviewer_may_reject,
        reject_rules=list(cfg.static.reject_rules),
        llm_model=cfg.llm.model,
        sandbox=cfg.sandbox.backend,
    )


def run_stages(ctx: ReviewContext, stages: Sequence[Stage], on_stage: Callable[[str], None] | None = None) -> Verdict:
    """Run ``stages`` in order until one decides; ``on_stage`` hears each stage's name as it starts (progress)."""
    for stage in stages:
        if on_stage is not None:
            on_stage(stage.name)
        result = run_stage(stage, ctx)
        ctx.results.append(result)
        if result.outcome in _DECISIVE:
            break
    apply_method = ctx.workspace.apply_method if ctx.workspace else None
    verdict = decide(ctx.results, policy_of(ctx.request), apply_method)
    return verdict.model_copy(update={"changed_files": [f.path for f in ctx.patch.files]})


def pristine_checkouts(config: CascadeConfig) -> PristineCheckouts | None:
    cfg = config.cache
    return PristineCheckouts(cache_root(cfg.dir) / "checkouts", cfg.checkouts_max_mb << 20) if cfg.checkouts else None


def review(
    request: ReviewRequest,
    stages: Sequence[Stage] | None = None,
    *,
    with_repo: bool = True,
    patch: Patch | None = None,
    on_stage: Callable[[str], None] | None = None,
) -> Verdict:
    """Review one patch. ``with_repo=False`` runs without a checkout (stages that need one are skipped)."""
    check_names(request.config)
    patch = patch or parse_patch(request.patch_text, request.config.no_change)
    stages = list(stages) if stages is not None else default_stages(request.config)
    with ExitStack() as stack:
        workspace, problem = None, None
        if with_repo:
            workspace = stack.enter_context(
                Workspace(request.repo, request.base_ref, pristine_checkouts(request.config))
            )
            try:
                workspace.prepare(patch)
            except IncompleteRepository as exc:  # the stages that need no checkout still run
                workspace, problem = None, str(exc)
        store = open_store(request.config.cache)
        ctx = ReviewContext(request=request, patch=patch, workspace=workspace, repo_problem=problem, store=store)
        verdict = run_stages(ctx, stages, on_stage)
        if problem is None:
            return verdict
        return verdict.model_copy(update={"incomplete_repo": problem, "reason": f"{problem} — {verdict.reason}"})
