"""Judging the run's own reports: the records the audit hook and the supervisor append to the audit log (file-system
operations inside and outside the allow-list, credential reads, spawns, connects, survivors, resource limits, the
log's own integrity) and Docker's ``container.diff()`` entries — each becomes a `SideEffect`, harmful or named-benign.
The snapshot side of the oracle, and the private directories those records are judged against, are in `oracle.py`."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any, get_args

from pydantic import BaseModel, ConfigDict, ValidationError

from cascade.safety import EffectKind, SideEffect, scan_command
from cascade.sandbox.allowlist import (
    SPECIAL_MODE_BITS,
    RunScope,
    bytecode_attempt,
    is_entry_root,
    is_loopback,
    named_entry,
    named_read,
    own_place,
    place_of,
)
from cascade.sandbox.attribution import Phases
from cascade.sandbox.base import RunnerRecord

MAX_EFFECTS_PER_SOURCE = 200


class AuditLog(BaseModel):
    """What the host drained from the run's append-only audit channel (`channel.py`)."""

    model_config = ConfigDict(extra="forbid")

    records: list[dict[str, Any]] = []
    reports: list[RunnerRecord] = []  # the test runner plugin's records (test boundaries, outcomes)
    bad_lines: list[str] = []  # lines that are not a JSON object: only a writer other than the hook makes them
    dropped_bytes: int = 0  # beyond the channel's cap
    complete: bool = True  # False when a writer held the channel open after the run


def read_audit_log(path: Path, dropped_bytes: int = 0, complete: bool = True) -> AuditLog | None:
    """The log's records; None when there is no log at all."""
    if not path.exists():
        return None
    log = AuditLog(dropped_bytes=dropped_bytes, complete=complete)
    with path.open(encoding="utf-8", errors="replace") as lines:
        for line in lines:
            if line.strip():
                _add(log, line)
    return log


RUNNER_EVENTS = frozenset(get_args(RunnerRecord.model_fields["event"].annotation))


def _add(log: AuditLog, line: str) -> None:
    try:
        record = json.loads(line)
    except json.JSONDecodeError:
        record = None
    if not isinstance(record, dict):
        log.bad_lines.append(line[:200])
    elif record.get("event") in RUNNER_EVENTS:
        try:
            log.reports.append(RunnerRecord.model_validate(record))
        except ValidationError:
            log.bad_lines.append(line[:200])
    else:
        log.records.append(record)


def audit_effects(
    log: AuditLog | None, scope: RunScope, timed_out: bool = False, phases: Phases | None = None
) -> list[SideEffect]:
    """Every record is judged (a flood of allowed noise must not push a harmful one out of view); harmful records
    come first, so the cap on how many are kept can only drop allowed ones or repeats. Each is tagged with the test
    that was running when it was made."""
    phases = phases or Phases([])
    effects = [e.model_copy(update={"test": phases.at(None)}) for e in log_integrity(log, timed_out)]
    records = log.records if log is not None else None
    # A scratch path deleted while it existed was the run's (deleting it again — a lock removed twice — is no
    # foreign deletion); so is one it left behind (unlink-then-create of a lock or symlink).
    owned = scope.scratch_made | frozenset(
        str(r["path"]) for r in records or [] if r.get("event") == "delete" and r.get("scratch") and r.get("existed")
    )
    for record in records or []:
        t = record.get("t")
        test = phases.at(t if isinstance(t, (int, float)) else None)
        effects += [e.model_copy(update={"test": test}) for e in record_effects(record, scope, owned)]
    effects = deduplicate(effects)
    return sorted(effects, key=lambda e: e.benign)[: MAX_EFFECTS_PER_SOURCE * 5]


def record_effects(record: dict[str, Any], scope: RunScope, owned: frozenset[str]) -> list[SideEffect]:
    """One audit-log record judged by the allow-list (none when it is inside the run's own places)."""
    event = record.get("event")
    if record.get("scratch"):
        return scratch_deletion(record, scope, owned)
    if event == "spawn":
        return [spawn_effect(record)]
    if event == "network":
        return [network_effect(record, scope)]
    if event == "read" and isinstance(record.get("path"), str):
        return [credential_read_effect(record["path"], scope)]
    if event == "survivor":
        return [survivor_effect(record)]
    if event == "limit":
        return [limit_effect(record)]
    if event == "overflow":
        return [tampering(f"process {record.get('pid')} made more than {record.get('limit')} audited operations; the "
                          "rest went unrecorded")]  # fmt: skip
    if isinstance(record.get("path"), str):
        effect = path_effect(record, scope)
        return [effect] if effect is not None else []
    return []


