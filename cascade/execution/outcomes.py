"""What each test did, from a record the PR's code cannot alter after the fact (docs/architecture.md, "Run model").

The gate's pytest plugin (`sandbox/audit_hook/pytest_report_props.py`) writes every phase's outcome into the run's
append-only channel as it happens; that record decides. pytest's junit report, written at the end by the same process —
where a conftest hook could rewrite it — only cross-checks it: a test the two disagree on, a failure that reached the
report as a pass without being an expected failure, or an exit status that contradicts the outcomes is a ``tampering``
record, and rejects.

Outcome classes: ``pass``; ``behavioural_fail`` — the code under test behaved wrongly (an assertion, pytest's "DID NOT
RAISE", or an exception raised inside the code); ``setup_error`` — the test never got to judge the code (collection or
import error of the test file, fixture error, missing dependency, the network the sandbox does not have, timeout, a
dependency's warning raised as an error); ``skipped``. A behavioural failure is *assertion-class* (AssertionError, DID
NOT RAISE, ``pytest.fail``, a ``SystemExit`` the code chose) or *crash-class* (any other exception escaping the code) —
Stage 2 rejects on crash-class regressions only (docs/architecture.md, Stages)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from cascade.execution.channel_order import order_breaks, runner_records
from cascade.safety import SideEffect
from cascade.sandbox.base import RunnerRecord, RunResult

TestStatus = Literal["pass", "behavioural_fail", "setup_error", "skipped"]
FailureClass = Literal["assertion", "crash"]
EXCERPT_CHARS = 2000
_SETUP_EXCEPTIONS = {"ModuleNotFoundError"}  # missing dependency wherever it is raised
# The sandbox has no network: a test that needs it fails for that reason, not because of the code (requests' tests
# reach httpbin.org). Recognised by the exception type or the resolver's/socket's own words in the failure.
NEEDS_NETWORK = "needs the network (sandbox has none)"
_NETWORK_EXCEPTIONS = {"ConnectionError", "ConnectTimeout", "MaxRetryError", "NewConnectionError", "gaierror"}
_NETWORK_MARKERS = (
    "Temporary failure in name resolution",
    "Name or service not known",
    "Failed to establish a new connection",
    "Network is unreachable",
    "nodename nor servname provided",
)
_TIMEOUT_MARKERS = ("Timeout", "Failed: Timeout")
DEPENDENCY_WARNING = "a dependency's warning raised as an error (the installed version, not the code)"
# pytest's last traceback line: "<file>:<line>: <ExceptionType>"; a file of an installed package is not the tree's
_RAISED_AT = re.compile(r"^(?P<file>\S.*?):\d+: (?P<exc>\w+)\s*$", re.MULTILINE)
_INSTALLED = ("/site-packages/", "/dist-packages/")


class TestResult(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    test_id: str = Field(description="pytest node id, e.g. tests/test_x.py::TestK::test_y[1].")
    status: TestStatus
    failure_class: FailureClass | None = None
    exception: str = Field(default="", description="Exception type name of the failure or error, when known.")
    reason: str = Field(default="", description="Why the status, in words: 'fixture error', 'collection error', …")
    message: str = ""
    excerpt: str = ""


def failure(test_id: str, exception: str, assertion: bool | None, message: str, text: str) -> TestResult:
    """A failed call phase classified: a missing dependency, the missing network and a timeout are setup errors."""
    excerpt = text[-EXCERPT_CHARS:]

    def setup_error(reason: str) -> TestResult:
        return TestResult(test_id=test_id, status="setup_error", reason=reason, exception=exception, message=message,
                          excerpt=excerpt)  # fmt: skip

    if exception in _SETUP_EXCEPTIONS:
        return setup_error("missing dependency")
    if exception in _NETWORK_EXCEPTIONS or any(m in message or m in text for m in _NETWORK_MARKERS):
        return setup_error(NEEDS_NETWORK)
    if message.startswith(_TIMEOUT_MARKERS):
        return setup_error("timeout")
    if _dependency_warning(exception, text):
        return setup_error(DEPENDENCY_WARNING)
    if assertion is None:  # no record of the class: pytest's own message says an assert or DID NOT RAISE
        assertion = message.startswith(("assert", "AssertionError")) or "DID NOT RAISE" in message
    failure_class: FailureClass = "assertion" if assertion else "crash"
    reason = "assertion" if assertion else "exception raised in code"
    return TestResult(test_id=test_id, status="behavioural_fail", failure_class=failure_class, reason=reason,
                      exception=exception, message=message, excerpt=excerpt)  # fmt: skip


def _raised_at(text: str) -> re.Match[str] | None:
    """pytest's last "<file>:<line>: <ExceptionType>" line of a failure, when the file is inside an installed
    package rather than the tree (pytest names the tree's files relative to its rootdir, others absolute)."""
    last = next(reversed(list(_RAISED_AT.finditer(text))), None)
    where = last["file"] if last else ""
    return last if where.startswith("/") and any(marker in where for marker in _INSTALLED) else None


def raised_in_installed_package(text: str) -> str | None:
    """Where a failure was raised ("<file>:<line>"), when that is inside an installed package."""
    found = _raised_at(text)
    return found.group(0).rsplit(": ", 1)[0] if found else None


def _dependency_warning(exception: str, text: str) -> bool:
    """A warning category raised inside an installed package (a project that turns warnings into errors, run with a
    newer dependency that deprecates what it calls): the failure says which versions were installed, on both trees
    alike, not how the code behaves."""
    found = _raised_at(text)
    return found is not None and (exception or found["exc"]).endswith("Warning")


def collection_error(test_id: str, exception: str, message: str, text: str) -> TestResult:
    missing = exception == "ModuleNotFoundError" or "ModuleNotFoundError" in text
    return TestResult(test_id=test_id, status="setup_error", exception="ModuleNotFoundError" if missing else exception,
                      reason="missing dependency" if missing else "collection error", message=message,
                      excerpt=text[-EXCERPT_CHARS:])  # fmt: skip


# -- from the channel ------------------------------------------------------------------------------------------------


def from_channel(reports: list[RunnerRecord]) -> list[TestResult]:
    """Every test the plugin reported, classified; collection errors as one result per file."""
    phases: dict[str, dict[str, RunnerRecord]] = {}
    results: list[TestResult] = []
    for record in runner_records(reports):
        if record.event == "outcome":
            phases.setdefault(record.nodeid, {})[record.when] = record
        elif record.event == "collect_error" and record.nodeid:
            results.append(collection_error(record.nodeid, "", "collection failure", record.excerpt or record.message))
    return [*results, *(_test(nodeid, by_phase) for nodeid, by_phase in phases.items())]


def _test(nodeid: str, by_phase: dict[str, RunnerRecord]) -> TestResult:
    setup, call, teardown = by_phase.get("setup"), by_phase.get("call"), by_phase.get("teardown")
    if setup is not None and setup.outcome == "failed":
        return TestResult(test_id=nodeid, status="setup_error", exception=setup.raw or "", reason="fixture error",
                          message=setup.message, excerpt=setup.excerpt)  # fmt: skip
    skipped = next((p for p in (setup, call) if p is not None and p.outcome == "skipped"), None)
    if skipped is not None:
        return TestResult(test_id=nodeid, status="skipped", message=skipped.message)
    if call is not None and call.outcome == "failed":
        return failure(nodeid, call.raw or "", call.assertion if call.raw else None, call.message, call.excerpt)
    if teardown is not None and teardown.outcome == "failed":
        return TestResult(test_id=nodeid, status="setup_error", exception=teardown.raw or "", reason="teardown error",
                          message=teardown.message, excerpt=teardown.excerpt)  # fmt: skip
    return TestResult(test_id=nodeid, status="pass")


# -- from junit (the cross-check) ------------------------------------------------------------------------------------


def parse_junit(xml_text: str) -> list[TestResult]:
    """All test cases of a junit XML report (pytest's), classified."""
    root = ET.fromstring(xml_text)
    return [classify_testcase(case) for case in root.iter("testcase")]


def classify_testcase(case: ET.Element) -> TestResult:
    props = {p.get("name"): p.get("value") for p in case.iter("property") if p.get("name") is not None}
    test_id = props.get("rp_nodeid") or _fallback_node_id(case)
    for child in case:
        text, message = (child.text or "")[-EXCERPT_CHARS:], child.get("message", "")
        if child.tag == "skipped":
            return TestResult(test_id=test_id, status="skipped", message=message)
        if child.tag == "error" and message == "collection failure":
            return collection_error(test_id, props.get("rp_setup_exception") or "", message, text)
        if child.tag == "error":
            phase = "teardown" if "teardown" in message else "setup"
            return TestResult(test_id=test_id, status="setup_error", exception=props.get(f"rp_{phase}_exception") or "",
                              reason="fixture error" if phase == "setup" else "teardown error", message=message,
                              excerpt=text)  # fmt: skip
        if child.tag == "failure":
            exception = props.get("rp_call_exception") or ""
            assertion = props.get("rp_call_assertion") == "1" if exception else None
            return failure(test_id, exception, assertion, message, text)
    return TestResult(test_id=test_id, status="pass")


def _fallback_node_id(case: ET.Element) -> str:
    """Node id from the xunit1 ``file``/``classname``/``name`` attributes (when the plugin did not run)."""
    file, classname, name = case.get("file", ""), case.get("classname", ""), case.get("name", "")
    if not classname:
        return file or name
    module = file[:-3].replace("/", ".") if file.endswith(".py") else ""
    rest = classname[len(module) + 1 :] if module and classname.startswith(module + ".") else ""
    return "::".join([file or classname, *[p for p in rest.split(".") if p], name])


# -- integrity ---------------------------------------------------------------------------------------------------------


def integrity(result: RunResult, channel: list[TestResult], junit: list[TestResult] | None) -> list[SideEffect]:
    """Where the report hooks, the junit file or the exit status contradict the channel: ``tampering`` records."""
    found: list[SideEffect] = []

    def flag(detail: str, target: str = "test outcomes") -> None:
        found.append(SideEffect(kind="tampering", target=target, source="outcomes", detail=detail))

    for nodeid, detail in order_breaks(result.reports):
        flag(f"{detail}: the run wrote records into the channel that pass for the gate plugin's", nodeid or "channel")
    for record in result.reports:
        passed = record.event == "outcome" and record.outcome == "passed" and not record.wasxfail
        if passed and record.raw and record.raw not in ("Skipped", "XFailed"):
            flag(f"{record.raw} raised in the {record.when} phase reached the report as a pass: a plugin or "
                 "conftest hook rewrote the outcome", record.nodeid)  # fmt: skip
    mine = {t.test_id: t.status for t in channel}
    # pytest's junit writes a test that failed in its call and again in teardown as two test cases of one id (a
    # failure, then an error): the report disagrees only when none of its cases says what the channel recorded.
    said: dict[str, list[str]] = {}
    for test in junit or []:
        said.setdefault(test.test_id, []).append(test.status)
    for test_id, statuses in said.items():
        if test_id in mine and mine[test_id] not in statuses:
            flag(f"the junit report says {' and '.join(statuses)}, the gate plugin recorded {mine[test_id]} as it "
                 "ran: the report was rewritten", test_id)  # fmt: skip
    finish = [r for r in result.reports if r.event == "runner" and r.phase == "finish"]
    failed = any(t.status == "behavioural_fail" for t in channel)
    if result.exit_code == 0 and failed:
        flag("pytest exited 0 although tests failed: the exit status was rewritten")
    elif finish and result.exit_code is not None and finish[-1].exitstatus not in (None, result.exit_code):
        flag(f"pytest's session ended with status {finish[-1].exitstatus} but the process exited {result.exit_code}")
    elif not finish and result.exit_code == 0 and any(r.event == "runner" for r in result.reports):
        flag("the test process exited 0 before its session finished")
    if finish and junit is None:
        flag("the session finished but its junit report is missing or unreadable: the report was removed or garbled")
    return found
