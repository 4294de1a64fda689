"""The local executor: a process pool on this machine (``--jobs N`` worker processes)."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
from collections.abc import Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool

from cascade.bench.executors import MAX_ATTEMPTS, Planned, RowSink
from cascade.bench.rows import TraceRow, TraceStatus
from cascade.bench.worker import died_row, failed_row, stop_on_interrupt, trace_in_pool
from cascade.interrupt import stop_signals_held

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
        # spawn, not fork: workers must not inherit the progress bar's thread or the parent's open worktrees
        spawn = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=self.jobs, mp_context=spawn, initializer=stop_on_interrupt) as pool:
            futures: dict[Future[TraceRow], Planned] = {}
            try:
                with stop_signals_held():  # workers start with them held, until their handlers are in place
                    for job, arm in planned:
                        futures[pool.submit(trace_in_pool, job, arm)] = (job, arm)
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
            except KeyboardInterrupt:
                # Ctrl-C or SIGTERM: end the running traces (`kill` of the driver alone reaches no worker) and drop the
                # queued ones; finished rows are on disk to resume from
                for worker in multiprocessing.active_children():
                    if worker.pid:  # never 0: that would be this whole process group
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(worker.pid, signal.SIGINT)
                pool.shutdown(wait=True, cancel_futures=True)
                raise
        return orphans
