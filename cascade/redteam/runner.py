"""Run the red-team corpus through the full gate on each sandbox backend; write JSONL per case and a Markdown table.

Each case is reviewed by ``cascade.pipeline.review`` with the default stages against a fresh git repository of the
demo package. Catch = an unsafe (or trace) case rejected WITH a recorded effect its predicate accepts; false alarm =
a benign twin rejected with side-effect evidence."""

from __future__ import annotations

import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from cascade.config import CascadeConfig, EnvConfig
from cascade.errors import CascadeError, ToolUnavailable
from cascade.execution.envs import Environment, EnvSpec, current_environment, ensure_environment
from cascade.models import ReviewRequest
from cascade.redteam.corpus import DEFAULT_CORPUS, make_target_repo
from cascade.redteam.evaluate import UNPROVEN, allowed_count, judge, tests_not_run
from cascade.redteam.models import TESTED_KINDS, Backend, BackendSummary, CaseResult, RedteamCase, SuiteReport
from cascade.redteam.safety import LoopbackListeners, preflight, refuse_unsafe_on_none
from cascade.sandbox.base import Sandbox
from cascade.sandbox.select import BACKENDS, get_sandbox, isolating_backends

Progress = Callable[[CaseResult], None]


def probe_backend(backend: Backend, config: CascadeConfig) -> tuple[Sandbox | None, str]:
    """The backend's sandbox, or None and why it is not usable here."""
    try:
        sandbox = get_sandbox(config.sandbox.model_copy(update={"backend": backend}))
    except ToolUnavailable as exc:
        return None, str(exc)
    return sandbox, ""


# The docker image (docker/make-base-image.sh) is Debian bookworm: its /usr/bin/python3 is the host's Debian
# Python, so a venv of that interpreter in a world-readable cache runs inside the container as well.
DOCKER_PYTHON = "/usr/bin/python3"
DOCKER_ENV_CACHE = "/var/tmp/cascade-redteam-envs"
TEST_PACKAGES = ["pytest>=8,<9", "coverage>=7.4,<8"]


def env_for(base: EnvConfig, backend: Backend) -> EnvConfig:
    """A backend that can run the host's interpreters (bwrap, none): the current one (the demo package has no
    dependencies). A container cannot run an interpreter from the host's HOME, so a cached venv of the Debian Python
    unless the config names one."""
    if BACKENDS[backend].host_interpreter:
        return base.model_copy(update={"use_current_interpreter": True})
    if base.python is not None or not Path(DOCKER_PYTHON).exists():
        return base
    return base.model_copy(
        update={
            "python": DOCKER_PYTHON,
            "packages": TEST_PACKAGES,
            "install_project": False,
            "cache_dir": base.cache_dir or DOCKER_ENV_CACHE,
        }
    )


def case_config(base: CascadeConfig, backend: Backend) -> CascadeConfig:
    """The gate's config for one backend: that sandbox, no LLM, an environment the backend can run, everything
    else as configured (default: the full default stage list)."""
    return base.model_copy(
        update={
            "sandbox": base.sandbox.model_copy(update={"backend": backend}),
            "env": env_for(base.env, backend),
            "llm": base.llm.model_copy(update={"model": None}),
        }
    )


def backend_environment(env: EnvConfig) -> Environment:
    """The environment Stage 2 will build for the demo repository under this config (as its make_environment)."""
    if env.use_current_interpreter:
        return current_environment()
    spec = EnvSpec(
        repo="textkit", python=env.python or sys.executable, packages=list(env.packages), install_project=False
    )
    cache = Path(env.cache_dir).expanduser() if env.cache_dir else None
    return ensure_environment(spec, cache_dir=cache, timeout=env.setup_timeout_seconds)


def _checked_backend(sandbox: Sandbox, env: EnvConfig, backend: Backend) -> dict[str, object]:
    """The preflight report; CascadeError when the backend cannot run the environment or shares HOME or /tmp."""
    if not BACKENDS[backend].isolating:
        return {}
    environment = backend_environment(env)
    return preflight(sandbox, environment.python, environment.exposed_paths())


def runner_missing(report: dict[str, object], config: CascadeConfig, backend: Backend) -> str | None:
    """Why the backend's test environment cannot run any case's test (pytest or coverage not importable there)."""
    missing = report.get("test_runner_missing")
    if not isinstance(missing, list) or not missing:
        return None
    env = case_config(config, backend).env
    where = "cascade's own interpreter" if env.use_current_interpreter else f"the environment of {env.python}"
    return (
        f"tests did not run: {', '.join(map(str, missing))} not importable in {where} inside the sandbox "
        "(install cascade with the dev extra, or name an environment with pytest in env.python / env.packages)"
    )


def case_identity(case: RedteamCase, backend: Backend) -> dict[str, Any]:
    return {
        "case": case.id,
        "kind": case.spec.kind,
        "domain": case.spec.domain,
        "framing": case.spec.framing,
        "backend": backend,
        "expected": list(case.spec.expect.evidence),
    }


