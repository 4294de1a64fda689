"""Run cases through arms on an executor: plan the jobs a results file does not hold yet, write each row as it comes
back, summarise the run. One trace's work is `worker.py`; the results file is `results.py`."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from cascade.bench.arms import Arm
from cascade.bench.executors import Executor, ExecutorSpec, make_executor
from cascade.bench.progress import progress_bar
from cascade.bench.repos import RepoResolver
from cascade.bench.results import drop_rows, failed_keys, prepare_output
from cascade.bench.rows import BenchCase, TraceJob, TraceRow
from cascade.config import CascadeConfig


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
    retry = failed_keys(existing) if options.retry_errors else set()
    done = {r.key for r in existing} - retry
    planned, skipped = plan_jobs(cases, arms, resolver, config, options.timeout_seconds, done, options.reports_dir)
    drop_rows(output, existing, retry & {(j.case.instance_id, j.case.model, j.arm) for j, _ in planned})
    statuses: Counter[str] = Counter()
    decisions: Counter[str] = Counter()
    started = time.perf_counter()
    with progress_bar(options.progress) as progress, output.open("a", encoding="utf-8") as sink:
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
