"""The `docker` backend: a throw-away container of a locally built image (no registry is reachable; see
docker/make-base-image.sh) with no network, no capabilities, ``no-new-privileges``, memory/pids/CPU/file-size
limits, a non-root user and the host's hostname. The run's fresh places (`places.py`) are bind-mounted where the
bwrap backend shows them too (the tree at ``/workspace/<name>``, its ``.git`` and the object store read-only, the
gate's hook and channel directories read-only, the report directory writable); HOME and /tmp are private host
directories (diffed afterwards like bwrap's), and ``container.diff()`` records every other change to the
container's filesystem as side-effect evidence. Output is streamed from the engine as it is written, kept as a
bounded tail and counted (the engine stores no log). The unprivileged user cannot change the image's system files, so
those writes are refused (EACCES) and leave no diff: strace, in the image and run around the supervisor, records
them (an image without a working strace makes this backend unavailable).

Read-only paths (a venv, its interpreter's prefix) are bind-mounted at their host paths too — except the image's
own system: nothing under /usr, /bin, /lib, /etc… and no whole top-level directory is ever bound over the
container (binding the host's /usr, the prefix of Debian's python3, hides the container's docker-init and
libraries). Those come from the image instead: docker/make-base-image.sh puts the same Debian interpreters in it
(bookworm's python3 and bullseye's python3.9), so a venv made on the host from /usr/bin/python3.9 runs in the
container on the image's /usr/bin/python3.9. A venv of an interpreter outside the system trees (pyenv, /opt) gets
that interpreter's prefix mounted as well.

An engine or API failure (the daemon gone, the image missing, a command the image cannot start) raises
``ToolUnavailable`` with one line that says what to do; the command's own failure or timeout is a ``RunResult``."""

from __future__ import annotations

import contextlib
import functools
import os
import re
import socket
import threading
import time
from typing import Any

import docker.errors
import requests.exceptions
from docker.models.containers import Container
from docker.types import LogConfig, Mount, Ulimit

import docker
from cascade.errors import ToolUnavailable
from cascade.safety import SideEffect
from cascade.sandbox.allowlist import AUDIT_MOUNT, GATE_ROOT, HOOK_MOUNT, OBJECTS_MOUNT, RESULTS_MOUNT, TREE_ROOT
from cascade.sandbox.base import Isolation, RunResult, RunSpec
from cascade.sandbox.host import (
    SYSTEM_PYTHON,
    output_limit,
    read_results,
    result_of,
    run_env,
    scope_of,
    supervised,
)
from cascade.sandbox.oracle import observe
from cascade.sandbox.places import Layout, RunPlaces, system_sitecustomize
from cascade.sandbox.process import DEFAULT_PATH, OUTPUT_LIMIT
from cascade.sandbox.records import LIMIT_NAMES, docker_effects
from cascade.sandbox.strace import traced

DEFAULT_IMAGE = "cascade-base:bookworm"
SANDBOX_HOME = "/home/dev"
# Paths Docker itself writes into every container (the init binary, name resolution files): not the run's doing.
DOCKER_OWN_PATHS = ["/usr/sbin/docker-init", "/etc/hosts", "/etc/hostname", "/etc/resolv.conf", "/dev", "/proc", "/sys"]
NOBODY = 65534  # the unprivileged uid/gid the container runs as when the worktree belongs to root
PING_TIMEOUT_SECONDS = 5
# The image's own system: a read-only path in (or equal to) one of these trees is never bind-mounted.
SYSTEM_TREES = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/boot", "/dev", "/proc",
                "/sys", "/run")  # fmt: skip
# Whole top-level directories the image has: binding one would hide the image's content (deeper paths are fine).
IMAGE_DIRS = ("/", "/var", "/opt", "/home", "/root", "/srv", "/mnt", "/media", "/tmp")
IMAGE_HINT = (
    "docker/make-base-image.sh gives /usr/bin/python3 and /usr/bin/python3.9; rebuild an older image with "
    "CASCADE_BASE_REBUILD=1, or use an interpreter outside /usr"
)
MESSAGE_CHARS = 300
# With ``init`` Docker's init (tini) execs the command; when that fails it says so and exits 127.
INIT_EXEC_FAILURE = re.compile(r"\[FATAL tini \(\d+\)\] exec .* failed: .*")
SUPERVISOR_EXEC_FAILURE = re.compile(r"cascade supervisor: cannot run .*")
EXEC_FAILED_EXIT = 127
IMAGE_STRACE = "/usr/bin/strace"
STRACE_HINT = "docker/make-base-image.sh installs it; rebuild an older image with CASCADE_BASE_REBUILD=1"


