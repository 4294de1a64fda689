"""Sandbox overhead : one small pytest run, bare vs. bwrap vs. docker, as a ratio to bare.

The same venv (Debian's /usr/bin/python3 + pytest, made with uv) runs the same test file in every mode: bare is a
plain subprocess; bwrap and docker go through `cascade.sandbox` with the venv exposed read-only, exactly as Stage 2
runs tests. The modes take turns (round-robin, after one warm-up run each), so a load change on a shared machine
hits all of them alike; the median wall time of --reps runs is reported. Bare runs get the same minimal
environment the sandboxes give (so e.g. a host PYTHONDONTWRITEBYTECODE does not skew the baseline), and the venv is
byte-compiled up front (the sandboxes see it read-only).

    python3 -m benchmarks.sandbox_overhead [--reps 7] [--tests 30] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel

from cascade.sandbox.base import RunSpec, Sandbox
from cascade.sandbox.bwrap import BwrapSandbox
from cascade.sandbox.docker import DockerSandbox
from cascade.sandbox.none import NoSandbox
from cascade.sandbox.process import scrubbed_env

SYSTEM_PYTHON = "/usr/bin/python3"  # Debian's: the same interpreter exists in the cascade-base image


class ModeTiming(BaseModel):
    mode: str
    seconds: list[float]
    median: float
    ratio_to_bare: float | None = None
    skipped: str | None = None


def make_venv(root: Path) -> Path:
    venv = root / "venv"
    subprocess.run(["uv", "venv", "-q", "--python", SYSTEM_PYTHON, str(venv)], check=True)
    subprocess.run(
        ["uv", "pip", "install", "-q", "--compile-bytecode", "--python", str(venv / "bin/python"), "pytest"], check=True
    )
    return venv


def make_worktree(root: Path, tests: int) -> Path:
    worktree = root / "worktree"
    worktree.mkdir()
    (worktree / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    body = "".join(f"def test_add_{i}():\n    assert add({i}, 1) == {i + 1}\n\n" for i in range(tests))
    (worktree / "test_calc.py").write_text("from calc import add\n\n\n" + body)
    return worktree


def pytest_argv(venv: Path) -> list[str]:
    return [str(venv / "bin/python"), "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_calc.py"]


def time_round_robin(runners: dict[str, Callable[[], int]], reps: int) -> dict[str, list[float]]:
    """Warm each mode up once (page cache, docker layers), then take turns; any failed run aborts."""
    for run_once in runners.values():
        run_once()
    seconds: dict[str, list[float]] = {mode: [] for mode in runners}
    for _ in range(reps):
        for mode, run_once in runners.items():
            start = time.perf_counter()
            code = run_once()
            seconds[mode].append(time.perf_counter() - start)
            if code != 0:
                raise SystemExit(f"the pytest run failed in mode {mode} (exit {code}); measurement aborted")
    return seconds


def bare_runner(venv: Path, worktree: Path) -> Callable[[], int]:
    env, _ = scrubbed_env({}, home=str(worktree.parent / "home"), tmpdir=tempfile.gettempdir())

    def run_once() -> int:
        return subprocess.run(pytest_argv(venv), cwd=worktree, env=env, capture_output=True).returncode

    return run_once


def sandbox_runner(sandbox: Sandbox, venv: Path, worktree: Path) -> Callable[[], int]:
    spec = RunSpec(argv=pytest_argv(venv), tree=str(worktree), read_only_paths=[str(venv)], timeout_seconds=120)

    def run_once() -> int:
        result = sandbox.run(spec)
        return -1 if result.exit_code is None else result.exit_code

    return run_once


def measure(reps: int, tests: int) -> list[ModeTiming]:
    root = Path(tempfile.mkdtemp(prefix="cascade-overhead-"))
    try:
        venv, worktree = make_venv(root), make_worktree(root, tests)
        modes: dict[str, Sandbox | None] = {
            "bare": None,
            "none": NoSandbox(),
            "bwrap": BwrapSandbox(),
            "docker": DockerSandbox(),
        }
        runners: dict[str, Callable[[], int]] = {}
        results: dict[str, ModeTiming] = {}
        for mode, sandbox in modes.items():
            reason = sandbox.available() if sandbox is not None else None
            if reason is not None:
                results[mode] = ModeTiming(mode=mode, seconds=[], median=0.0, skipped=reason)
            else:
                runners[mode] = (
                    bare_runner(venv, worktree) if sandbox is None else sandbox_runner(sandbox, venv, worktree)
                )
        seconds = time_round_robin(runners, reps)
        for mode, times in seconds.items():
            results[mode] = ModeTiming(mode=mode, seconds=[round(t, 4) for t in times], median=statistics.median(times))
        bare = results["bare"].median
        return [
            results[mode].model_copy(
                update={"ratio_to_bare": round(results[mode].median / bare, 2) if results[mode].seconds else None}
            )
            for mode in modes
        ]
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description="Sandbox overhead: a small pytest run, bare vs. bwrap vs. docker.")
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--tests", type=int, default=30, help="tests in the measured pytest file")
    parser.add_argument("--json", help="also write the timings here")
    args = parser.parse_args()
    timings = measure(args.reps, args.tests)
    load = os.getloadavg()[0]
    print(f"pytest on {args.tests} tests, median of {args.reps} round-robin runs (after 1 warm-up); load {load:.1f}")
    print(f"{'mode':8} {'median s':>9} {'ratio':>7}  runs")
    for t in timings:
        if t.skipped:
            print(f"{t.mode:8} skipped: {t.skipped}")
        else:
            print(f"{t.mode:8} {t.median:9.3f} {t.ratio_to_bare:7.2f}  {t.seconds}")
    if args.json:
        Path(args.json).write_text(json.dumps([t.model_dump() for t in timings], indent=2))


if __name__ == "__main__":
    main()
