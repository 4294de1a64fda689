"""Runs the test command inside the sandbox and reports to the run's audit channel (named in ``config.json`` beside
this file) what only the inside can see:

* processes still alive when the command returned (a double fork, a ``setsid`` daemon): the supervisor is a child
  subreaper, so every orphan of the run is re-parented to it; after a short grace for processes that are exiting
  anyway (multiprocessing's helpers end when their parent does), each survivor is recorded and killed;
* resource limits the run hit: OOM kills and refused forks counted by the memory and pids cgroups the run is in
  (v1 or v2, before/after), and processes killed by the CPU-time or file-size rlimit (SIGXCPU, SIGXFSZ);
* a start and an end record around everything (no command runs when the start record cannot be written), so
  forged or missing records are caught.

It runs as ``python3 -I -S _cascade_supervise.py -- argv…`` (isolated: no audit hook, no site), standard library only,
and exits with the command's status (128+N for a signal, as a shell reports it)."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import time

CONFIG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "config.json")

PR_SET_CHILD_SUBREAPER = 36
REFUSED_EXIT = 125  # as `env` and `timeout` report "could not run the command"
GRACE_SECONDS = 2.0
LIMIT_SIGNALS = {int(signal.SIGXCPU): "cpu", int(signal.SIGXFSZ): "fsize"}
# (controller, v1 file, v2 file, counter name)
COUNTERS = (
    ("memory", "memory.oom_control", "memory.events", "oom_kill"),
    ("pids", "pids.events", "pids.events", "max"),
)


class Log:
    def __init__(self, path: str | None) -> None:
        self.fd: int | None = None
        self.error = ""
        if path is not None:
            try:
                self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
            except OSError as exc:
                self.error = str(exc)

    def start(self) -> bool:
        """Write the start record; False when the run was to be logged and cannot be (then nothing may run)."""
        if self.error:
            return False
        if self.fd is None:
            return True
        try:
            record = {"event": "run_start", "pid": os.getpid(), "t": time.time()}
            os.write(self.fd, (json.dumps(record) + "\n").encode())
        except OSError as exc:
            self.error = str(exc)
            return False
        return True

    def emit(self, record: dict[str, object]) -> None:
        if self.fd is None:
            return
        record["pid"] = os.getpid()
        record["t"] = time.time()
        with contextlib.suppress(OSError):
            os.write(self.fd, (json.dumps(record) + "\n").encode("utf-8", "replace"))


def counter_files() -> dict[str, str]:
    """limit name -> the file holding its counter for this process's cgroup (first one that exists)."""
    try:
        with open("/proc/self/cgroup") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return {}
    found: dict[str, str] = {}
    for limit, v1_file, v2_file, _ in COUNTERS:
        candidates: list[str] = []
        for line in lines:
            parts = line.split(":", 2)
            if len(parts) != 3:
                continue
            hierarchy, controllers, path = parts
            if limit in controllers.split(","):
                base = "/sys/fs/cgroup/" + limit
                candidates += [base + path.rstrip("/") + "/" + v1_file, base + "/" + v1_file]
            elif hierarchy == "0" and not controllers:
                candidates += ["/sys/fs/cgroup" + path.rstrip("/") + "/" + v2_file, "/sys/fs/cgroup/" + v2_file]
        for candidate in candidates:
            if os.path.exists(candidate):
                found[limit] = candidate
                break
    return found


def read_counters(files: dict[str, str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    names = {limit: name for limit, _, _, name in COUNTERS}
    for limit, path in files.items():
        try:
            with open(path) as handle:
                for line in handle:
                    key, _, value = line.partition(" ")
                    if key == names[limit] and value.strip().isdigit():
                        counts[limit] = int(value)
        except OSError:
            pass
    return counts


def proc_table() -> dict[int, tuple[str, int, int]]:
    """pid -> (state, ppid, session) of every process visible here."""
    table: dict[int, tuple[str, int, int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/" + name + "/stat") as handle:
                text = handle.read()
        except OSError:
            continue
        fields = text[text.rfind(")") + 2 :].split()
        if len(fields) > 3:
            table[int(name)] = (fields[0], int(fields[1]), int(fields[3]))
    return table


def descendants(me: int) -> list[tuple[int, int]]:
    """(pid, session) of every live process below ``me``."""
    table = proc_table()
    children: dict[int, list[int]] = {}
    for pid, (_, ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found: list[tuple[int, int]] = []
    stack = list(children.get(me, []))
    while stack:
        pid = stack.pop()
        if table[pid][0] not in ("Z", "X"):
            found.append((pid, table[pid][2]))
        stack += children.get(pid, [])
    return found


def command_of(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()[:500]
    except OSError:
        return "?"


def reap(log: Log) -> None:
    """Collect every exited child without blocking; record the ones an rlimit killed."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        note_signal(log, status, "an orphaned process of the run")


def note_signal(log: Log, status: int, what: str) -> None:
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) in LIMIT_SIGNALS:
        log.emit({"event": "limit", "limit": LIMIT_SIGNALS[os.WTERMSIG(status)], "count": 1, "what": what})


def log_path() -> str:
    """The channel named by the run's configuration; "" when it names none (then nothing may run)."""
    try:
        with open(CONFIG, encoding="utf-8") as handle:
            return str(json.load(handle)["log"])
    except (OSError, ValueError, KeyError, TypeError):
        return ""


def main(argv: list[str]) -> int:
    log = Log(log_path())
    if not log.start():  # an unlogged run would be judged blind: refuse it, the gate sees no result and no record
        sys.stderr.write(f"cascade supervisor: cannot write the audit channel: {log.error}\n")
        return REFUSED_EXIT
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    files = counter_files()
    before = read_counters(files)
    try:
        child = subprocess.Popen(argv)
    except OSError as exc:
        sys.stderr.write(f"cascade supervisor: cannot run {argv[0] if argv else ''!r}: {exc}\n")
        log.emit({"event": "run_end", "exit": 127})
        return 127
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda signum, _frame: child.send_signal(signum))
    status = wait_for(child.pid, log)
    what = f"the test command ({os.path.basename(argv[0])})"
    note_signal(log, status, what)
    end_survivors(log)
    after = read_counters(files)
    for limit, count in after.items():
        if count > before.get(limit, 0):
            log.emit(
                {
                    "event": "limit",
                    "limit": limit,
                    "count": count - before.get(limit, 0),
                    "what": "a process of the run",
                }
            )
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)
    log.emit({"event": "run_end", "exit": code})
    return code


def wait_for(pid: int, log: Log) -> int:
    """Block until the command exits, reaping (and noting) orphans meanwhile; its wait status."""
    while True:
        try:
            done, status = os.waitpid(-1, 0)
        except ChildProcessError:
            return 0
        except InterruptedError:
            continue
        if done == pid:
            return status
        note_signal(log, status, "an orphaned process of the run")


def end_survivors(log: Log) -> None:
    me, session = os.getpid(), os.getsid(0)
    deadline = time.monotonic() + GRACE_SECONDS
    alive = descendants(me)
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        reap(log)
        alive = descendants(me)
    for pid, sid in alive:
        log.emit({"event": "survivor", "pid": pid, "command": command_of(pid), "own_session": sid != session})
    for pid, _ in alive:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + GRACE_SECONDS
    while descendants(me) and time.monotonic() < deadline:
        time.sleep(0.02)
        reap(log)
    reap(log)


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["--"]:
        args = args[1:]
    sys.exit(main(args))
