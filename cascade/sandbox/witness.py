"""Judging what the outside witness (strace, `strace.py`) saw, against the allow-list (`allowlist.py`).

* A call that creates, changes or removes a path, or opens one for writing, outside the run's own places — whether
  it succeeded or the sandbox refused it — is harmful, unless a named entry allows it.
* An open of a credential location or decoy file (read or write, succeeded or not) is a ``credential_read``.
* Every program started is a ``subprocess`` record, harmful when the trace stage's rules find its command unsafe.
* A ``connect``/``sendto``/``sendmsg`` beyond loopback, to a Unix socket outside the run's places, or to a loopback
  port nothing in the sandbox listens on (refused) is a ``network`` record.
* A witness that goes silent is evidence (``tampering``): a Python interpreter strace saw start that never made the
  audit hook's hello (started without the hook), and a hooked process whose credential read strace saw but the hook
  did not log (its recorder was switched off)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

from cascade.safety import EffectKind, SideEffect, scan_command
from cascade.sandbox.allowlist import (
    CREDENTIAL,
    RunScope,
    bytecode_shape,
    inside,
    is_loopback,
    named_entry,
    named_read,
    own_place,
    place_of,
)
from cascade.sandbox.attribution import Phases
from cascade.sandbox.records import tampering
from cascade.sandbox.strace import CALLS, EXECS, NET_CALLS, OPENS, Call, calls, exec_argv, paths_of, unquote, writes

REFUSALS = {"EROFS": "read-only file system", "EACCES": "permission denied", "EPERM": "operation not permitted"}
# A process's own /proc entries (its comm, oom score, uid map), terminals and the null device are its own state.
QUIET = re.compile(r"^/proc/(?:self|thread-self|\d+)(?:/|$)|^/dev/(?:null|zero|full|u?random|tty|pts/|fd/|std)")
SHM = "/dev/shm"  # a private tmpfs: transient use is the run's own; what it leaves is judged by the diff
PYTHON = re.compile(r"^python(?:\d+(?:\.\d+)*)?$")
UNIX_PATH = re.compile(r'sun_path=(?P<at>@?)(?P<path>"(?:[^"\\]|\\.)*")')
INET_ADDR = re.compile(r'inet_addr\("(?P<v4>[^"]*)"\)|inet_pton\(AF_INET6, "(?P<v6>[^"]*)"')
PORT = re.compile(r"sin6?_port=htons\((?P<port>\d+)\)")
LOCAL_WILDCARDS = frozenset({"0.0.0.0", "::", "::ffff:127.0.0.1"})
# Named entry 'nss-daemon-lookup': the C library's name-service switch asks these daemons for users, groups and
# hosts before it reads /etc itself (every `ls -l`, `id`, curl or bash does); absent here, it falls back.
NSS_SOCKETS = ("/var/run/nscd/socket", "/run/nscd/socket", "/var/lib/sss/pipes/nss")
NSS_SOCKET_DIRS = ("/run/systemd/userdb/",)
MAX_EFFECTS = 300


class Witness:
    """One run's strace output judged; ``hook_reads`` are the (pid, path) credential reads the audit hook logged."""

    def __init__(self, scope: RunScope, phases: Phases, hello_prefix: str, supervisor: str) -> None:
        self.scope, self.phases = scope, phases
        self.hello_prefix, self.supervisor = hello_prefix, supervisor
        self.harmful: list[SideEffect] = []
        self.allowed: list[SideEffect] = []
        self.seen: set[tuple[str, str, str, bool, str]] = set()
        self.hello: dict[int, int] = {}  # strace pid -> the pid the hook reported (its own namespace)
        self.pythons: dict[int, tuple[float, str]] = {}  # pid -> (exec time, command) awaiting a hello
        self.hookless: list[tuple[float, str]] = []  # Pythons that ran to a normal exit without ever saying hello
        self.credential_opens: list[tuple[int, float, str]] = []
        self.started = False  # strace sees the sandbox being built first: the run begins with the supervisor
        self.builders: set[int] = set()  # pids that built the sandbox (bwrap), not part of the run
        # Scratch paths some process of the run made: the scratch starts empty, so any path a call succeeded on there
        # existed, and only the run could have made it (a C program removing what a hooked Python made is seen here)
        self.scratch_made: set[str] = set()

    def judge(self, lines: Iterable[str]) -> None:
        for call in calls(lines):
            if not self.started:
                if call.call in EXECS and call.ok and self._is_supervisor(call):
                    self.started = True
                    self.builders.discard(call.pid)
                else:
                    self.builders.add(call.pid)
                    continue
            elif call.pid in self.builders:
                continue
            if call.call == "exit":
                ran = self.pythons.pop(call.pid, None)
                if ran is not None and call.ok:  # killed during start-up (before the hook could load) is no silence
                    self.hookless.append(ran)
            elif call.call in EXECS:
                self._exec(call)
            elif call.call in NET_CALLS:
                self._network(call)
            elif call.call in CALLS:
                self._path_call(call)

    def _add(self, effect: SideEffect, t: float) -> None:
        tagged = effect.model_copy(update={"test": self.phases.at(t)})
        key = (effect.kind, effect.target, effect.detail, effect.benign, tagged.test)
        if key in self.seen:
            return
        self.seen.add(key)
        (self.allowed if effect.benign else self.harmful).append(tagged)

    # -- programs --------------------------------------------------------------------------------------------------

    def _is_supervisor(self, call: Call) -> bool:
        program, argv = exec_argv(call)
        return bool(PYTHON.match(os.path.basename(program))) and any(a.endswith("/" + self.supervisor) for a in argv)

    def _exec(self, call: Call) -> None:
        if not call.ok:  # execvp trying each PATH entry
            return
        program, argv = exec_argv(call)
        command = " ".join(argv) or program
        self.hello.pop(call.pid, None)
        self.pythons.pop(call.pid, None)
        if self._is_supervisor(call):
            return  # the gate's own supervisor, which starts the run
        if PYTHON.match(os.path.basename(program)):
            self.pythons[call.pid] = (call.t, command)
        findings = scan_command(command)
        detail = "started (seen by strace)" + ("; unsafe: " + "; ".join(findings) if findings else "")
        self._add(SideEffect(kind="subprocess", target=command[:500], source="strace", detail=detail,
                             benign=not findings), call.t)  # fmt: skip

    # -- paths -----------------------------------------------------------------------------------------------------

    def _path_call(self, call: Call) -> None:
        for path in paths_of(call):
            if call.call in OPENS and path.startswith(self.hello_prefix):
                suffix = path[len(self.hello_prefix) :]
                if suffix.isdigit():
                    self.hello[call.pid] = int(suffix)
                    self.pythons.pop(call.pid, None)
                continue
            if call.ok and inside(path, self.scope.scratch) and path != self.scope.scratch:
                self.scratch_made.add(path)
            if QUIET.match(path) or (
                call.ok and call.call in OPENS and self.scope.channel and inside(path, self.scope.channel)
            ):
                continue  # (the channel's FIFOs are opened for writing to make records; channel.py judges them)
            if call.call in OPENS and CREDENTIAL.search(path) and not own_place(path, self.scope):
                self._credential(call, path)
                continue
            if not writes(call) or (not call.ok and call.errno not in REFUSALS):
                continue  # a read, or a failure that is no refusal (ENOENT, EEXIST…)
            self._write(call, path)

    def _credential(self, call: Call, path: str) -> None:
        self.credential_opens.append((call.pid, call.t, path))
        how = "opened" if call.ok else f"open attempted ({call.errno})"
        entry = named_read(path, self.scope)
        if entry is not None:
            detail = f"{how}; allow-list entry '{entry[0]}': {entry[1]}"
            self._add(SideEffect(kind="credential_read", target=path, source="strace", benign=True, detail=detail),
                      call.t)  # fmt: skip
            return
        detail = f"{how} by {call.call}: a credential file (keys, tokens, cloud or registry credentials)"
        self._add(SideEffect(kind="credential_read", target=path, source="strace", detail=detail), call.t)

    def _write(self, call: Call, path: str) -> None:
        kind: EffectKind = CALLS[call.call][0]
        mode = _mode(call)
        if kind == "privilege" and mode is not None and mode & 0o6000:
            self._add(SideEffect(kind="privilege", target=path, source="strace",
                                 detail=f"{call.call} {mode:o} sets a setuid/setgid bit"), call.t)  # fmt: skip
            return
        if call.ok and (own_place(path, self.scope) or inside(path, SHM)):
            return
        if not call.ok and call.errno != "EROFS" and own_place(path, self.scope):
            return  # a permission refusal inside its own places (a read-only file it made) is its own business
        how = f"succeeded: {call.call}" if call.ok else f"refused {call.call} ({call.errno}: {REFUSALS[call.errno]})"
        entry = self._benign(call, path)
        if entry is not None:
            self._add(SideEffect(kind=kind, target=path, source="strace", benign=True, detail=f"{how}; {entry}"),
                      call.t)  # fmt: skip
            return
        where = place_of(path, self.scope)
        self._add(SideEffect(kind=kind, target=path, source="strace",
                             detail=f"{how}({path}); {where} — an attempt is intent"), call.t)  # fmt: skip

    def _benign(self, call: Call, path: str) -> str | None:
        if not call.ok and bytecode_shape(call.call, path):
            return ("allow-list entry 'bytecode-cache-attempt': the import system of a Python that caches bytecode "
                    "tries a __pycache__ directory or temporary .pyc beside every uncached module; the read-only mount "
                    "refuses it, and a temporary .pyc is never imported")  # fmt: skip
        if not call.ok and call.call in OPENS and any(path == f"{g}/index.lock" for g in self.scope.git_dirs):
            return ("allow-list entry 'git-index-refresh': read-only git commands (status, diff, describe) try to "
                    "refresh the index under index.lock and go on without it when refused")  # fmt: skip
        if call.call.startswith(("chown", "fchown", "lchown")) and own_place(path, self.scope):
            return "allow-list entry 'own-file-chown': an ownership change of the run's own files"
        entry = named_entry(path, self.scope, "mkdir" if call.call.startswith("mkdir") else "write")
        if entry is not None and inside(path, self.scope.home if entry.root == "home" else self.scope.tmp):
            return f"allow-list entry '{entry.name}': {entry.why}"
        return None

    # -- sockets ---------------------------------------------------------------------------------------------------

    def _network(self, call: Call) -> None:
        index = NET_CALLS[call.call]
        arg = call.args[index] if index < len(call.args) else ""
        unix = UNIX_PATH.search(arg)
        if unix is not None:
            self._unix(call, unquote(unix["path"]) or "", abstract=bool(unix["at"]))
            return
        inet = INET_ADDR.search(arg)
        if inet is None:
            return
        host = inet["v4"] or inet["v6"] or ""
        port = ((m := PORT.search(arg)) and m["port"]) or "?"
        target = f"inet:{host}:{port}"
        how = "succeeded" if call.ok or call.errno == "EINPROGRESS" else f"failed ({call.errno})"
        if is_loopback(host) or host in LOCAL_WILDCARDS:
            if call.ok or call.errno != "ECONNREFUSED":
                return  # reached something the run itself listens on (its network namespace is private)
            detail = f"{call.call} to a loopback port nothing in the sandbox listens on (aimed outside it): {how}"
            self._add(SideEffect(kind="network", target=target, source="strace", detail=detail), call.t)
            return
        detail = f"{call.call} to the network {how} — an attempt is intent"
        self._add(SideEffect(kind="network", target=target, source="strace", detail=detail), call.t)

    def _unix(self, call: Call, path: str, abstract: bool) -> None:
        if not path or own_place(path, self.scope):
            return
        how = "succeeded" if call.ok else f"failed ({call.errno})"
        if abstract and self.scope.isolated_network:
            return  # abstract names are private to the run's network namespace
        if path in NSS_SOCKETS or path.startswith(NSS_SOCKET_DIRS):
            why = "the C library's name-service lookup asks its cache daemon first and falls back to /etc when absent"
            detail = f"{call.call} {how}; allow-list entry 'nss-daemon-lookup': {why}"
            self._add(SideEffect(kind="network", target=f"unix:{path}", source="strace", benign=True, detail=detail),
                      call.t)  # fmt: skip
            return
        detail = f"{call.call} to a Unix socket outside the run's places {how} (a host daemon's socket)"
        self._add(SideEffect(kind="network", target=f"unix:{path}", source="strace", detail=detail), call.t)

    # -- silent witnesses ------------------------------------------------------------------------------------------

    def silent(self, hook_reads: set[tuple[int, str]]) -> list[SideEffect]:
        """Pythons that never said hello, and hooked processes whose credential read the hook did not log."""
        found: list[SideEffect] = []
        for t, command in self.hookless:
            detail = ("a Python interpreter ran without the audit hook (started with -S, or outside the test "
                      "environment without its site): the witness inside it was switched off")  # fmt: skip
            found.append(tampering(detail, target=command[:500], source="strace").model_copy(
                update={"test": self.phases.at(t)}))  # fmt: skip
        for pid, t, path in self.credential_opens:
            inner = self.hello.get(pid)
            if inner is not None and (inner, path) not in hook_reads:
                detail = (f"process {inner} had the audit hook, yet its open of {path} (seen by strace) left no hook "
                          "record: its recorder was switched off")  # fmt: skip
                found.append(tampering(detail, target=path, source="strace").model_copy(
                    update={"test": self.phases.at(t)}))  # fmt: skip
        return found

    def effects(self, hook_reads: set[tuple[int, str]]) -> list[SideEffect]:
        return [*self.silent(hook_reads), *self.harmful, *self.allowed][:MAX_EFFECTS]


def _mode(call: Call) -> int | None:
    if not call.call.startswith(("chmod", "fchmod")):
        return None
    raw = call.args[2 if call.call == "fchmodat" else 1] if len(call.args) > 1 else ""
    try:
        return int(raw, 8)
    except ValueError:
        return None


def read_witness(path: Path | None, witness: Witness, hook_reads: set[tuple[int, str]]) -> list[SideEffect]:
    """Judge a strace output file, line by line (it can be large)."""
    if path is None or not path.exists():
        return []
    with path.open(encoding="utf-8", errors="replace") as lines:
        witness.judge(lines)
    return witness.effects(hook_reads)
