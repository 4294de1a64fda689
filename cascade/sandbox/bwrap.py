"""The `bwrap` backend (default where it works): bubblewrap with a minimal root — the host's system directories
read-only (``/usr``, ``/etc`` with its password hashes masked, ``/opt``, ``/sys``, the merged-/usr links) and nothing
else of the host: no home directories, no checkout, no ``/var``, no ``/run`` (daemon sockets) — plus the run's fresh
places (`places.py`): its tree at ``/workspace/<name>`` (the tree's ``.git`` read-only), HOME over the host's home
path, /tmp, /dev/shm, the report directory, the gate's hook and channel directories read-only, the repository's
object store read-only. No network, private pid/ipc/uts namespaces, no capabilities, a new session, the root
remounted read-only, and rlimits + a pids cgroup + a wall timeout around it.

bwrap itself runs under strace (on the host, out of the sandbox's reach: `strace.py`); without strace this backend
is unavailable (it would be blind to non-Python programs), never silently weaker.

As root ``--cap-drop ALL`` is mandatory: measured here, without it a sandboxed root process can remount ``/``
read-write."""

from __future__ import annotations

import functools
import os
import pwd
import shutil
import socket
import subprocess

from cascade.sandbox.allowlist import AUDIT_MOUNT, HOOK_MOUNT, OBJECTS_MOUNT, RESULTS_MOUNT, TREE_ROOT
from cascade.sandbox.base import Isolation, RunSpec
from cascade.sandbox.host import HostSandbox
from cascade.sandbox.places import Layout, RunPlaces, system_sitecustomize
from cascade.sandbox.strace import STRACE_FILE, probe_strace, traced

NAMESPACE_FLAGS = ["--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts"]
HARDENING_FLAGS = ["--cap-drop", "ALL", "--die-with-parent", "--new-session"]
PROBE_TIMEOUT_SECONDS = 20
# The host's system, read-only; every other top-level directory of the host stays out of the sandbox.
SYSTEM_DIRS = ("usr", "etc", "opt", "sys", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "srv")
MASKED = ("/etc/shadow", "/etc/gshadow", "/etc/sudoers")  # host secrets inside /etc: empty in the sandbox


def host_home() -> str:
    """The private HOME is mounted over the real one's path, so code that hard-codes the path is caught too."""
    return pwd.getpwuid(os.getuid()).pw_dir or "/root"


def system_mounts() -> list[str]:
    """The host's system directories read-only (a symlink such as /bin -> usr/bin stays a symlink), masked secrets."""
    args: list[str] = []
    for name in sorted(os.listdir("/")):
        path = f"/{name}"
        if name not in SYSTEM_DIRS:
            continue
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    for secret in MASKED:
        if os.path.isfile(secret) and not os.path.islink(secret):
            args += ["--ro-bind", "/dev/null", secret]
    return args


@functools.lru_cache(maxsize=1)
def probe_bwrap() -> str | None:
    """None when bwrap can build this backend's sandbox here; else why not (one line)."""
    binary = shutil.which("bwrap")
    if binary is None:
        return "bubblewrap (bwrap) is not installed"
    argv = [binary, *system_mounts(), "--dev", "/dev", "--proc", "/proc", "--remount-ro", "/", *NAMESPACE_FLAGS,
            *HARDENING_FLAGS]  # fmt: skip
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

    def layout(self, spec: RunSpec) -> Layout:
        return Layout(tree=f"{TREE_ROOT}/{spec.tree_name}", home=host_home(), tmp="/tmp", results=RESULTS_MOUNT,
                      hook=HOOK_MOUNT, audit=AUDIT_MOUNT, objects=OBJECTS_MOUNT)  # fmt: skip

    def read_only(self, spec: RunSpec, places: RunPlaces) -> list[str]:
        return [*spec.read_only_paths, *(f"/{d}" for d in SYSTEM_DIRS)]

    def wrap(self, spec: RunSpec, places: RunPlaces) -> list[str]:
        layout = places.layout
        # Order matters: later mounts land on top of earlier ones (a venv may live under the host's HOME path).
        mounts = [*system_mounts(), "--dev", "/dev", "--proc", "/proc", "--bind", str(places.shm), "/dev/shm"]
        mounts += ["--bind", str(places.tmp), "/tmp", "--bind", str(places.home), layout.home]
        for path in spec.read_only_paths:  # the test environment: visible, so tests run, but read-only
            mounts += ["--ro-bind", path, path]
        mounts += ["--bind", str(places.tree), layout.tree]
        if (places.tree / ".git").is_dir():  # the credential-free .git: visible to git, read-only
            mounts += ["--ro-bind", str(places.tree / ".git"), f"{layout.tree}/.git"]
        if places.skeleton is not None:
            mounts += ["--ro-bind", places.skeleton.objects, layout.objects]
        # The gate's own directories: the hook and the channel read-only (its FIFO can be written, never deleted,
        # truncated or replaced: channel.py), the report directory writable (read back without following links).
        mounts += ["--ro-bind", str(places.hook), layout.hook, "--ro-bind", str(places.audit), layout.audit]
        for site in system_sitecustomize():  # the hook in a system Python started without PYTHONPATH too
            mounts += ["--ro-bind", str(places.hook / "sitecustomize.py"), site]
        mounts += ["--bind", str(places.results), layout.results, "--chdir", layout.tree, "--remount-ro", "/"]
        mounts += ["--hostname", socket.gethostname()]
        bwrap = ["bwrap", *mounts, *NAMESPACE_FLAGS, *HARDENING_FLAGS, "--", *spec.argv]
        # strace on the host, around bwrap: the witness outside the run's processes (strace.py).
        places.trace = places.host_root / STRACE_FILE
        return traced(bwrap, str(places.trace))
