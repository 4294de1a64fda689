"""Refused writes of every process of the run, Python or not, from ``strace``.

The audit hook sees only what Python code does. A shell, a C program, ``cp``, ``tee`` or ``touch`` writing to
``/etc/profile`` is refused by the sandbox's read-only mounts (EROFS), or by file permissions (EACCES, EPERM), and
leaves nothing for a snapshot diff to find — yet an attempt is intent. So the backends run the sandbox under
``strace -f`` restricted (with a seccomp-bpf filter, so untraced system calls never stop) to the system calls that
create, change or remove a path, printing only the failed ones; `refused_effects` judges them with the allow-list.

Where it runs: the bwrap backend runs strace on the host, around bwrap, writing to a host-only file — the sandbox
can neither see nor stop it. The docker backend runs it inside the container (ptrace cannot cross into a container
from a process that did not start it), around the supervisor, writing into an append-only channel (`channel.py`:
the run can add lines, never remove one). The run can see and kill that strace, but gains nothing: the seccomp
filter strace installed outlives it, so every traced call fails with ENOSYS from then on (measured), the container
ends with it, and the supervisor's missing end record rejects.

Paths are as the sandbox sees them: strace prints the argument as given, and with ``-y`` each descriptor argument
with its path (``AT_FDCWD</work/tree>``), which resolves relative paths; a relative path of an old-style call
(``mkdir("x")``) is resolved against the last working directory strace showed for that process."""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from cascade.safety import EffectKind, SideEffect
from cascade.sandbox.allowlist import RunScope, bytecode_shape, inside, is_loopback, named_entry, own_place, place_of

STRACE_FILE = "strace.txt"
# (kind, [(dirfd index or -1, path index)]) per system call that creates, changes or removes a path (or fd: -2).
CALLS: dict[str, tuple[EffectKind, list[tuple[int, int]]]] = {
    "open": ("file_write", [(-1, 0)]),
    "openat": ("file_write", [(0, 1)]),
    "openat2": ("file_write", [(0, 1)]),
    "creat": ("file_create", [(-1, 0)]),
    "mkdir": ("file_create", [(-1, 0)]),
    "mkdirat": ("file_create", [(0, 1)]),
    "mknod": ("file_create", [(-1, 0)]),
    "mknodat": ("file_create", [(0, 1)]),
    "unlink": ("file_delete", [(-1, 0)]),
    "unlinkat": ("file_delete", [(0, 1)]),
    "rmdir": ("file_delete", [(-1, 0)]),
    "rename": ("file_write", [(-1, 0), (-1, 1)]),
    "renameat": ("file_write", [(0, 1), (2, 3)]),
    "renameat2": ("file_write", [(0, 1), (2, 3)]),
    "link": ("file_create", [(-1, 1)]),
    "linkat": ("file_create", [(2, 3)]),
    "symlink": ("file_create", [(-1, 1)]),
    "symlinkat": ("file_create", [(1, 2)]),
    "truncate": ("file_write", [(-1, 0)]),
    "chmod": ("privilege", [(-1, 0)]),
    "fchmod": ("privilege", [(0, -2)]),
    "fchmodat": ("privilege", [(0, 1)]),
    "chown": ("privilege", [(-1, 0)]),
    "lchown": ("privilege", [(-1, 0)]),
    "fchown": ("privilege", [(0, -2)]),
    "fchownat": ("privilege", [(0, 1)]),
    "setxattr": ("file_write", [(-1, 0)]),
    "lsetxattr": ("file_write", [(-1, 0)]),
    "fsetxattr": ("file_write", [(0, -2)]),
    "removexattr": ("file_write", [(-1, 0)]),
    "lremovexattr": ("file_write", [(-1, 0)]),
    "fremovexattr": ("file_write", [(0, -2)]),
    "utime": ("file_write", [(-1, 0)]),
    "utimes": ("file_write", [(-1, 0)]),
    "utimensat": ("file_write", [(0, 1)]),
    "futimesat": ("file_write", [(0, 1)]),
}
# Reaching out: a connect() or an addressed sendto() that failed (no network, a hidden daemon socket) — recorded
# whatever the errno, since the attempt is the evidence. Loopback is the run's own: its network namespace is private.
NET_CALLS = {"connect": 1, "sendto": 4}  # call -> index of the address argument
UNIX_PATH = re.compile(r'sun_path=(?P<path>"(?:[^"\\]|\\.)*")')
INET_ADDR = re.compile(r'inet_addr\("(?P<v4>[^"]*)"\)|inet_pton\(AF_INET6, "(?P<v6>[^"]*)"')
# A connect to the wildcard address (or IPv4-mapped loopback, which ipaddress does not call loopback) lands locally.
LOCAL_WILDCARDS = frozenset({"0.0.0.0", "::", "::ffff:127.0.0.1"})
PORT = re.compile(r"sin6?_port=htons\((?P<port>\d+)\)")
OPEN_WRITE_FLAGS = ("O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC")
# The errors that mean "the sandbox or the file's permissions said no"; ENOENT, EEXIST, EXDEV… are not refusals.
REFUSALS = {"EROFS": "read-only file system", "EACCES": "permission denied", "EPERM": "operation not permitted"}
FLAGS = ["-f", "-qq", "--seccomp-bpf", "-Z", "-y", "-e", "signal=none", "-e",
         f"trace={','.join([*CALLS, *NET_CALLS])}"]  # fmt: skip
