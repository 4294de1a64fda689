"""What a sandboxed test run may touch: the allow-list the side-effect oracle judges by.

A run may read anything it can see; write, create and delete inside its **own** worktree (never the repository's git
directory, reached through the worktree's ``.git`` file) and inside its **own** scratch directory (``$TMPDIR``); spawn
processes that end before the run ends; connect to loopback ports it itself listens on. Everything else it does or
tries is a side effect and rejects, whether the sandbox let it happen or refused it: an attempt is intent.

Real test suites make some noise outside those two places. Each such kind of noise is a **named entry** below with
the reason it is harmless, matched on an exact path prefix — never a whole directory such as ``~/.cache`` or ``/tmp``
(``tests/test_allowlist.py`` covers every entry and its near misses)."""

from __future__ import annotations

import ipaddress
import re
import stat
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict

SCRATCH_NAME = "scratch"  # the run's own scratch directory inside its private /tmp; $TMPDIR points here
# Where the bwrap and docker backends show the run's places and the gate's own directories (docs/architecture.md,
# "Run model"). Names a test could read are plain: nothing tells it which tool watches.
TREE_ROOT = "/workspace"  # the run's fresh tree is /workspace/<name>, the same path on both sides of a review
GATE_ROOT = "/var/lib/pysite"
HOOK_MOUNT = f"{GATE_ROOT}/site"  # the audit hook, the supervisor and the pytest plugin (read-only)
AUDIT_MOUNT = f"{GATE_ROOT}/log"  # the append-only channel's FIFOs (read-only directory)
RESULTS_MOUNT = f"{GATE_ROOT}/reports"  # the test runner's report files (writable; read back without following)
OBJECTS_MOUNT = f"{GATE_ROOT}/objects"  # the repository's object store, which the tree's .git borrows (read-only)
MPLCONFIGDIR_IN_SANDBOX = "/tmp/mplconfig"  # set by execution.envs for every test run
# Files that hold credentials, wherever they are: opening one is evidence (the decoys live at some of them).
CREDENTIAL = re.compile(
    r"(?:^|/)\.(?:ssh|aws|azure|kube|gnupg)/|(?:^|/)\.(?:netrc|pypirc|git-credentials|pgpass)$"
    r"|/\.docker/config\.json$|/\.config/(?:gcloud|gh)/|^/etc/(?:shadow|gshadow|sudoers)"
    r"|(?:^|/)\.credentials(?:_rsaparams)?$|(?:^|/)\.runner$"
)
SPECIAL_MODE_BITS = stat.S_ISUID | stat.S_ISGID
# importlib makes ``__pycache__`` and writes bytecode only through a temporary ``<name>.cpython-311.pyc.<id>``
# renamed into place: a write of a final ``.pyc`` (or a rename) there is someone planting bytecode, not the import
# system.
BYTECODE_DIR = re.compile(r"/__pycache__$")
BYTECODE_TEMP = re.compile(r"/__pycache__/[^/]+\.pyc\.\d+$")


@dataclass(frozen=True)
class NamedEntry:
    """One allowed kind of noise: writes under ``<root>/<prefix>`` (root: the run's private HOME or /tmp)."""

    name: str
    root: Literal["home", "tmp"]
    prefix: str
    why: str


NAMED_ENTRIES: tuple[NamedEntry, ...] = (
    NamedEntry("matplotlib-config", "tmp", MPLCONFIGDIR_IN_SANDBOX.removeprefix("/tmp/"),
               "MPLCONFIGDIR, set by the gate for every run: matplotlib's font cache and config live there"),
    NamedEntry("matplotlib-config-home", "home", ".config/matplotlib",
               "matplotlib's default config dir, used by a child process that dropped MPLCONFIGDIR"),
    NamedEntry("matplotlib-cache-home", "home", ".cache/matplotlib",
               "matplotlib's default font-list cache, used by a child process that dropped MPLCONFIGDIR"),
    NamedEntry("fontconfig-cache", "home", ".cache/fontconfig",
               "fontconfig's font cache, written by the C library when a program first lists the system fonts "
               "(matplotlib drawing text in xarray's plot tests; measured on merged xarray fixes)"),
    NamedEntry("pyximport-build", "home", ".pyxbld",
               "Cython's pyximport build directory (sphinx's autodoc tests compile a module there)"),
    NamedEntry("pylint-stats", "home", ".cache/pylint",
               "PYLINTHOME of pylint >= 2.10: run statistics pylint's own tests write on every lint"),
    NamedEntry("pylint-stats-legacy", "home", ".pylint.d",
               "PYLINTHOME of pylint < 2.10: the same statistics in the old location"),
    NamedEntry("astropy-config", "home", ".astropy/config",
               "astropy makes its config directory on import (astropy.config.paths); measured on SWE-bench astropy"),
    NamedEntry("astropy-cache", "home", ".astropy/cache",
               "astropy's download and data cache directory, made on import next to its config directory"),
)  # fmt: skip


