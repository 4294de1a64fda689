"""Shared by the host-process backends (bwrap, none): scrubbed environment, rlimits, a pids cgroup, and a wall
timeout that kills every process the run started."""

from __future__ import annotations

import contextlib
import os
import re
import resource
import signal
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from cascade.sandbox.base import RunSpec

# Names that must never reach untrusted code, even when a caller asks for them through ``RunSpec.env``.
SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
OUTPUT_LIMIT = 1_000_000  # characters of stdout/stderr kept per stream (the tail: that is where errors are)
KILL_GRACE_SECONDS = 5.0
MIB = 1024 * 1024


class ProcessOutcome(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    exit_code: int | None
    timed_out: bool
    stdout: str
    stderr: str
    seconds: float


def is_secret_name(name: str) -> bool:
    return SECRET_NAME.search(name) is not None


def scrubbed_env(spec_env: dict[str, str], home: str, tmpdir: str) -> tuple[dict[str, str], list[str]]:
    """Start from nothing: an allow-list, then the caller's extras minus secret-looking names (returned as dropped)."""
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


def read_tail(path: Path) -> str:
    with path.open("rb") as handle:
        handle.seek(0, os.SEEK_END)
        size = handle.tell()
        handle.seek(max(0, size - OUTPUT_LIMIT))
        return handle.read().decode("utf-8", errors="replace")


def run_limited(argv: list[str], spec: RunSpec, env: dict[str, str], output_dir: Path) -> ProcessOutcome:
    """Run argv with rlimits in its own session and pids cgroup; on timeout kill the group and the cgroup.

    Output goes to files, not pipes, so a grandchild that keeps a pipe open cannot hang the caller."""
    cgroups = RunCgroups.create(spec.pids, spec.memory_mb * MIB)
    out_path, err_path = output_dir / "stdout", output_dir / "stderr"
    start = time.monotonic()
    timed_out = False
    try:
        with out_path.open("wb") as out, err_path.open("wb") as err:
            proc = subprocess.Popen(
                argv,
                cwd=spec.worktree,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
                preexec_fn=limits_preexec(spec, cgroups),
            )
            try:
                proc.wait(timeout=spec.timeout_seconds)
            except subprocess.TimeoutExpired:
                timed_out = True
            kill_group(proc.pid)
            cgroups.kill_all()
            exit_code = proc.wait(timeout=KILL_GRACE_SECONDS)
    finally:
        cgroups.remove()
    return ProcessOutcome(
        exit_code=None if timed_out else exit_code,
        timed_out=timed_out,
        stdout=read_tail(out_path),
        stderr=read_tail(err_path),
        seconds=round(time.monotonic() - start, 3),
    )


def kill_group(pgid: int) -> None:
    """The child leads its own session, so its pgid is its pid; processes left behind after exit die too."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
