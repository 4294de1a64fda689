"""Shared by the host-process backends (bwrap, none): scrubbed environment, rlimits, a pids cgroup, and a wall
timeout that kills every process the run started."""

from __future__ import annotations

import contextlib
import os
import re
import resource
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from cascade.sandbox.base import RunSpec

# Names that must never reach untrusted code, even when a caller asks for them through ``RunSpec.env``.
SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
OUTPUT_LIMIT = 1_000_000  # bytes of stdout/stderr kept per stream (the tail: that is where errors are)
KILL_GRACE_SECONDS = 5.0
MIB = 1024 * 1024


class ProcessOutcome(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    exit_code: int | None
    timed_out: bool
    stdout: str
    stderr: str
    seconds: float
    output_bytes: int = 0


def is_secret_name(name: str) -> bool:
    return SECRET_NAME.search(name) is not None


def scrubbed_env(spec_env: dict[str, str], home: str, tmpdir: str) -> tuple[dict[str, str], list[str]]:
    """Start from nothing: an allow-list, then the caller's extras minus secret-looking names (returned as dropped).
    Nothing names the gate: a test cannot tell from its environment what watches it."""
    env = {
        "PATH": os.environ.get("PATH", DEFAULT_PATH),
        "LANG": os.environ.get("LANG", "C.UTF-8"),
        "TZ": "UTC",
        "PYTHONHASHSEED": "0",
        "HOME": home,
        "TMPDIR": tmpdir,
    }
    dropped = sorted(name for name in spec_env if is_secret_name(name))
    env.update({name: value for name, value in spec_env.items() if not is_secret_name(name)})
    return env, dropped


class RunCgroups:
    """Per-run cgroups (v1 or v2) for the pids and memory controllers, made under this process's own cgroups.

    They are preferred over rlimits: RLIMIT_NPROC counts every process of the uid on the machine (for root, whatever
    else the host runs), and RLIMIT_AS counts reserved address space, which threaded test suites exhaust long before
    they use real memory. The rlimits remain the fallback where no cgroup can be made (not root, no delegation)."""

    ROOT = Path("/sys/fs/cgroup")

    def __init__(self) -> None:
        self.paths: dict[str, Path] = {}

    @classmethod
    def create(cls, max_pids: int, memory_bytes: int) -> RunCgroups:
        cgroups = cls()
        name = f"cascade-{uuid.uuid4().hex[:12]}"
        settings = {
            "pids": {"pids.max": str(max_pids)},
            "memory": {"memory.limit_in_bytes": str(memory_bytes), "memory.max": str(memory_bytes)},
        }
        for controller, files in settings.items():
            path = cls._make(controller, name, files)
            if path is not None:
                cgroups.paths[controller] = path
        return cgroups

    @classmethod
    def _make(cls, controller: str, name: str, files: dict[str, str]) -> Path | None:
        parent = cls._parent(controller)
        if parent is None:
            return None
        path = parent / name
        try:
            path.mkdir(exist_ok=True)
            written = [key for key, value in files.items() if (path / key).exists() and cls._write(path / key, value)]
        except OSError:
            written = []
        if not written:
            with contextlib.suppress(OSError):
                path.rmdir()
            return None
        return path

    @staticmethod
    def _write(path: Path, value: str) -> bool:
        path.write_text(value)
        return True

    @classmethod
    def _parent(cls, controller: str) -> Path | None:
        """Our own cgroup for the controller: v1 has one hierarchy per controller, v2 one unified tree."""
        try:
            lines = Path("/proc/self/cgroup").read_text().splitlines()
        except OSError:
            return None
        for line in lines:
            hierarchy, controllers, own = line.split(":", 2)
            if controller in controllers.split(",") and (cls.ROOT / controller).is_dir():
                return cls.ROOT / controller / own.lstrip("/")
        for line in lines:
            hierarchy, controllers, own = line.split(":", 2)
            unified = cls.ROOT / own.lstrip("/")
            subtree = unified / "cgroup.subtree_control"
            if hierarchy == "0" and not controllers and subtree.exists() and controller in subtree.read_text().split():
                return unified
        return None

    @property
    def procs_files(self) -> list[str]:
        return sorted({str(path / "cgroup.procs") for path in self.paths.values()})

    def pids(self) -> list[int]:
        members: set[int] = set()
        for procs in self.procs_files:
            with contextlib.suppress(OSError, ValueError):
                members.update(int(line) for line in Path(procs).read_text().split())
        return sorted(members)

    def kill_all(self) -> None:
        """SIGKILL every member until the groups are empty (bounded: pids.max limits how many can appear)."""
        deadline = time.monotonic() + KILL_GRACE_SECONDS
        while (members := self.pids()) and time.monotonic() < deadline:
            for pid in members:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.02)

    def remove(self) -> None:
        self.kill_all()
        for path in set(self.paths.values()):
            deadline = time.monotonic() + KILL_GRACE_SECONDS
            while time.monotonic() < deadline:
                try:
                    path.rmdir()
                    break
                except OSError:
                    time.sleep(0.05)


