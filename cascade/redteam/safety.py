"""Safety of the red-team suite itself: loopback-only listeners, and a preflight that proves a backend gives the
run its own HOME and /tmp before any unsafe case is allowed to execute there."""

from __future__ import annotations

import json
import os
import re
import socket
import stat
import sys
import tempfile
import threading
from pathlib import Path
from types import TracebackType
from typing import Any

from cascade.errors import BadInput, CascadeError
from cascade.redteam.models import UNSAFE_KINDS, RedteamCase
from cascade.sandbox.base import RunSpec, Sandbox
from cascade.sandbox.select import BACKENDS

LOOPBACK_HOSTS = ("127.0.0.1", "::1")
# What the suite's Stage 2 runs need from the test environment: without them no case's tests can run at all.
TEST_RUNNER_MODULES = ("pytest", "coverage")
_PREFLIGHT = (
    "import json, os, sys, importlib.util\n"
    "home = os.path.expanduser('~')\n"
    "def ident(p):\n"
    "    s = os.stat(p)\n"
    "    return [s.st_dev, s.st_ino]\n"
    f"missing = [m for m in {TEST_RUNNER_MODULES!r} if importlib.util.find_spec(m) is None]\n"
    "print(json.dumps({'home': home, 'home_id': ident(home), 'tmp_id': ident('/tmp'),\n"
    "                  'tempdir': __import__('tempfile').gettempdir(), 'missing': missing}))\n"
)


class LoopbackListeners:
    """TCP listeners on 127.0.0.1 and ::1 for the ports the cases name, counting what reaches them.

    They exist so that a case's connection has a real, harmless endpoint the suite owns; with working network
    isolation they must see nothing — the count is reported as a safety measurement."""

    def __init__(self, ports: list[int]) -> None:
        self.ports = sorted(set(ports))
        self.connections: list[dict[str, Any]] = []
        self.unbound: list[str] = []
        self._sockets: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def __enter__(self) -> LoopbackListeners:
        for port in self.ports:
            for host in LOOPBACK_HOSTS:
                self._listen(host, port)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for sock in self._sockets:
            sock.close()
        for thread in self._threads:
            thread.join(timeout=2)

    def _listen(self, host: str, port: int) -> None:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))  # loopback only: never a wildcard address
            sock.listen(8)
            sock.settimeout(0.2)
        except OSError as exc:
            sock.close()
            self.unbound.append(f"{host}:{port} ({exc.strerror or exc})")
            return
        self._sockets.append(sock)
        thread = threading.Thread(target=self._serve, args=(sock, f"{host}:{port}"), daemon=True)
        thread.start()
        self._threads.append(thread)

    def _serve(self, sock: socket.socket, where: str) -> None:
        while sock.fileno() != -1:
            try:
                conn, peer = sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with conn:
                conn.settimeout(1)
                try:
                    data = conn.recv(65536)
                except OSError:
                    data = b""
            with self._lock:
                self.connections.append({"listener": where, "peer": str(peer[0]), "bytes": len(data)})

    def addresses(self) -> list[str]:
        """The host part of every bound listener (loopback only, by construction)."""
        return [str(sock.getsockname()[0]) for sock in self._sockets]

    def report(self) -> dict[str, Any]:
        return {
            "ports": self.ports,
            "hosts": list(LOOPBACK_HOSTS),
            "connections": list(self.connections),
            "unbound": list(self.unbound),
        }


def refuse_unsafe_on_none(backend: str, cases: list[RedteamCase]) -> None:
    """A backend that does not isolate (`none`) would run the unsafe cases on the real machine: refuse with a
    one-line reason."""
    unsafe = [c.id for c in cases if c.spec.kind in UNSAFE_KINDS]
    if not BACKENDS[backend].isolating and unsafe:
        raise BadInput(
            f"refusing to run {len(unsafe)} unsafe red-team case(s) on the {backend!r} backend: it would change this "
            "machine (use bwrap or docker, or select only benign/trace cases with --kind)"
        )


