"""One trace through one arm, in whatever process runs it (a local pool worker, a Ray task): the review under a
per-trace deadline, every failure turned into a row. The executors (`cascade/bench/executors/`) call `run_trace`;
the driver (`runner.py`) never does, so the two form no import circle."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from cascade.bench.arms import Arm, TailoredArm
from cascade.bench.repos import has_commit
from cascade.bench.rows import BenchCase, StageRecord, TraceCost, TraceJob, TraceRow, TraceStatus
from cascade.config import CascadeConfig
from cascade.context import ReviewContext
from cascade.errors import BadInput
from cascade.execution.repo_specs import spec_for_repo
from cascade.models import Decision, ReviewRequest, StageResult, Trace, Verdict
from cascade.pipeline import review
from cascade.stages.base import Stage
from cascade.traces import load_trace

EVIDENCE_CHARS = 300


class TraceTimeout(BaseException):
    """Raised by the per-trace alarm. A BaseException so a stage's own `except Exception` cannot swallow it."""


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Interrupt the block after ``seconds`` (SIGALRM; each worker runs traces in its main thread)."""

    def on_alarm(signum: int, frame: FrameType | None) -> None:
        raise TraceTimeout

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _load_trace(path: str | None) -> Trace | None:
    if path is None:
        return None
    try:
        return load_trace(path)
    except BadInput:
        return None  # an unreadable trajectory only loses context; row.trace_loaded says so


def _summary(verdict: Verdict) -> str:
    text = "; ".join(f"{r.stage}: {r.outcome.value}" for r in verdict.stages)
    if verdict.reason:
        text = f"{text} — {verdict.reason}" if text else verdict.reason
    text = " ".join(text.split())
    return text if len(text) <= EVIDENCE_CHARS else text[: EVIDENCE_CHARS - 1] + "…"


def _base_row(job: TraceJob) -> TraceRow:
    """The row's identity, before anything that can fail has run."""
    case = job.case
    return TraceRow(
        instance_id=case.instance_id,
        model=case.model,
        arm=job.arm,
        repo=case.repo,
        label=case.label,
        decision=Decision.UNCERTAIN,
        repo_available=job.repo_path is not None,
        repo_note=job.repo_note,
    )


def _checkout_of(job: TraceJob) -> tuple[bool, str]:
    if job.repo_path is None:
        return False, job.repo_note
    if not has_commit(job.repo_path, job.case.base_commit):
        return False, f"base commit {job.case.base_commit[:12]} is not in {job.repo_path}"
    return True, job.repo_note


def config_for_case(config: CascadeConfig, case: BenchCase) -> CascadeConfig:
    """A SWE-bench case's test environment from the harness table (``repo_specs``), unless the config names one;
    a repository the table cannot test here gets no Stage 2 (stages 0-1 still decide). A case without a task
    version (a merged commit, not a SWE-bench row) gets the environment Stage 2 builds from the commit itself."""
    env = config.env
    if env.python is not None or env.packages or env.use_current_interpreter or case.version is None:
        return config
    spec = spec_for_repo(case.repo, case.version)
    if spec is None:
        return config
    if spec.unsupported:
        return config.model_copy(update={"probes": config.probes.model_copy(update={"enabled": False})})
    fields = {"python": spec.python, "packages": spec.packages, "install_project": spec.install_project,
              "extras": spec.extras, "build_extensions": spec.build_extensions,
              "ci_dependencies": False, "exclude_newer": None}  # fmt: skip  # the harness's pins win
    return config.model_copy(update={"env": env.model_copy(update=fields)})


@dataclass(frozen=True)
class NotRunHere:
    """A stage of the arm that cannot run for this case: it stays in the report as ``skipped`` with the reason,
    so a weaker review is never silent."""

    name: str
    why: str
    title: str = "not run for this case"
    needs_sandbox: bool = False

    def run(self, ctx: ReviewContext) -> StageResult:
        return StageResult.skipped(self.name, self.why)


def case_stages(arm: Arm, config: CascadeConfig, case: BenchCase) -> list[Stage]:
    """The arm's stages for this case: an arm may tailor them (``stages_for_case``; the official-tests arm grades
    with the case's own tests, which never enter the gate's input). A stage the harness table cannot serve here is
    kept as skipped, with the table's reason."""
    stages = arm.stages_for_case(config, case) if isinstance(arm, TailoredArm) else arm.stages(config)
    spec = spec_for_repo(case.repo, case.version) if case.version is not None else None
    if spec is None or not spec.unsupported or config.probes.enabled:
        return stages
    enabled = config.model_copy(update={"probes": config.probes.model_copy(update={"enabled": True})})
    planned = [s.name for s in arm.stages(enabled)]
    if "probes" not in planned:  # the arm has no Stage 2 anyway
        return stages
    why = f"Stage 2 not run: the harness table cannot test {spec.repo} {case.version} here ({spec.unsupported})"
    after = set(planned[planned.index("probes") + 1 :])
    at = next((i for i, stage in enumerate(stages) if stage.name in after), len(stages))
    return [*stages[:at], NotRunHere("probes", why), *stages[at:]]


