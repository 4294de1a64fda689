"""What many test modules share and is no fixture: real git repositories made on disk, where the SWE-bench data
and mirrors live, and the sandbox backends by name (a backend that cannot run here is a skip with its reason, never
a silent fallback to the ``none`` backend). Test modules import this module, never each other."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from cascade.sandbox.base import Sandbox
from cascade.sandbox.bwrap import BwrapSandbox
from cascade.sandbox.docker import DEFAULT_IMAGE, DockerSandbox

SWEBENCH_DIR = Path(
    os.environ.get("CASCADE_SWEBENCH_DIR", Path(__file__).resolve().parents[2] / "shared/data/swebench")
)
MIRROR_DIR = Path(os.environ.get("CASCADE_REPOS_DIR", "/work/.mirror"))
ISOLATING_BACKENDS = ["bwrap", "docker"]
# As test parameters: the docker runs are the slow lane (the fast lane, `pytest -m "not slow"`, runs bwrap)
BACKEND_PARAMS = ["bwrap", pytest.param("docker", marks=pytest.mark.slow)]

MakeRepo = Callable[[dict[str, str]], Path]


def run_git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
    }
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env).stdout


def diff_of(repo: Path, changes: dict[str, str | None]) -> str:
    """Make a unified diff by editing files in the repo, diffing, and restoring the checkout."""
    for rel, text in changes.items():
        path = repo / rel
        if text is None:
            path.unlink()
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    run_git(repo, "add", "-A")
    patch = run_git(repo, "diff", "--cached")
    run_git(repo, "reset", "-q", "--hard", "HEAD")
    run_git(repo, "clean", "-fdq")
    return patch


def docker_engine_answers() -> bool:
    reason = DockerSandbox(image=DEFAULT_IMAGE).available()
    return reason is None or "not found" in reason


def sandbox_backend(name: str) -> Sandbox:
    """The named isolating backend, or a skip saying why it cannot run here. Docker skips only when the engine does
    not answer: an engine without the base image is a failure (.ci/run builds it with docker/make-base-image.sh)."""
    if name == "bwrap":
        reason = BwrapSandbox().available()
        if reason is not None:
            pytest.skip(f"bwrap: {reason}")
        return BwrapSandbox()
    if name != "docker":
        raise ValueError(f"not an isolating backend: {name!r}")
    if not docker_engine_answers():
        pytest.skip("docker: the engine does not answer")
    backend = DockerSandbox(image=DEFAULT_IMAGE)
    reason = backend.available()
    if reason is not None:
        pytest.fail(f"{reason}: run docker/make-base-image.sh (as .ci/run does)")
    return backend


def processes_mentioning(text: str) -> list[str]:
    """Live processes whose command line contains ``text`` (a run's private directory: nothing may outlive it)."""
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            found.append(f"{entry.name}: {cmdline[:200]}")
    return found


def signal_and_wait(proc: subprocess.Popen[str], signum: int, timeout: float) -> tuple[float, str]:
    """Send ``signum``; the seconds until the process exited and its stderr. Still running after ``timeout``: killed,
    and the test fails."""
    started = time.monotonic()
    proc.send_signal(signum)
    try:
        _, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"{' '.join(map(str, proc.args[2:5]))} did not exit within {timeout:g} s of signal {signum}")
    return time.monotonic() - started, stderr
