"""The shape of the gate plugin's channel records (`execution/channel_order.py`): the sequences a real run writes
(tests/test_runner.py runs them with a real rerun plugin) against those only a forger appending records can make."""

from __future__ import annotations

import pytest

from cascade.execution.channel_order import order_breaks
from cascade.sandbox.base import RunnerRecord

T = "tests/test_a.py::test_a"


def records(*events: str, pid: int = 7) -> list[RunnerRecord]:
    """'begin', 'end', 'setup:passed', …: one test's records between the session's start and finish."""
    found = [RunnerRecord(event="runner", phase="start", pid=pid)]
    for event in events:
        if event in ("begin", "end"):
            found.append(RunnerRecord(event="test_begin" if event == "begin" else "test_end", nodeid=T, pid=pid))
        else:
            when, outcome = event.split(":")
            found.append(RunnerRecord(event="outcome", nodeid=T, when=when, outcome=outcome, pid=pid))
    return [*found, RunnerRecord(event="runner", phase="finish", exitstatus=0, pid=pid)]


PLAIN = ("begin", "setup:passed", "call:failed", "teardown:passed", "end")
RERUN = ("begin", "setup:passed", "call:rerun", "teardown:passed",
         "setup:passed", "call:failed", "teardown:passed", "end")  # fmt: skip


@pytest.mark.parametrize("events", [PLAIN, RERUN, ("begin", "setup:rerun", "setup:passed", "call:passed", "end")])
def test_what_the_plugin_writes_keeps_its_shape(events: tuple[str, ...]) -> None:
    assert order_breaks(records(*events)) == []


@pytest.mark.parametrize(
    "events",
    [
        ("begin", "setup:passed", "call:failed", "call:passed", "teardown:passed", "end"),  # a pass after the failure
        ("begin", "setup:passed", "call:passed", "call:failed", "teardown:passed", "end"),  # … written before it
        ("begin", "setup:passed", "call:failed", "teardown:rerun", "setup:passed", "call:passed", "teardown:passed",
         "end"),  # a forged rerun in the teardown, then a forged attempt: a failure is final
        ("begin", "setup:passed", "call:failed", "teardown:passed", "end", "call:passed"),  # after the test's end
        ("begin", "setup:passed", "begin", "end", "end"),  # nested
    ],
)  # fmt: skip
def test_records_only_a_forger_can_append_break_it(events: tuple[str, ...]) -> None:
    assert order_breaks(records(*events)), events


def test_test_records_of_another_process_and_a_second_session_break_it() -> None:
    other = [*records(*PLAIN), RunnerRecord(event="outcome", nodeid=T, when="call", outcome="passed", pid=8)]
    assert "other than the test runner's" in order_breaks(other)[0][1]
    twice = [*records(*PLAIN), RunnerRecord(event="runner", phase="finish", exitstatus=0, pid=7)]
    assert "finish was recorded more than once" in order_breaks(twice)[0][1]
