"""What the sandbox costs, as ratios measured in one run: `sandbox-overhead` (one small pytest file bare, in the `none`,
bwrap and docker backends) and `strace-overhead` (sympy's core tests in bwrap as shipped, under the outside witness
``strace -f --seccomp-bpf``, against the same bwrap without it; cascade/sandbox/strace.py).

Every mode runs the same venv of Debian's /usr/bin/python3 (made with uv, byte-compiled, shown read-only as Stage 2
shows a test environment). The modes take turns — one warm-up each (rep 0), then ``--reps`` rounds — so a load change
on a shared machine hits all of them alike; the summary gives each mode's median and its ratio to the baseline. A mode
whose backend is not available here is a row that says why. Each row is one timed run."""

from __future__ import annotations

import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from cascade.bench.scans import ScanInputs
from cascade.sandbox.base import RunSpec, Sandbox
from cascade.sandbox.bwrap import BwrapSandbox
from cascade.sandbox.places import RunPlaces

SYSTEM_PYTHON = "/usr/bin/python3"  # Debian's: the same interpreter exists in the cascade-base image
SYMPY_TESTS = ["sympy/core/tests/test_basic.py", "sympy/core/tests/test_sympify.py", "sympy/core/tests/test_arit.py"]
SMALL_FILE_TESTS = 30


class TimedRun(BaseModel):
    model_config = ConfigDict(extra="forbid")

    mode: str
    rep: int = Field(description="0: the warm-up run (not in the medians)")
    seconds: float | None = None
    exit_code: int | None = None
    harmful: list[str] = Field(default_factory=list, description="Harmful records of a sandboxed run: none expected.")
    skipped: str | None = Field(default=None, description="Why the mode did not run here.")
    load: float = Field(description="1-minute load average when the run ended")


Runner = Callable[[], tuple[int | None, list[str]]]


def round_robin(runners: dict[str, Runner], reps: int) -> Iterator[TimedRun]:
    """A warm-up run of each mode, then ``reps`` rounds in turn."""
    for rep in range(reps + 1):
        for mode, run_once in runners.items():
            started = time.perf_counter()
            code, harmful = run_once()
            seconds = round(time.perf_counter() - started, 4)
            yield TimedRun(mode=mode, rep=rep, seconds=seconds, exit_code=code, harmful=harmful,
                           load=round(os.getloadavg()[0], 2))  # fmt: skip


def summary_lines(rows: list[TimedRun], baseline: str) -> list[str]:
    lines = ["| mode | median s | ratio to " + baseline + " | runs (s) | failed runs | harmful records |",
             "|---|---:|---:|---|---:|---:|"]  # fmt: skip
    timed = {r.mode: [x for x in rows if x.mode == r.mode and x.rep > 0] for r in rows if r.skipped is None}
    base = statistics.median(x.seconds or 0.0 for x in timed[baseline]) if timed.get(baseline) else None
    for mode, runs in timed.items():
        median = statistics.median(x.seconds or 0.0 for x in runs) if runs else 0.0
        ratio = f"{median / base:.3f}" if base else "–"
        failed = sum(x.exit_code != 0 for x in runs)
        lines.append(f"| {mode} | {median:.3f} | {ratio} | {', '.join(f'{x.seconds:.2f}' for x in runs)} | {failed} | "
                     f"{sum(len(x.harmful) for x in runs)} |")  # fmt: skip
    lines += [f"| {r.mode} | skipped: {r.skipped} | | | | |" for r in rows if r.skipped is not None]
    loads = [r.load for r in rows if r.skipped is None]
    if loads:
        lines += ["", f"Load average (1 min) at the end of the runs: {min(loads):.1f}–{max(loads):.1f}."]
    return lines


def make_venv(root: Path, packages: list[str]) -> Path:
    venv = root / "venv"
    subprocess.run(["uv", "venv", "-q", "--python", SYSTEM_PYTHON, str(venv)], check=True)
    subprocess.run(["uv", "pip", "install", "-q", "--compile-bytecode", "--python", str(venv / "bin/python"),
                    *packages], check=True)  # fmt: skip
    return venv


def sandbox_runner(sandbox: Sandbox, argv: list[str], tree: Path, venv: Path, timeout: float) -> Runner:
    spec = RunSpec(argv=argv, tree=str(tree), read_only_paths=[str(venv)], timeout_seconds=timeout,
                   env={"PYTHONDONTWRITEBYTECODE": "1"})  # fmt: skip

    def run_once() -> tuple[int | None, list[str]]:
        result = sandbox.run(spec)
        return result.exit_code, [f"{e.source}: {e.target}: {e.detail}" for e in result.harmful_side_effects]

    return run_once


