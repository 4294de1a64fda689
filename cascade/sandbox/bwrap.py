"""The `bwrap` backend (default where it works): bubblewrap with the host root read-only, the worktree the only
writable host path, private HOME, /tmp and /dev/shm (host directories the oracle diffs afterwards), the host's /run
hidden (daemon sockets), the repository's git directory read-only, no network, private
pid/ipc/uts namespaces, no capabilities, a new session, and rlimits + a pids cgroup + a wall timeout around it.
bwrap itself runs under strace (on the host, out of the sandbox's reach), which records every write the read-only
mounts refused to any program; without strace this backend is unavailable (it would be blind to non-Python
programs), never silently weaker.

As root ``--cap-drop ALL`` is mandatory: measured here, without it a sandboxed root process can remount ``/``
read-write."""

from __future__ import annotations

import functools
import os
import pwd
import shutil
import subprocess

from cascade.sandbox.base import Isolation, RunSpec
from cascade.sandbox.host import AUDIT_MOUNT, HOOK_MOUNT, HostSandbox
from cascade.sandbox.oracle import AUDIT_FILE, AUDIT_HOOK_DIR, PrivateDirs, exposed_git_dirs
from cascade.sandbox.strace import STRACE_FILE, probe_strace, traced

NAMESPACE_FLAGS = ["--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts"]
HARDENING_FLAGS = ["--cap-drop", "ALL", "--die-with-parent", "--new-session"]
PROBE_TIMEOUT_SECONDS = 20


# Where host daemons keep their sockets. A read-only bind does not stop connect() on a Unix socket (measured: curl
# reached /var/run/docker.sock from inside, which is root on the host), so these are empty tmpfs in the sandbox;
# strace records a connect to a socket path the run does not own, failed or not visible, as a side effect.
DAEMON_SOCKET_DIRS = ("/run", "/var/run")


def daemon_socket_mounts() -> list[str]:
    """Fresh empty tmpfs over the host's run-time directories (a symlink to one of them needs nothing)."""
    return [arg for d in DAEMON_SOCKET_DIRS if os.path.isdir(d) and not os.path.islink(d) for arg in ("--tmpfs", d)]


def host_home() -> str:
    """The sandbox's private HOME is mounted over the real one, so code that hard-codes the path is caught too."""
    return pwd.getpwuid(os.getuid()).pw_dir or "/root"


@functools.lru_cache(maxsize=1)
def probe_bwrap() -> str | None:
    """None when bwrap can build this backend's sandbox here; else why not (one line)."""
    binary = shutil.which("bwrap")
    if binary is None:
        return "bubblewrap (bwrap) is not installed"
    argv = [binary, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", *NAMESPACE_FLAGS, *HARDENING_FLAGS]
    try:
        proc = subprocess.run([*argv, "true"], capture_output=True, text=True, timeout=PROBE_TIMEOUT_SECONDS)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap could not start: {exc}"
    if proc.returncode != 0:
        message = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"
        return f"bwrap cannot create namespaces here: {message}"
    return None


class BwrapSandbox(HostSandbox):
    isolated_network = True

    @property
    def isolation(self) -> Isolation:
        return "bwrap"

    def available(self) -> str | None:
        return probe_bwrap() or probe_strace()

    def private_dirs(self, spec: RunSpec) -> PrivateDirs:
        mounts = [*spec.read_only_paths, *exposed_git_dirs(spec.worktree), HOOK_MOUNT, AUDIT_MOUNT]
        dirs = PrivateDirs(spec, mounts, home_in_sandbox=host_home(), tmp_in_sandbox="/tmp")
        dirs.trace = dirs.root / STRACE_FILE  # on the host, outside every mount: the run cannot reach it
        return dirs

    def hook_paths(self, dirs: PrivateDirs) -> tuple[str, str]:
        return HOOK_MOUNT, f"{AUDIT_MOUNT}/{AUDIT_FILE}"

    def wrap(self, spec: RunSpec, dirs: PrivateDirs) -> list[str]:
        # Order matters: later mounts land on top of earlier ones (the worktree may live under /tmp or HOME).
        mounts = ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--bind", str(dirs.shm), "/dev/shm"]
        mounts += daemon_socket_mounts()
        mounts += ["--bind", str(dirs.tmp), "/tmp", "--bind", str(dirs.home), dirs.home_in_sandbox]
        # The audit directory read-only: its FIFO can be written, never deleted, truncated or replaced (channel.py).
        mounts += ["--ro-bind", str(AUDIT_HOOK_DIR), HOOK_MOUNT, "--ro-bind", str(dirs.audit), AUDIT_MOUNT]
        # The environment and the repository's git directory: visible, so tests and git work, but read-only.
        for path in [*spec.read_only_paths, *exposed_git_dirs(spec.worktree)]:
            mounts += ["--ro-bind", path, path]
        mounts += ["--bind", spec.worktree, spec.worktree, "--chdir", spec.worktree]
        bwrap = ["bwrap", *mounts, *NAMESPACE_FLAGS, *HARDENING_FLAGS, "--", *spec.argv]
        # strace on the host, around bwrap: refused writes of every program of the run (strace.py).
        return traced(bwrap, str(dirs.trace or dirs.root / STRACE_FILE))
