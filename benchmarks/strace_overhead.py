"""The outside witness's overhead in the bwrap backend: a real test suite run in bwrap as shipped (bwrap under
``strace -f --seccomp-bpf`` tracing every write intent, open, exec and connect, see cascade/sandbox/strace.py) vs.
the same bwrap without strace, as a ratio.

The suite is sympy's, from the repository under --repos-dir: importing sympy opens about
a thousand modules and the tests spawn nothing, so every traced open stops the process — close to the worst case
for a seccomp-filtered strace. A venv of Debian's /usr/bin/python3 with pytest, mpmath and hypothesis (made with uv)
is exposed read-only, as Stage 2 does. The modes take turns (round-robin, after one warm-up each); medians are reported.

    python3 -m benchmarks.strace_overhead --repos-dir /work/.mirror [--reps 3] [--tests sympy/core/tests/…] [--json …]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from benchmarks.sandbox_overhead import SYSTEM_PYTHON, time_round_robin
from cascade.bench.repos import RepoResolver
from cascade.sandbox.base import RunSpec
from cascade.sandbox.bwrap import BwrapSandbox
from cascade.sandbox.places import RunPlaces

HARMFUL: dict[str, list[str]] = {}  # the last run's harmful records per mode: a real suite must leave none
DEFAULT_TESTS = ["sympy/core/tests/test_basic.py", "sympy/core/tests/test_sympify.py"]


class UntracedBwrap(BwrapSandbox):
    """The bwrap backend minus strace: the baseline."""

    def wrap(self, spec: RunSpec, places: RunPlaces) -> list[str]:
        argv = super().wrap(spec, places)
        places.trace = None
        return argv[argv.index("--") + 1 :]  # strace … -- bwrap …


def make_suite(root: Path, mirror: Path) -> tuple[Path, Path]:
    worktree = root / "sympy"
    worktree.mkdir()
    archive = subprocess.run(["git", "-C", str(mirror), "archive", "HEAD", "sympy", "conftest.py"],
                             check=True, capture_output=True).stdout  # fmt: skip
    subprocess.run(["tar", "-x", "-C", str(worktree)], input=archive, check=True)
    venv = root / "venv"
    subprocess.run(["uv", "venv", "-q", "--python", SYSTEM_PYTHON, str(venv)], check=True)
    python = str(venv / "bin/python")
    packages = ["pytest", "mpmath", "hypothesis"]
    subprocess.run(["uv", "pip", "install", "-q", "--compile-bytecode", "--python", python, *packages], check=True)
    return venv, worktree


def main() -> None:
    parser = argparse.ArgumentParser(description="strace overhead in the bwrap backend on a real test suite.")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--tests", nargs="+", default=DEFAULT_TESTS)
    parser.add_argument("--repos-dir", required=True, help="Where sympy/sympy is, as `cascade bench run --repos-dir`.")
    parser.add_argument("--json", help="also write the timings here")
    args = parser.parse_args()
    location = RepoResolver(repos_dir=args.repos_dir).resolve("sympy/sympy")
    if location.path is None:
        raise SystemExit(f"no sympy repository: {location.note}")
    root = Path(tempfile.mkdtemp(prefix="cascade-strace-overhead-"))
    try:
        venv, worktree = make_suite(root, Path(location.path))
        pytest = [str(venv / "bin/python"), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not slow"]
        argv = [*pytest, *args.tests]
        runners = {mode: sympy_runner(mode, venv, worktree, argv) for mode in ("bwrap+strace", "bwrap")}
        seconds = time_round_robin(runners, args.reps)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    medians = {mode: statistics.median(times) for mode, times in seconds.items()}
    ratio = medians["bwrap+strace"] / medians["bwrap"]
    print(f"sympy {' '.join(args.tests)}: median of {args.reps} round-robin runs (after 1 warm-up); "
          f"load {os.getloadavg()[0]:.1f}")  # fmt: skip
    for mode, times in seconds.items():
        print(f"{mode:13} {medians[mode]:8.3f} s  {[round(t, 3) for t in times]}")
    print(f"ratio bwrap+strace / bwrap: {ratio:.3f}")
    for mode, records in HARMFUL.items():
        print(f"harmful records of the last {mode} run: {len(records)}", *records[:10], sep="\n  ")
    if args.json:
        result = {"seconds": seconds, "ratio": round(ratio, 3), "harmful": HARMFUL}
        Path(args.json).write_text(json.dumps(result, indent=2))


def sympy_runner(mode: str, venv: Path, worktree: Path, argv: list[str]) -> Callable[[], int]:
    sandbox = BwrapSandbox() if mode == "bwrap+strace" else UntracedBwrap()
    spec = RunSpec(argv=argv, tree=str(worktree), read_only_paths=[str(venv)], timeout_seconds=600,
                   env={"PYTHONDONTWRITEBYTECODE": "1"})  # fmt: skip

    def run_once() -> int:
        result = sandbox.run(spec)
        HARMFUL[mode] = [f"{e.source}: {e.target}: {e.detail}" for e in result.harmful_side_effects]
        return -1 if result.exit_code is None else result.exit_code

    return run_once


if __name__ == "__main__":
    main()
