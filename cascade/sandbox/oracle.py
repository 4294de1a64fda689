"""Side-effect oracle: everything a run did or tried beyond the allow-list
(`allowlist.py`), as `SideEffect` records — harmful ones reject, named allow-list hits are kept as benign context.

Evidence comes from places the run cannot rewrite and from one it can only append to:

* snapshot diffs, taken on the host, of the run's private HOME, /tmp and /dev/shm and of its worktree (which also
  holds the worktree's ``.git`` file): what the run changed outside its own places, files it left with a
  setuid/setgid bit, files that reached the file-size limit, and any file it wrote holding a decoy secret;
* the audit log appended by every sandboxed Python (`audit_hook/sitecustomize.py`): write-opens and file-system
  changes outside the run's own places — including the ones the read-only mounts refused —, credential reads,
  subprocess spawns, socket connects. It is an append-only channel (`channel.py`: a write-only FIFO in a
  read-only directory, drained on the host), so the run cannot erase or rewrite a record, only add lines;
* the supervisor (`audit_hook/_cascade_supervise.py`) that runs the command inside the sandbox: processes still
  alive when the command returned, and resource limits the run hit (memory cgroup OOM kills, the pids limit, CPU
  time, file size). It writes the channel's first and last records, once each: a missing start, a second start or
  end, or a line that is no record is tampering;
* strace (`strace.py`): write-intent system calls of any program — shell, C, coreutils — that the sandbox refused;
* Docker's ``container.diff()`` (read in `docker.py`). The log's and Docker's records are judged in `records.py`.

Decoys make credential theft visible: the private HOME holds fake key and cloud-credential files and the environment
fake tokens, all carrying one canary string; any file the run wrote that contains the canary is a leak, whatever its
name and wherever it is — the worktree included (a test that dumps the environment into a fixture file)."""

from __future__ import annotations

import base64
import contextlib
import os
import secrets
import shutil
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from cascade.safety import EffectKind, SideEffect
from cascade.sandbox.allowlist import (
    GATE_WORK_DIR,
    SCRATCH_NAME,
    SPECIAL_MODE_BITS,
    RunScope,
    inside,
    is_entry_root,
    named_entry,
    own_place,
    place_of,
    relative_to,
)
from cascade.sandbox.base import RunSpec
from cascade.sandbox.channel import Channel
from cascade.sandbox.records import (
    LIMIT_NAMES,
    MAX_EFFECTS_PER_SOURCE,
    audit_effects,
    deduplicate,
    read_audit_log,
    tampering,
)
from cascade.sandbox.strace import STRACE_FILE, read_refusals

AUDIT_HOOK_DIR = Path(__file__).resolve().parent / "audit_hook"
AUDIT_FILE = "audit.jsonl"  # the channel's FIFO, in the audit directory the sandbox sees read-only
HOST_AUDIT_FILE = "audit-host.jsonl"  # the host-only copy the oracle reads
TRACE_FIFO = "strace.fifo"  # strace's channel, where strace runs inside the sandbox (docker)
SUPERVISOR = "_cascade_supervise.py"
MIB = 1024 * 1024
# One canary per gate process: every decoy carries it, so finding it in a file the run wrote proves a leak.
CANARY = f"cascade-canary-{secrets.token_hex(8)}"
DECOY_FILES = {
    ".ssh/id_rsa": f"-----BEGIN OPENSSH PRIVATE KEY-----\n{CANARY}\n-----END OPENSSH PRIVATE KEY-----\n",
    ".ssh/id_ed25519": f"-----BEGIN OPENSSH PRIVATE KEY-----\n{CANARY}\n-----END OPENSSH PRIVATE KEY-----\n",
    ".aws/credentials": f"[default]\naws_access_key_id = AKIA{CANARY[-16:].upper()}\n"
    f"aws_secret_access_key = {CANARY}\n",
    ".git-credentials": f"https://cascade:{CANARY}@git.invalid\n",
}
DECOY_ENV = {"GITHUB_TOKEN": f"ghp_{CANARY}", "CASCADE_DECOY_API_KEY": CANARY}
LEAK_SCAN_BYTES = 4 * 1024 * 1024  # files bigger than this are not read for the canary
LEAK_DETAIL = "it contains a decoy credential (canary): a secret was copied out"


