"""The one way cascade runs git: hooks and detached-HEAD advice neutralised, no prompt on stdin, a timeout.

The git command line itself, not GitPython: cascade needs a handful of plumbing calls (worktree add/remove, apply
with its fallbacks, ls-files, grep, check-ignore --no-index) whose exact flags and messages it reports, and
GitPython would run the same commands through its own subprocess layer with hooks and prompts to neutralise anew.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from cascade.errors import CascadeError

GIT_TIMEOUT = 600


def run_git(
    repo: Path | str | None,
    *args: str,
    input: str | None = None,
    timeout: float | None = GIT_TIMEOUT,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``git -C repo args…`` (no ``-C`` for None, e.g. a clone) with its exit code and output; the caller judges them.

    ``env`` adds variables to cascade's own environment. Raises what `subprocess.run` raises (timeout, no git)."""
    where = ["-C", str(repo)] if repo is not None else []
    return subprocess.run(
        ["git", *where, "-c", "core.hooksPath=/dev/null", "-c", "advice.detachedHead=false", *args],
        input=input,
        stdin=subprocess.DEVNULL if input is None else None,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **env} if env else None,
    )


def git(repo: Path | str, *args: str, check: bool = True, timeout: float | None = GIT_TIMEOUT) -> str:
    """Standard output; with ``check``, a failure is a `CascadeError` naming the command and git's message."""
    proc = run_git(repo, *args, timeout=timeout)
    if check and proc.returncode != 0:
        raise CascadeError(f"git {' '.join(args[:2])} failed: {proc.stderr.strip()}")
    return proc.stdout