def preflight(sandbox: Sandbox, python: str = sys.executable, exposed: list[str] | None = None) -> dict[str, Any]:
    """Run a read-only probe in the sandbox and check its HOME and /tmp are not the host's (device and inode differ).

    Raises CascadeError when the probe cannot run there, or when the backend would let a case reach the host's HOME
    or /tmp (then no case may run on it)."""
    host_home = Path.home()
    with tempfile.TemporaryDirectory(prefix="cascade-redteam-preflight-") as work:
        spec = RunSpec(argv=[python, "-c", _PREFLIGHT], tree=work, read_only_paths=exposed or [], timeout_seconds=60)
        try:
            result = sandbox.run(spec)
        except CascadeError as exc:  # the backend's own one-line reason (e.g. docker: the engine or image failed)
            raise CascadeError(f"sandbox '{sandbox.isolation}' cannot run the preflight: {exc}") from None
        except Exception as exc:  # any other failure of a backend makes it unusable, never fatal to the suite
            raise CascadeError(
                f"sandbox '{sandbox.isolation}' cannot run the preflight: {type(exc).__name__}: "
                f"{str(exc).splitlines()[0][:300]}"
            ) from None
    try:
        seen = json.loads(result.stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        raise CascadeError(
            f"sandbox '{sandbox.isolation}' preflight failed (exit {result.exit_code}): "
            f"{(result.stderr.strip().splitlines() or ['no output'])[-1]}"
        ) from None
    home_id, tmp_id = _ident(host_home), _ident(Path("/tmp"))
    report = {
        "isolation": result.isolation,
        "sandbox_home": seen["home"],
        "sandbox_tempdir": seen["tempdir"],
        "home_private": seen["home_id"] != home_id,
        "tmp_private": seen["tmp_id"] != tmp_id,
        "test_runner_missing": list(seen.get("missing", [])),
    }
    if not (report["home_private"] and report["tmp_private"]):
        raise CascadeError(
            f"refused: sandbox '{sandbox.isolation}' shares the host's HOME or /tmp with the run: {report}"
        )
    return report


HostSnapshot = dict[str, tuple[str, int, int, int]]

# Host paths the corpus aims at, relative to HOME (or absolute): a difference there is the suite's fault. Anchored,
# so other processes' scratch trees (e.g. another run's private HOME under /tmp) never count.
_HOME_TARGETS = (
    r"|\.(?:bashrc|profile|bash_profile|bash_login|zshrc|netrc|git-credentials|gitconfig)"
    r"|\.(?:ssh|aws)(?:/.*)?|\.cache|\.config(?:/systemd/.*|/autostart/.*)?|\.local/(?:bin|lib|share)(?:/.*)?"
)
_ABSOLUTE_TARGETS = r"/tmp|/tmp/textkit.*|/etc/cron.*|/var/spool/cron.*|.*/site-packages/(?:sitecustomize\.py|.*\.pth)"


def footprint_pattern(home: Path) -> re.Pattern[str]:
    return re.compile(rf"^(?:{re.escape(str(home))}(?:/(?:{_HOME_TARGETS[1:]}))?|{_ABSOLUTE_TARGETS})$")


def host_snapshot(roots: list[Path], max_depth: int = 4, max_entries: int = 200_000) -> HostSnapshot:
    """(kind, size, mtime_ns, mode) of every entry under ``roots`` down to ``max_depth``, bounded by ``max_entries``.

    Directories record kind and mode only: their mtime moves whenever anyone adds a file, which is not a change
    of the directory itself (but a chmod of HOME or /tmp is)."""
    states: HostSnapshot = {}
    for root in roots:
        _record(states, root)
        for dirpath, dirnames, filenames in os.walk(root):
            depth = len(Path(dirpath).relative_to(root).parts)
            if depth >= max_depth:
                dirnames[:] = []
            for name in [*dirnames, *filenames]:
                if len(states) >= max_entries:
                    return states
                _record(states, Path(dirpath) / name)
    return states


def _record(states: HostSnapshot, path: Path) -> None:
    try:
        info = path.lstat()
    except OSError:
        return
    if stat.S_ISDIR(info.st_mode):
        states[str(path)] = ("dir", 0, 0, info.st_mode)
    else:
        states[str(path)] = ("file", info.st_size, info.st_mtime_ns, info.st_mode)


def snapshot_diff(before: HostSnapshot, after: HostSnapshot) -> list[str]:
    """Human-readable differences: ``+path`` created, ``-path`` removed, ``~path`` changed."""
    changed = [f"~{p}" for p in sorted(before.keys() & after.keys()) if before[p] != after[p]]
    return [
        *(f"+{p}" for p in sorted(after.keys() - before.keys())),
        *(f"-{p}" for p in sorted(before.keys() - after.keys())),
        *changed,
    ]


def suite_footprint(differences: list[str], home: Path | None = None) -> list[str]:
    """The differences at a path the suite targets; concurrent activity elsewhere on a shared machine is not ours."""
    pattern = footprint_pattern(home or Path.home())
    return [d for d in differences if pattern.match(d[1:])]


def _ident(path: Path) -> list[int]:
    info = os.stat(path)
    return [info.st_dev, info.st_ino]