class DockerSandbox:
    isolated_network = True

    def __init__(self, image: str | None = None) -> None:
        self.image = image or DEFAULT_IMAGE

    @property
    def isolation(self) -> Isolation:
        return "docker"

    def client(self) -> docker.DockerClient:
        return docker.from_env(timeout=PING_TIMEOUT_SECONDS)

    def available(self) -> str | None:
        try:
            client = self.client()
            client.ping()
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
            return f"the docker engine does not answer ({type(exc).__name__})"
        try:
            client.images.get(self.image)
        except docker.errors.ImageNotFound:
            return f"image {self.image} not found (build it with docker/make-base-image.sh)"
        except docker.errors.APIError as exc:
            return f"docker image lookup failed: {exc.explanation or exc}"
        return probe_image_strace(self.image)

    def layout(self, spec: RunSpec) -> Layout:
        return Layout(tree=f"{TREE_ROOT}/{spec.tree_name}", home=SANDBOX_HOME, tmp="/tmp", results=RESULTS_MOUNT,
                      hook=HOOK_MOUNT, audit=AUDIT_MOUNT, objects=OBJECTS_MOUNT)  # fmt: skip

    def run(self, spec: RunSpec) -> RunResult:
        read_only = bound_read_only_paths(spec.read_only_paths)
        places = RunPlaces(spec, self.layout(spec), mounts=read_only)
        owner = os.stat(places.tree)
        user = (owner.st_uid, owner.st_gid) if owner.st_uid != 0 else (NOBODY, NOBODY)
        try:
            if user != (owner.st_uid, owner.st_gid):
                places.lend_to(*user)  # a root-owned copy is lent to the unprivileged user (it is thrown away)
            return self._run(spec, places, user, read_only)
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
            raise ToolUnavailable(self.failure_message(spec, exc)) from None
        finally:
            places.cleanup()

    def failure_message(self, spec: RunSpec, exc: Exception) -> str:
        """One line: what failed and what to do about it."""
        detail = one_line(exc)
        if "exec:" not in detail and "executable file not found" not in detail:
            return f"docker engine error ({type(exc).__name__}): {detail[:MESSAGE_CHARS]}"
        return self.start_failure(spec, detail[detail.find("exec:") :] if "exec:" in detail else detail)

    def start_failure(self, spec: RunSpec, detail: str) -> str:
        """The command never ran: usually the interpreter a venv points to is not in the image."""
        program = spec.argv[0] if spec.argv else "?"
        target = os.path.realpath(program)
        if target != program and is_image_provided(target):
            why = f"it runs {target}, which the image must provide"
        else:
            why = "no such program in the image or its mounts"
        return f"docker could not start {program!r} in image {self.image}: {why} ({IMAGE_HINT}); {detail[:200]}"

    def _run(self, spec: RunSpec, places: RunPlaces, user: tuple[int, int], read_only: list[str]) -> RunResult:
        env, dropped = run_env(spec, places.layout)
        env["PATH"] = spec.env.get("PATH", DEFAULT_PATH)  # the image's PATH, not the host's
        client = docker.from_env(timeout=max(60, int(spec.timeout_seconds) + 30))
        start = time.monotonic()
        # strace inside the container (a host process cannot trace what the engine starts), around the supervisor:
        # the witness outside the run's processes, into an append-only channel (strace.py, channel.py).
        argv = traced(supervised(SYSTEM_PYTHON, places.layout, spec.argv), places.open_trace_channel(),
                      IMAGE_STRACE)  # fmt: skip
        container: Container = client.containers.create(
            self.image, argv, **self.container_options(spec, places, env, user, read_only)
        )
        try:
            output = StreamedOutput(container)
            container.start()
            exit_code, timed_out = wait_or_kill(container, spec.timeout_seconds)
            seconds = round(time.monotonic() - start, 3)
            stdout, stderr = output.texts()
            ignored = [
                TREE_ROOT,
                GATE_ROOT,
                *read_only,
                "/tmp",
                SANDBOX_HOME,
                *DOCKER_OWN_PATHS,
                *system_sitecustomize(),
            ]
            extra = [*docker_effects(container.diff() or [], ignored), *oom_killed(container),
                     *output_limit(spec, output.total)]  # fmt: skip
            failure = INIT_EXEC_FAILURE.search(stderr) or SUPERVISOR_EXEC_FAILURE.search(stderr)
            init_failure = failure if exit_code == EXEC_FAILED_EXIT else None
            scope = scope_of(places, read_only, self.isolated_network)
            seen = observe(places, scope, timed_out, stdout, stderr, read_results(places))
            seen.effects += extra
            if init_failure and not seen.effects:
                # Docker's init could not exec the command, so nothing of the run happened. (A command that prints
                # the same line after doing something has effects and is judged on them like any other run.)
                raise ToolUnavailable(self.start_failure(spec, init_failure.group(0)))
            return result_of("docker", spec, places, seen, exit_code=None if timed_out else exit_code,
                             timed_out=timed_out, seconds=seconds, dropped_env=dropped)  # fmt: skip
        finally:
            with contextlib.suppress(docker.errors.DockerException):
                container.remove(force=True)

    def container_options(
        self, spec: RunSpec, places: RunPlaces, env: dict[str, str], user: tuple[int, int], read_only: list[str]
    ) -> dict[str, Any]:
        layout = places.layout
        volumes: dict[str, dict[str, str]] = {
            str(places.tmp): {"bind": "/tmp", "mode": "rw"},
            str(places.home): {"bind": SANDBOX_HOME, "mode": "rw"},
            str(places.shm): {"bind": "/dev/shm", "mode": "rw"},  # replaces the container's own, so it can be diffed
            str(places.tree): {"bind": layout.tree, "mode": "rw"},
            str(places.hook): {"bind": layout.hook, "mode": "ro"},
            str(places.audit): {"bind": layout.audit, "mode": "ro"},  # its FIFOs stay writable, nothing else
            str(places.results): {"bind": layout.results, "mode": "rw"},
        }
        if (places.tree / ".git").is_dir():
            volumes[str(places.tree / ".git")] = {"bind": f"{layout.tree}/.git", "mode": "ro"}
        if places.skeleton is not None:
            volumes[places.skeleton.objects] = {"bind": layout.objects, "mode": "ro"}
        for path in read_only:
            volumes[path] = {"bind": path, "mode": "ro"}
        # the hook in a system Python started without PYTHONPATH too (one source mounted at several places)
        hook_file = str(places.hook / "sitecustomize.py")
        mounts = [Mount(target=site, source=hook_file, type="bind", read_only=True) for site in system_sitecustomize()]
        mib = 1024 * 1024
        return {
            "user": f"{user[0]}:{user[1]}",
            "working_dir": layout.tree,
            "environment": env,
            "volumes": volumes,
            "mounts": mounts,
            "hostname": socket.gethostname(),
            "network_disabled": True,
            "cap_drop": ["ALL"],
            "security_opt": ["no-new-privileges"],
            "mem_limit": spec.memory_mb * mib,
            "memswap_limit": spec.memory_mb * mib,
            "pids_limit": spec.pids,
            "ulimits": [
                Ulimit(name="cpu", soft=spec.cpu_seconds, hard=spec.cpu_seconds + 5),
                Ulimit(name="fsize", soft=spec.file_size_mb * mib, hard=spec.file_size_mb * mib),
                Ulimit(name="core", soft=0, hard=0),
            ],
            "log_config": LogConfig(type="none"),  # output is streamed by StreamedOutput; the engine keeps none
            "init": True,  # a real pid 1 reaps orphans, so a fork storm cannot fill the table with zombies
            "detach": True,
        }


