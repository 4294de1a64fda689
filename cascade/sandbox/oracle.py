"""Side-effect oracle (design §3 Safety, §5): what a run did outside its worktree, as `SideEffect` records.

Evidence comes from four places: a snapshot diff of the private HOME and /tmp the run was given (host directories
bound into the sandbox, so they can be read after it is gone), the audit-hook log written by the sandboxed Python
(`audit_hook/sitecustomize.py`: write-opens outside the worktree — including the ones the read-only root refused —,
subprocess spawns, socket connects), and Docker's `container.diff()`. Each record says whether it is benign (normal
scratch activity of a test run) or a reason to reject."""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import re
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from cascade.execution.trace_scan import scan_command
from cascade.sandbox.base import SideEffect

AUDIT_HOOK_DIR = Path(__file__).resolve().parent / "audit_hook"
AUDIT_FILE = "audit.jsonl"
# Inside HOME, caches are what test runs legitimately write (pip, matplotlib, pytest plugins).
BENIGN_HOME_PREFIXES = (".cache/",)
PYC_CACHE = re.compile(r"/__pycache__(?:/[^/]+\.pyc(?:\.\d+)?)?$")
LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost", ""}
MAX_EFFECTS_PER_SOURCE = 200


class FileState(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["file", "dir", "symlink", "other"]
    size: int
    mtime_ns: int
    mode: int


Snapshot = dict[str, FileState]
Change = Literal["created", "modified", "deleted"]
EffectKind = Literal["file_write", "file_delete", "file_create", "network", "subprocess", "privilege", "other"]
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


class PrivateDirs:
    """Per-run host directories: HOME, /tmp and the audit log, bound into the sandbox and diffed afterwards."""

    def __init__(
        self, worktree: str, extra_mounts: list[str], home_in_sandbox: str | None, tmp_in_sandbox: str | None
    ) -> None:
        """``*_in_sandbox``: where the run sees its HOME and /tmp; None = at their host paths (no mount)."""
        self.root = Path(tempfile.mkdtemp(prefix="cascade-run-"))
        self.home = self.root / "home"
        self.tmp = self.root / "tmp"
        self.audit = self.root / "audit"
        self.output = self.root / "output"
        for path in (self.home, self.tmp, self.audit, self.output):
            path.mkdir()
        # Writable by any uid: the docker backend runs as an unprivileged user.
        for path in (self.home, self.tmp, self.audit):
            path.chmod(0o1777)
        self.home_in_sandbox = home_in_sandbox or str(self.home)
        self.tmp_in_sandbox = tmp_in_sandbox or str(self.tmp)
        self.mounts = [worktree, *extra_mounts]
        self._precreate_mount_points(self.mounts)
        self.before_home = snapshot(self.home)
        self.before_tmp = snapshot(self.tmp)

    @property
    def audit_log(self) -> Path:
        return self.audit / AUDIT_FILE

    def _precreate_mount_points(self, mounts: list[str]) -> None:
        """A mount nested under the private /tmp or HOME needs a mount-point directory there; make it before the
        snapshot so it is not mistaken for something the run created."""
        for mount in mounts:
            for private, visible in ((self.tmp, self.tmp_in_sandbox), (self.home, self.home_in_sandbox)):
                relative = relative_to(mount, visible)
                if relative:
                    (private / relative).mkdir(parents=True, exist_ok=True)

    def side_effects(self, isolated_network: bool, worktree: str) -> list[SideEffect]:
        effects = [
            *home_effects(diff_snapshots(self.before_home, snapshot(self.home)), self.home_in_sandbox),
            *tmp_effects(diff_snapshots(self.before_tmp, snapshot(self.tmp)), self.tmp_in_sandbox),
            *audit_effects(
                read_audit_log(self.audit_log), self.home_in_sandbox, isolated_network, worktree, self.mounts
            ),
        ]
        return deduplicate(effects)

    def cleanup(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def relative_to(path: str, parent: str) -> str | None:
    """path relative to parent when it lies strictly inside it, else None."""
    parent = parent.rstrip("/")
    return path[len(parent) + 1 :] if path.startswith(parent + "/") else None


def home_effects(changes: list[tuple[str, Change]], home: str) -> list[SideEffect]:
    return [
        SideEffect(
            kind=CHANGE_KINDS[change],
            target=f"{home.rstrip('/')}/{path}",
            detail=f"{change} in the private HOME",
            source="home_diff",
            benign=path.startswith(BENIGN_HOME_PREFIXES) or f"{path}/" in BENIGN_HOME_PREFIXES,
        )
        for path, change in changes[:MAX_EFFECTS_PER_SOURCE]
    ]


def tmp_effects(changes: list[tuple[str, Change]], tmp: str) -> list[SideEffect]:
    """The private /tmp is thrown away after the run: scratch files there are recorded but benign."""
    return [
        SideEffect(
            kind=CHANGE_KINDS[change],
            target=f"{tmp.rstrip('/')}/{path}",
            detail=f"{change} in the private /tmp",
            source="tmp_diff",
            benign=True,
        )
        for path, change in changes[:MAX_EFFECTS_PER_SOURCE]
    ]


def read_audit_log(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    records: list[dict[str, Any]] = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        with contextlib.suppress(json.JSONDecodeError):
            record = json.loads(line)
            if isinstance(record, dict):
                records.append(record)
    return records


def audit_effects(
    records: list[dict[str, Any]], home: str, isolated_network: bool, worktree: str, mounts: list[str] | None = None
) -> list[SideEffect]:
    effects: list[SideEffect] = []
    for record in records[: MAX_EFFECTS_PER_SOURCE * 5]:
        event = record.get("event")
        if event == "spawn":
            effects.append(spawn_effect(record))
        elif event == "network":
            effects.append(network_effect(record, isolated_network))
        elif isinstance(record.get("path"), str):
            effects.append(path_effect(str(event), record["path"], home, worktree, mounts or []))
    return effects


PATH_EVENT_KINDS: dict[str, EffectKind] = {
    "write": "file_write",
    "truncate": "file_write",
    "rename": "file_write",
    "delete": "file_delete",
    "mkdir": "file_create",
    "symlink": "file_create",
    "link": "file_create",
    "chmod": "privilege",
    "chown": "privilege",
}


def path_effect(event: str, path: str, home: str, worktree: str, mounts: list[str]) -> SideEffect:
    """Benign: scratch places, ~/.cache, and Python's own bytecode cache inside the paths mounted for the run (a
    fresh venv mounted read-only makes every import try to write its .pyc; the attempt is no effect)."""
    in_home = relative_to(path, home)
    in_scratch = any(relative_to(path, place) is not None for place in (worktree, "/tmp", "/dev/shm"))
    bytecode = PYC_CACHE.search(path) is not None and any(relative_to(path, mount) is not None for mount in mounts)
    benign = in_scratch or bytecode or (in_home is not None and in_home.startswith(BENIGN_HOME_PREFIXES))
    return SideEffect(
        kind=PATH_EVENT_KINDS.get(event, "other"),
        target=path,
        detail=f"{event} attempted outside the worktree (seen by the audit hook, whether or not it succeeded)",
        source="audit_hook",
        benign=benign,
    )


def spawn_effect(record: dict[str, Any]) -> SideEffect:
    """A subprocess is ordinary for a test suite; it is a reason to reject only when the command itself is unsafe."""
    command = record.get("command")
    text = " ".join(map(str, command)) if isinstance(command, list) else str(command)
    findings = scan_command(text)
    detail = f"spawned via {record.get('via')}"
    if findings:
        detail += "; unsafe: " + "; ".join(findings)
    return SideEffect(kind="subprocess", target=text[:500], detail=detail, source="audit_hook", benign=not findings)


def network_effect(record: dict[str, Any], isolated_network: bool) -> SideEffect:
    address = record.get("address")
    host = address[0] if isinstance(address, list) and address else address
    loopback = is_loopback(host)
    # Inside a private network namespace loopback reaches only the sandbox itself (test servers the suite starts).
    benign = loopback and isolated_network
    where = "loopback inside the sandbox's own network namespace" if benign else "network attempt"
    return SideEffect(
        kind="network",
        target=json.dumps(address),
        detail=f"{where} ({record.get('via')})",
        source="audit_hook",
        benign=benign,
    )


def is_loopback(host: object) -> bool:
    if not isinstance(host, str):
        return False
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


DOCKER_KINDS: dict[int, EffectKind] = {0: "file_write", 1: "file_create", 2: "file_delete"}


def docker_effects(changes: list[dict[str, Any]], ignored: list[str]) -> list[SideEffect]:
    """`container.diff()` entries (Kind 0 changed, 1 added, 2 deleted), minus mounts and the parents of other
    entries (Docker lists every ancestor directory of a change as changed)."""
    paths = [str(change.get("Path", "")) for change in changes]
    effects: list[SideEffect] = []
    for change in changes:
        path = str(change.get("Path", ""))
        kind = DOCKER_KINDS.get(int(change.get("Kind", 0)), "file_write")
        if is_ignored(path, ignored) or (kind == "file_write" and any(p.startswith(path + "/") for p in paths)):
            continue
        effects.append(SideEffect(kind=kind, target=path, detail="container filesystem diff", source="docker_diff"))
    return effects[:MAX_EFFECTS_PER_SOURCE]


def is_ignored(path: str, ignored: list[str]) -> bool:
    """Inside an ignored mount, or an ancestor directory Docker created to hold one."""
    return any(path == mount or path.startswith(mount + "/") or mount.startswith(path + "/") for mount in ignored)


def deduplicate(effects: list[SideEffect]) -> list[SideEffect]:
    """One record per (kind, target, source); a harmful record wins over a benign duplicate."""
    chosen: dict[tuple[str, str, str], SideEffect] = {}
    for effect in effects:
        key = (effect.kind, effect.target, effect.source)
        if key not in chosen or (chosen[key].benign and not effect.benign):
            chosen[key] = effect
    return list(chosen.values())
