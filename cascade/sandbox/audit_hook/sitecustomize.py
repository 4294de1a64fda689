"""Loaded by every sandboxed Python — through PYTHONPATH, and through a ``.pth`` line in the test environment for
an interpreter started with a clean environment or ``-I`` — a `sys.addaudithook` that appends one JSON line per
write-open or file-system change outside the run's own places, read-open of a credential file, subprocess spawn,
socket connect or name lookup to the run's audit channel. The side-effect oracle reads the log after the run
and judges each record against the allow-list (``cascade/sandbox/allowlist.py``). Its settings are in
``config.json`` beside this file (read-only in the sandbox): no variable in the run's environment names it.

Every record carries the wall-clock time it was made, so the oracle can tell which test made it. On start the hook
tries to open ``<hello><pid>`` (which never exists): the outside witness (strace) sees that attempt, so a Python
process it saw start that never made it ran without this hook.

The run's own places (``allow``: its worktree and scratch directory) are not logged, except what lies in ``deny``
inside them (the worktree's ``.git``) and a setuid/setgid chmod or a chown, logged anywhere (the
oracle judges them: a setuid bit is harmful anywhere, a chown of the run's own files is a named benign entry).
A path is checked as written and with symlinks resolved, so a link in the worktree does not launder a write into the
git directory. A connect to a loopback address records whether anything in the sandbox listens on that port: inside
the sandbox's own network namespace a connect to a port nobody there listens on was aimed outside the sandbox.

It has to stay standard-library only and cheap: the hook sees every audit event of the process (every import
opens files). It is evidence, not a boundary: the sandbox is what contains the effects."""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import time

# Beside this file, or — when the sandbox mounted it over the system interpreter's own sitecustomize (Debian's
# /etc/python3.X/sitecustomize.py) — where the sandbox shows the gate's hook directory (allowlist.HOOK_MOUNT).
_CONFIGS = (os.path.join(os.path.dirname(os.path.abspath(__file__)), "config.json"), "/var/lib/pysite/site/config.json")
_SPECIAL_BITS = 0o6000  # setuid, setgid
# Files that hold credentials: reading one from a test is evidence even when nothing is written.
_CREDENTIAL = re.compile(
    r"(?:^|/)\.(?:ssh|aws|azure|kube|gnupg)/|(?:^|/)\.(?:netrc|pypirc|git-credentials|pgpass)$"
    r"|/\.docker/config\.json$|/\.config/(?:gcloud|gh)/|^/etc/(?:shadow|gshadow|sudoers)"
    r"|(?:^|/)\.credentials(?:_rsaparams)?$|(?:^|/)\.runner$"
)
_PROC_NET = {1: ("/proc/net/tcp", "/proc/net/tcp6"), 2: ("/proc/net/udp", "/proc/net/udp6")}
_LISTEN_STATES = {"0A", "07"}  # TCP LISTEN; UDP unconnected (bound)
_MAX_LINES = 20_000
_PIPE_BUF = 4096
_SHORT = 1024
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
# Never logged: terminals and the process's own descriptors; /dev/shm is judged by the host-side diff of the private
# tmpfs mounted there (transient use — POSIX semaphores, joblib's memmaps — is the run's own; what it leaves is not).
_QUIET_PATHS = (
    "/dev/null",
    "/dev/tty",
    "/dev/stdout",
    "/dev/stderr",
    "/dev/fd/",
    "/dev/shm/",
    "/dev/pts/",
    "/proc/self/",
)

# event -> (kind, (index of a path argument, index of its dir_fd argument or -1), ...) for file-system events.
_PATH_EVENTS = {
    "os.remove": ("delete", ((0, 1),)),
    "os.rmdir": ("delete", ((0, 1),)),
    "shutil.rmtree": ("delete", ((0, 1),)),
    "os.rename": ("rename", ((0, 2), (1, 3))),
    "os.mkdir": ("mkdir", ((0, 2),)),
    "os.symlink": ("symlink", ((1, 2),)),
    "os.link": ("link", ((1, 3),)),
    "os.chmod": ("chmod", ((0, 2),)),
    "os.chown": ("chown", ((0, 3),)),
    "os.truncate": ("truncate", ((0, -1),)),
}
_SPAWN_EVENTS = {"subprocess.Popen": 1, "os.exec": 1, "os.posix_spawn": 1, "os.spawn": 2, "os.system": 0}
_NET_EVENTS = {"socket.connect", "socket.sendto", "socket.getaddrinfo"}


