"""Run pytest inside a sandbox — in a fresh copy of a pristine tree, with the files placed for the run — and read what
each test did (`outcomes.py`: the gate plugin's channel records decide, junit cross-checks).

Nothing is written into the pristine tree and nothing is read back from the run's tree: the report files come back
through the run's report directory without following links (`sandbox/safefs.py`), the outcomes through the append-only
channel (docs/architecture.md, "Run model")."""

from __future__ import annotations

import shlex
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from cascade.execution.envs import Environment
from cascade.execution.outcomes import (
    NEEDS_NETWORK,
    FailureClass,
    TestResult,
    TestStatus,
    from_channel,
    integrity,
    parse_junit,
)
from cascade.sandbox.allowlist import HOOK_MOUNT
from cascade.sandbox.base import HOOK, RESULTS, TREE, RunResult, RunSpec, Sandbox

__all__ = ["NEEDS_NETWORK", "FailureClass", "PytestRun", "TestResult", "TestStatus", "executed_lines", "run_pytest"]
PLUGIN_MODULE = "pytest_report_props"
JUNIT, COVERAGE = "junit.xml", "coverage"
EXCERPT_CHARS = 2000
SHOWN = {TREE: ".", RESULTS: "<results>", HOOK: "<hook>"}


class PytestRun(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tree: str = Field(description="The pristine tree the run got a copy of.")
    targets: list[str]
    placed: list[str] = Field(default_factory=list, description="Files written into the run's copy before it ran.")
    command: str = Field(description="The command, as a shell line run in the tree.")
    result: RunResult
    tests: list[TestResult] = Field(default_factory=list)
    run_error: str | None = Field(default=None, description="Why the run as a whole gave no verdict (timeout…).")
    coverage: bytes | None = Field(default=None, exclude=True, description="coverage.py's data file, read back.")

    def by_id(self) -> dict[str, TestResult]:
        return {t.test_id: t for t in self.tests}

    def log_excerpt(self) -> str:
        text = (self.result.stdout + "\n" + self.result.stderr).strip()
        return text[-EXCERPT_CHARS:]


def pytest_command(env: Environment, targets: list[str], coverage: bool, coverage_include: list[str]) -> list[str]:
    """The argv of one run, with the run's places as tokens. ``--rootdir`` is the tree so node ids are
    repository-relative and can be run again."""
    argv = [env.python]
    if coverage:
        # An explicit empty rcfile: the project's own coverage settings (``parallel``, ``source``) would write the
        # data under another name or ignore --include, and the run would seem to execute no changed line.
        argv += ["-m", "coverage", "run", "--rcfile=/dev/null", f"--data-file={RESULTS}/{COVERAGE}"]
        if coverage_include:
            argv.append("--include=" + ",".join(f"{TREE}/{p}" for p in coverage_include))
    argv += ["-m", "pytest", "-p", PLUGIN_MODULE, "-p", "no:cacheprovider", "-o", "junit_family=xunit1",
             f"--junitxml={RESULTS}/{JUNIT}", f"--rootdir={TREE}", "--continue-on-collection-errors", "-q", "-rN",
             *targets]  # fmt: skip
    return argv


HOOK_LOADER = "_pysite_hook.pth"


def hook_loader_line() -> str:
    """A ``.pth`` line that loads the audit hook in an interpreter of the test environment started without the hook
    on PYTHONPATH (a clean environment, ``-I``, ``-E``): only where the sandbox shows the hook, so it does nothing on
    the host (the path lies in a root-owned directory nobody else can create it in)."""
    site = HOOK_MOUNT
    return (
        f"import os, sys; p = {site!r}; os.path.isfile(p + '/sitecustomize.py') and 'sitecustomize' not in "
        "sys.modules and (sys.path.insert(0, p), __import__('sitecustomize'), sys.path.remove(p))\n"
    )


def install_hook_loader(env: Environment) -> None:
    """Put the hook loader into the cached venv's site-packages (the gate writes it on the host; runs see the venv
    read-only). The interpreter running the gate itself is never changed."""
    if not env.venv_dir:
        return
    for site in Path(env.venv_dir).glob("lib/python*/site-packages"):
        target = site / HOOK_LOADER
        line = hook_loader_line()
        if not target.is_file() or target.read_text(encoding="utf-8") != line:
            target.write_text(line, encoding="utf-8")


def tokenized(value: str, tree: Path) -> str:
    """A host path of the pristine tree in a variable becomes the token of the run's copy."""
    return value.replace(str(tree), TREE)


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
    place: dict[str, str] | None = None,
    tree_name: str = "project",
) -> PytestRun:
    """Run pytest on ``targets`` (paths or node ids) in a fresh copy of ``tree`` with ``place`` written into it;
    coverage is measured when ``coverage_include`` is given (paths relative to the tree)."""
    del tag  # every run has its own places now; kept for callers naming their runs
    install_hook_loader(env)
    argv = pytest_command(env, targets, coverage_include is not None, coverage_include or [])
    base_env = env.run_env(tree)
    run_env = {k: tokenized(v, tree) for k, v in base_env.items()}
    run_env["PYTHONPATH"] = ":".join([HOOK, *(tokenized(p, tree) for p in env.pythonpath(tree))])
    spec = RunSpec(
        argv=argv,
        tree=str(tree),
        tree_name=tree_name,
        place=place or {},
        results=[JUNIT, COVERAGE] if coverage_include is not None else [JUNIT],
        env=run_env,
        read_only_paths=env.exposed_paths(),
        timeout_seconds=timeout_seconds,
        **(limits or {}),
    )
    result = sandbox.run(spec)
    run = PytestRun(tree=str(tree), targets=targets, placed=sorted(place or {}), command=_shell_line(run_env, argv),
                    result=result)  # fmt: skip
    run.tests, run.run_error = _read_outcomes(result, timeout_seconds)
    coverage = next((r for r in result.results if r.name == COVERAGE and r.data is not None), None)
    run.coverage = coverage.data if coverage else None
    return run


