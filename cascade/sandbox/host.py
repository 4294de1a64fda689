"""The flow shared by the backends that run a host process (bwrap, none): private dirs, scrubbed env, limits,
then the side-effect oracle."""

from __future__ import annotations

from cascade.sandbox.base import Isolation, RunResult, RunSpec
from cascade.sandbox.oracle import AUDIT_FILE, AUDIT_HOOK_DIR, DECOY_ENV, PrivateDirs
from cascade.sandbox.process import run_limited, scrubbed_env

# Where the bwrap and docker backends show the audit hook and its log inside the sandbox (under the private /tmp,
# whose mount points are made before the snapshot, so they never count as changes).
HOOK_MOUNT = "/tmp/.cascade-hook"
AUDIT_MOUNT = "/tmp/.cascade-audit"


def audit_env(
    base: dict[str, str], hook_dir: str, log_path: str, allowed: list[str], scratch: list[str] | None = None
) -> dict[str, str]:
    """Load the audit hook in every Python of the run (and its child Pythons, which inherit the variables), and
    hand the run decoy tokens: the real environment is scrubbed, so any token-looking value it sees is a canary.

    ``allowed``: nothing there is logged (the worktree). ``scratch``: writes are not logged, deletions and mode
    changes are (the private /tmp)."""
    env = {**base, **DECOY_ENV}
    env["PYTHONPATH"] = hook_dir + (":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["CASCADE_AUDIT_LOG"] = log_path
    env["CASCADE_AUDIT_ALLOW"] = ":".join(allowed)
    env["CASCADE_AUDIT_SCRATCH"] = ":".join(scratch or [])
    return env


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
            env, dropped = scrubbed_env(spec.env, dirs.home_in_sandbox, dirs.tmp_in_sandbox)
            hook_dir, log_path = self.hook_paths(dirs)
            env = audit_env(env, hook_dir, log_path, [spec.worktree], scratch=[dirs.tmp_in_sandbox])
            outcome = run_limited(self.wrap(spec, dirs), spec, env, dirs.output)
            return RunResult(
                isolation=self.isolation,
                argv=list(spec.argv),
                exit_code=outcome.exit_code,
                timed_out=outcome.timed_out,
                stdout=outcome.stdout,
                stderr=outcome.stderr,
                seconds=outcome.seconds,
                side_effects=dirs.side_effects(self.isolated_network, spec.worktree),
                dropped_env=dropped,
            )
        finally:
            dirs.cleanup()
