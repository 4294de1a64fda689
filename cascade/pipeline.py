"""Run the stages in order, stop at the first decision, record per-stage time (docs/architecture.md, Stages)."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from pathlib import Path

from cascade import __version__
from cascade.config import CascadeConfig
from cascade.context import ReviewContext
from cascade.errors import IncompleteRepository, RequiredToolUnavailable
from cascade.git import run_git
from cascade.leaks import scrub
from cascade.llm.errors import CassetteMiss
from cascade.models import (
    WORKING_TREE,
    Cost,
    Decision,
    Evidence,
    EvidenceKind,
    Outcome,
    Patch,
    Phase,
    Policy,
    ReviewRequest,
    SideEffect,
    SideEffectDetails,
    StageResult,
    Verdict,
)
from cascade.patch import parse_patch
from cascade.stable import (
    TOOLS,
    machine_placeholders,
    repo_placeholder,
    run_placeholders,
    stable_result,
    stable_verdict,
)
from cascade.stages import check_names, default_stages
from cascade.stages.base import Stage
from cascade.stages.evasion import evasion_findings
from cascade.stages.injection import injection_findings
from cascade.store import cache_root, open_store
from cascade.tools import find_tool
from cascade.workspace import PristineCheckouts, Workspace

# What a checkout that did not apply the patch as written leaves out of the review (the verdict's limitations).
APPLY_NOTES = {
    "patch-fuzz": "the patch applied only with fuzz (patch --fuzz=3), not with git apply: hunks were placed by "
    "their context, so the reviewed code can differ from what the diff shows",
    "git-apply-text-part": "the patch's binary files carry no data ('Binary files … differ') and were left out: "
    "only its text part was reviewed",
}
_DECISIVE = {Outcome.ACCEPT: Decision.ACCEPT, Outcome.REJECT: Decision.REJECT, Outcome.UNCERTAIN: Decision.UNCERTAIN}
# Stages that only read the trees. Before any other stage runs (Stage 2 runs tests there; the official-tests arm
# builds from the base tree), no file of the trees shares its inode with the pristine checkout any more
# (docs/architecture.md, Checkouts): a stage missing here costs a copy, never the pristine checkout.
READS_TREES_ONLY = frozenset({"no_change", "hygiene", "injection", "evasion", "trace_scan", "static", "reviewer"})


def run_stage(stage: Stage, ctx: ReviewContext, placeholders: dict[str, str] | None = None) -> StageResult:
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
    return screened(stable_result(result, review_placeholders(ctx) if placeholders is None else placeholders))


def review_placeholders(ctx: ReviewContext) -> dict[str, str]:
    """Every path of this run and machine a report must not name (cascade/stable.py): the trees, the repository,
    cascade's environment and tools, the test environments' cache, the home directory."""
    from cascade.execution.envs import DEFAULT_CACHE

    env_cache = ctx.config.env.cache_dir
    tools = tuple((name, path) for name in TOOLS if (path := find_tool(name)))
    found = machine_placeholders(tools, Path(env_cache).expanduser() if env_cache else DEFAULT_CACHE)
    workspace = ctx.workspace
    if workspace is None:
        return found
    return found | repo_placeholder(workspace.repo) | run_placeholders(workspace.base_dir, workspace.patched_dir)


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


def decide(
    results: list[StageResult], policy: Policy, apply_method: str | None, setup_notes: Sequence[str] = ()
) -> Verdict:
    """The verdict of the first decisive stage; ``setup_notes`` are what the checkout could not do as asked."""
    cost = sum((r.cost for r in results), Cost())
    limitations = [f"setup: {note}" for note in setup_notes]
    limitations += [f"{r.stage}: {limit}" for r in results for limit in r.limitations]
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


def run_stages(
    ctx: ReviewContext,
    stages: Sequence[Stage],
    on_progress: Callable[[str], None] | None = None,
    setup_notes: Sequence[str] = (),
) -> Verdict:
    """Run ``stages`` in order until one decides; ``on_progress`` hears "running stage NAME" as each one starts."""
    placeholders = review_placeholders(ctx)
    for stage in stages:
        if on_progress is not None:
            on_progress(f"running stage {stage.name}")
        result = run_stage(stage, ctx, placeholders)
        ctx.results.append(result)
        if result.outcome in _DECISIVE:
            break
    apply_method = ctx.workspace.apply_method if ctx.workspace else None
    verdict = decide(ctx.results, policy_of(ctx.request), apply_method, setup_notes)
    return verdict.model_copy(update={"changed_files": [f.path for f in ctx.patch.files]})


def pristine_checkouts(config: CascadeConfig) -> PristineCheckouts | None:
    cfg = config.cache
    return PristineCheckouts(cache_root(cfg.dir) / "checkouts", cfg.checkouts_max_mb << 20) if cfg.checkouts else None


def setup_notes(request: ReviewRequest, workspace: Workspace | None) -> list[str]:
    """What the reviewed trees may lack of what the user meant: a patch placed by fuzz, binary files without data,
    uncommitted changes of the repository the patch may have been written against."""
    if workspace is None:
        return []
    notes: list[str] = []
    if workspace.apply_method in APPLY_NOTES:
        notes.append(APPLY_NOTES[workspace.apply_method])
    if request.head_commit is None:
        dirty = uncommitted_files(workspace.repo)
        if dirty:
            notes.append(
                f"the repository has uncommitted changes in {dirty} file(s); the patch was applied to commit "
                f"{workspace.base_commit[:12]} without them"
            )
    return notes


def uncommitted_files(repo: Path) -> int:
    """Tracked files of the repository's checkout that differ from its HEAD (0 for a bare repository)."""
    proc = run_git(repo, "status", "--porcelain", "--untracked-files=no")
    return len(proc.stdout.splitlines()) if proc.returncode == 0 else 0


