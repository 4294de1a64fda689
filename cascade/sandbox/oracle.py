"""Side-effect oracle (design §3 Safety, §5): what a run did outside its worktree, as `SideEffect` records.

Evidence comes from four places: a snapshot diff of the private HOME and /tmp the run was given (host directories
bound into the sandbox, so they can be read after it is gone), the audit-hook log written by the sandboxed Python
(`audit_hook/sitecustomize.py`: write-opens outside the worktree — including the ones the read-only root refused —,
deletions and mode changes in the scratch /tmp, credential reads, subprocess spawns, socket connects), and Docker's
`container.diff()`. Each record says whether it is benign (normal scratch activity of a test run) or a reason to
reject.

Decoys make credential theft visible: the private HOME holds fake key and cloud-credential files and the environment
fake tokens, all carrying one canary string; a file the run leaves in its HOME or /tmp that contains the canary is a
leak, whatever its name."""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import re
import secrets
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from cascade.safety import EffectKind, SideEffect, scan_command

AUDIT_HOOK_DIR = Path(__file__).resolve().parent / "audit_hook"
AUDIT_FILE = "audit.jsonl"
# Inside HOME, caches are what test runs legitimately write (pip, matplotlib, pytest plugins).
# ~/.pyxbld is Cython's pyximport build cache (sphinx's autodoc tests build there).
BENIGN_HOME_PREFIXES = (".cache/", ".pyxbld/")
PYC_CACHE = re.compile(r"/__pycache__(?:/[^/]+\.pyc(?:\.\d+)?)?$")
LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost", ""}
MAX_EFFECTS_PER_SOURCE = 200
SPECIAL_MODE_BITS = stat.S_ISUID | stat.S_ISGID
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
        plant_decoys(self.home)
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
        after_home, after_tmp = snapshot(self.home), snapshot(self.tmp)
        home_changes = diff_snapshots(self.before_home, after_home)
        tmp_changes = diff_snapshots(self.before_tmp, after_tmp)
        scope = AuditScope(
            home=self.home_in_sandbox,
            worktree=worktree,
            mounts=self.mounts,
            scratch=self.tmp_in_sandbox,
            preexisting=[f"{self.tmp_in_sandbox.rstrip('/')}/{path}" for path in self.before_tmp],
            run_owned=frozenset(f"{self.tmp_in_sandbox.rstrip('/')}/{path}" for path in after_tmp),
            isolated_network=isolated_network,
        )
        effects = [
            *home_effects(home_changes, self.home_in_sandbox, leaks(self.home, home_changes)),
            *tmp_effects(tmp_changes, self.tmp_in_sandbox, leaks(self.tmp, tmp_changes), after_tmp),
            *audit_effects(read_audit_log(self.audit_log), scope),
        ]
        return deduplicate(effects)

    def cleanup(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def plant_decoys(home: Path) -> None:
    for relative, content in DECOY_FILES.items():
        path = home / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
        path.chmod(0o644)  # readable by the docker backend's unprivileged user, like a careless real key


def leaks(root: Path, changes: list[tuple[str, Change]]) -> set[str]:
    """Created or modified files under root whose content holds the canary (a decoy secret copied out)."""
    found: set[str] = set()
    needle = CANARY.encode()
    for relative, change in changes:
        path = root / relative
        if change == "deleted" or relative in DECOY_FILES or not path.is_file() or path.is_symlink():
            continue
        with contextlib.suppress(OSError):
            if path.stat().st_size <= LEAK_SCAN_BYTES and needle in path.read_bytes():
                found.add(relative)
    return found


def relative_to(path: str, parent: str) -> str | None:
    """path relative to parent when it lies strictly inside it, else None."""
    parent = parent.rstrip("/")
    return path[len(parent) + 1 :] if path.startswith(parent + "/") else None


LEAK_DETAIL = "; it contains a decoy credential (canary) — a secret was copied out"


def home_effects(changes: list[tuple[str, Change]], home: str, leaked: set[str]) -> list[SideEffect]:
    """A leak is listed first so the per-source cap can never hide it."""
    ordered = sorted(changes, key=lambda item: item[0] not in leaked)
    return [
        SideEffect(
            kind=CHANGE_KINDS[change],
            target=f"{home.rstrip('/')}/{path}",
            detail=f"{change} in the private HOME" + (LEAK_DETAIL if path in leaked else ""),
            source="home_diff",
            benign=path not in leaked
            and (path.startswith(BENIGN_HOME_PREFIXES) or f"{path}/" in BENIGN_HOME_PREFIXES),
        )
        for path, change in ordered[:MAX_EFFECTS_PER_SOURCE]
    ]


def tmp_effects(
    changes: list[tuple[str, Change]], tmp: str, leaked: set[str], after: Snapshot
) -> list[SideEffect]:
    """The private /tmp is thrown away after the run: scratch files there are recorded but benign — unless one holds
    a decoy secret (a leak) or carries a setuid/setgid bit (a privilege change)."""
    whys = {path: tmp_harm(path, leaked, after) for path, _ in changes}
    ordered = sorted(changes, key=lambda item: not whys[item[0]])
    return [
        SideEffect(
            kind="privilege" if whys[path].startswith("; left with") else CHANGE_KINDS[change],
            target=f"{tmp.rstrip('/')}/{path}",
            detail=f"{change} in the private /tmp{whys[path]}",
            source="tmp_diff",
            benign=not whys[path],
        )
        for path, change in ordered[:MAX_EFFECTS_PER_SOURCE]
    ]


def tmp_harm(path: str, leaked: set[str], after: Snapshot) -> str:
    """Why a /tmp entry is harmful ("" when it is plain scratch)."""
    if path in leaked:
        return LEAK_DETAIL
    state = after.get(path)
    if state is not None and state.kind == "file" and state.mode & SPECIAL_MODE_BITS:
        return f"; left with a setuid/setgid mode ({stat.filemode(state.mode)})"
    return ""


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


class AuditScope(BaseModel):
    """What the oracle needs to judge audit records: where the run's HOME, worktree, mounts and scratch /tmp were
    (as the sandboxed process saw them) and which scratch entries existed before it started (mount points)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    home: str
    worktree: str
    mounts: list[str] = []
    scratch: str = "/tmp"
    preexisting: list[str] = []
    run_owned: frozenset[str] = frozenset()  # scratch paths present at the end, or deleted while they existed
    isolated_network: bool = True


def audit_effects(records: list[dict[str, Any]], scope: AuditScope) -> list[SideEffect]:
    # A scratch path the run deleted while it existed was its own; deleting it again (a lock file removed twice, as
    # pytest does) is no foreign deletion.
    owned = frozenset(
        str(r["path"]) for r in records if r.get("event") == "delete" and r.get("scratch") and r.get("existed")
    )
    scope = scope.model_copy(update={"run_owned": scope.run_owned | owned})
    effects: list[SideEffect] = []
    for record in records[: MAX_EFFECTS_PER_SOURCE * 5]:
        event = record.get("event")
        if event == "spawn":
            effects.append(spawn_effect(record))
        elif event == "network":
            effects.append(network_effect(record, scope))
        elif event == "read" and isinstance(record.get("path"), str):
            effects.append(credential_read_effect(record["path"]))
        elif isinstance(record.get("path"), str):
            effects.append(path_effect(record, scope))
    return effects


def credential_read_effect(path: str) -> SideEffect:
    return SideEffect(
        kind="credential_read",
        target=path,
        detail="read-open of a credential file (keys, cloud or registry credentials, system accounts)",
        source="audit_hook",
    )


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


def path_effect(record: dict[str, Any], scope: AuditScope) -> SideEffect:
    """Benign: scratch places, ~/.cache, and Python's own bytecode cache inside the paths mounted for the run (a
    fresh venv mounted read-only makes every import try to write its .pyc; the attempt is no effect)."""
    event, path = str(record.get("event")), str(record["path"])
    if record.get("scratch"):
        return scratch_effect(record, scope)
    in_home = relative_to(path, scope.home)
    in_scratch = any(relative_to(path, place) is not None for place in (scope.worktree, scope.scratch, "/dev/shm"))
    bytecode = PYC_CACHE.search(path) is not None and any(relative_to(path, m) is not None for m in scope.mounts)
    # Inside a cache anything goes; the cache directory itself may be made, not removed (that is the user's cache).
    cache_dir = in_home is not None and f"{in_home}/" in BENIGN_HOME_PREFIXES and event == "mkdir"
    benign = in_scratch or bytecode or cache_dir or (in_home is not None and in_home.startswith(BENIGN_HOME_PREFIXES))
    return SideEffect(
        kind=PATH_EVENT_KINDS.get(event, "other"),
        target=path,
        detail=f"{event} attempted outside the worktree (seen by the audit hook, whether or not it succeeded)",
        source="audit_hook",
        benign=benign,
    )


def scratch_effect(record: dict[str, Any], scope: AuditScope) -> SideEffect:
    """A delete / chmod / chown in the private /tmp. It started empty (but for mount points), so whatever exists
    there the run made itself; deleting what is not there — or a mount point — means the code aimed at a path it
    did not create, which on a real machine is someone else's — unless the run creates it afterwards (the usual
    unlink-then-create of a symlink or lock file). A setuid/setgid mode is a privilege change anywhere."""
    event, path = str(record.get("event")), str(record["path"])
    mode = record.get("mode")
    why = ""
    foreign = not record.get("existed") and path not in scope.run_owned
    if event == "delete" and (foreign or is_ignored(path, scope.preexisting)):
        why = "deletion of a path in /tmp the run did not create"
    elif event == "chmod" and isinstance(mode, int) and mode & SPECIAL_MODE_BITS:
        why = f"chmod {mode:o} sets a setuid/setgid bit"
    elif event == "chown":
        why = "ownership change"
    return SideEffect(
        kind=PATH_EVENT_KINDS.get(event, "other"),
        target=path,
        detail=f"{event} in the private /tmp" + (f": {why}" if why else ""),
        source="audit_hook",
        benign=not why,
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


def network_effect(record: dict[str, Any], scope: AuditScope) -> SideEffect:
    """Inside a private network namespace loopback reaches only the sandbox itself: a connect to a port something
    in the sandbox listens on (a test server the tests started) is benign; a connect to a port nobody there listens
    on was aimed at a service outside the sandbox, which is what exfiltration to a local collector looks like."""
    address = record.get("address")
    via = record.get("via")
    if isinstance(address, str):  # an AF_UNIX socket path
        benign = scope.isolated_network and (
            address.startswith(("\x00", "@")) or any(relative_to(address, p) for p in (scope.scratch, scope.worktree))
        )
        where = "unix socket inside the run's scratch space" if benign else "unix socket connect outside the run"
    else:
        host = address[0] if isinstance(address, list) and address else address
        loopback = is_loopback(host)
        if via == "socket.getaddrinfo":
            benign = loopback
            where = "name lookup of loopback" if benign else "name lookup (network attempt)"
        else:
            benign = loopback and scope.isolated_network and record.get("listener") is True
            if benign:
                where = "loopback connect to a listener inside the sandbox"
            elif loopback:
                where = "loopback connect to a port nothing in the sandbox listens on (aimed outside the sandbox)"
            else:
                where = "network attempt"
    return SideEffect(
        kind="network",
        target=json.dumps(address),
        detail=f"{where} ({via})",
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
    """One record per (kind, target, source, detail); a harmful record wins over a benign duplicate."""
    chosen: dict[tuple[str, str, str, str], SideEffect] = {}
    for effect in effects:
        key = (effect.kind, effect.target, effect.source, effect.detail)
        if key not in chosen or (chosen[key].benign and not effect.benign):
            chosen[key] = effect
    return list(chosen.values())
