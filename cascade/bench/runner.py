"""Replay cases through arms in worker processes: per-trace timeout, resumable JSONL output, crash isolation."""

from __future__ import annotations

import signal
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

from pydantic import BaseModel, ConfigDict, ValidationError
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from cascade.bench.arms import Arm
from cascade.bench.executors import MAX_ATTEMPTS, Executor, ExecutorSpec, make_executor
from cascade.bench.repos import RepoResolver, has_commit
from cascade.bench.rows import BenchCase, StageRecord, TraceCost, TraceJob, TraceRow, TraceStatus
from cascade.config import CascadeConfig
from cascade.errors import BadInput
from cascade.execution.repo_specs import spec_for_repo
from cascade.models import Decision, ReviewRequest, Trace, Verdict
from cascade.pipeline import review
from cascade.stages.official_tests import OfficialTestsStage
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


def _reviewed(job: TraceJob, arm: Arm, row: TraceRow) -> TraceRow:
    case = job.case
    trace = _load_trace(case.trace_path)
    config = config_for_case(job.config, case)
    stages = arm.stages(config)
    grades_officially = any(stage.name == OfficialTestsStage.name for stage in stages)
    request = ReviewRequest(
        repo=job.repo_path or case.repo,
        base_ref=case.base_commit,
        patch_text=case.patch_text,
        issue_text=case.issue_text,
        trace=trace,
        official_tests=case.official_tests if grades_officially else None,  # never part of a gate's input
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


# --- the results file --------------------------------------------------------------------------------------


def read_rows(path: str | Path) -> list[TraceRow]:
    """Rows of a results JSONL; a torn last line (a run killed mid-write) is ignored, any other bad line is not."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise BadInput(f"results file not found: {path}") from None
    rows: list[TraceRow] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            rows.append(TraceRow.model_validate_json(line))
        except ValidationError:
            if number == len(lines):
                break
            raise BadInput(f"{path}:{number}: not a result row of this schema") from None
    return rows


def _repair_tail(path: Path) -> None:
    """Cut a torn last line so appended rows start on a line of their own."""
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        path.write_bytes(data[: data.rfind(b"\n") + 1])


def prepare_output(path: Path) -> list[TraceRow]:
    """Rows already in the output (created empty when new), after cutting a torn last line."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
        return []
    _repair_tail(path)
    return read_rows(path)


def _failed_keys(rows: list[TraceRow]) -> set[tuple[str, str, str]]:
    return {r.key for r in rows if r.status in (TraceStatus.ERROR, TraceStatus.TIMEOUT)}


def _drop_rows(path: Path, rows: list[TraceRow], keys: set[tuple[str, str, str]]) -> None:
    """Rewrite the output without the rows about to run again, so each key keeps one row."""
    if keys:
        path.write_text("".join(r.model_dump_json() + "\n" for r in rows if r.key not in keys), encoding="utf-8")


# --- the run -----------------------------------------------------------------------------------------------


class RunOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    jobs: int = 1
    timeout_seconds: float = 600
    retry_errors: bool = False
    progress: bool = True
    reports_dir: str | None = None


class RunSummary(BaseModel):
    model_config = ConfigDict(extra="forbid")

    cases: int
    arms: list[str]
    skipped_existing: int
    ran: int
    statuses: dict[str, int]
    decisions: dict[str, int]
    jobs: int
    executor: str = "local"
    wall_seconds: float
    traces_per_minute: float | None


def plan_jobs(
    cases: list[BenchCase],
    arms: list[Arm],
    resolver: RepoResolver,
    config: CascadeConfig,
    timeout: float,
    done: set[tuple[str, str, str]],
    reports_dir: str | None = None,
) -> tuple[list[tuple[TraceJob, Arm]], int]:
    planned: list[tuple[TraceJob, Arm]] = []
    skipped = 0
    for case in cases:
        location = resolver.resolve(case.repo)
        for arm in arms:
            if (case.instance_id, case.model, arm.name) in done:
                skipped += 1
                continue
            job = TraceJob(
                case=case,
                arm=arm.name,
                repo_path=location.path,
                repo_note=location.note,
                config=config,
                timeout_seconds=timeout,
                reports_dir=reports_dir,
            )
            planned.append((job, arm))
    return planned, skipped


def _progress(enabled: bool) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        TextColumn("{task.fields[last]}"),
        console=Console(stderr=True),
        disable=not enabled,
    )


def failed_row(job: TraceJob, status: TraceStatus, message: str) -> TraceRow:
    """The row of a job that produced none of its own (its worker died, or its result could not come back)."""
    return _failed(_base_row(job), status, message)


def died_row(job: TraceJob, message: str) -> TraceRow:
    return failed_row(job, TraceStatus.ERROR, f"{message}; retried {MAX_ATTEMPTS - 1}x")


def run_bench(
    cases: list[BenchCase],
    arms: list[Arm],
    resolver: RepoResolver,
    config: CascadeConfig,
    output: Path,
    options: RunOptions,
    executor: Executor | None = None,
) -> RunSummary:
    """Run the cases not already in ``output`` on ``executor`` (default: a local pool of ``options.jobs``)."""
    executor = executor or make_executor(ExecutorSpec(jobs=options.jobs))
    existing = prepare_output(output)
    retry = _failed_keys(existing) if options.retry_errors else set()
    done = {r.key for r in existing} - retry
    planned, skipped = plan_jobs(cases, arms, resolver, config, options.timeout_seconds, done, options.reports_dir)
    _drop_rows(output, existing, retry & {(j.case.instance_id, j.case.model, j.arm) for j, _ in planned})
    statuses: Counter[str] = Counter()
    decisions: Counter[str] = Counter()
    started = time.perf_counter()
    with _progress(options.progress) as progress, output.open("a", encoding="utf-8") as sink:
        task = progress.add_task("bench", total=len(planned), last="")

        def on_row(row: TraceRow) -> None:
            sink.write(row.model_dump_json() + "\n")
            sink.flush()  # a killed run keeps every finished row: re-running resumes after it
            statuses[row.status.value] += 1
            decisions[row.decision.value] += 1
            progress.update(task, advance=1, last=f"{row.instance_id} {row.decision.value}")

        executor.run(planned, on_row)
    wall = time.perf_counter() - started
    return RunSummary(
        cases=len(cases),
        arms=[a.name for a in arms],
        skipped_existing=skipped,
        ran=len(planned),
        statuses=dict(statuses),
        decisions=dict(decisions),
        jobs=options.jobs,
        executor=executor.name,
        wall_seconds=round(wall, 2),
        traces_per_minute=round(len(planned) / (wall / 60), 2) if planned and wall > 0 else None,
    )
