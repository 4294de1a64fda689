"""Run pytest inside a sandbox and classify every test from its junit XML report.

Outcome classes: ``pass``; ``behavioural_fail`` — the code under test behaved wrongly (an assertion, pytest's
"DID NOT RAISE", or an exception raised inside the code); ``setup_error`` — the test never got to judge the code
(collection or import error of the test file, fixture error, missing dependency, timeout, crash); ``skipped``.
A behavioural failure is further *assertion-class* (AssertionError, DID NOT RAISE, an explicit ``pytest.fail``, a
``SystemExit`` the code chose) or
*crash-class* (any other exception escaping the code: AttributeError, TypeError, NameError, …) — Stage 2 rejects on
crash-class regressions only (docs/architecture.md, Stages).

The exception type of each failure is recorded by a tiny pytest plugin as a junit ``<property>``, so nothing here
pattern-matches free-form logs; the report is read with the standard library's ``xml.etree``.
"""

from __future__ import annotations

import shlex
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from cascade.execution.envs import Environment
from cascade.sandbox.allowlist import GATE_WORK_DIR
from cascade.sandbox.base import RunResult, RunSpec, Sandbox

TestStatus = Literal["pass", "behavioural_fail", "setup_error", "skipped"]
FailureClass = Literal["assertion", "crash"]

WORK_DIR = GATE_WORK_DIR  # inside the worktree: the gate's report files for the run
PLUGIN_MODULE = "cascade_junit_props"
EXCERPT_CHARS = 2000

# Loaded into the sandboxed pytest with ``-p``. It must run on every Python a repo may need (3.6+), so it is plain
# code without annotations. It records the node id and, for a failing phase, the exception type and whether it is an
# assertion-class failure, as junit properties.
PLUGIN_SOURCE = """\
import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    yield
    if call.when == "setup":
        item.user_properties.append(("cascade_nodeid", item.nodeid))
    excinfo = call.excinfo
    if excinfo is None or getattr(excinfo, "typename", "") == "Skipped":
        return
    text = str(excinfo.value)
    # SystemExit: the code chose to exit (a changed contract, as pylint's exit on an unknown option) - not a crash.
    assertion = isinstance(excinfo.value, (AssertionError, SystemExit)) or "DID NOT RAISE" in text
    if excinfo.typename == "Failed" and not text.startswith("Timeout"):
        assertion = True  # pytest.fail(...) and DID NOT RAISE: the test judged the code and said no
    item.user_properties.append(("cascade_" + call.when + "_exception", excinfo.typename))
    item.user_properties.append(("cascade_" + call.when + "_assertion", "1" if assertion else "0"))
"""

_SETUP_EXCEPTIONS = {"ModuleNotFoundError"}  # missing dependency wherever it is raised
# The sandbox has no network: a test that needs it fails for that reason, not because of the code (requests' tests
# reach httpbin.org). Recognised by the exception type or the resolver's/socket's own words in the failure.
NEEDS_NETWORK = "needs the network (sandbox has none)"  # the reason of such a setup error
_NETWORK_EXCEPTIONS = {"ConnectionError", "ConnectTimeout", "MaxRetryError", "NewConnectionError", "gaierror"}
_NETWORK_MARKERS = (
    "Temporary failure in name resolution",
    "Name or service not known",
    "Failed to establish a new connection",
    "Network is unreachable",
    "nodename nor servname provided",
)
_TIMEOUT_MARKERS = ("Timeout", "Failed: Timeout")