class SandboxOverheadScan:
    name = "sandbox-overhead"
    title = "Sandbox overhead: one small pytest file, bare vs. the backends"
    needs_data = False
    row = TimedRun

    def rows(self, inputs: ScanInputs) -> Iterator[TimedRun]:
        from cascade.sandbox.docker import DockerSandbox
        from cascade.sandbox.none import NoSandbox
        from cascade.sandbox.process import scrubbed_env

        with tempfile.TemporaryDirectory(prefix="overhead-", dir=inputs.scratch) as name:
            root = Path(name)
            venv, tree = make_venv(root, ["pytest"]), root / "tree"
            tree.mkdir()
            (tree / "calc.py").write_text("def add(a, b):\n    return a + b\n")
            tests = range(SMALL_FILE_TESTS)
            body = "".join(f"def test_add_{i}():\n    assert add({i}, 1) == {i + 1}\n\n" for i in tests)
            (tree / "test_calc.py").write_text("from calc import add\n\n\n" + body)
            argv = [str(venv / "bin/python"), "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_calc.py"]
            env, _ = scrubbed_env({}, home=str(root / "home"), tmpdir=tempfile.gettempdir())

            def bare() -> tuple[int | None, list[str]]:  # the environment the sandboxes give, without them
                return subprocess.run(argv, cwd=tree, env=env, capture_output=True).returncode, []

            runners: dict[str, Runner] = {"bare": bare}
            for mode, sandbox in (("none", NoSandbox()), ("bwrap", BwrapSandbox()), ("docker", DockerSandbox())):
                why = sandbox.available()
                if why is not None:
                    yield TimedRun(mode=mode, rep=0, skipped=why, load=round(os.getloadavg()[0], 2))
                else:
                    runners[mode] = sandbox_runner(sandbox, argv, tree, venv, 120)
            yield from round_robin(runners, inputs.reps)

    def summary(self, rows: list[TimedRun]) -> list[str]:
        return [f"pytest on {SMALL_FILE_TESTS} tests; medians of the rounds after one warm-up each.", "",
                *summary_lines(rows, "bare")]  # fmt: skip


class UntracedBwrap(BwrapSandbox):
    """The bwrap backend minus strace: the baseline of `strace-overhead`."""

    def wrap(self, spec: RunSpec, places: RunPlaces) -> list[str]:
        argv = super().wrap(spec, places)
        places.trace = None
        return argv[argv.index("--") + 1 :]  # strace … -- bwrap …


class StraceOverheadScan:
    name = "strace-overhead"
    title = "The outside witness's overhead in the bwrap backend"
    needs_data = False
    row = TimedRun

    def rows(self, inputs: ScanInputs) -> Iterator[TimedRun]:
        location = inputs.repos.resolve("sympy/sympy")
        if location.path is None:
            for mode in ("bwrap+strace", "bwrap"):
                yield TimedRun(mode=mode, rep=0, skipped=f"no sympy repository: {location.note}", load=0.0)
            return
        with tempfile.TemporaryDirectory(prefix="strace-overhead-", dir=inputs.scratch) as name:
            root = Path(name)
            tree = root / "sympy"
            tree.mkdir()
            archive = subprocess.run(["git", "-C", location.path, "archive", "HEAD", "sympy", "conftest.py"],
                                     check=True, capture_output=True).stdout  # fmt: skip
            subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
            venv = make_venv(root, ["pytest", "mpmath", "hypothesis"])
            argv = [str(venv / "bin/python"), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not slow",
                    *SYMPY_TESTS]  # fmt: skip
            runners = {"bwrap+strace": sandbox_runner(BwrapSandbox(), argv, tree, venv, 600),
                       "bwrap": sandbox_runner(UntracedBwrap(), argv, tree, venv, 600)}  # fmt: skip
            yield from round_robin(runners, inputs.reps)

    def summary(self, rows: list[TimedRun]) -> list[str]:
        return [f"sympy at the repository's HEAD: {' '.join(SYMPY_TESTS)}; medians of the rounds after one warm-up "
                "each.", "", *summary_lines(rows, "bwrap")]  # fmt: skip