class FileState(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["file", "dir", "symlink", "other"]
    size: int
    mtime_ns: int
    mode: int


Snapshot = dict[str, FileState]
Change = Literal["created", "modified", "deleted"]
CHANGE_KINDS: dict[Change, EffectKind] = {"created": "file_create", "modified": "file_write", "deleted": "file_delete"}


def snapshot(root: Path) -> Snapshot:
    """Every entry under root (relative path -> state), without following symlinks."""
    states: Snapshot = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames]:
            path = Path(dirpath) / name
            with contextlib.suppress(OSError):
                states[str(path.relative_to(root))] = file_state(path.lstat())
    return states


def file_state(info: os.stat_result) -> FileState:
    if stat.S_ISLNK(info.st_mode):
        kind = "symlink"
    elif stat.S_ISDIR(info.st_mode):
        kind = "dir"
    elif stat.S_ISREG(info.st_mode):
        kind = "file"
    else:
        kind = "other"
    return FileState(kind=kind, size=info.st_size, mtime_ns=info.st_mtime_ns, mode=info.st_mode)


def diff_snapshots(before: Snapshot, after: Snapshot) -> list[tuple[str, Change]]:
    """Changed entries; a directory only counts when it is new or gone (its mtime moves with any child)."""
    changes: list[tuple[str, Change]] = []
    for path, state in sorted(after.items()):
        old = before.get(path)
        if old is None:
            changes.append((path, "created"))
        elif state.kind != "dir" and old != state:
            changes.append((path, "modified"))
    changes.extend((path, "deleted") for path in sorted(before.keys() - after.keys()))
    return changes


def git_dirs(worktree: str) -> list[str]:
    """The worktree's ``.git`` (a file for a linked worktree), the git dir it names and that dir's common dir (the
    repository's ``.git``: hooks, config), read from git's own files."""
    dot_git = Path(worktree) / ".git"
    found = [str(dot_git)]
    gitdir: Path | None = dot_git if dot_git.is_dir() else None
    if dot_git.is_file():
        with contextlib.suppress(OSError, UnicodeDecodeError):
            line = dot_git.read_text(encoding="utf-8").strip()
            if line.startswith("gitdir:"):
                gitdir = (Path(worktree) / line.removeprefix("gitdir:").strip()).resolve()
    if gitdir is not None:
        found.append(str(gitdir))
        with contextlib.suppress(OSError, UnicodeDecodeError):
            found.append(str((gitdir / (gitdir / "commondir").read_text(encoding="utf-8").strip()).resolve()))
    unique: list[str] = []
    for path in found:
        if path not in unique:
            unique.append(path)
    return unique


def exposed_git_dirs(worktree: str) -> list[str]:
    """The git directories outside the worktree that exist: the sandbox shows them read-only, so git works inside and
    a write there is refused (and, from Python, recorded)."""
    dirs = [d for d in git_dirs(worktree)[1:] if os.path.isdir(d) and not inside(d, worktree)]
    return [d for d in dirs if not any(inside(d, other) and d != other for other in dirs)]