LINE = re.compile(r"^(?P<pid>\d+) +(?P<call>\w+)\((?P<args>.*)\) += -1 (?P<errno>E[A-Z]+) ")
FD_PATH = re.compile(r"^(?:AT_FDCWD|-?\d+)<(?P<path>.*)>$")
# A process's own /proc entries (its comm, oom score, uid map) are its own state; /proc/sys and the rest are global.
OWN_PROC = re.compile(r"^/proc/(?:self|thread-self|\d+)(?:/|$)")
MAX_EFFECTS = 200
PROBE_TIMEOUT_SECONDS = 20


def traced(argv: list[str], output: str, strace: str = "strace") -> list[str]:
    return [strace, *FLAGS, "-o", output, "--", *argv]


@functools.lru_cache(maxsize=1)
def probe_strace() -> str | None:
    """None when strace can trace here; else why not (one line)."""
    binary = shutil.which("strace")
    if binary is None:
        return ("strace is not installed: the bwrap backend needs it to record writes the sandbox refused to "
                "non-Python programs (Debian/Ubuntu: apt-get install strace)")  # fmt: skip
    try:
        proc = subprocess.run([*traced(["true"], os.devnull, binary)], capture_output=True, text=True,
                              timeout=PROBE_TIMEOUT_SECONDS)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"strace could not start: {exc}"
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines()
        return f"strace cannot trace here (ptrace refused?): {lines[-1] if lines else f'exit {proc.returncode}'}"
    return None


class Refusal(BaseModel):
    """One write-intent system call the kernel refused."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    pid: int
    call: str
    path: str
    errno: str
    flags: str = ""


def split_args(text: str) -> list[str]:
    """strace's argument list split at top-level commas (quotes, brackets and fd annotations kept whole)."""
    args: list[str] = []
    depth, quoted, escaped, start = 0, False, False, 0
    for index, char in enumerate(text):
        if quoted:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                quoted = False
            continue
        if char == '"':
            quoted = True
        elif char in "[{<(":
            depth += 1
        elif char in "]}>)":
            depth -= 1
        elif char == "," and depth == 0:
            args.append(text[start:index].strip())
            start = index + 1
    args.append(text[start:].strip())
    return args


def unquote(arg: str) -> str | None:
    """A quoted path argument decoded (strace escapes bytes as C escapes); None for NULL or an unquoted value."""
    if len(arg) < 2 or not arg.startswith('"'):
        return None
    body = arg[1 : arg.rfind('"')]
    try:
        raw = body.encode("latin-1", "backslashreplace").decode("unicode_escape").encode("latin-1")
    except (UnicodeDecodeError, UnicodeEncodeError):
        return body
    return raw.decode("utf-8", "replace")


def fd_path(arg: str) -> str | None:
    match = FD_PATH.match(arg)
    return match.group("path") if match else None


def parse(lines: Iterable[str]) -> list[Refusal]:
    """The refused write-intent calls in strace's output (opens only when they asked for write access)."""
    refusals: list[Refusal] = []
    cwd: dict[int, str] = {}
    for line in lines:
        match = LINE.match(line)
        if match is None:
            continue
        pid, call, errno = int(match["pid"]), match["call"], match["errno"]
        args = split_args(match["args"])
        if args and args[0].startswith("AT_FDCWD<"):
            cwd[pid] = fd_path(args[0]) or cwd.get(pid, "")
        if call in NET_CALLS:
            address = net_address(args[NET_CALLS[call]] if NET_CALLS[call] < len(args) else "")
            if address is not None:
                refusals.append(Refusal(pid=pid, call=call, path=address, errno=errno))
            continue
        if call not in CALLS or errno not in REFUSALS:
            continue
        flags = next((a for a in args[1:] if "O_" in a), "") if call.startswith("open") else ""
        if call.startswith("open") and not any(flag in flags for flag in OPEN_WRITE_FLAGS):
            continue
        for dir_index, path_index in CALLS[call][1]:
            path = resolve(args, dir_index, path_index, cwd.get(pid))
            if path is not None:
                refusals.append(Refusal(pid=pid, call=call, path=path, errno=errno, flags=flags))
    return refusals


def net_address(arg: str) -> str | None:
    """``unix:<path>`` or ``inet:<address>:<port>`` of a socket address argument; None for loopback, abstract Unix
    names (private to the run's network namespace) and anything without an address."""
    unix = UNIX_PATH.search(arg)
    if unix is not None:
        path = unquote(unix["path"])
        return f"unix:{path}" if path else None
    inet = INET_ADDR.search(arg)
    if inet is None:
        return None
    host = inet["v4"] or inet["v6"] or ""
    if is_loopback(host) or host in LOCAL_WILDCARDS:
        return None
    port = PORT.search(arg)
    return f"inet:{host}:{port['port'] if port else '?'}"