def _shell_line(env: dict[str, str], argv: list[str]) -> str:
    shown = {k: v for k, v in env.items() if k in {"TZ", "PYTHONHASHSEED", "PYTHONPATH"}}
    words = [*(f"{k}={shlex.quote(v)}" for k, v in shown.items()), *map(shlex.quote, argv)]
    line = " ".join(words)
    for token, text in SHOWN.items():
        line = line.replace(token, text)
    return line


def _read_outcomes(result: RunResult, timeout_seconds: float) -> tuple[list[TestResult], str | None]:
    """The channel's outcomes, cross-checked with junit; the disagreements join the run's side effects."""
    if result.timed_out:  # the limit, not the measured time: the same run must give the same report
        return [], f"timeout after {timeout_seconds:g}s"
    tests = from_channel(result.reports)
    junit = _junit(result)
    result.side_effects = [*result.side_effects, *integrity(result, tests, junit)]
    if not any(r.event == "runner" for r in result.reports):
        return [], f"crash: pytest wrote no report (exit code {result.exit_code})"
    if result.exit_code is not None and result.exit_code not in (0, 1, 2, 5):
        return tests, f"pytest exit code {result.exit_code} (internal or usage error)"
    return tests, None


def _junit(result: RunResult) -> list[TestResult] | None:
    back = next((r for r in result.results if r.name == JUNIT), None)
    if back is None or back.data is None:
        return None
    try:
        return parse_junit(back.data.decode("utf-8", "replace"))
    except ET.ParseError:
        return None


def executed_lines(run: PytestRun, relative: str) -> set[int]:
    """Lines of the tree's file ``relative`` executed during a coverage-measured run (read from the data file the
    run wrote, copied to a host-only temporary file first: nothing is opened in the run's places)."""
    if not run.coverage:
        return set()
    from coverage import CoverageData

    with tempfile.TemporaryDirectory(prefix="cascade-coverage-") as tmp:
        data_file = Path(tmp) / "coverage"
        data_file.write_bytes(run.coverage)
        data = CoverageData(basename=str(data_file))
        data.read()
        return set(data.lines(f"{run.result.tree}/{relative}") or [])