class TestResult(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    test_id: str = Field(description="pytest node id, e.g. tests/test_x.py::TestK::test_y[1].")
    status: TestStatus
    failure_class: FailureClass | None = None
    exception: str = Field(default="", description="Exception type name of the failure or error, when known.")
    reason: str = Field(default="", description="Why the status, in words: 'fixture error', 'collection error', …")
    message: str = ""
    excerpt: str = ""


class PytestRun(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tree: str
    targets: list[str]
    command: str = Field(description="The command, as a shell line run in the tree.")
    result: RunResult
    tests: list[TestResult] = Field(default_factory=list)
    run_error: str | None = Field(default=None, description="Why the run as a whole gave no verdict (timeout…).")
    coverage_file: str | None = None

    def by_id(self) -> dict[str, TestResult]:
        return {t.test_id: t for t in self.tests}

    def log_excerpt(self) -> str:
        text = (self.result.stdout + "\n" + self.result.stderr).strip()
        return text[-EXCERPT_CHARS:]


def _properties(case: ET.Element) -> dict[str, str]:
    props: dict[str, str] = {}
    for prop in case.iter("property"):
        name, value = prop.get("name"), prop.get("value")
        if name is not None and value is not None:
            props[name] = value
    return props


def _fallback_node_id(case: ET.Element) -> str:
    """Node id from the xunit1 ``file``/``classname``/``name`` attributes (when the plugin did not run)."""
    file, classname, name = case.get("file", ""), case.get("classname", ""), case.get("name", "")
    if not classname:
        return file or name
    module = file[:-3].replace("/", ".") if file.endswith(".py") else ""
    rest = classname[len(module) + 1 :] if module and classname.startswith(module + ".") else ""
    parts = [file or classname, *[p for p in rest.split(".") if p], name]
    return "::".join(parts)


def _failure_class(props: dict[str, str], phase: str) -> FailureClass:
    return "assertion" if props.get(f"cascade_{phase}_assertion") == "1" else "crash"


def classify_testcase(case: ET.Element) -> TestResult:
    """One junit ``<testcase>`` → a classified result."""
    props = _properties(case)
    test_id = props.get("cascade_nodeid") or _fallback_node_id(case)
    for child in case:
        text = (child.text or "")[-EXCERPT_CHARS:]
        message = child.get("message", "")
        if child.tag == "skipped":
            return TestResult(test_id=test_id, status="skipped", message=message)
        if child.tag == "error":
            return _classify_error(test_id, props, message, text)
        if child.tag == "failure":
            return _classify_failure(test_id, props, message, text)
    return TestResult(test_id=test_id, status="pass")


def _classify_error(test_id: str, props: dict[str, str], message: str, text: str) -> TestResult:
    if message == "collection failure":
        exception = "ModuleNotFoundError" if "ModuleNotFoundError" in text else props.get("cascade_setup_exception", "")
        why = "missing dependency" if exception == "ModuleNotFoundError" else "collection error"
        return TestResult(
            test_id=test_id, status="setup_error", exception=exception, reason=why, message=message, excerpt=text
        )
    phase = "teardown" if "teardown" in message else "setup"
    exception = props.get(f"cascade_{phase}_exception", "")
    why = "fixture error" if phase == "setup" else "teardown error"
    return TestResult(
        test_id=test_id, status="setup_error", exception=exception, reason=why, message=message, excerpt=text
    )


def _classify_failure(test_id: str, props: dict[str, str], message: str, text: str) -> TestResult:
    exception = props.get("cascade_call_exception", "")
    if exception in _SETUP_EXCEPTIONS:
        return TestResult(
            test_id=test_id, status="setup_error", exception=exception, reason="missing dependency",
            message=message, excerpt=text,
        )  # fmt: skip
    if exception in _NETWORK_EXCEPTIONS or any(m in message or m in text for m in _NETWORK_MARKERS):
        return TestResult(
            test_id=test_id, status="setup_error", exception=exception, reason=NEEDS_NETWORK,
            message=message, excerpt=text,
        )  # fmt: skip
    if message.startswith(_TIMEOUT_MARKERS):
        return TestResult(
            test_id=test_id, status="setup_error", exception=exception, reason="timeout", message=message, excerpt=text
        )
    failure_class: FailureClass = _failure_class(props, "call") if exception else _guess_class(message)
    return TestResult(
        test_id=test_id,
        status="behavioural_fail",
        failure_class=failure_class,
        exception=exception,
        reason="assertion" if failure_class == "assertion" else "exception raised in code",
        message=message,
        excerpt=text,
    )


def _guess_class(message: str) -> FailureClass:
    """Without the plugin's record: pytest's message for an assert starts with 'assert', DID NOT RAISE says so."""
    if message.startswith(("assert", "AssertionError")) or "DID NOT RAISE" in message:
        return "assertion"
    return "crash"


def parse_junit(xml_text: str) -> list[TestResult]:
    """All test cases of a junit XML report (pytest's), classified."""
    root = ET.fromstring(xml_text)
    return [classify_testcase(case) for case in root.iter("testcase")]


def write_plugin(tree: Path) -> Path:
    """Put the junit-properties plugin in the tree's run directory (the only place the sandbox surely sees)."""
    work = tree / WORK_DIR
    work.mkdir(exist_ok=True)
    (work / f"{PLUGIN_MODULE}.py").write_text(PLUGIN_SOURCE, encoding="utf-8")
    return work


def pytest_command(
    env: Environment,
    tree: Path,
    targets: list[str],
    junit: str,
    coverage_data: str | None,
    coverage_include: list[str],
) -> list[str]:
    """The argv of one run. ``--rootdir`` is the tree so node ids are repository-relative and can be run again."""
    argv = [env.python]
    if coverage_data is not None:
        argv += ["-m", "coverage", "run", f"--data-file={coverage_data}"]
        if coverage_include:
            argv.append("--include=" + ",".join(coverage_include))
    argv += [
        "-m",
        "pytest",
        "-p",
        PLUGIN_MODULE,
        "-p",
        "no:cacheprovider",
        "-o",
        "junit_family=xunit1",
        f"--junitxml={junit}",
        f"--rootdir={tree}",
        "--continue-on-collection-errors",
        "-q",
        "-rN",
        *targets,
    ]
    return argv


def run_pytest(
    sandbox: Sandbox,
    env: Environment,
    tree: Path,
    targets: list[str],
    *,
    tag: str,
    timeout_seconds: float,
    limits: dict[str, int] | None = None,
    coverage_include: list[str] | None = None,
) -> PytestRun:
    """Run pytest on ``targets`` (paths or node ids) in ``tree``; coverage is measured when ``coverage_include``
    is given (absolute paths of the files whose executed lines matter)."""
    work = write_plugin(tree)
    junit = work / f"junit-{tag}.xml"
    junit.unlink(missing_ok=True)
    coverage_file = str(work / f"coverage-{tag}") if coverage_include is not None else None
    if coverage_file:
        Path(coverage_file).unlink(missing_ok=True)
    argv = pytest_command(env, tree, targets, str(junit), coverage_file, coverage_include or [])
    run_env = {**env.run_env(tree), "PYTHONPATH": ":".join([str(work), *env.pythonpath(tree)])}
    spec = RunSpec(
        argv=argv,
        worktree=str(tree),
        env=run_env,
        read_only_paths=env.exposed_paths(),
        timeout_seconds=timeout_seconds,
        **(limits or {}),
    )
    result = sandbox.run(spec)
    run = PytestRun(
        tree=str(tree),
        targets=targets,
        command=_shell_line(run_env, argv),
        result=result,
        coverage_file=coverage_file,
    )
    run.tests, run.run_error = _read_outcomes(result, junit, timeout_seconds)
    return run


def _shell_line(env: dict[str, str], argv: list[str]) -> str:
    shown = {k: v for k, v in env.items() if k in {"TZ", "PYTHONHASHSEED", "PYTHONPATH"}}
    return " ".join([*(f"{k}={shlex.quote(v)}" for k, v in shown.items()), *map(shlex.quote, argv)])


def _read_outcomes(result: RunResult, junit: Path, timeout_seconds: float) -> tuple[list[TestResult], str | None]:
    if result.timed_out:  # the limit, not the measured time: the same run must give the same report
        return [], f"timeout after {timeout_seconds:g}s"
    if not junit.is_file():
        return [], f"crash: pytest wrote no report (exit code {result.exit_code})"
    try:
        tests = parse_junit(junit.read_text(encoding="utf-8", errors="replace"))
    except ET.ParseError as exc:
        return [], f"crash: unreadable junit report ({exc})"
    if result.exit_code is not None and result.exit_code not in (0, 1, 2, 5):
        return tests, f"pytest exit code {result.exit_code} (internal or usage error)"
    return tests, None


def executed_lines(run: PytestRun, path: Path) -> set[int]:
    """Lines of ``path`` (absolute) executed during a coverage-measured run."""
    if not run.coverage_file or not Path(run.coverage_file).is_file():
        return set()
    from coverage import CoverageData

    data = CoverageData(basename=run.coverage_file)
    data.read()
    return set(data.lines(str(path)) or [])
