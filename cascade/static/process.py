"""Run an analysis tool as its own process group, so a timeout also ends its children (pyright's node)."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path


def run_tool(argv: list[str], cwd: Path, timeout: float, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """(exit code, stdout, stderr); raises ``subprocess.TimeoutExpired`` after killing the whole group."""
    with subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    ) as proc:
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            raise
        except BaseException:
            _kill_group(proc)
            raise
        return proc.returncode, stdout, stderr


def _kill_group(proc: subprocess.Popen[str]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    proc.communicate()