def review(
    request: ReviewRequest,
    stages: Sequence[Stage] | None = None,
    *,
    with_repo: bool = True,
    patch: Patch | None = None,
    on_progress: Callable[[str], None] | None = None,
) -> Verdict:
    """Review one patch. ``with_repo=False`` runs without a checkout (stages that need one are skipped).
    ``cost.seconds`` is the wall time of the whole review: setup and cleanup (``phases``) plus the stages."""
    started = time.perf_counter()
    check_names(request.config)
    patch = patch or parse_patch(request.patch_text, request.config.no_change)
    stages = list(stages) if stages is not None else default_stages(request.config)
    progress = on_progress or (lambda _message: None)
    with ExitStack() as stack:
        progress("preparing the trees")
        workspace, problem, base_commit = None, None, None
        if with_repo:
            workspace = stack.enter_context(
                Workspace(request.repo, request.base_ref, pristine_checkouts(request.config))
            )
            base_commit = workspace.base_commit
            try:
                workspace.prepare(patch)
            except IncompleteRepository as exc:  # the stages that need no checkout still run
                workspace, problem = None, str(exc)
        setup = Phase(name="setup", seconds=round(time.perf_counter() - started, 4))
        store = open_store(request.config.cache)
        ctx = ReviewContext(request=request, patch=patch, workspace=workspace, repo_problem=problem, store=store)
        verdict = run_stages(ctx, stages, progress, setup_notes(request, workspace))
        placeholders = review_placeholders(ctx)
        progress("removing the trees")
        cleanup_started = time.perf_counter()
    cleanup = Phase(name="cleanup", seconds=round(time.perf_counter() - cleanup_started, 4))
    verdict = verdict.model_copy(
        update={
            "base_commit": base_commit,
            "head": request.head_commit or WORKING_TREE,
            "patch_sha256": hashlib.sha256(request.patch_text.encode("utf-8")).hexdigest(),
            "phases": [setup, cleanup],
            "cost": verdict.cost.model_copy(update={"seconds": round(time.perf_counter() - started, 4)}),
        }
    )
    if problem is not None:
        verdict = verdict.model_copy(update={"incomplete_repo": problem, "reason": f"{problem} — {verdict.reason}"})
    return stable_verdict(verdict, placeholders)
