"""Ctrl-C: a real SIGINT to a real `cascade review` process while it runs static tools or a sandboxed test run.
The command exits 130 within 2 s, with one line on stderr (no blank first line), and leaves nothing behind: no
temporary directory of its own, no worktree registered in the repository, no process still working on its trees."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cascade.interrupt import EXIT_INTERRUPTED, descendants
from tests.bench_support import init_repo
from tests.support import MakeRepo, diff_of, processes_mentioning, run_git, signal_and_wait

ROOT = Path(__file__).resolve().parents[1]
PROMPT_SECONDS = 2.0
SLOW_TEST = (
    "import time\n\nfrom pkg.mod import value\n\n\ndef test_value():\n    time.sleep(60)\n    assert value() == 1\n"
)


def start_review(repo: Path, patch: str, tmp: Path, *extra: str) -> subprocess.Popen[str]:
    (tmp / "fix.diff").write_text(patch)
    env = {**os.environ, "TMPDIR": str(tmp / "t"), "PYTHONPATH": str(ROOT)}
    (tmp / "t").mkdir()
    argv = [sys.executable, "-m", "cascade", "review", str(tmp / "fix.diff"), "--repo", str(repo), "--format", "json"]
    return subprocess.Popen([*argv, *extra], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for(tmp: Path, prefix: str, proc: subprocess.Popen[str], timeout: float = 240) -> None:
    """Until a temporary directory named ``prefix…`` exists under the run's TMPDIR (the stage is under way)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(p.name.startswith(prefix) for p in (tmp / "t").iterdir()):
            time.sleep(0.3)  # the tool inside it has started
            return
        assert proc.poll() is None, f"review ended before {prefix}: {proc.communicate()}"
        time.sleep(0.05)
    proc.kill()
    pytest.fail(f"no {prefix}* directory within {timeout} s")


def interrupt(proc: subprocess.Popen[str]) -> tuple[float, str]:
    return signal_and_wait(proc, signal.SIGINT, 30)


def assert_left_nothing(repo: Path, tmp: Path) -> None:
    time.sleep(0.3)
    assert sorted(p.name for p in (tmp / "t").iterdir()) == [], "temporary directories left behind"
    listed = run_git(repo, "worktree", "list", "--porcelain").splitlines()
    worktrees = [ln for ln in listed if ln.startswith("worktree ")]
    assert worktrees == [f"worktree {repo}"], worktrees
    assert processes_mentioning(str(tmp / "t")) == []


def assert_prompt_exit(proc: subprocess.Popen[str], seconds: float, stderr: str) -> None:
    assert proc.returncode == EXIT_INTERRUPTED == 130, stderr
    assert seconds < PROMPT_SECONDS, f"exit took {seconds:.2f} s"
    lines = stderr.splitlines()
    assert lines and lines[0].strip(), f"blank first line: {stderr!r}"
    assert lines[-1] == "cascade: interrupted", stderr
    assert "Traceback" not in stderr


@pytest.mark.slow
def test_ctrl_c_during_static_exits_130_promptly_and_cleans_up(make_repo: MakeRepo, tmp_path: Path) -> None:
    repo = make_repo({"pkg/__init__.py": "", "pkg/mod.py": "def value():\n    return 1\n"})
    patch = diff_of(repo, {"pkg/mod.py": "def value():\n    return 2\n"})
    proc = start_review(repo, patch, tmp_path, "--config", str(write_config(tmp_path, probes=False)))
    wait_for(tmp_path, "cascade-pyright-", proc)
    seconds, stderr = interrupt(proc)
    assert_prompt_exit(proc, seconds, stderr)
    assert_left_nothing(repo, tmp_path)


@pytest.mark.slow
def test_ctrl_c_during_a_sandboxed_test_run_exits_130_promptly_and_cleans_up(
    make_repo: MakeRepo, tmp_path: Path
) -> None:
    files = {"pkg/__init__.py": "", "pkg/mod.py": "def value():\n    return 1\n", "tests/test_mod.py": SLOW_TEST}
    repo = make_repo(files)
    patch = diff_of(repo, {"pkg/mod.py": "def value():\n    return 1  # same\n\n\nX = 2\n"})
    proc = start_review(repo, patch, tmp_path, "--config", str(write_config(tmp_path, probes=True)))
    wait_for(tmp_path, "cascade-run-", proc)
    seconds, stderr = interrupt(proc)
    assert_prompt_exit(proc, seconds, stderr)
    assert_left_nothing(repo, tmp_path)