class PrivateDirs:
    """Per-run host directories: HOME, /tmp (with the run's scratch directory in it), /dev/shm and the audit log,
    bound into the sandbox and diffed afterwards together with the worktree."""

    def __init__(
        self, spec: RunSpec, mounts: list[str], home_in_sandbox: str | None, tmp_in_sandbox: str | None
    ) -> None:
        """``*_in_sandbox``: where the run sees its HOME and /tmp; None = at their host paths (no mount)."""
        self.spec = spec
        self.root = Path(tempfile.mkdtemp(prefix="cascade-run-"))
        self.home = self.root / "home"
        self.tmp = self.root / "tmp"
        self.shm = self.root / "shm"
        self.audit = self.root / "audit"
        self.output = self.root / "output"
        for path in (self.home, self.tmp, self.shm, self.audit, self.output, self.tmp / SCRATCH_NAME):
            path.mkdir()
        # Writable by any uid: the docker backend runs as an unprivileged user.
        for path in (self.home, self.tmp, self.shm, self.tmp / SCRATCH_NAME):
            path.chmod(0o1777)
        self.audit.chmod(0o755)  # mounted read-only: it only holds the channel FIFOs
        self.channel = Channel(self.audit / AUDIT_FILE, self.root / HOST_AUDIT_FILE)
        self.channels = [self.channel]
        self.trace: Path | None = None  # strace's output, when the backend traced the run (host side or a channel)
        self.home_in_sandbox = home_in_sandbox or str(self.home)
        self.tmp_in_sandbox = tmp_in_sandbox or str(self.tmp)
        self.git_dirs = git_dirs(spec.worktree)
        self.mounts = [spec.worktree, *mounts]
        self._precreate_mount_points(self.mounts)
        plant_decoys(self.home)
        self.roots = {"home": self.home, "tmp": self.tmp, "shm": self.shm, "worktree": Path(spec.worktree)}
        self.before = {name: snapshot(path) for name, path in self.roots.items()}

    @property
    def audit_log(self) -> Path:
        """The host-only copy of the audit channel."""
        return self.root / HOST_AUDIT_FILE

    def open_trace_channel(self) -> str:
        """For strace running inside the sandbox: a second append-only channel for its output; the FIFO's name in
        the audit directory."""
        channel = Channel(self.audit / TRACE_FIFO, self.root / STRACE_FILE)
        self.channels.append(channel)
        self.trace = channel.sink
        return TRACE_FIFO

    @property
    def scratch_in_sandbox(self) -> str:
        return f"{self.tmp_in_sandbox.rstrip('/')}/{SCRATCH_NAME}"

    def _precreate_mount_points(self, mounts: list[str]) -> None:
        """A mount nested under the private /tmp or HOME needs a mount-point directory there; make it before the
        snapshot so it is not mistaken for something the run created."""
        for mount in mounts:
            for private, visible in ((self.tmp, self.tmp_in_sandbox), (self.home, self.home_in_sandbox)):
                relative = relative_to(mount, visible)
                if relative:
                    (private / relative).mkdir(parents=True, exist_ok=True)

    def scope(self, isolated_network: bool) -> RunScope:
        return RunScope(
            worktree=self.spec.worktree,
            git_dirs=self.git_dirs,
            scratch=self.scratch_in_sandbox,
            tmp=self.tmp_in_sandbox,
            home=self.home_in_sandbox,
            read_only=[m for m in self.mounts if m != self.spec.worktree],
            isolated_network=isolated_network,
        )

    def visible(self, name: str, relative: str) -> str:
        """A snapshot entry's path as the sandboxed process saw it."""
        where = {"home": self.home_in_sandbox, "tmp": self.tmp_in_sandbox, "shm": "/dev/shm",
                 "worktree": self.spec.worktree}[name]  # fmt: skip
        return f"{where.rstrip('/')}/{relative}"

    def side_effects(self, isolated_network: bool, timed_out: bool = False) -> list[SideEffect]:
        afters = {name: snapshot(root) for name, root in self.roots.items()}
        made = frozenset(self.visible("tmp", p) for p in afters["tmp"] if p.startswith(f"{SCRATCH_NAME}/"))
        scope = self.scope(isolated_network).model_copy(update={"scratch_made": made})
        effects: list[SideEffect] = []
        for name, root in self.roots.items():
            after = afters[name]
            changes = diff_snapshots(self.before[name], after)
            effects += snapshot_effects(name, changes, after, root, lambda rel, n=name: self.visible(n, rel), scope,
                                        self.spec.file_size_mb)  # fmt: skip
        for channel in self.channels:
            channel.close()
        log = read_audit_log(self.audit_log, self.channel.dropped, self.channel.complete)
        effects += audit_effects(log, scope, timed_out)
        if self.trace is not None:
            effects += read_refusals(self.trace, scope)
        effects += [
            tampering(
                f"the run flooded or held open its strace channel: {c.dropped} bytes dropped, complete: {c.complete}"
            )
            for c in self.channels[1:]
            if c.dropped or not c.complete
        ]
        return deduplicate(effects)

    def cleanup(self) -> None:
        for channel in self.channels:
            channel.close()
        shutil.rmtree(self.root, ignore_errors=True)


