"""The `docker` backend: a throw-away container of a locally built image (no registry is reachable; see
docker/make-base-image.sh) with no network, no capabilities, ``no-new-privileges``, memory/pids/CPU/file-size
limits and a non-root user. The worktree is bind-mounted at its host path; HOME and /tmp are private host
directories (diffed afterwards like bwrap's), and ``container.diff()`` records every other change to the
container's filesystem as side-effect evidence."""

from __future__ import annotations

import contextlib
import os
import time
from typing import Any

import docker.errors
import requests.exceptions
from docker.models.containers import Container
from docker.types import Ulimit

import docker
from cascade.sandbox.base import Isolation, RunResult, RunSpec
from cascade.sandbox.host import AUDIT_MOUNT, HOOK_MOUNT, audit_env
from cascade.sandbox.oracle import AUDIT_FILE, AUDIT_HOOK_DIR, PrivateDirs, deduplicate, docker_effects
from cascade.sandbox.process import DEFAULT_PATH, OUTPUT_LIMIT, scrubbed_env

DEFAULT_IMAGE = "cascade-base:bookworm"
SANDBOX_HOME = "/home/sandbox"
# Paths Docker itself writes into every container (the init binary, name resolution files): not the run's doing.
DOCKER_OWN_PATHS = ["/usr/sbin/docker-init", "/etc/hosts", "/etc/hostname", "/etc/resolv.conf", "/dev", "/proc", "/sys"]
NOBODY = 65534  # the unprivileged uid/gid the container runs as when the worktree belongs to root
PING_TIMEOUT_SECONDS = 5


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
        return None

    def run(self, spec: RunSpec) -> RunResult:
        mounts = [spec.worktree, *spec.read_only_paths, HOOK_MOUNT, AUDIT_MOUNT]
        dirs = PrivateDirs(spec.worktree, mounts, home_in_sandbox=SANDBOX_HOME, tmp_in_sandbox="/tmp")
        owner = os.stat(spec.worktree)
        user = (owner.st_uid, owner.st_gid) if owner.st_uid != 0 else (NOBODY, NOBODY)
        try:
            if user != (owner.st_uid, owner.st_gid):
                chown_tree(spec.worktree, *user)  # a root-owned worktree is lent to the unprivileged user
            return self._run(spec, dirs, user)
        finally:
            if user != (owner.st_uid, owner.st_gid):
                chown_tree(spec.worktree, owner.st_uid, owner.st_gid)
            dirs.cleanup()

    def _run(self, spec: RunSpec, dirs: PrivateDirs, user: tuple[int, int]) -> RunResult:
        env, dropped = scrubbed_env(spec.env, SANDBOX_HOME, "/tmp")
        env["PATH"] = spec.env.get("PATH", DEFAULT_PATH)  # the image's PATH, not the host's
        env = audit_env(env, HOOK_MOUNT, f"{AUDIT_MOUNT}/{AUDIT_FILE}", [spec.worktree, "/tmp"])
        client = docker.from_env(timeout=max(60, int(spec.timeout_seconds) + 30))
        start = time.monotonic()
        container: Container = client.containers.create(
            self.image, spec.argv, **self.container_options(spec, dirs, env, user)
        )
        try:
            container.start()
            exit_code, timed_out = wait_or_kill(container, spec.timeout_seconds)
            seconds = round(time.monotonic() - start, 3)
            ignored = [spec.worktree, *spec.read_only_paths, "/tmp", SANDBOX_HOME, *DOCKER_OWN_PATHS]
            effects = [
                *dirs.side_effects(self.isolated_network, spec.worktree),
                *docker_effects(container.diff() or [], ignored),
            ]
            return RunResult(
                isolation="docker",
                argv=list(spec.argv),
                exit_code=None if timed_out else exit_code,
                timed_out=timed_out,
                stdout=logs(container, stdout=True),
                stderr=logs(container, stdout=False),
                seconds=seconds,
                side_effects=deduplicate(effects),
                dropped_env=dropped,
            )
        finally:
            with contextlib.suppress(docker.errors.DockerException):
                container.remove(force=True)

    def container_options(
        self, spec: RunSpec, dirs: PrivateDirs, env: dict[str, str], user: tuple[int, int]
    ) -> dict[str, Any]:
        volumes: dict[str, dict[str, str]] = {
            str(dirs.tmp): {"bind": "/tmp", "mode": "rw"},
            str(dirs.home): {"bind": SANDBOX_HOME, "mode": "rw"},
            str(AUDIT_HOOK_DIR): {"bind": HOOK_MOUNT, "mode": "ro"},
            str(dirs.audit): {"bind": AUDIT_MOUNT, "mode": "rw"},
            spec.worktree: {"bind": spec.worktree, "mode": "rw"},
        }
        for path in spec.read_only_paths:
            volumes[path] = {"bind": path, "mode": "ro"}
        mib = 1024 * 1024
        return {
            "user": f"{user[0]}:{user[1]}",
            "working_dir": spec.worktree,
            "environment": env,
            "volumes": volumes,
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
            "init": True,  # a real pid 1 reaps orphans, so a fork storm cannot fill the table with zombies
            "detach": True,
        }


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


def logs(container: Container, stdout: bool) -> str:
    raw = container.logs(stdout=stdout, stderr=not stdout)
    return raw.decode("utf-8", errors="replace")[-OUTPUT_LIMIT:]


def chown_tree(root: str, uid: int, gid: int) -> None:
    """chown without following symlinks (a link in the tree must not hand out a file outside it)."""
    os.lchown(root, uid, gid)
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames]:
            with contextlib.suppress(FileNotFoundError):
                os.lchown(os.path.join(dirpath, name), uid, gid)