def _text(value: object) -> str | None:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, str):
        return value
    if isinstance(value, os.PathLike):
        return _text(os.fspath(value))
    return None


class _Recorder:
    def __init__(
        self,
        fd: int,
        allowed: tuple[str, ...],
        denied: tuple[str, ...],
        scratch: tuple[str, ...],
        quiet: tuple[str, ...] = (),
    ) -> None:
        self.fd = fd
        self.quiet = _QUIET_PATHS + quiet
        self.allowed = allowed
        self.denied = denied
        self.scratch = scratch
        self.lines = 0
        self.busy = False

    def absolute(self, path: object, dir_fd: object = None) -> str | None:
        """The absolute path; a relative one is relative to dir_fd when given (shutil.rmtree walks that way)."""
        text = _text(path)
        if text is None:
            return None
        if os.path.isabs(text):
            return os.path.normpath(text)
        base = os.readlink(f"/proc/self/fd/{dir_fd}") if isinstance(dir_fd, int) else os.getcwd()
        return os.path.normpath(os.path.join(base, text))

    def outside(self, path: str) -> bool:
        """Not in the run's own places, judged on the path as written and with symlinks resolved."""
        if path.startswith(self.quiet):
            return False
        for candidate in (path, os.path.realpath(path)):
            probe = candidate.rstrip("/") + "/"
            if probe.startswith(self.denied) or not probe.startswith(self.allowed):
                return True
        return False

    def emit(self, record: dict[str, object]) -> None:
        if self.lines > _MAX_LINES:
            return
        self.lines += 1
        if self.lines > _MAX_LINES:  # say so once: what follows goes unrecorded, which the oracle counts against it
            record = {"event": "overflow", "limit": _MAX_LINES}
        record["pid"] = os.getpid()
        record["t"] = time.time()
        try:
            os.write(self.fd, _line(record))
        except OSError:
            self.lines = _MAX_LINES + 1

    def on_open(self, args: tuple[object, ...]) -> None:
        path, mode, flags = (*args, None, None, 0)[:3]
        writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
            isinstance(flags, int) and flags & _WRITE_FLAGS
        )
        if writes:
            self.on_path("write", path)
        elif not isinstance(path, int) and _CREDENTIAL.search(_text(path) or ""):
            self.on_read(path)

    def on_read(self, raw: object) -> None:
        path = self.absolute(raw)
        if path is not None and self.outside(path):
            self.emit({"event": "read", "path": path})

    def on_path(self, kind: str, raw: object, args: tuple[object, ...] = (), dir_fd: object = None) -> None:
        path = self.absolute(raw, dir_fd)
        if path is None:
            return
        mode = args[1] if kind == "chmod" and len(args) > 1 and isinstance(args[1], int) else None
        anywhere = kind == "chown" or (mode is not None and mode & _SPECIAL_BITS)
        record: dict[str, object] = {"event": kind, "path": path}
        if kind == "delete" and (path.rstrip("/") + "/").startswith(self.scratch):
            # The scratch directory is the run's own only for what the run made there: deleting a path that is not
            # there aims at what, on a real machine's shared $TMPDIR, belongs to someone else.
            record["scratch"] = True
            record["existed"] = os.path.lexists(path)
            self.emit(record)
            return
        if not anywhere and not self.outside(path):
            return
        if mode is not None:
            record["mode"] = mode
        if "__pycache__" in path:  # only the import system's own attempt is allowed, and only when it caches at all
            record["bytecode_on"] = not sys.dont_write_bytecode
        self.emit(record)

    def on_spawn(self, event: str, args: tuple[object, ...]) -> None:
        command = args[_SPAWN_EVENTS[event]] if len(args) > _SPAWN_EVENTS[event] else None
        if isinstance(command, (list, tuple)):
            command = [_text(part) or repr(part) for part in command]
        else:
            command = _text(command) or repr(command)
        self.emit({"event": "spawn", "via": event, "command": command})

    def on_network(self, event: str, args: tuple[object, ...]) -> None:
        if event == "socket.getaddrinfo":
            address: object = [_text(args[0]) if args else None, args[1] if len(args) > 1 else None]
            self.emit({"event": "network", "via": event, "address": address})
            return
        raw = args[1] if len(args) > 1 else None
        record: dict[str, object] = {"event": "network", "via": event}
        if isinstance(raw, tuple) and len(raw) >= 2 and isinstance(raw[1], int):
            sock_type = getattr(args[0], "type", 1) if args else 1
            record["listener"] = _listening(raw[1], sock_type)
        record["address"] = _text(raw) or (list(raw) if isinstance(raw, tuple) else repr(raw))
        self.emit(record)

    def __call__(self, event: str, args: tuple[object, ...]) -> None:
        if self.busy:
            return
        if event != "open" and event not in _PATH_EVENTS and event not in _SPAWN_EVENTS and event not in _NET_EVENTS:
            return
        self.busy = True
        try:
            self.dispatch(event, args)
        except Exception:  # the hook must never break the code it observes
            pass
        finally:
            self.busy = False

    def dispatch(self, event: str, args: tuple[object, ...]) -> None:
        if event == "open":
            self.on_open(args)
        elif event in _PATH_EVENTS:
            kind, positions = _PATH_EVENTS[event]
            for index, fd_index in positions:
                if index < len(args):
                    dir_fd = args[fd_index] if 0 <= fd_index < len(args) else None
                    self.on_path(kind, args[index], args, dir_fd)
        elif event in _SPAWN_EVENTS:
            self.on_spawn(event, args)
        else:
            self.on_network(event, args)


