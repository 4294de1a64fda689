"""Ctrl-C: stop what the review started, so its cleanup runs at once and the command exits 130 within seconds.

A review's time goes into child processes (git, ruff, pyright, the sandboxed test runs), often waited on from a
worker thread. Python delivers SIGINT to the main thread only, as ``KeyboardInterrupt``; the children keep running
(``kill -INT`` reaches only cascade; a terminal's Ctrl-C reaches its whole process group, but tools that catch it,
or a sandbox in its own namespace, may not stop), and every ``with`` block that waits for a thread waits for them.
So the handler first ends every descendant process of cascade (SIGTERM, then SIGKILL for those still alive after
a short grace), then raises ``KeyboardInterrupt``: the ``finally`` blocks and context managers remove the
worktrees and the sandbox's private directories, and ``cascade.cli`` exits 130 (128 + SIGINT, the shell's
convention). Descendants are read from ``/proc`` (Linux, where the sandbox runs); elsewhere only the default
``KeyboardInterrupt`` happens.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

EXIT_INTERRUPTED = 128 + signal.SIGINT  # 130
GRACE_SECONDS = 0.3  # a child's own SIGTERM cleanup (bwrap tearing down its namespace) gets this long
CLEANUP_SECONDS = 0.5  # worker threads whose tools were killed get this long to leave their `with` blocks


def _parent_of(stat: str) -> int | None:
    """The parent pid from ``/proc/<pid>/stat`` (the command name in parentheses may hold spaces and ')'); None
    for a zombie, which has ended already and only waits to be reaped by its parent."""
    fields = stat.rsplit(")", 1)[-1].split()
    if len(fields) < 2 or fields[0] == "Z" or not fields[1].isdigit():
        return None
    return int(fields[1])


def descendants(pid: int | None = None) -> list[int]:
    """Every live process below ``pid`` (default: this one), parents before their children."""
    root = os.getpid() if pid is None else pid
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            parent = _parent_of((entry / "stat").read_text())
        except (OSError, ValueError):
            continue  # gone meanwhile, or not readable
        if parent is not None:
            children.setdefault(parent, []).append(int(entry.name))
    found: list[int] = []
    pending = list(children.get(root, []))
    while pending:
        current = pending.pop(0)
        found.append(current)
        pending.extend(children.get(current, []))
    return found


def _signal_all(pids: list[int], signum: int) -> list[int]:
    sent: list[int] = []
    for pid in pids:
        try:
            os.kill(pid, signum)
            sent.append(pid)
        except (ProcessLookupError, PermissionError):
            continue
    return sent


def terminate_descendants(grace: float = GRACE_SECONDS) -> int:
    """SIGTERM every descendant, SIGKILL the ones still there after ``grace`` seconds; how many were signalled."""
    if not Path("/proc/self/stat").exists():
        return 0
    pids = _signal_all(descendants(), signal.SIGTERM)
    deadline = time.monotonic() + grace
    while pids and time.monotonic() < deadline:
        time.sleep(0.02)
        pids = [pid for pid in descendants() if pid in set(pids)]
    _signal_all(descendants(), signal.SIGKILL)
    return len(pids)


def end_children_and_raise(signum: int, frame: FrameType | None) -> None:
    """The SIGINT handler: end every descendant, then raise ``KeyboardInterrupt`` (once: later SIGINTs are ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the cleanup short
    terminate_descendants()
    raise KeyboardInterrupt


STOP_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM})


@contextmanager
def stop_signals_held() -> Iterator[None]:
    """Within the block SIGINT and SIGTERM are held (blocked, not lost), and the block's end delivers one that came.

    For starting worker processes: a child inherits the blocked mask across ``exec``, so a signal sent to a worker
    that is still importing waits for the handler its initializer installs (``release_stop_signals``) instead of
    killing it mid-import with a traceback, breaking the pool, or being missed."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def release_stop_signals() -> None:
    """In a worker started under ``stop_signals_held``, once its handlers are installed: take the held signals.
    One that came while the worker started runs its handler now; a handler that raises ``KeyboardInterrupt`` for it
    has marked the worker as stopping, which is all the interrupt needs to do before any work began."""
    with contextlib.suppress(KeyboardInterrupt):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)


def raise_interrupt(signum: int, frame: FrameType | None) -> None:
    """A SIGTERM handler for a command that stops on it as on Ctrl-C (the benchmark's driver)."""
    raise KeyboardInterrupt


def await_worker_cleanup(seconds: float = CLEANUP_SECONDS) -> None:
    """Let worker threads whose tools were just killed finish unwinding (a tool's temporary directory is removed
    when its thread leaves the ``with`` block) before the process exits; never longer than ``seconds`` in all, so
    a thread still stuck cannot hold the exit up."""
    deadline = time.monotonic() + seconds
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join(max(0.0, deadline - time.monotonic()))


@contextmanager
def stop_children_on_interrupt() -> Iterator[None]:
    """Within the block, Ctrl-C (SIGINT) ends every descendant process before ``KeyboardInterrupt`` is raised."""
    previous = signal.signal(signal.SIGINT, end_children_and_raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
