"""The witness outside the run's processes: ``strace`` around the whole run, every program in it followed.

The audit hook lives inside each Python process it watches, so a test can start an interpreter without it or switch
it off. strace cannot be switched off from inside: on the bwrap backend it runs on the host, around bwrap, writing a
host-only file; on the docker backend it runs inside the container (ptrace cannot cross into a container from a
process that did not start it) around the supervisor, writing into an append-only channel (`channel.py`), and if the
run kills it, the seccomp filter it installed outlives it — every traced call fails with ENOSYS from then on
(measured), and the supervisor's missing end record rejects.

It records, whether they succeed or fail (an attempt is intent), every call that creates, changes or removes a path;
every open (a write-open anywhere, a read of a credential or decoy file, the audit hook's hello); every ``execve``
(a Python started without the hook is visible); every ``connect``/``sendto``/``sendmsg`` on any socket family. With
``--seccomp-bpf`` untraced calls never stop, with ``-ttt`` each line carries the wall-clock time (for attribution),
with ``-y`` each descriptor its path (``AT_FDCWD</work/tree>``), which resolves relative paths. This module runs and
parses it; `witness.py` judges the calls."""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from cascade.safety import EffectKind

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
OPENS = frozenset({"open", "openat", "openat2", "creat"})
EXECS = frozenset({"execve", "execveat"})
NET_CALLS = {"connect": 1, "sendto": 4, "sendmsg": 1}  # call -> index of the address argument
FLAGS = ["-f", "-q", "--seccomp-bpf", "-ttt", "-y", "-s", "256", "-e", "signal=none", "-e",
         f"trace={','.join([*CALLS, *EXECS, *NET_CALLS])}"]  # fmt: skip
LINE = re.compile(r"^(?P<pid>\d+) +(?P<t>\d+\.\d+) +(?P<rest>.*)$")
CALL = re.compile(r"^(?P<call>\w+)\((?P<args>.*)\) += (?P<ret>-?\d+|\?)(?P<tail>.*)$")
UNFINISHED = re.compile(r"^(?P<call>\w+)\((?P<args>.*) <unfinished \.\.\.>$")
RESUMED = re.compile(r"^<\.\.\. (?P<call>\w+) resumed>(?P<rest>.*)$")
EXITED = re.compile(r"^\+\+\+ (?P<how>exited with \d+|killed by \w+)")
ERRNO = re.compile(r"^ (?P<errno>E[A-Z0-9]+) ")
FD_PATH = re.compile(r"^(?:AT_FDCWD|-?\d+)<(?P<path>.*)>$")
RET_PATH = re.compile(r"^<(?P<path>.*)>")
OPEN_WRITE_FLAGS = ("O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC")
PROBE_TIMEOUT_SECONDS = 20


def traced(argv: list[str], output: str, strace: str = "strace") -> list[str]:
    return [strace, *FLAGS, "-o", output, "--", *argv]


@functools.lru_cache(maxsize=1)
def probe_strace() -> str | None:
    """None when strace can trace here; else why not (one line)."""
    binary = shutil.which("strace")
    if binary is None:
        return ("strace is not installed: the bwrap backend needs it as the witness outside the run's processes "
                "(Debian/Ubuntu: apt-get install strace)")  # fmt: skip
    try:
        proc = subprocess.run([*traced(["true"], os.devnull, binary)], capture_output=True, text=True,
                              timeout=PROBE_TIMEOUT_SECONDS)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"strace could not start: {exc}"
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines()
        return f"strace cannot trace here (ptrace refused?): {lines[-1] if lines else f'exit {proc.returncode}'}"
    return None


class Call(NamedTuple):
    """One traced system call: who, when, what, with which arguments, and how it ended."""

    pid: int
    t: float
    call: str
    args: list[str]
    ok: bool
    errno: str  # "" when it succeeded
    ret_path: str  # the path of a returned descriptor (``-y``), "" otherwise
    cwd: str  # the process's last known working directory (for old-style relative paths)


def calls(lines: Iterable[str]) -> Iterator[Call]:
    """The traced calls in strace's output, split calls (``<unfinished ...>`` / ``<... resumed>``) joined."""
    pending: dict[int, tuple[str, str]] = {}
    cwd: dict[int, str] = {}
    for line in lines:
        match = LINE.match(line.rstrip("\n"))
        if match is None:
            continue
        pid, t, rest = int(match["pid"]), float(match["t"]), match["rest"]
        exited = EXITED.match(rest)
        if exited is not None:  # the process ended: "exit" is a pseudo-call, ok when it exited rather than was killed
            yield Call(pid, t, "exit", [exited["how"]], exited["how"].startswith("exited"), "", "", "")
            continue
        unfinished = UNFINISHED.match(rest)
        if unfinished is not None:
            pending[pid] = (unfinished["call"], unfinished["args"])
            continue
        resumed = RESUMED.match(rest)
        if resumed is not None:
            start = pending.pop(pid, None)
            if start is None or start[0] != resumed["call"]:
                continue
            rest = f"{start[0]}({start[1]}{resumed['rest']}"
        parsed = CALL.match(rest)
        if parsed is None:
            continue
        args = split_args(parsed["args"])
        if args and args[0].startswith("AT_FDCWD<"):
            cwd[pid] = fd_path(args[0]) or cwd.get(pid, "")
        ret, tail = parsed["ret"], parsed["tail"]
        ok = ret not in ("-1", "?")
        errno = "" if ok else (((m := ERRNO.match(tail)) and m["errno"]) or "")
        ret_path = (((m := RET_PATH.match(tail)) and m["path"]) or "") if ok else ""
        yield Call(pid, t, parsed["call"], args, ok, errno, ret_path, cwd.get(pid, ""))


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


def paths_of(call: Call) -> list[str]:
    """The paths a path call acts on, as the sandbox saw them."""
    return [p for d, i in CALLS[call.call][1] if (p := resolve(call.args, d, i, call.cwd)) is not None]


def open_flags(call: Call) -> str:
    return next((a for a in call.args[1:] if "O_" in a), "")


def writes(call: Call) -> bool:
    """An open asking for write access (or creating); every other path call is a change by nature."""
    if call.call == "creat":
        return True
    if call.call in OPENS:
        return any(flag in open_flags(call) for flag in OPEN_WRITE_FLAGS)
    return True


def exec_argv(call: Call) -> tuple[str, list[str]]:
    """(program path, argv) of an execve/execveat."""
    if call.call == "execveat":
        program = resolve(call.args, 0, 1, call.cwd) or ""
        argv_arg = call.args[2] if len(call.args) > 2 else ""
    else:
        program = unquote(call.args[0]) if call.args else ""
        argv_arg = call.args[1] if len(call.args) > 1 else ""
    items = re.findall(r'"(?:[^"\\]|\\.)*"', argv_arg)
    return program or "", [unquote(item) or "" for item in items]
