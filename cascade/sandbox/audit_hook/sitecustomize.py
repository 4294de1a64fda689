"""Loaded by every sandboxed Python through PYTHONPATH: a `sys.addaudithook` that appends one JSON line per
write-open outside the allowed prefixes, file-system change there, subprocess spawn, socket connect or name lookup
to $CASCADE_AUDIT_LOG. The side-effect oracle reads the log after the run (design §5).

It has to stay standard-library only and cheap: the hook sees every audit event of the process (every import
opens files). It is evidence, not a boundary: the sandbox is what contains the effects."""

from __future__ import annotations

import json
import os
import sys

_LOG_ENV = "CASCADE_AUDIT_LOG"
_ALLOW_ENV = "CASCADE_AUDIT_ALLOW"
_MAX_LINES = 20_000
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_QUIET_PATHS = ("/dev/null", "/dev/tty", "/dev/stdout", "/dev/stderr", "/dev/shm/", "/dev/pts/", "/proc/self/")

# event -> (kind, indices of the path arguments) for the file-system events.
_PATH_EVENTS = {
    "os.remove": ("delete", (0,)),
    "os.rmdir": ("delete", (0,)),
    "shutil.rmtree": ("delete", (0,)),
    "os.rename": ("rename", (0, 1)),
    "os.mkdir": ("mkdir", (0,)),
    "os.symlink": ("symlink", (1,)),
    "os.link": ("link", (1,)),
    "os.chmod": ("chmod", (0,)),
    "os.chown": ("chown", (0,)),
    "os.truncate": ("truncate", (0,)),
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
    def __init__(self, fd: int, allowed: tuple[str, ...]) -> None:
        self.fd = fd
        self.allowed = allowed
        self.lines = 0
        self.busy = False

    def absolute(self, path: object) -> str | None:
        text = _text(path)
        if text is None:
            return None
        return os.path.normpath(text if os.path.isabs(text) else os.path.join(os.getcwd(), text))

    def outside(self, path: str) -> bool:
        if path.startswith(_QUIET_PATHS):
            return False
        probe = path.rstrip("/") + "/"
        return not probe.startswith(self.allowed)

    def emit(self, record: dict[str, object]) -> None:
        if self.lines >= _MAX_LINES:
            return
        self.lines += 1
        record["pid"] = os.getpid()
        try:
            os.write(self.fd, (json.dumps(record, default=repr) + "\n").encode("utf-8", "replace"))
        except OSError:
            self.lines = _MAX_LINES

    def on_open(self, args: tuple[object, ...]) -> None:
        path, mode, flags = (*args, None, None, 0)[:3]
        writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
            isinstance(flags, int) and flags & _WRITE_FLAGS
        )
        if writes:
            self.on_path("write", path)

    def on_path(self, kind: str, raw: object) -> None:
        path = self.absolute(raw)
        if path is not None and self.outside(path):
            self.emit({"event": kind, "path": path})

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
        else:
            address = args[1] if len(args) > 1 else None
            address = _text(address) or (list(address) if isinstance(address, tuple) else repr(address))
        self.emit({"event": "network", "via": event, "address": address})

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
            kind, indices = _PATH_EVENTS[event]
            for index in indices:
                if index < len(args):
                    self.on_path(kind, args[index])
        elif event in _SPAWN_EVENTS:
            self.on_spawn(event, args)
        else:
            self.on_network(event, args)


def _install() -> None:
    log_path = os.environ.get(_LOG_ENV)
    if not log_path:
        return
    try:
        fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o666)
    except OSError:
        return
    prefixes = [p for p in os.environ.get(_ALLOW_ENV, "").split(os.pathsep) if p]
    allowed = tuple(os.path.normpath(p).rstrip("/") + "/" for p in prefixes)
    sys.addaudithook(_Recorder(fd, allowed))


_install()