def write_config(tmp: Path, *, probes: bool) -> Path:
    config = tmp / "config.yaml"
    text = "env:\n  use_current_interpreter: true\n"
    text += "probes:\n  enabled: true\n" if probes else "probes:\n  enabled: false\n"
    config.write_text(text)
    return config


def start_bench(tmp: Path) -> tuple[subprocess.Popen[str], Path, Path]:
    """`cascade bench run --gold` of four tasks on one repository whose nearby test sleeps, at --jobs 2."""
    files = {"pkg/__init__.py": "", "pkg/mod.py": "def value():\n    return 1\n", "tests/test_mod.py": SLOW_TEST}
    repo = tmp / "repos" / "acme__slow"
    base = init_repo(repo, files)
    patch = diff_of(repo, {"pkg/mod.py": "def value():\n    return 1  # same\n\n\nX = 2\n"})
    rows = [{"instance_id": f"acme__slow-{i}", "repo": "acme/slow", "base_commit": base, "patch": patch,
             "problem_statement": "x"} for i in range(4)]  # fmt: skip
    (tmp / "tasks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp / "t").mkdir()
    env = {**os.environ, "TMPDIR": str(tmp / "t"), "PYTHONPATH": str(ROOT), "CASCADE_CACHE_DIR": str(tmp / "cache")}
    argv = [sys.executable, "-m", "cascade", "bench", "run", "--tasks", str(tmp / "tasks.jsonl"), "--gold",
            "--repos-dir", str(tmp / "repos"), "--arm", "full-cascade", "--jobs", "2", "--quiet", "--config",
            str(write_config(tmp, probes=True)), "--output", str(tmp / "out")]  # fmt: skip
    return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True), repo, tmp / "out"


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_stopping_the_benchmarks_driver_alone_ends_its_workers_traces_and_starts_no_other(
    tmp_path: Path, signum: int
) -> None:
    """`kill -INT` or `kill` of the driver's pid (not its process group): the workers used to finish their traces
    and start the queued ones (minutes of sandboxed runs after the driver was told to stop; SIGTERM orphaned them)."""
    proc, repo, _ = start_bench(tmp_path)
    wait_for(tmp_path, "cascade-run-", proc)
    assert_bench_stopped(proc, signum, repo, tmp_path)


@pytest.mark.slow
def test_an_interrupt_while_the_benchmarks_workers_still_start_is_neither_lost_nor_a_traceback(
    tmp_path: Path,
) -> None:
    """A worker process takes a second or more to import cascade before its own handler is in place: the signal the
    driver passes on then used to kill it mid-import (a traceback on stderr), or be swallowed so that the worker went
    on to run its traces."""
    proc, repo, _ = start_bench(tmp_path)
    deadline = time.monotonic() + 60
    while not pool_workers(proc.pid):
        assert proc.poll() is None and time.monotonic() < deadline, "no worker process started"
        time.sleep(0.01)
    assert not list((tmp_path / "t").iterdir()), "too late: a worker already began a trace"
    assert_bench_stopped(proc, signal.SIGINT, repo, tmp_path)


def pool_workers(pid: int) -> list[int]:
    """The driver's worker processes (multiprocessing's spawned children), by their command line."""
    found = []
    for child in descendants(pid):
        try:
            if b"spawn_main" in Path(f"/proc/{child}/cmdline").read_bytes():
                found.append(child)
        except OSError:
            continue
    return found


def assert_bench_stopped(proc: subprocess.Popen[str], signum: int, repo: Path, tmp: Path) -> None:
    """``signum`` to the driver alone: exit 130 within 15 s, one line on stderr, no row, nothing left behind."""
    seconds, stderr = signal_and_wait(proc, signum, 60)
    assert proc.returncode == EXIT_INTERRUPTED, stderr
    assert seconds < 15, f"exit took {seconds:.1f} s"
    assert stderr.splitlines()[-1] == "cascade: interrupted" and "Traceback" not in stderr, stderr
    out = tmp / "out"
    rows = (out / "results.jsonl").read_text().splitlines() if (out / "results.jsonl").exists() else []
    assert rows == [], rows  # every trace was cut short: a re-run does them all
    assert_left_nothing(repo, tmp)
