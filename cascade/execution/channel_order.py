"""The order in which the gate's pytest plugin writes its channel records, and the records that break it.

The run's own code shares the test process with the plugin, so it can append records that look like the plugin's —
a ``passed`` outcome after a test's real failure, say, which the reader would take as the test's last word. It
cannot remove or reorder what the plugin wrote (the channel is append-only). The plugin's records of one run follow
a fixed shape, from one process: one session start and finish; each test's records between its ``test_begin`` and
``test_end``, tests never nested; each phase (setup, call, teardown) reported once per attempt at the test. A test is
attempted again only after a ``rerun`` report (pytest-rerunfailures reports a failure it will retry so, and runs the
test again from its setup), never after a ``failed`` one, which is final. A record outside that shape was written by
someone else: a ``tampering`` record (docs/architecture.md, "Run model", point 3). No record of the real suites'
stored base runs (the nine fetchable SWE-bench repositories, pytest's own included) breaks it.

Where the plugin itself is switched off in-process, its records stop: that is the silent-witness rule's
(`sandbox/witness.py`), not this one's."""

from __future__ import annotations

from cascade.sandbox.attribution import runner_pid
from cascade.sandbox.base import RunnerRecord

_TEST_EVENTS = frozenset({"test_begin", "test_end", "outcome"})


def runner_records(reports: list[RunnerRecord]) -> list[RunnerRecord]:
    """The records of the runner's process (all of them when no session started)."""
    main = runner_pid(reports)
    return [r for r in reports if main is None or r.pid == main]


def order_breaks(reports: list[RunnerRecord]) -> list[tuple[str, str]]:
    """(node id or '', what is wrong) for every record the plugin cannot have written where it stands."""
    main = runner_pid(reports)
    breaks: list[tuple[str, str]] = []
    others = [r for r in reports if main is not None and r.pid != main and r.event in _TEST_EVENTS | {"runner"}]
    if others:
        breaks.append((others[0].nodeid, f"{len(others)} test record(s) came from process(es) other than the test "
                       f"runner's (first: {others[0].event} from pid {others[0].pid})"))  # fmt: skip
    mine = runner_records(reports)
    for phase in ("start", "finish"):
        if sum(1 for r in mine if r.event == "runner" and r.phase == phase) > 1:
            breaks.append(("", f"the session {phase} was recorded more than once"))
    breaks += _test_breaks(mine)
    return breaks


def _test_breaks(mine: list[RunnerRecord]) -> list[tuple[str, str]]:
    breaks: list[tuple[str, str]] = []
    current: str | None = None
    attempt = _Attempt()
    for record in mine:
        if record.event == "test_begin":
            if current is not None:
                breaks.append((record.nodeid, f"test_begin of {record.nodeid} while {current} was still running"))
            current, attempt = record.nodeid, _Attempt()
        elif record.event == "test_end":
            if record.nodeid != current:
                breaks.append((record.nodeid, f"test_end of {record.nodeid}, which was not running"))
            current = None
        elif record.event == "outcome":
            if record.nodeid != current:
                breaks.append((record.nodeid, f"a {record.when} outcome of {record.nodeid} outside that test's run"))
            elif not attempt.admits(record):
                breaks.append((record.nodeid, f"a second {record.when} outcome ({record.outcome}) in one attempt of "
                               "the test: an outcome is reported once"))  # fmt: skip
    return breaks


class _Attempt:
    """The phases reported in one attempt at a test. A test is attempted again (setup first) only after a ``rerun``
    report, and never once a phase has failed: a rerun plugin reports the failures it will retry as ``rerun``, so a
    ``failed`` report means no attempt follows."""

    def __init__(self) -> None:
        self.phases: set[str] = set()
        self.rerun = False
        self.failed = False

    def admits(self, record: RunnerRecord) -> bool:
        if record.when in self.phases:
            if record.when != "setup" or not self.rerun or self.failed:
                return False
            self.phases, self.rerun = set(), False
        self.phases.add(record.when)
        self.rerun |= record.outcome == "rerun"
        self.failed |= record.outcome == "failed"
        return True