def limits_preexec(spec: RunSpec, cgroups: RunCgroups) -> Callable[[], None]:
    """Runs in the child between fork and exec: join the cgroups first (so nothing forks outside them), then the
    rlimits — address space and process count only where no cgroup enforces them."""
    procs_files = cgroups.procs_files
    limits = [
        (resource.RLIMIT_CPU, spec.cpu_seconds, spec.cpu_seconds + 5),
        (resource.RLIMIT_FSIZE, spec.file_size_mb * MIB, spec.file_size_mb * MIB),
        (resource.RLIMIT_CORE, 0, 0),
    ]
    if "memory" not in cgroups.paths:
        limits.append((resource.RLIMIT_AS, spec.memory_mb * MIB, spec.memory_mb * MIB))
    if "pids" not in cgroups.paths:
        limits.append((resource.RLIMIT_NPROC, spec.pids, spec.pids))

    def apply() -> None:
        for procs_file in procs_files:
            with open(procs_file, "w") as handle:
                handle.write(str(os.getpid()))
        for which, soft, hard in limits:
            resource.setrlimit(which, (soft, hard))

    return apply


class OutputTail:
    """Drains one output pipe of the run on a host thread: keeps the last ``OUTPUT_LIMIT`` bytes, counts the rest, and
    never holds more — a run printing gigabytes costs the host nothing but the count."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.total = 0
        self._tail = bytearray()
        self._thread = threading.Thread(target=self._drain, name="cascade-output", daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        with contextlib.suppress(OSError):
            while chunk := os.read(self.fd, 65536):
                self.total += len(chunk)
                self._tail += chunk
                if len(self._tail) > 2 * OUTPUT_LIMIT:
                    del self._tail[: len(self._tail) - OUTPUT_LIMIT]
        os.close(self.fd)

    def text(self, wait: float = KILL_GRACE_SECONDS) -> str:
        """The kept tail (after the writers are gone; a writer that escaped the kill is not waited for long)."""
        self._thread.join(wait)
        return bytes(self._tail[-OUTPUT_LIMIT:]).decode("utf-8", errors="replace")


def run_limited(argv: list[str], spec: RunSpec, env: dict[str, str], cwd: str) -> ProcessOutcome:
    """Run argv with rlimits in its own session and pids cgroup; on timeout kill the group and the cgroup.

    Output is drained from pipes by host threads with a cap (`OutputTail`); every process of the run is killed at
    its end (session and cgroup), so no grandchild keeps a pipe open past it."""
    cgroups = RunCgroups.create(spec.pids, spec.memory_mb * MIB)
    start = time.monotonic()
    timed_out = False
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe()
    try:
        try:
            proc = subprocess.Popen(
                argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out_write, stderr=err_write,
                start_new_session=True, preexec_fn=limits_preexec(spec, cgroups),
            )  # fmt: skip
        finally:
            os.close(out_write)
            os.close(err_write)
        tails = OutputTail(out_read), OutputTail(err_read)
        try:
            proc.wait(timeout=spec.timeout_seconds)
        except subprocess.TimeoutExpired:
            timed_out = True
        kill_group(proc.pid)
        cgroups.kill_all()
        exit_code = proc.wait(timeout=KILL_GRACE_SECONDS)
    finally:
        cgroups.remove()
    stdout, stderr = tails[0].text(), tails[1].text()
    return ProcessOutcome(
        exit_code=None if timed_out else exit_code,
        timed_out=timed_out,
        stdout=stdout,
        stderr=stderr,
        seconds=round(time.monotonic() - start, 3),
        output_bytes=tails[0].total + tails[1].total,
    )


def kill_group(pgid: int) -> None:
    """The child leads its own session, so its pgid is its pid; processes left behind after exit die too."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
