"""The gate's pytest plugin, loaded with ``-p pytest_report_props`` into every sandboxed pytest run.

It reports, into the run's append-only audit channel (named in ``config.json`` beside this file), what the gate
decides on — so the outcome is not read back from a file the run's own code could rewrite:

* ``test_begin`` / ``test_end`` around each test's whole protocol (setup, call, teardown), with the wall-clock time:
  every side-effect record made in between belongs to that test (the oracle's attribution);
* ``outcome`` per phase, from the final report (what junit shows too), with the exception pytest caught *before* any
  report hook ran (``raw``): a failure another plugin or conftest turned into a pass shows as a pass with a raw
  exception and no xfail;
* ``collect`` as each test file's collection (its import) begins, ``collect_error`` for a file that failed to
  collect, and ``runner`` start/finish records with the exit status.

It keeps the tests in its own process (a project's pytest-xdist ``-n`` is switched off), and it also keeps writing
the junit ``<property>`` values the report reader cross-checks. It must run on every Python a repository may need
(3.6+) and every pytest from 4.6: plain code, old-style hook wrappers, no annotations."""

import contextlib
import json
import os
import time

import pytest

_CONFIG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "config.json")
_LIMIT = 3800  # one record per write of at most PIPE_BUF (4096) bytes: atomic among the run's writers
_state = {"fd": None, "raw": {}}


def _fd():
    if _state["fd"] is None:
        try:
            with open(_CONFIG) as handle:
                path = json.load(handle)["log"]
            _state["fd"] = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
        except Exception:
            _state["fd"] = -1
    return _state["fd"]


def _emit(record):
    fd = _fd()
    if fd < 0:
        return
    record["pid"] = os.getpid()
    record["t"] = time.time()
    data = (json.dumps(record) + "\n").encode("utf-8", "replace")
    while len(data) > _LIMIT and record.get("excerpt"):
        record["excerpt"] = record["excerpt"][len(record["excerpt"]) // 2 :]
        data = (json.dumps(record) + "\n").encode("utf-8", "replace")
    if len(data) > _LIMIT:
        record["message"] = str(record.get("message", ""))[:200]
        data = (json.dumps(record) + "\n").encode("utf-8", "replace")[:_LIMIT]
    with contextlib.suppress(OSError):
        os.write(fd, data)


def _assertion(excinfo):
    """Assertion-class: the test judged the code and said no (an assert, DID NOT RAISE, pytest.fail, a SystemExit
    the code chose — a changed contract, as pylint's exit on an unknown option), not an exception escaping it."""
    text = str(excinfo.value)
    assertion = isinstance(excinfo.value, (AssertionError, SystemExit)) or "DID NOT RAISE" in text
    if excinfo.typename == "Failed" and not text.startswith("Timeout"):
        assertion = True
    return assertion


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    # The tests run in this process, the one the gate watches as the runner: each test's begin, end and outcome, and
    # the records between them, come from it (execution/channel_order.py). A project's `-n auto` would move them to
    # pytest-xdist workers; running them here changes no test's outcome.
    option = config.option
    if getattr(option, "numprocesses", None):
        option.numprocesses = 0
        option.dist = "no"
        option.tx = []


def pytest_sessionstart(session):
    _emit({"event": "runner", "phase": "start"})


def pytest_sessionfinish(session, exitstatus):
    _emit({"event": "runner", "phase": "finish", "exitstatus": int(exitstatus)})


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_make_collect_report(collector):
    # A test file's collection imports it: from the first one on, a placed file's code may have run
    if isinstance(collector, pytest.File):
        _emit({"event": "collect", "nodeid": collector.nodeid})
    yield


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    _emit({"event": "test_begin", "nodeid": item.nodeid})
    yield
    _emit({"event": "test_end", "nodeid": item.nodeid})


@pytest.hookimpl(hookwrapper=True, trylast=True)
def pytest_runtest_makereport(item, call):
    excinfo = call.excinfo
    if call.when == "setup":
        item.user_properties.append(("rp_nodeid", item.nodeid))
    if excinfo is not None:
        _state["raw"][(item.nodeid, call.when)] = (excinfo.typename, _assertion(excinfo))
        if excinfo.typename != "Skipped":
            item.user_properties.append(("rp_" + call.when + "_exception", excinfo.typename))
            item.user_properties.append(("rp_" + call.when + "_assertion", "1" if _assertion(excinfo) else "0"))
    yield


def pytest_runtest_logreport(report):
    raw = _state["raw"].pop((report.nodeid, report.when), None)
    record = {
        "event": "outcome",
        "nodeid": report.nodeid,
        "when": report.when,
        "outcome": report.outcome,
        "wasxfail": hasattr(report, "wasxfail"),
        "raw": raw[0] if raw else None,
        "assertion": bool(raw[1]) if raw else False,
    }
    if report.failed:
        longrepr = getattr(report, "longreprtext", "") or str(report.longrepr or "")
        record["message"] = _message(report, longrepr)[:600]
        record["excerpt"] = longrepr[-1500:]
    _emit(record)


def _message(report, longrepr):
    crash = getattr(getattr(report, "longrepr", None), "reprcrash", None)
    if crash is not None and getattr(crash, "message", None):
        return str(crash.message)
    lines = [line for line in longrepr.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def pytest_collectreport(report):
    if report.failed:
        longrepr = getattr(report, "longreprtext", "") or str(report.longrepr or "")
        _emit(
            {"event": "collect_error", "nodeid": report.nodeid, "message": longrepr[-600:], "excerpt": longrepr[-1500:]}
        )