class StreamedOutput:
    """The container's stdout and stderr, attached before it starts and drained on a thread: the last
    ``OUTPUT_LIMIT`` bytes of each are kept, the rest only counted."""

    def __init__(self, container: Container) -> None:
        self.total = 0
        self._tails = {True: bytearray(), False: bytearray()}
        self._stream = container.attach(stdout=True, stderr=True, stream=True, logs=False, demux=True)
        self._thread = threading.Thread(target=self._drain, name="cascade-docker-output", daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        with contextlib.suppress(docker.errors.DockerException, requests.exceptions.RequestException, OSError,
                                 ValueError):  # fmt: skip
            for out, err in self._stream:
                for is_out, chunk in ((True, out), (False, err)):
                    if chunk:
                        self.total += len(chunk)
                        tail = self._tails[is_out]
                        tail += chunk
                        if len(tail) > 2 * OUTPUT_LIMIT:
                            del tail[: len(tail) - OUTPUT_LIMIT]

    def texts(self, wait: float = 10.0) -> tuple[str, str]:
        self._thread.join(wait)
        return tuple(bytes(self._tails[k][-OUTPUT_LIMIT:]).decode("utf-8", "replace") for k in (True, False))  # type: ignore[return-value]


@functools.lru_cache(maxsize=8)
def probe_image_strace(image: str) -> str | None:
    """None when strace traces in the image as the sandbox runs it (unprivileged, no capabilities); else why not."""
    options: dict[str, Any] = {"user": f"{NOBODY}:{NOBODY}", "network_disabled": True, "cap_drop": ["ALL"],
                               "security_opt": ["no-new-privileges"], "remove": True, "stderr": True}  # fmt: skip
    try:
        docker.from_env(timeout=60).containers.run(image, traced(["true"], "/dev/null", IMAGE_STRACE), **options)
    except docker.errors.ContainerError as exc:
        return f"strace cannot trace in image {image}: {one_line(exc)[:MESSAGE_CHARS]}"
    except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        return (f"image {image} has no working {IMAGE_STRACE}: the docker backend records refused writes of "
                f"non-Python programs with it ({one_line(exc)[:200]}; {STRACE_HINT})")  # fmt: skip
    return None


def oom_killed(container: Container) -> list[SideEffect]:
    """Docker's own record of a memory-cgroup OOM kill in the container (the supervisor may have been the victim)."""
    with contextlib.suppress(docker.errors.DockerException, requests.exceptions.RequestException):
        container.reload()
        if container.attrs.get("State", {}).get("OOMKilled"):
            return [
                SideEffect(
                    kind="resource_limit",
                    target="memory",
                    source="docker_state",
                    detail=f"{LIMIT_NAMES['memory']}: the engine reports the container OOM-killed",
                )
            ]
    return []


def is_image_provided(path: str) -> bool:
    """True for a path the container takes from its image: inside a system tree, or a whole top-level directory.
    Checked on the path as given and with symlinks resolved (/lib is a link to /usr/lib on merged-/usr systems)."""
    for candidate in {os.path.normpath(path), os.path.realpath(path)}:
        if candidate in IMAGE_DIRS or any(candidate == t or candidate.startswith(t + "/") for t in SYSTEM_TREES):
            return True
    return False


def bound_read_only_paths(paths: list[str]) -> list[str]:
    """The requested read-only paths that are bind-mounted: existing ones (Docker would create a missing source
    directory on the host), outside the image's own system, without duplicates."""
    bound: list[str] = []
    for path in paths:
        if os.path.exists(path) and not is_image_provided(path) and path not in bound:
            bound.append(path)
    return bound


def one_line(exc: Exception) -> str:
    """An exception as one short line (Docker's explanation when the API gave one)."""
    text = exc.explanation if isinstance(exc, docker.errors.APIError) and exc.explanation else str(exc)
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


def wait_or_kill(container: Container, timeout: float) -> tuple[int | None, bool]:
    """(exit code, timed out). On timeout the whole container (every process in it) is killed."""
    try:
        status = container.wait(timeout=timeout)
        return int(status.get("StatusCode", -1)), False
    except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError):
        with contextlib.suppress(docker.errors.DockerException):
            container.kill()
        with contextlib.suppress(docker.errors.DockerException, requests.exceptions.RequestException):
            container.wait(timeout=30)
        return None, True