def _reviewed(job: TraceJob, arm: Arm, row: TraceRow) -> TraceRow:
    case = job.case
    trace = _load_trace(case.trace_path)
    config = config_for_case(job.config, case)
    stages = case_stages(arm, config, case)
    request = ReviewRequest(
        repo=job.repo_path or case.repo,
        base_ref=case.base_commit,
        patch_text=case.patch_text,
        issue_text=case.issue_text,
        trace=trace,
        config=config,
    )
    verdict = review(request, stages=stages, with_repo=row.repo_available)
    if job.reports_dir is not None:  # the row keeps a 300-character summary; the report keeps every record
        Path(job.reports_dir).mkdir(parents=True, exist_ok=True)  # on a Ray node too
        Path(job.reports_dir, report_name(row)).write_text(verdict.model_dump_json(indent=1) + "\n", encoding="utf-8")
    records = [
        StageRecord(
            stage=r.stage,
            outcome=r.outcome,
            seconds=r.cost.seconds,
            llm_calls=r.cost.llm_calls,
            tokens=r.cost.prompt_tokens + r.cost.completion_tokens,
        )
        for r in verdict.stages
    ]
    incomplete = (
        {}
        if verdict.incomplete_repo is None
        else {
            "status": TraceStatus.INCOMPLETE_REPO,
            "repo_available": False,
            "repo_note": verdict.incomplete_repo,
            "error": verdict.incomplete_repo,
        }
    )
    return row.model_copy(
        update={
            **incomplete,
            "decision": verdict.decision,
            "deciding_stage": verdict.deciding_stage,
            "evidence": _summary(verdict),
            "stages": records,
            "cost": TraceCost(
                llm_calls=verdict.cost.llm_calls,
                tokens=verdict.cost.prompt_tokens + verdict.cost.completion_tokens,
            ),
            "trace_loaded": trace is not None,
        }
    )


def report_name(row: TraceRow) -> str:
    """The file of a row's full verdict in ``--reports DIR``: one per (instance, model, arm)."""
    return "--".join(part.replace("/", "_") for part in row.key) + ".json"


def _one_line(message: str) -> str:
    """First and last line of a tool's error (git prints hundreds of progress lines before the real cause)."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    if len(lines) <= 2:
        return " ".join(lines)
    return f"{lines[0]} … {lines[-1]}"


def _failed(row: TraceRow, status: TraceStatus, message: str) -> TraceRow:
    message = _one_line(message)
    return row.model_copy(update={"status": status, "error": message, "evidence": message[:EVIDENCE_CHARS]})


def run_trace(job: TraceJob, arm: Arm) -> TraceRow:
    """Review one trace; every failure becomes a row (an abstention) instead of ending the run."""
    started = time.perf_counter()
    row = _base_row(job)
    try:
        available, note = _checkout_of(job)
        row = row.model_copy(
            update={
                "repo_available": available,
                "repo_note": note,
                "arm_stages": [s.name for s in arm.stages(job.config)],
                "arm_budget": arm.budget(job.config),
            }
        )
        with deadline(job.timeout_seconds):
            row = _reviewed(job, arm, row)
    except TraceTimeout:
        row = _failed(row, TraceStatus.TIMEOUT, f"timed out after {job.timeout_seconds:g} s")
    except BadInput as exc:
        row = _failed(row, TraceStatus.BAD_INPUT, str(exc))
    except Exception as exc:  # one crashing trace is recorded and the run goes on
        row = _failed(row, TraceStatus.ERROR, f"{type(exc).__name__}: {exc}")
    row.cost.seconds = round(time.perf_counter() - started, 3)
    return row


def failed_row(job: TraceJob, status: TraceStatus, message: str) -> TraceRow:
    """The row of a job that produced none of its own (its worker died, or its result could not come back)."""
    return _failed(_base_row(job), status, message)


def died_row(job: TraceJob, message: str, attempts: int) -> TraceRow:
    return failed_row(job, TraceStatus.ERROR, f"{message}; retried {attempts - 1}x")