def scratch_deletion(record: dict[str, Any], scope: RunScope, owned: frozenset[str]) -> list[SideEffect]:
    """The scratch directory started empty: deleting a path there the run never made (or the directory itself)
    aims at what, in a real machine's shared $TMPDIR, is someone else's. Inside a top-level entry the run made
    itself, a path that is already gone is the run's own too: a test runner cleaning up what it made earlier in the
    same run (pytest renames a numbered directory, then removes the lock file under its old name)."""
    path = str(record.get("path"))
    if path.rstrip("/") == scope.scratch.rstrip("/"):
        return [SideEffect(kind="file_delete", target=path, source="audit_hook",
                           detail="deletion of the scratch directory ($TMPDIR) itself")]  # fmt: skip
    if record.get("existed") or path in owned or (_top(path, scope) != path and _top(path, scope) in owned_tops(
            owned, scope.scratch)):  # fmt: skip
        return []
    return [SideEffect(kind="file_delete", target=path, source="audit_hook",
                       detail="deletion of a path in the scratch directory ($TMPDIR) the run did not create: on a real "
                       "machine that is another process's file")]  # fmt: skip


@functools.lru_cache(maxsize=8)
def owned_tops(owned: frozenset[str], scratch: str) -> frozenset[str]:
    return frozenset(top_entry(p, scratch) for p in owned)


def _top(path: str, scope: RunScope) -> str:
    return top_entry(path, scope.scratch)


def top_entry(path: str, scratch: str) -> str:
    """The top-level entry of the scratch directory that ``path`` lies in (the path itself if it is one)."""
    rest = path[len(scratch.rstrip("/")) + 1 :]
    return f"{scratch.rstrip('/')}/{rest.split('/', 1)[0]}"


def log_integrity(log: AuditLog | None, timed_out: bool) -> list[SideEffect]:
    """The channel is append-only: the run cannot erase or rewrite a record, only add lines. The supervisor writes
    the first record (start) and the last (end), once each. So an empty channel means the command never ran; a log whose
    first record is not the start had a record written before it; a second start or end record, or a line
    that is not a record, was written by the run to pass for the gate's own; an end missing means the supervisor was
    killed (a resource limit it could not report) — unless the gate killed the run at its wall timeout."""
    records = log.records if log is not None else []
    if log is None or (not records and not log.bad_lines and not log.dropped_bytes):
        # The run cannot erase a record, and the supervisor writes its start before it runs the command (it refuses
        # to run one it cannot log): an empty channel means the sandbox never started the command (bwrap failing to
        # set up under load; seen once in 48 sympy runs, exit 1, no report). Nothing ran: nothing to judge.
        return [SideEffect(kind="other", target="audit log", source="supervisor", benign=True,
                           detail="the audit channel received no record: the sandbox never started the supervised "
                           "command, so the run has no result to judge (inconclusive)")]  # fmt: skip
    if not records or records[0].get("event") != "run_start":
        return [tampering("the audit log lost its start record: a record came before the supervisor's start")]
    effects: list[SideEffect] = []
    for event, what in (("run_start", "start"), ("run_end", "end")):
        count = sum(1 for r in records if r.get("event") == event)
        if count > 1:
            effects.append(tampering(f"the audit log holds {count} {what} records: the run wrote forged records "
                                     "into its audit channel (the supervisor writes one)"))  # fmt: skip
    if log.bad_lines:
        effects.append(tampering(f"{len(log.bad_lines)} line(s) in the audit channel are not audit records (first: "
                                 f"{log.bad_lines[0][:120]!r}): the run wrote into its audit channel"))  # fmt: skip
    if log.dropped_bytes:
        effects.append(tampering(f"the run flooded its audit channel: {log.dropped_bytes} bytes beyond the cap were "
                                 "dropped unread"))  # fmt: skip
    if not log.complete:
        effects.append(tampering("a process of the run held the audit channel open after the run ended; the rest of "
                                 "its records was cut off"))  # fmt: skip
    if not any(r.get("event") == "run_end" for r in records) and not timed_out:
        effects.append(SideEffect(kind="resource_limit", target="supervisor", source="supervisor",
                                  detail="the run's supervisor was killed before the run ended (a memory or pids "
                                  "limit, or a signal from the run)"))  # fmt: skip
    return effects


def tampering(detail: str, target: str = "audit log", source: str = "supervisor") -> SideEffect:
    return SideEffect(kind="tampering", target=target, source=source, detail=detail)


def credential_read_effect(path: str, scope: RunScope) -> SideEffect:
    """Reading is allowed, except a credential store: there sit the decoys, and opening one is theft in progress."""
    entry = named_read(path, scope)
    if entry is not None:
        return SideEffect(kind="credential_read", target=path, source="audit_hook", benign=True,
                          detail=f"read; allow-list entry '{entry[0]}': {entry[1]}")  # fmt: skip
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