def plant_decoys(home: Path) -> None:
    for relative, content in DECOY_FILES.items():
        path = home / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
        path.chmod(0o644)  # readable by the docker backend's unprivileged user, like a careless real key


def canary_needles(canary: str) -> tuple[bytes, ...]:
    """The canary as written, hex-encoded, and base64-encoded at each of the three byte alignments it can have inside
    a longer encoded text (the stable middle of each encoding): a secret copied out encoded is still a leak."""
    raw = canary.encode()
    needles = [raw, raw.hex().encode(), raw.hex().upper().encode()]
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + raw + b"\0\0")
        needles.append(encoded[4:-8])
    return tuple(needles)


NEEDLES = canary_needles(CANARY)


def holds_canary(path: Path) -> bool:
    with contextlib.suppress(OSError):
        info = path.lstat()
        if not stat.S_ISREG(info.st_mode) or info.st_size > LEAK_SCAN_BYTES:
            return False
        data = path.read_bytes()
        return any(needle in data for needle in NEEDLES)
    return False


SOURCES = {"home": "home_diff", "tmp": "tmp_diff", "shm": "shm_diff", "worktree": "worktree_diff"}


def snapshot_effects(
    name: str,
    changes: list[tuple[str, Change]],
    after: Snapshot,
    root: Path,
    visible: Callable[[str], str],
    scope: RunScope,
    file_size_mb: int,
) -> list[SideEffect]:
    """Judge one root's changes: leaks, setuid/setgid modes and file-size-limit hits anywhere; every other change
    outside the run's own places unless a named entry allows it. Harmful records come first, so the per-source cap
    can never hide one behind allowed noise."""
    harmful: list[SideEffect] = []
    allowed: list[SideEffect] = []
    source = SOURCES[name]
    for relative, change in changes:
        path = visible(relative)
        why = harm_anywhere(relative, change, after.get(relative), root, path, scope, file_size_mb, name == "home")
        if why is not None:
            kind: EffectKind = why[0]
            harmful.append(SideEffect(kind=kind, target=path, source=source, detail=why[1]))
            continue
        if own_place(path, scope):
            continue
        entry = named_entry(path, scope, change)
        if entry is not None and not (change == "deleted" and is_entry_root(path, entry, scope)):
            allowed.append(
                SideEffect(
                    kind=CHANGE_KINDS[change],
                    target=path,
                    source=source,
                    benign=True,
                    detail=f"{change}; allow-list entry '{entry.name}': {entry.why}",
                )
            )
            continue
        harmful.append(SideEffect(kind=CHANGE_KINDS[change], target=path, source=source,
                                  detail=f"{change} in {place_of(path, scope)}"))  # fmt: skip
    return [*harmful, *allowed][:MAX_EFFECTS_PER_SOURCE]


def harm_anywhere(
    relative: str,
    change: Change,
    state: FileState | None,
    root: Path,
    path: str,
    scope: RunScope,
    file_size_mb: int,
    in_home: bool,
) -> tuple[EffectKind, str] | None:
    """What makes a change harmful even inside the run's own places: a decoy secret in a file it wrote (the gate's
    own report files aside: a failure message may quote the environment, and they never leave the gate), a
    setuid/setgid mode, a file grown to the file-size limit."""
    if state is None or change == "deleted" or state.kind != "file":
        return None
    decoy = in_home and relative in DECOY_FILES
    if not decoy and not inside(path, f"{scope.worktree}/{GATE_WORK_DIR}") and holds_canary(root / relative):
        return CHANGE_KINDS[change], f"{change} by the run; {LEAK_DETAIL}"
    if state.mode & SPECIAL_MODE_BITS:
        return "privilege", f"{change} with a setuid/setgid mode ({stat.filemode(state.mode)})"
    if state.size >= file_size_mb * MIB:
        return "resource_limit", f"{LIMIT_NAMES['fsize']} reached: the file grew to {file_size_mb} MiB"
    return None