def run_case(case: RedteamCase, repo: Path, config: CascadeConfig, backend: Backend) -> CaseResult:
    from cascade.pipeline import review  # imported late: the pipeline pulls in every stage

    started = time.perf_counter()
    base = case_identity(case, backend)
    request = ReviewRequest(
        repo=str(repo), patch_text=case.patch_text, issue_text=case.issue_text, trace=case.trace, config=config
    )
    try:
        verdict = review(request)
    except CascadeError as exc:
        return CaseResult(
            **base,
            outcome="error",
            error=f"{type(exc).__name__}: {exc}",
            seconds=round(time.perf_counter() - started, 2),
        )
    outcome, matched, harmful, missing = judge(case, verdict)
    benign = allowed_count(verdict)
    not_run = tests_not_run(case, verdict) if outcome in UNPROVEN else None
    if not_run is not None:
        seconds = round(time.perf_counter() - started, 2)
        return CaseResult(**base, outcome="error", error=not_run, decision=verdict.decision.value, seconds=seconds)
    return CaseResult(
        **base,
        outcome=outcome,
        decision=verdict.decision.value,
        deciding_stage=verdict.deciding_stage,
        reason=verdict.reason,
        matched=matched,
        effects=harmful,
        benign_effects=benign,
        missing=missing,
        seconds=round(time.perf_counter() - started, 2),
    )


def _run_backend(
    backend: Backend,
    cases: list[RedteamCase],
    config: CascadeConfig,
    corpus: Path,
    jobs: int,
    progress: Progress | None,
    missing: str | None = None,
) -> list[CaseResult]:
    """Every case on one backend; ``jobs`` worker threads, each with its own target repository. ``missing``: why
    no test can run in this backend's environment — its tested cases are error rows without a review."""
    local = threading.local()
    with tempfile.TemporaryDirectory(prefix="cascade-redteam-") as tmp:
        counter = iter(range(10_000))
        lock = threading.Lock()

        def repo() -> Path:
            if not hasattr(local, "repo"):
                with lock:
                    index = next(counter)
                local.repo = make_target_repo(Path(tmp) / f"textkit-{index}", corpus)
            return local.repo

        def one(case: RedteamCase) -> CaseResult:
            if missing and case.spec.kind in TESTED_KINDS:
                result = CaseResult(**case_identity(case, backend), outcome="error", error=missing)
            else:
                result = run_case(case, repo(), case_config(config, backend), backend)
            if progress is not None:
                progress(result)
            return result

        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            return list(pool.map(one, cases))


def summarize(
    backend: Backend,
    results: list[CaseResult],
    seconds: float,
    preflight_report: dict[str, object],
) -> BackendSummary:
    def count(kind: str, outcome: str | None = None) -> int:
        return sum(1 for r in results if r.kind == kind and (outcome is None or r.outcome == outcome))

    return BackendSummary(
        backend=backend,
        available=True,
        preflight=dict(preflight_report),
        unsafe_total=count("unsafe"),
        caught=count("unsafe", "caught"),
        benign_total=count("benign"),
        false_alarms=count("benign", "false_alarm"),
        trace_total=count("trace"),
        trace_caught=count("trace", "caught"),
        trace_benign_total=count("trace-benign"),
        trace_false_alarms=count("trace-benign", "false_alarm"),
        errors=sum(1 for r in results if r.outcome == "error"),
        seconds=round(seconds, 1),
    )


def run_suite(
    cases: list[RedteamCase],
    backends: list[Backend] | None = None,
    config: CascadeConfig | None = None,
    corpus: Path = DEFAULT_CORPUS,
    jobs: int = 1,
    progress: Progress | None = None,
) -> SuiteReport:
    """Run ``cases`` on each requested backend (default: every available one). Unavailable backends are reported
    with their reason; the `none` backend is refused when unsafe cases are selected; a backend whose preflight shows
    a shared HOME or /tmp is refused before any case runs on it."""
    config = config or CascadeConfig()
    requested = backends or isolating_backends()
    summaries: list[BackendSummary] = []
    results: list[CaseResult] = []
    ports = sorted({p for c in cases for p in c.spec.loopback_ports})
    with LoopbackListeners(ports) as listeners:
        for backend in requested:
            refuse_unsafe_on_none(backend, cases)
            sandbox, reason = probe_backend(backend, config)
            if sandbox is None:
                summaries.append(BackendSummary(backend=backend, available=False, reason=reason))
                continue
            try:
                report = _checked_backend(sandbox, case_config(config, backend).env, backend)
            except CascadeError as exc:
                summaries.append(BackendSummary(backend=backend, available=False, reason=str(exc)))
                continue
            started = time.perf_counter()
            mine = _run_backend(backend, cases, config, corpus, jobs, progress, runner_missing(report, config, backend))
            results.extend(mine)
            summaries.append(summarize(backend, mine, time.perf_counter() - started, report))
        listener_report = listeners.report()
    if not any(s.available for s in summaries):
        raise CascadeError("no sandbox backend available: " + "; ".join(f"{s.backend}: {s.reason}" for s in summaries))
    return SuiteReport(backends=summaries, results=results, listener=listener_report)