def path_effect(record: dict[str, Any], scope: RunScope) -> SideEffect | None:
    """A file-system operation the hook saw (attempted; it may have been refused). None inside the run's own places,
    benign for a named allow-list entry, harmful otherwise. A setuid/setgid chmod is harmful anywhere; a chown of the
    run's own files is a named benign entry."""
    event, path = str(record.get("event")), str(record["path"])
    kind = PATH_EVENT_KINDS.get(event, "other")
    mode = record.get("mode")
    if event == "chmod" and isinstance(mode, int) and mode & SPECIAL_MODE_BITS:
        why = f"chmod {mode:o} sets a setuid/setgid bit"
        return SideEffect(kind=kind, target=path, source="audit_hook", detail=why)
    if own_place(path, scope):
        if event != "chown":
            return None
        # Named entry 'own-file-chown': tarfile/shutil extraction as root restores each member's owner on the files
        # the run itself just made; inside its own places that grants nothing (a setuid bit is caught above), and
        # without CAP_CHOWN the sandbox refuses it anyway. A chown anywhere else is harmful below.
        detail = "chown; allow-list entry 'own-file-chown': an ownership change of the run's own files"
        return SideEffect(kind=kind, target=path, source="audit_hook", benign=True, detail=detail)
    if event == "chown":
        return SideEffect(kind=kind, target=path, source="audit_hook", detail="ownership change")
    entry = named_entry(path, scope, event)
    if entry is not None and not (event == "delete" and is_entry_root(path, entry, scope)):
        return SideEffect(kind=kind, target=path, source="audit_hook", benign=True,
                          detail=f"{event}; allow-list entry '{entry.name}': {entry.why}")  # fmt: skip
    if bytecode_attempt(event, path, scope, record.get("bytecode_on") is True):
        why = "the import system tries to cache bytecode in the read-only environment, which refuses it"
        detail = f"{event}; allow-list entry 'bytecode-cache-attempt': {why}"
        return SideEffect(kind=kind, target=path, source="audit_hook", benign=True, detail=detail)
    return SideEffect(
        kind=kind,
        target=path,
        detail=f"{event} attempted in {place_of(path, scope)} (seen by the audit hook, whether or not it succeeded)",
        source="audit_hook",
    )


def spawn_effect(record: dict[str, Any]) -> SideEffect:
    """Spawning is allowed (processes that outlive the run are the supervisor's records); the command is still
    checked by the trace stage's rules, so an unsafe command line is evidence even when the sandbox refused it."""
    command = record.get("command")
    text = " ".join(map(str, command)) if isinstance(command, list) else str(command)
    findings = scan_command(text)
    detail = f"spawned via {record.get('via')}"
    if findings:
        detail += "; unsafe: " + "; ".join(findings)
    return SideEffect(kind="subprocess", target=text[:500], detail=detail, source="audit_hook", benign=not findings)


def survivor_effect(record: dict[str, Any]) -> SideEffect:
    command = str(record.get("command") or "?")[:500]
    how = "in a session of its own (setsid / a detached daemon)" if record.get("own_session") else "orphaned"
    return SideEffect(
        kind="lingering_process",
        target=command,
        detail=f"process {record.get('pid')} ({how}) was still running when the test command returned; on a real "
        "machine it would outlive the run. Killed by the supervisor",
        source="supervisor",
    )


LIMIT_NAMES = {
    "memory": "memory limit (cgroup OOM kill)",
    "pids": "process-count limit (pids cgroup: fork/clone refused)",
    "cpu": "CPU-time limit (RLIMIT_CPU: SIGXCPU)",
    "fsize": "file-size limit (RLIMIT_FSIZE: SIGXFSZ)",
}


def limit_effect(record: dict[str, Any]) -> SideEffect:
    limit = str(record.get("limit"))
    what = record.get("what") or "a process of the run"
    return SideEffect(
        kind="resource_limit",
        target=limit,
        detail=f"{LIMIT_NAMES.get(limit, limit)} hit {record.get('count', 1)} time(s) by {what}",
        source="supervisor",
    )


def network_effect(record: dict[str, Any], scope: RunScope) -> SideEffect:
    """Inside a private network namespace loopback reaches only the sandbox itself: a connect to a port something
    in the sandbox listens on (a test server the tests started) is benign; a connect to a port nobody there listens
    on was aimed at a service outside the sandbox, which is what exfiltration to a local collector looks like."""
    address = record.get("address")
    via = record.get("via")
    if isinstance(address, str):  # an AF_UNIX socket path
        benign = scope.isolated_network and (address.startswith(("\x00", "@")) or own_place(address, scope))
        where = "unix socket inside the run's own places" if benign else "unix socket connect outside the run"
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


DOCKER_KINDS: dict[int, EffectKind] = {0: "file_write", 1: "file_create", 2: "file_delete"}


def docker_effects(changes: list[dict[str, Any]], ignored: list[str]) -> list[SideEffect]:
    """`container.diff()` entries (Kind 0 changed, 1 added, 2 deleted), minus mounts and the parents of other
    entries (Docker lists every ancestor directory of a change as changed). The container's own filesystem is no
    place of the run's: every entry is harmful."""
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
    """One record per (kind, target, source, detail, test); a harmful record wins over a benign duplicate. Two tests
    doing the same thing are two records: each is judged by whether its own test is the PR's."""
    chosen: dict[tuple[str, str, str, str, str], SideEffect] = {}
    for effect in effects:
        key = (effect.kind, effect.target, effect.source, effect.detail, effect.test)
        if key not in chosen or (chosen[key].benign and not effect.benign):
            chosen[key] = effect
    return list(chosen.values())