class RunScope(BaseModel):
    """Where the run's own places are, as the sandboxed process sees them (paths without a trailing slash)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    worktree: str
    git_dirs: list[str] = []  # the worktree's .git and the repository's git directories: never the run's
    scratch: str
    tmp: str = "/tmp"
    home: str
    read_only: list[str] = []  # the environment's paths, mounted read-only (a write there can only be an attempt)
    isolated_network: bool = True
    scratch_made: frozenset[str] = frozenset()  # scratch paths the run left behind: made by it (it started empty)
    results: str = ""  # the directory the test runner writes its report files into (the run's own)
    channel: str = ""  # the gate's channel directory: opening its FIFOs for writing is how records are made


def inside(path: str, parent: str) -> bool:
    parent = parent.rstrip("/") or "/"
    return path == parent or path.startswith(parent if parent == "/" else parent + "/")


def relative_to(path: str, parent: str) -> str | None:
    """path relative to parent when it lies strictly inside it, else None."""
    parent = parent.rstrip("/")
    return path[len(parent) + 1 :] if path.startswith(parent + "/") else None


def own_place(path: str, scope: RunScope) -> bool:
    """Inside the run's own worktree (not its git directory) or scratch directory."""
    if any(inside(path, git) for git in scope.git_dirs):
        return False
    return (
        inside(path, scope.worktree)
        or inside(path, scope.scratch)
        or (bool(scope.results) and inside(path, scope.results))
    )


def named_entry(path: str, scope: RunScope, event: str = "write") -> NamedEntry | None:
    """The named entry allowing a change at ``path``. Creating an ancestor directory of an entry (``~/.cache``
    itself) is allowed too — removing one is not: that would delete what the entry does not cover."""
    for entry in NAMED_ENTRIES:
        root = scope.home if entry.root == "home" else scope.tmp
        base = f"{root.rstrip('/')}/{entry.prefix}"
        if inside(path, base):
            return entry
        if event in ("mkdir", "created") and base.startswith(path.rstrip("/") + "/"):
            return entry
    return None


def named_read(path: str, scope: RunScope) -> tuple[str, str] | None:
    """The named entry allowing a read of a credential location, as (name, why); None for every other one."""
    if path == f"{scope.home.rstrip('/')}/.netrc":
        why = (
            "HTTP clients (requests, curl, urllib) read ~/.netrc for the credentials of a host they contact; the "
            "read alone sends nothing, and a decoy's value anywhere in the run's output is still a leak"
        )
        return "netrc-lookup", why
    return None


def bytecode_attempt(event: str, path: str, scope: RunScope, bytecode_on: bool) -> bool:
    """A bytecode-cache write into the read-only environment by the import system: it tries one for every uncached
    module of a fresh venv, and the mount refuses it. Only in a process that caches bytecode at all (the gate runs
    tests with PYTHONDONTWRITEBYTECODE, so there it can only be the test's own doing), and only importlib's shapes."""
    if not bytecode_on:
        return False
    pattern = {"mkdir": BYTECODE_DIR, "write": BYTECODE_TEMP}.get(event)
    return pattern is not None and pattern.search(path) is not None and any(inside(path, p) for p in scope.read_only)


def bytecode_shape(call: str, path: str) -> bool:
    """The import system's own bytecode-cache shapes: making a ``__pycache__`` directory, or creating the temporary
    ``<name>.pyc.<id>`` it renames into place (a write of a final ``.pyc`` is not its shape)."""
    if call.startswith("mkdir"):
        return BYTECODE_DIR.search(path) is not None
    return call.startswith(("open", "creat")) and BYTECODE_TEMP.search(path) is not None


def place_of(path: str, scope: RunScope) -> str:
    """Where a path lies, in words, for the record's detail."""
    if inside(path, AUDIT_MOUNT) or inside(path, HOOK_MOUNT):
        return "the gate's own audit channel or audit hook (the run may only append records to the channel)"
    if any(inside(path, git) for git in scope.git_dirs):
        return "the reviewed repository's git directory (hooks and config run on the developer's next git command)"
    if any(inside(path, p) for p in scope.read_only):
        return "the test environment (interpreter, site-packages), which later reviews reuse"
    if inside(path, scope.home):
        return "the private HOME (the developer's home directory on a real machine)"
    if inside(path, scope.tmp):
        return "/tmp outside the run's own scratch directory (shared with every other process on a real machine)"
    if inside(path, "/dev/shm"):
        return "/dev/shm (a shared tmpfs that outlives the run on a real machine)"
    return "outside the worktree and the run's scratch directory"


def is_entry_root(path: str, entry: NamedEntry, scope: RunScope) -> bool:
    """Whether path is an entry's root directory or one of its ancestors (deleting those is not allowed)."""
    base = f"{(scope.home if entry.root == 'home' else scope.tmp).rstrip('/')}/{entry.prefix}"
    return path == base or base.startswith(path.rstrip("/") + "/")


LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost", ""}


def is_loopback(host: object) -> bool:
    """A name or address that reaches only the machine itself (in a sandbox: only the run's own namespace)."""
    if not isinstance(host, str):
        return False
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False
