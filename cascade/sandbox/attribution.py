"""Which test made a record: the gate's pytest plugin marks each test's begin and end in the run's channel with the
wall-clock time, and every witness stamps its records with the same clock (the audit hook and supervisor with
``time.time()``, strace with ``-ttt``, a file left behind with its mtime). A record made between a test's begin and
end belongs to that test — whatever process made it, so a test's children and helpers count as the test; before the
first test file's collection began it belongs to ``startup`` (the interpreter, plugins, the repository's conftest
files: no test file has been imported yet), and otherwise outside every test to ``session`` (collection, session
fixtures, the runner's own work). A run whose runner never began its session ran start-up only.

Judging uses it to tell a patch's doing from what an unchanged test always did (`stages/probes/attribution.py`)."""

from __future__ import annotations

import bisect

from cascade.sandbox.base import RunnerRecord

SESSION = "session"
STARTUP = "startup"


def runner_pid(reports: list[RunnerRecord]) -> int | None:
    """The test runner's process: the one that started the session (None when no session started)."""
    return next((r.pid for r in reports if r.event == "runner" and r.phase == "start"), None)


class Phases:
    """The test intervals of one run, from the plugin records of its pytest process."""

    def __init__(self, reports: list[RunnerRecord]) -> None:
        main = runner_pid(reports)
        self.active = main is not None
        collects = [r.t for r in reports if r.event == "collect" and r.pid == main]
        self.collecting_from = min(collects) if collects else None  # no file collected: no start-up is told apart
        self.begins: list[float] = []
        self.intervals: list[tuple[float, float, str]] = []
        open_tests: dict[str, float] = {}
        for record in reports:
            if record.pid != main:
                continue
            if record.event == "test_begin":
                open_tests[record.nodeid] = record.t
            elif record.event == "test_end" and record.nodeid in open_tests:
                self.intervals.append((open_tests.pop(record.nodeid), record.t, record.nodeid))
        # a test whose end never came (the run was killed in it) lasts until the end of the run
        self.intervals += [(begin, float("inf"), nodeid) for nodeid, begin in open_tests.items()]
        self.intervals.sort()
        self.begins = [begin for begin, _, _ in self.intervals]

    def at(self, t: float | None) -> str:
        """The test running at time ``t``; ``startup`` before any test file's collection (all of a run whose runner
        never began its session); ``session`` outside every test; for a record of no time (the run's own integrity),
        ``session``, or '' when the runner never began (such a record always counts)."""
        if t is None:
            return SESSION if self.active else ""
        if not self.active or (self.collecting_from is not None and t < self.collecting_from):
            return STARTUP
        index = bisect.bisect_right(self.begins, t) - 1
        if index >= 0:
            begin, end, nodeid = self.intervals[index]
            if begin <= t <= end:
                return nodeid
        return SESSION
