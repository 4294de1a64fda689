"""Where the benchmark's traces run: one ``Executor`` protocol, one small module per implementation.

- ``local`` (``executors/local.py``): a process pool on this machine (``--jobs N``), the default.
- ``ray`` (``executors/ray.py``): one Ray task per trace on a Ray cluster (``pip install 'cascade-gate[ray]'``).

The runner plans the jobs (skipping rows already in ``results.jsonl``) and writes each row the executor hands back;
an executor only decides where ``runner.run_trace`` runs. Both hand back the same rows (timings aside).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from cascade.bench.arms import Arm
from cascade.bench.rows import TraceJob, TraceRow
from cascade.config import CascadeConfig

Planned = tuple[TraceJob, Arm]
RowSink = Callable[[TraceRow], None]
MAX_ATTEMPTS = 2  # a trace whose worker died is run once more (in a fresh process), then recorded as an error row


class Executor(Protocol):
    @property
    def name(self) -> str:
        """``local`` or ``ray``: written into the run summary."""
        ...

    def run(self, planned: Sequence[Planned], on_row: RowSink) -> None:
        """Run every planned job and call ``on_row`` exactly once per job, from the calling thread, as rows finish.

        A job whose worker dies is retried once, then handed back as an error row: no job is ever dropped. On
        Ctrl-C the executor stops queued jobs, hands back the rows that did finish and re-raises
        ``KeyboardInterrupt`` (a re-run resumes from the rows on disk).
        """
        ...


class RepoSource(BaseModel):
    """Where a worker finds a repository the driver could not hand it (``--clone`` into a node-local cache)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    repos_dir: str | None = None
    cache_dir: str | None = None
    clone: bool = False
    url_template: str = "https://github.com/{repo}.git"


class ExecutorSpec(BaseModel):
    """The ``--executor``/``--jobs``/``--ray-address`` choice, as plain data."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["local", "ray"] = "local"
    jobs: int = Field(default=1, ge=1, description="local: worker processes; ray: CPUs of a Ray this run starts")
    ray_address: str = Field(default="", description="'' = start a local Ray; 'auto'; 'ray://host:10001'; host:port")
    repos: RepoSource | None = Field(default=None, description="ray: resolve (or clone) repositories on the node")


class TaskResources(BaseModel):
    """What one trace asks of the node that runs it (Ray's logical resources)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cpus: float = Field(default=1.0, gt=0)
    memory_mb: int = Field(default=1024, gt=0)


BASE_RESOURCES = TaskResources(cpus=1.0, memory_mb=1024)  # git worktrees, ruff, pyright (node) on two trees


def arm_resources(arm: Arm, config: CascadeConfig) -> TaskResources:
    """The arm's request: its own ``resources(config)`` when it has one, else derived from its stages.

    An arm with a sandboxed test stage asks for two CPUs (package installs and the suite run beside the static
    tools) and the sandbox's memory cap on top of the base request.
    """
    own = getattr(arm, "resources", None)
    if callable(own):
        requested = own(config)
        if isinstance(requested, TaskResources):
            return requested
    try:
        sandboxed = any(stage.needs_sandbox for stage in arm.stages(config))
    except Exception:  # an arm that cannot build its stages fails in its trace, where it becomes an error row
        return BASE_RESOURCES
    if sandboxed:
        return TaskResources(cpus=2.0, memory_mb=BASE_RESOURCES.memory_mb + config.sandbox.memory_mb)
    return BASE_RESOURCES


def make_executor(spec: ExecutorSpec) -> Executor:
    """The executor for ``spec``; ``ray`` without Ray installed is bad input (exit 3) naming the extra."""
    if spec.kind == "ray":
        from cascade.bench.executors.ray import RayExecutor

        return RayExecutor(spec)
    from cascade.bench.executors.local import LocalExecutor

    return LocalExecutor(spec.jobs)