def _line(record: dict[str, object]) -> bytes:
    """One record as one write of at most PIPE_BUF bytes: the log is a FIFO shared by every process of the run, and
    only writes that small are atomic (a longer one could interleave with another process's record and garble it)."""
    data = (json.dumps(record, default=repr) + "\n").encode("utf-8", "replace")
    if len(data) <= _PIPE_BUF:
        return data
    short: dict[str, object] = {"truncated": True}
    for key, value in record.items():
        if isinstance(value, str):
            value = value[:_SHORT]
        elif isinstance(value, (list, tuple)):
            value = [str(part)[: _SHORT // 4] for part in value[:8]]
        short[key] = value
    data = (json.dumps(short, default=repr) + "\n").encode("utf-8", "replace")
    if len(data) <= _PIPE_BUF:
        return data
    least = {"event": str(record.get("event"))[:40], "path": str(record.get("path"))[:200], "truncated": True}
    return (json.dumps({**least, "pid": os.getpid()}, ensure_ascii=True) + "\n").encode()


def _listening(port: int, sock_type: object) -> bool:
    """Whether a socket in this network namespace listens on (TCP) or is bound to (UDP) the port."""
    kind = 2 if isinstance(sock_type, int) and sock_type & 0xF == 2 else 1
    wanted = f":{port:04X}"
    for table in _PROC_NET[kind]:
        try:
            with open(table, encoding="ascii") as handle:
                rows = handle.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if len(fields) > 3 and fields[1].endswith(wanted) and fields[3] in _LISTEN_STATES:
                return True
    return False


def _prefixes(values: list[str]) -> tuple[str, ...]:
    """The listed paths as written and resolved (a worktree reached through a symlink matches both ways)."""
    paths = {os.path.normpath(p) for p in values if p} | {os.path.realpath(p) for p in values if p}
    return tuple(sorted(p.rstrip("/") + "/" for p in paths))


def _install() -> None:
    config: dict = {}
    for path in _CONFIGS:
        try:
            with open(path, encoding="utf-8") as handle:
                config = json.load(handle)
            break
        except (OSError, ValueError):
            continue
    try:
        fd = os.open(config["log"], os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
    except (OSError, KeyError, TypeError):
        return
    with_hello = str(config.get("hello", ""))
    if with_hello:  # never exists: only the attempt matters, for the witness outside (strace) to see
        with contextlib.suppress(OSError):
            os.close(os.open(with_hello + str(os.getpid()), os.O_RDONLY | os.O_CLOEXEC))
    allowed, denied = _prefixes(list(config.get("allow", []))), _prefixes(list(config.get("deny", [])))
    scratch = _prefixes([str(config.get("scratch", ""))])
    quiet = _prefixes(list(config.get("quiet", [])))
    sys.addaudithook(_Recorder(fd, allowed, denied, scratch, quiet))


_install()
