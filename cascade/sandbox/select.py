"""The sandbox backends by name, and choosing one from config: ``auto`` = the isolating backends in registry order
(bwrap if it works here, else docker if the engine answers), else a clear error. ``none`` is used only when
configured explicitly — never as a silent fallback. `BACKENDS` is the one list of names: the config's
``sandbox.backend``, the red-team suite's ``--backend`` and its default backends derive from it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cascade.config import SandboxConfig
from cascade.errors import BadInput, ToolUnavailable
from cascade.sandbox.base import RunSpec, Sandbox

INSTALL_HINT = (
    "; Stage 2 runs tests only in a sandbox: install bubblewrap and strace (Debian/Ubuntu: apt-get install "
    "bubblewrap strace) or start a Docker engine (README, 'Set up')"
)
AUTO = "auto"


@dataclass(frozen=True)
class Backend:
    """A registered backend: how to build it, and what it can do."""

    make: Callable[[SandboxConfig], Sandbox]
    isolating: bool  # protects the host: ``auto`` tries these, the red-team suite runs its unsafe cases on them
    host_interpreter: bool  # can run an interpreter of the host's file system (a container cannot)


def _bwrap(config: SandboxConfig) -> Sandbox:
    from cascade.sandbox.bwrap import BwrapSandbox  # each backend loads when chosen: the CLI's choices need names only

    return BwrapSandbox()


def _docker(config: SandboxConfig) -> Sandbox:
    from cascade.sandbox.docker import DockerSandbox

    return DockerSandbox(image=config.docker_image)


def _none(config: SandboxConfig) -> Sandbox:
    from cascade.sandbox.none import NoSandbox

    return NoSandbox()


BACKENDS: dict[str, Backend] = {
    "bwrap": Backend(_bwrap, isolating=True, host_interpreter=True),
    "docker": Backend(_docker, isolating=True, host_interpreter=False),
    "none": Backend(_none, isolating=False, host_interpreter=True),
}


def backend_choices() -> list[str]:
    """What ``sandbox.backend`` may say."""
    return [AUTO, *BACKENDS]


def isolating_backends() -> list[str]:
    """The backends that protect the host, in the order ``auto`` tries them."""
    return [name for name, backend in BACKENDS.items() if backend.isolating]


def get_sandbox(config: SandboxConfig) -> Sandbox:
    """The configured backend, checked to work; raises ToolUnavailable with the reason(s) otherwise."""
    if config.backend != AUTO and config.backend not in BACKENDS:
        raise BadInput(f"unknown sandbox backend {config.backend!r}; known: {', '.join(backend_choices())}")
    names = isolating_backends() if config.backend == AUTO else [config.backend]
    reasons: list[str] = []
    for name in names:
        sandbox = BACKENDS[name].make(config)
        reason = sandbox.available()
        if reason is None:
            return sandbox
        reasons.append(f"{sandbox.isolation}: {reason}")
    hint = INSTALL_HINT
    if config.backend == AUTO:
        hint += " (or set sandbox.backend: none to run unprotected, explicitly)"
    raise ToolUnavailable("no sandbox available — " + "; ".join(reasons) + hint)


def run_spec(config: SandboxConfig, argv: list[str], tree: str, **overrides: object) -> RunSpec:
    """A RunSpec carrying the configured limits; keyword overrides (env, read_only_paths, timeout_seconds…) win."""
    limits: dict[str, object] = {
        "memory_mb": config.memory_mb,
        "cpu_seconds": config.cpu_seconds,
        "file_size_mb": config.file_size_mb,
        "pids": config.pids,
        "timeout_seconds": config.timeout_seconds,
        "disk_mb": config.disk_mb,
        "inodes": config.inodes,
        "output_cap_mb": config.output_mb,
    }
    return RunSpec.model_validate({"argv": argv, "tree": tree, **limits, **overrides})
