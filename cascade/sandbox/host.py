"""The flow shared by the backends that run a host process (bwrap, none): private dirs, scrubbed env, limits,
then the side-effect oracle."""

from __future__ import annotations

import os
import sys

from cascade.sandbox.allowlist import AUDIT_MOUNT, HOOK_MOUNT
from cascade.sandbox.base import Isolation, RunResult, RunSpec
from cascade.sandbox.oracle import AUDIT_FILE, AUDIT_HOOK_DIR, DECOY_ENV, SUPERVISOR, PrivateDirs
from cascade.sandbox.process import run_limited, scrubbed_env

__all__ = ["AUDIT_MOUNT", "HOOK_MOUNT", "SYSTEM_PYTHON", "HostSandbox", "audit_env", "host_python", "supervised"]
SYSTEM_PYTHON = "/usr/bin/python3"  # the supervisor's interpreter; docker/make-base-image.sh puts one in the image


def audit_env(
    base: dict[str, str], hook_dir: str, log_path: str, allowed: list[str], denied: list[str], scratch: str
) -> dict[str, str]:
    """Load the audit hook in every Python of the run (and its child Pythons, which inherit the variables), and
    hand the run decoy tokens: the real environment is scrubbed, so any token-looking value it sees is a canary.

    ``allowed``: the run's own places, not logged (worktree, scratch directory). ``denied``: logged even inside
    them (the worktree's git directory). ``scratch``: deletions there are logged with whether the path existed."""
    env = {**base, **DECOY_ENV}
    env["PYTHONPATH"] = hook_dir + (":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["CASCADE_AUDIT_LOG"] = log_path
    env["CASCADE_AUDIT_ALLOW"] = ":".join(allowed)
    env["CASCADE_AUDIT_DENY"] = ":".join(denied)
    env["CASCADE_AUDIT_SCRATCH"] = scratch
    return env


def supervised(python: str, hook_dir: str, argv: list[str]) -> list[str]:
    """argv run under the supervisor (``audit_hook/_cascade_supervise.py``), isolated from the run's environment."""
    return [python, "-I", "-S", f"{hook_dir}/{SUPERVISOR}", "--", *argv]


def host_python() -> str:
    """The interpreter for the supervisor: the system one (visible in every backend), else the gate's own."""
    return SYSTEM_PYTHON if os.path.exists(SYSTEM_PYTHON) else sys.executable


class HostSandbox:
    """Template: a subclass decides where HOME and /tmp appear and how argv is wrapped."""

    isolated_network = False

    @property
    def isolation(self) -> Isolation:
        return "none"

    def private_dirs(self, spec: RunSpec) -> PrivateDirs:
        raise TypeError(f"{type(self).__name__} must define private_dirs")

    def wrap(self, spec: RunSpec, dirs: PrivateDirs) -> list[str]:
        raise TypeError(f"{type(self).__name__} must define wrap")

    def hook_paths(self, dirs: PrivateDirs) -> tuple[str, str]:
        """(directory holding sitecustomize.py, audit log path) as the sandboxed process sees them."""
        return str(AUDIT_HOOK_DIR), str(dirs.audit / AUDIT_FILE)

    def run(self, spec: RunSpec) -> RunResult:
        dirs = self.private_dirs(spec)
        try:
            env, dropped = scrubbed_env(spec.env, dirs.home_in_sandbox, dirs.scratch_in_sandbox)
            hook_dir, log_path = self.hook_paths(dirs)
            scratch = dirs.scratch_in_sandbox
            env = audit_env(env, hook_dir, log_path, [spec.worktree, scratch], dirs.git_dirs, scratch)
            inner = spec.model_copy(update={"argv": supervised(host_python(), hook_dir, spec.argv)})
            outcome = run_limited(self.wrap(inner, dirs), spec, env, dirs.output)
            return RunResult(
                isolation=self.isolation,
                argv=list(spec.argv),
                exit_code=outcome.exit_code,
                timed_out=outcome.timed_out,
                stdout=outcome.stdout,
                stderr=outcome.stderr,
                seconds=outcome.seconds,
                side_effects=dirs.side_effects(self.isolated_network, outcome.timed_out),
                dropped_env=dropped,
            )
        finally:
            dirs.cleanup()
