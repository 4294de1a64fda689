"""Choose the sandbox backend from config: ``auto`` = bwrap if it works here, else docker if the engine answers,
else a clear error. ``none`` is used only when configured explicitly — never as a silent fallback."""

from __future__ import annotations

from cascade.config import SandboxConfig
from cascade.errors import ToolUnavailable
from cascade.sandbox.base import RunSpec, Sandbox
from cascade.sandbox.bwrap import BwrapSandbox
from cascade.sandbox.docker import DockerSandbox
from cascade.sandbox.none import NoSandbox

INSTALL_HINT = (
    "; Stage 2 runs tests only in a sandbox: install bubblewrap and strace (Debian/Ubuntu: apt-get install "
    "bubblewrap strace) or start a Docker engine (README, 'Set up')"
)


def get_sandbox(config: SandboxConfig) -> Sandbox:
    """The configured backend, checked to work; raises ToolUnavailable with the reason(s) otherwise."""
    if config.backend == "none":
        return NoSandbox()
    candidates: list[Sandbox] = []
    if config.backend in ("auto", "bwrap"):
        candidates.append(BwrapSandbox())
    if config.backend in ("auto", "docker"):
        candidates.append(DockerSandbox(image=config.docker_image))
    reasons: list[str] = []
    for sandbox in candidates:
        reason = sandbox.available()
        if reason is None:
            return sandbox
        reasons.append(f"{sandbox.isolation}: {reason}")
    hint = INSTALL_HINT if config.backend != "none" else ""
    if config.backend == "auto":
        hint += " (or set sandbox.backend: none to run unprotected, explicitly)"
    raise ToolUnavailable("no sandbox available — " + "; ".join(reasons) + hint)


def run_spec(config: SandboxConfig, argv: list[str], worktree: str, **overrides: object) -> RunSpec:
    """A RunSpec carrying the configured limits; keyword overrides (env, read_only_paths, timeout_seconds…) win."""
    limits: dict[str, object] = {
        "memory_mb": config.memory_mb,
        "cpu_seconds": config.cpu_seconds,
        "file_size_mb": config.file_size_mb,
        "pids": config.pids,
        "timeout_seconds": config.timeout_seconds,
    }
    return RunSpec.model_validate({"argv": argv, "worktree": worktree, **limits, **overrides})
