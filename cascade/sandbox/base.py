"""The `Sandbox` protocol: every backend (bwrap, docker, none) is one small module implementing it."""

from __future__ import annotations

from typing import Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from cascade.safety import SideEffect
from cascade.sandbox.safefs import ReadBack

Isolation = str  # the backend's registered name (cascade/sandbox/select.py, BACKENDS)
# Where argv and env name the run's places: each backend shows them at its own paths (docs/architecture.md, "Run
# model"), so a caller writes these tokens and the backend substitutes them.
TREE = "@tree@"
RESULTS = "@results@"
HOOK = "@hook@"


class RunSpec(BaseModel):
    """One command to run untrusted code, in a fresh copy of ``tree`` that is thrown away afterwards."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    argv: list[str] = Field(description="The command; @tree@, @results@ and @hook@ name the run's places.")
    tree: str = Field(default="", description="The pristine tree the run gets a fresh copy of (never written).")
    tree_name: str = Field(default="project", description="The copy's directory name as the run sees it.")
    place: dict[str, str] = Field(
        default_factory=dict, description="Files written into the run's copy before it starts (path → text)."
    )
    results: list[str] = Field(
        default_factory=list, description="Names of the report files the run writes into @results@, read back."
    )
    env: dict[str, str] = Field(default_factory=dict, description="Extra variables; the base env is scrubbed.")
    read_only_paths: list[str] = Field(
        default_factory=list, description="Extra host paths to expose read-only (e.g. a cached venv)."
    )
    timeout_seconds: float = 300
    memory_mb: int = 2048
    cpu_seconds: int = 300
    file_size_mb: int = 512
    pids: int = 256
    disk_mb: int = Field(default=2048, description="Disk quota of the run's places beyond the tree's copy.")
    inodes: int = Field(default=200_000, description="Inode quota of the run's places beyond the tree's copy.")
    result_cap_mb: int = Field(default=64, description="Largest report file read back.")
    output_cap_mb: int = Field(default=64, description="Captured stdout+stderr; more is a resource_limit record.")


class RunnerRecord(BaseModel):
    """What the test runner's gate plugin reported into the append-only channel (one test phase, a collection
    error, the session's start and finish); ``t`` is wall-clock time, for attribution."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    event: Literal["runner", "test_begin", "test_end", "outcome", "collect", "collect_error"]
    t: float = 0.0
    pid: int = 0
    phase: str = ""
    nodeid: str = ""
    when: str = ""
    outcome: str = ""
    wasxfail: bool = False
    raw: str | None = None
    assertion: bool = False
    message: str = ""
    excerpt: str = ""
    exitstatus: int | None = None


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
    reports: list[RunnerRecord] = Field(default_factory=list, description="The test runner's channel records.")
    results: list[ReadBack] = Field(default_factory=list, description="The report files read back (RunSpec).")
    tree: str = Field(default="", description="Where the run saw its tree (paths in its reports start there).")
    notes: list[str] = Field(default_factory=list, description="How this run was weaker than asked (never silent).")

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