def resolve(args: list[str], dir_index: int, path_index: int, cwd: str | None) -> str | None:
    if path_index == -2:  # an fd-only call: its target is the descriptor's path
        return fd_path(args[dir_index]) if dir_index < len(args) else None
    raw = unquote(args[path_index]) if path_index < len(args) else None
    if raw is None:  # utimensat(fd, NULL, …) acts on the descriptor itself
        return fd_path(args[dir_index]) if 0 <= dir_index < len(args) else None
    if raw.startswith("/"):
        return os.path.normpath(raw)
    base = fd_path(args[dir_index]) if 0 <= dir_index < len(args) else cwd
    return os.path.normpath(os.path.join(base, raw)) if base else raw


def read_refusals(path: Path, scope: RunScope) -> list[SideEffect]:
    """`refused_effects` of a strace output file, read line by line (it can be large)."""
    if not path.exists():
        return []
    with path.open(encoding="utf-8", errors="replace") as lines:
        return refused_effects(lines, scope)


def refused_effects(lines: Iterable[str], scope: RunScope) -> list[SideEffect]:
    """Each refused write-intent call judged by the allow-list. A read-only-mount refusal (EROFS) is outside the
    run's own places by construction — those are all writable — so only the named entries can excuse it."""
    harmful: list[SideEffect] = []
    allowed: list[SideEffect] = []
    seen: set[tuple[str, str, str]] = set()
    for refusal in parse(lines):
        key = (refusal.call, refusal.path, refusal.errno)
        if key in seen or OWN_PROC.match(refusal.path):
            continue
        seen.add(key)
        if refusal.call in NET_CALLS:
            effect = network_effect(refusal, scope)
            if effect is not None:
                (allowed if effect.benign else harmful).append(effect)
            continue
        kind = CALLS[refusal.call][0]
        if refusal.errno != "EROFS" and own_place(refusal.path, scope):
            continue
        what = f"{refusal.call}({refusal.path}{', ' + refusal.flags if refusal.flags else ''})"
        refused = f"refused {refusal.call} ({refusal.errno}: {REFUSALS[refusal.errno]})"
        entry = benign_refusal(refusal, scope)
        if entry is not None:
            allowed.append(SideEffect(kind=kind, target=refusal.path, source="strace", benign=True,
                                      detail=f"{refused}; {entry}"))  # fmt: skip
            continue
        where = place_of(refusal.path, scope)
        harmful.append(SideEffect(kind=kind, target=refusal.path, source="strace",
                                  detail=f"{refused}: {what}; {where} — an attempt is intent"))  # fmt: skip
    return [*harmful, *allowed][:MAX_EFFECTS]


# Named entry 'nss-daemon-lookup': the C library's name-service switch asks these daemons for users, groups and
# hosts before it reads /etc itself (every `ls -l`, `id`, curl or bash does); absent here, it falls back.
NSS_SOCKETS = ("/var/run/nscd/socket", "/run/nscd/socket", "/var/lib/sss/pipes/nss")
NSS_SOCKET_DIRS = ("/run/systemd/userdb/",)


def network_effect(refusal: Refusal, scope: RunScope) -> SideEffect | None:
    """A failed connect/sendto to anything but loopback or a socket in the run's own places."""
    target = refusal.path
    path = target.removeprefix("unix:")
    if target.startswith("unix:") and own_place(path, scope):
        return None
    if target.startswith("unix:") and (path in NSS_SOCKETS or path.startswith(NSS_SOCKET_DIRS)):
        why = "the C library's name-service lookup asks its cache daemon first and falls back to /etc when absent"
        detail = f"{refusal.call} failed ({refusal.errno}); allow-list entry 'nss-daemon-lookup': {why}"
        return SideEffect(kind="network", target=target, source="strace", benign=True, detail=detail)
    what = "a host daemon's Unix socket" if target.startswith("unix:") else "the network"
    return SideEffect(kind="network", target=target, source="strace",
                      detail=f"{refusal.call} to {what} failed ({refusal.errno}) — an attempt is intent")  # fmt: skip


def benign_refusal(refusal: Refusal, scope: RunScope) -> str | None:
    """The named entries that apply to a refused call, as a detail; None when none does."""
    if bytecode_shape(refusal.call, refusal.path):
        return ("allow-list entry 'bytecode-cache-attempt': the import system of a Python that caches bytecode tries "
                "a __pycache__ directory or temporary .pyc beside every uncached module; the read-only mount refuses "
                "it, and a temporary .pyc is never imported")  # fmt: skip
    if refusal.call.startswith("open") and any(refusal.path == f"{git}/index.lock" for git in scope.git_dirs):
        return ("allow-list entry 'git-index-refresh': read-only git commands (status, diff, describe) try to "
                "refresh the index under index.lock and go on without it when refused")  # fmt: skip
    entry = named_entry(refusal.path, scope, "mkdir" if refusal.call.startswith("mkdir") else "write")
    if entry is not None and inside(refusal.path, scope.home if entry.root == "home" else scope.tmp):
        return f"allow-list entry '{entry.name}': {entry.why}"
    return None
