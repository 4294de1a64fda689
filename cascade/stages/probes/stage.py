"""The Stage-2 adapter: sets up the session, runs the regression check and the probe loop, decides."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from cascade.context import ReviewContext
from cascade.errors import CascadeError
from cascade.execution.envs import Environment
from cascade.execution.test_selection import MAX_REGRESSION_FILES
from cascade.models import Evidence, EvidenceKind, SandboxSetup, StageResult
from cascade.probesources import default_probe_sources
from cascade.probesources.base import ProbeSource
from cascade.probesources.generated import llm_accounting
from cascade.sandbox.base import Sandbox
from cascade.stages.probes import judging
from cascade.stages.probes.changes import changed_lines
from cascade.stages.probes.environment import make_environment, make_sandbox, prepare_extensions
from cascade.stages.probes.hooks import pr_hooks
from cascade.stages.probes.probing import run_probes
from cascade.stages.probes.regression import check_regressions
from cascade.stages.probes.reuse import patch_identity
from cascade.stages.probes.session import Session


class ProbesStage:
    name = "probes"
    needs_sandbox = True
    title = "Stage 2 — probes and regressions"

    def __init__(
        self,
        sources: Sequence[ProbeSource] | None = None,
        sandbox: Sandbox | None = None,
        environment: Environment | None = None,
        max_regression_files: int = MAX_REGRESSION_FILES,
    ) -> None:
        self._sources = sources
        self._sandbox = sandbox
        self._environment = environment
        self.max_regression_files = max_regression_files

    def run(self, ctx: ReviewContext) -> StageResult:
        started = time.perf_counter()
        if ctx.workspace is None:
            return StageResult.skipped(self.name, ctx.unavailable_reason() or "repository unavailable")
        base, patched = Path(ctx.workspace.base_dir), Path(ctx.workspace.patched_dir)
        try:
            sandbox = self._sandbox or make_sandbox(ctx.config)
            env = self._environment or make_environment(ctx.config, ctx.request.repo, base)
            built = prepare_extensions(ctx.config, env, base, patched, [f.path for f in ctx.patch.files])
        except CascadeError as exc:
            return StageResult.skipped(self.name, f"no execution environment: {exc}")
        name = Path(ctx.request.repo).resolve().name or "project"
        identity = (str(ctx.workspace.repo), ctx.workspace.base_commit, patch_identity(ctx.patch.text))
        session = Session(ctx.config, sandbox, env, base, patched, changed_lines(ctx.patch, patched), name,
                          store=ctx.store, identity=identity)  # fmt: skip
        summary = f"ran in sandbox '{sandbox.isolation}' with {env.description}"
        details = SandboxSetup(isolation=sandbox.isolation, python=env.python_version)
        setup = Evidence(kind=EvidenceKind.INFO, grounded=False, summary=summary, details=details)
        session.findings.evidence.append(setup)
        if built:
            session.findings.evidence.append(Evidence(kind=EvidenceKind.INFO, grounded=False, summary=built))
        session.pr_hooks = pr_hooks(ctx.patch, base, patched)
        if session.pr_hooks:
            named = "; ".join(h.describe() for h in session.pr_hooks)
            summary = (f"the PR adds or changes pytest hooks that can rewrite reports, outcomes, skips or collection: "
                       f"{named} (regressions are also checked without them)")  # fmt: skip
            session.findings.evidence.append(Evidence(kind=EvidenceKind.INFO, grounded=False, summary=summary))
        if ctx.config.probes.regression:
            check_regressions(session, ctx.patch, self.max_regression_files)
        sources = self._sources if self._sources is not None else default_probe_sources(ctx.config)
        if not session.findings.rejects or ctx.config.probes.exhaustive:
            run_probes(session, ctx, sources)
        effects = judging.side_effects(session.findings.side_effects)
        if effects:
            session.findings.add(effects, reject_first=True)
        llm_cost, llm_notes = llm_accounting(sources)  # the generator's LLM cost and why it stopped
        session.findings.evidence.extend(llm_notes)
        result = judging.decide(self.name, session.findings, time.perf_counter() - started)
        result.cost = result.cost + llm_cost
        reused = session.reuse_line()
        if reused:
            result.cost.reuse.append(f"{self.name}: {reused}")
        return result
