"""The local executor: a process pool on this machine (``--jobs N`` worker processes)."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future, as_completed
from concurrent.futures.process import BrokenProcessPool

from cascade.bench.executors import MAX_ATTEMPTS, Planned, RowSink
from cascade.bench.pool import new_pool, stop_workers, submit_all
from cascade.bench.rows import TraceRow, TraceStatus
from cascade.bench.worker import died_row, failed_row, run_trace

WORKER_DIED = "worker process died (killed, out of memory or a crash in C code)"


class LocalExecutor:
    name = "local"

    def __init__(self, jobs: int) -> None:
        self.jobs = jobs

    def run(self, planned: Sequence[Planned], on_row: RowSink) -> None:
        pending = list(planned)
        for attempt in range(1, MAX_ATTEMPTS + 1):
            if not pending:
                return
            pending = self._pool_run(pending, on_row)
            if attempt == MAX_ATTEMPTS:
                for job, _arm in pending:
                    on_row(died_row(job, WORKER_DIED, MAX_ATTEMPTS))

    def _pool_run(self, planned: list[Planned], on_row: RowSink) -> list[Planned]:
        """Run the jobs in one pool; return those whose worker died (the pool breaks and cannot say which job)."""
        orphans: list[Planned] = []
        # spawned workers, not forked: they must not inherit the progress bar's thread or the open worktrees
        with new_pool(self.jobs) as pool:
            futures: dict[Future[TraceRow], Planned] = {}
            try:
                futures = dict(zip(submit_all(pool, _trace, planned), planned, strict=True))
                for future in as_completed(futures):
                    job, arm = futures[future]
                    try:
                        row = future.result()
                    except BrokenProcessPool:
                        orphans.append((job, arm))
                        continue
                    except Exception as exc:  # e.g. an arm that cannot be pickled: still one row, never a lost trace
                        row = failed_row(job, TraceStatus.ERROR, f"{type(exc).__name__}: {exc}")
                    on_row(row)
            except KeyboardInterrupt:  # Ctrl-C or SIGTERM: finished rows are on disk to resume from
                stop_workers(pool)
                raise
        return orphans


def _trace(planned: Planned) -> TraceRow:
    """One planned trace, as a worker runs it (module-level: the pool pickles it by name)."""
    job, arm = planned
    return run_trace(job, arm)
