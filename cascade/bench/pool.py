"""Process pools of the benchmark (the local executor's traces, a scan's items) and how they stop.

Ctrl-C, or SIGINT/SIGTERM to the driver alone, must end the work under way within seconds and start nothing else:
- workers are started with SIGINT and SIGTERM held (`cascade/interrupt.py`, ``stop_signals_held``), so a signal that
  reaches one while it still imports waits for its handler instead of killing it mid-import or being lost;
- SIGINT ends a worker's current item — its tools and sandboxed runs first (``end_children_and_raise``), so its
  trees are removed — and every item still queued to it ends at once; an idle worker only remembers it;
- SIGTERM (the pool tearing down after another worker died, or `kill` of the process group) does the same and then
  ends the worker, whose sandboxed runs must not outlive it;
- the driver, on ``KeyboardInterrupt``, passes SIGINT on to every worker and drops the queued items
  (``stop_workers``).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from types import FrameType
from typing import TypeVar

from cascade.interrupt import end_children_and_raise, release_stop_signals, stop_signals_held

A = TypeVar("A")
B = TypeVar("B")

_stopping = 0  # the signal that interrupted this worker process (0: none): it starts no further item
_busy = False  # a worker is inside an item (not waiting for the next one)


def stop_on_interrupt() -> None:
    """Pool initializer: the handlers above, then the signals held while the worker started."""
    signal.signal(signal.SIGINT, _interrupted)
    signal.signal(signal.SIGTERM, _interrupted)
    release_stop_signals()


def _interrupted(signum: int, frame: FrameType | None) -> None:
    global _stopping
    first = not _stopping
    if first or signum == signal.SIGTERM:
        _stopping = signum
    if not _busy:  # idle: nothing to end; a queued item ends at once, the pool's shutdown ends the worker
        if signum == signal.SIGTERM:
            os._exit(128 + signum)
        return
    if first:
        end_children_and_raise(signum, frame)
    # a later signal lets the first one's cleanup finish; after a SIGTERM the worker then exits (`in_worker`)


def in_worker(work: Callable[[A], B], item: A) -> B:
    """``work(item)`` in a pool worker, marked as under way for the handler; nothing starts once interrupted, and a
    worker told to terminate exits once the item has unwound (its trees removed)."""
    global _busy
    if _stopping:
        raise KeyboardInterrupt
    _busy = True
    try:
        return work(item)
    finally:
        _busy = False
        if _stopping == signal.SIGTERM:
            os._exit(128 + signal.SIGTERM)


def new_pool(jobs: int) -> ProcessPoolExecutor:
    """``jobs`` spawned workers (not forked: the driver may run threads, and a fork copies their locks mid-use)."""
    return ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn"),
                               initializer=stop_on_interrupt)  # fmt: skip


def submit_all(pool: ProcessPoolExecutor, work: Callable[[A], B], items: Iterable[A]) -> list[Future[B]]:
    """Every item submitted (the workers start here, with the stop signals held until their handlers are in)."""
    with stop_signals_held():
        return [pool.submit(in_worker, work, item) for item in items]


def stop_workers(pool: ProcessPoolExecutor) -> None:
    """On the driver's ``KeyboardInterrupt``: end the items under way (`kill` of the driver alone reaches no worker)
    and drop the queued ones."""
    for worker in multiprocessing.active_children():
        if worker.pid:  # never 0: that would be this whole process group
            with contextlib.suppress(ProcessLookupError):
                os.kill(worker.pid, signal.SIGINT)
    pool.shutdown(wait=True, cancel_futures=True)


def ordered(work: Callable[[A], B], items: Iterable[A], jobs: int) -> Iterator[B]:
    """``work`` (a module-level function) over ``items`` in ``jobs`` worker processes, results in the items' order."""
    with new_pool(jobs) as pool:
        try:
            for future in submit_all(pool, work, items):
                yield future.result()
        except BaseException:  # Ctrl-C, a signal, a failed item, or the caller stopped reading: end the rest now
            stop_workers(pool)
            raise
