"""The `Sandbox` protocol: every backend (bwrap, docker, none) is one small module implementing it."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from cascade.safety import SideEffect

Isolation = str  # the backend's registered name (cascade/sandbox/select.py, BACKENDS)


class RunSpec(BaseModel):
    """One command to run untrusted code. The worktree is the only writable place that outlives the run."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    argv: list[str]
    worktree: str = Field(description="Absolute path of the tree the command runs in (its cwd), writable.")
    env: dict[str, str] = Field(default_factory=dict, description="Extra variables; the base env is scrubbed.")
    read_only_paths: list[str] = Field(
        default_factory=list, description="Extra host paths to expose read-only (e.g. a cached venv)."
    )
    timeout_seconds: float = 300
    memory_mb: int = 2048
    cpu_seconds: int = 300
    file_size_mb: int = 512
    pids: int = 256


class RunResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    isolation: Isolation
    argv: list[str]
    exit_code: int | None = Field(description="None when the run was killed (timeout).")
    timed_out: bool = False
    stdout: str = ""
    stderr: str = ""
    seconds: float = 0.0
    side_effects: list[SideEffect] = Field(default_factory=list)
    dropped_env: list[str] = Field(
        default_factory=list, description="Names of requested variables withheld because they look like secrets."
    )

    @property
    def harmful_side_effects(self) -> list[SideEffect]:
        """The effects that are a reason to reject: everything not marked benign."""
        return [effect for effect in self.side_effects if not effect.benign]


@runtime_checkable
class Sandbox(Protocol):
    """Runs untrusted commands with no network, no secrets, resource limits, and side-effect recording."""

    @property
    def isolation(self) -> Isolation:
        """Backend name recorded in every result (``none`` means the host was not protected)."""
        ...

    def available(self) -> str | None:
        """None when the backend works on this machine; otherwise a one-line reason why not."""
        ...

    def run(self, spec: RunSpec) -> RunResult:
        """Run ``spec.argv`` in ``spec.worktree``; never raises for the command's own failure or timeout."""
        ...
