"""The Ray executor: one Ray task per trace, on a running cluster or on a local Ray this run starts.

- ``--ray-address ''`` starts a local, loopback-only Ray with ``--jobs`` CPUs and stops it at the end; ``auto`` joins
  the cluster of this node (``ray start``); ``ray://host:10001`` goes through Ray Client; ``host:port`` joins a GCS.
- Each task asks for the CPUs and memory of its arm (``arm_resources``: Stage-2 arms ask for more).
- Rows stream back in completion order (``ray.wait``), at most ``WINDOW`` tasks in flight, so the driver's memory
  and a Ctrl-C stay bounded on runs of thousands of traces while an autoscaler still sees enough pending work.
- A task whose worker process or node dies is retried once by Ray (``max_retries=1``), then becomes an error row.
- Repositories: ``--repos-dir`` on a path every node mounts (the driver's resolution travels with the job), or
  ``--clone``: a node that lacks the driver's path resolves the repository itself into its own ``--cache-dir``.

Ray is an optional dependency (``pip install 'cascade-gate[ray]'``); it is imported only when this executor runs.
"""

from __future__ import annotations

import fcntl
import importlib.util
import logging
import os
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import cascade
from cascade.bench.arms import Arm
from cascade.bench.executors import (
    MAX_ATTEMPTS,
    ExecutorSpec,
    Planned,
    RepoSource,
    RowSink,
    TaskResources,
    arm_resources,
)
from cascade.bench.repos import RepoResolver
from cascade.bench.rows import TraceJob, TraceRow, TraceStatus
from cascade.bench.worker import died_row, failed_row, run_trace
from cascade.errors import BadInput

INSTALL_HINT = "--executor ray needs Ray, which is not installed: pip install 'cascade-gate[ray]'"
WINDOW = 512  # tasks in flight at once
CANCEL_GRACE_SECONDS = 30.0  # on Ctrl-C, how long cancelled traces get to unwind (their worktrees are removed)
WORKER_DIED = "Ray worker or node died (killed, out of memory or lost)"
# A Ray this run starts serves this run alone: loopback only (Ray's single-host mode), no usage reporting.
LOCAL_RAY_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0"}
LOCAL_OBJECT_STORE_BYTES = 256 * 2**20  # rows and jobs are kilobytes; the default would reserve 30% of RAM


class RayExecutor:
    name = "ray"

    def __init__(self, spec: ExecutorSpec) -> None:
        if importlib.util.find_spec("ray") is None:
            raise BadInput(INSTALL_HINT)
        self.spec = spec

    def run(self, planned: Sequence[Planned], on_row: RowSink) -> None:
        if not planned:
            return
        with _connected(self.spec) as ray:
            remote = ray.remote(_replay)
            ceiling = _largest_node(ray)
            requests: dict[str, TaskResources] = {}
            queue = deque(planned)
            flying: dict[Any, TraceJob] = {}
            try:
                while queue or flying:
                    while queue and len(flying) < WINDOW:
                        job, arm = queue.popleft()
                        if job.arm not in requests:
                            requests[job.arm] = _fit(arm_resources(arm, job.config), ceiling)
                        flying[self._submit(remote, job, arm, requests[job.arm])] = job
                    done, _ = ray.wait(list(flying), num_returns=1)
                    for ref in done:
                        on_row(_row_of(ray, ref, flying.pop(ref)))
            except KeyboardInterrupt:
                _stop(ray, flying, on_row)
                raise

    def _submit(self, remote: Any, job: TraceJob, arm: Arm, need: TaskResources) -> Any:
        options = remote.options(
            num_cpus=need.cpus,
            memory=need.memory_mb * 2**20,
            max_retries=MAX_ATTEMPTS - 1,  # system failures only (a dead worker or node), never a trace's own error
            retry_exceptions=False,
            name=f"cascade:{job.case.instance_id}:{job.arm}",
        )
        return options.remote(_portable(job), arm, self.spec.repos)


# --- on the worker -----------------------------------------------------------------------------------------


def _replay(job: TraceJob, arm: Arm, source: RepoSource | None) -> TraceRow:
    """The Ray task: find the repository on this node, then review the trace exactly as the local executor does."""
    return run_trace(_on_this_node(job, source), arm)


def _on_this_node(job: TraceJob, source: RepoSource | None) -> TraceJob:
    """The job with a repository path that exists here: the driver's (a shared mount), or this node's own clone."""
    if job.repo_path is not None and Path(job.repo_path).is_dir():
        return job
    if source is None or not (source.repos_dir or source.clone):
        return job
    resolver = RepoResolver(source.repos_dir, source.cache_dir, clone=source.clone, url_template=source.url_template)
    with _node_lock(source.cache_dir, job.case.repo):  # two tasks on one node must not clone the same repo at once
        location = resolver.resolve(job.case.repo)
    return job.model_copy(update={"repo_path": location.path, "repo_note": location.note})


@contextmanager
def _node_lock(cache_dir: str | None, repo: str) -> Iterator[None]:
    if cache_dir is None:
        yield
        return
    Path(cache_dir).mkdir(parents=True, exist_ok=True)
    with (Path(cache_dir) / f".{repo.replace('/', '__')}.lock").open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


# --- on the driver -----------------------------------------------------------------------------------------


def _portable(job: TraceJob) -> TraceJob:
    """Absolute paths: a worker's working directory is not the driver's."""
    case = job.case
    trace_path = os.path.abspath(case.trace_path) if case.trace_path else None
    return job.model_copy(
        update={
            "repo_path": os.path.abspath(job.repo_path) if job.repo_path else None,
            "case": case.model_copy(update={"trace_path": trace_path}),
        }
    )


def _row_of(ray: ModuleType, ref: Any, job: TraceJob) -> TraceRow:
    """The task's row; a task that produced none still yields exactly one row for its job."""
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as exc:  # raised past run_trace's own handler (e.g. an unpicklable arm)
        cause = exc.cause if exc.cause is not None else exc
        return failed_row(job, TraceStatus.ERROR, f"{type(cause).__name__}: {cause}")
    except ray.exceptions.RayError as exc:  # worker crashed, node died, out of memory, object lost: after the retry
        return died_row(job, f"{WORKER_DIED}: {type(exc).__name__}", MAX_ATTEMPTS)


def _stop(ray: ModuleType, flying: Mapping[Any, TraceJob], on_row: RowSink) -> None:
    """Ctrl-C: cancel what is queued or running, keep the rows that finish meanwhile; the rest resumes next run."""
    for ref in flying:
        ray.cancel(ref)  # not force: a running trace gets KeyboardInterrupt and removes its worktrees
    try:
        done, _ = ray.wait(list(flying), num_returns=len(flying), timeout=CANCEL_GRACE_SECONDS)
    except KeyboardInterrupt:
        return  # a second Ctrl-C: leave at once
    for ref in done:
        try:
            row = ray.get(ref)
        except ray.exceptions.RayError:
            continue  # cancelled or failed while stopping: not a result, so it runs again on resume
        on_row(row)


def _largest_node(ray: ModuleType) -> TaskResources | None:
    """The largest CPU and memory of any live node, or None when no node has CPUs yet (an autoscaler adds them)."""
    nodes = [n["Resources"] for n in ray.nodes() if n.get("Alive")]
    cpus = max((float(r.get("CPU", 0)) for r in nodes), default=0.0)
    memory = max((int(r.get("memory", 0)) for r in nodes), default=0)
    if cpus <= 0 or memory <= 0:
        return None
    return TaskResources(cpus=cpus, memory_mb=max(1, memory // 2**20))


def _fit(need: TaskResources, ceiling: TaskResources | None) -> TaskResources:
    """A request no node could ever satisfy would wait forever: cap it at the largest node."""
    if ceiling is None:
        return need
    return TaskResources(cpus=min(need.cpus, ceiling.cpus), memory_mb=min(need.memory_mb, ceiling.memory_mb))


@contextmanager
def _environ(updates: Mapping[str, str]) -> Iterator[None]:
    saved = {key: os.environ.get(key) for key in updates}
    os.environ.update(updates)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _local_env() -> dict[str, str]:
    env = dict(LOCAL_RAY_ENV)
    root = Path(cascade.__file__).resolve().parents[1]
    if (root / "pyproject.toml").is_file():  # a source checkout: workers must import this cascade, not another
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH", "")) if p)
    return env


def _token_env() -> dict[str, str]:
    """``RAY_AUTH_MODE=token`` when a cluster token is at hand and the mode is unset.

    A Ray 2.60 driver that loads Ray without it never sends its token, so joining a cluster that ``ray start``
    made with token authentication (the default) fails with "Failed to connect" even with ``~/.ray/auth_token``.
    """
    if "RAY_AUTH_MODE" in os.environ:
        return {}
    token_file = Path(os.environ.get("RAY_AUTH_TOKEN_PATH") or Path.home() / ".ray" / "auth_token")
    return {"RAY_AUTH_MODE": "token"} if os.environ.get("RAY_AUTH_TOKEN") or token_file.is_file() else {}


@contextmanager
def _connected(spec: ExecutorSpec) -> Iterator[ModuleType]:
    """Ray, connected to the cluster of ``spec``; disconnects (and stops a Ray it started) afterwards."""
    if spec.ray_address:
        os.environ.update(_token_env())
    with _environ({} if spec.ray_address else _local_env()):  # Ray reads these on import and when it starts
        import ray

        # a driver that connected itself (a notebook, a test) keeps its connection
        connects = not ray.is_initialized()
        if connects:
            _init(ray, spec)
    try:
        yield ray
    finally:
        if connects:
            ray.shutdown()


def _init(ray: ModuleType, spec: ExecutorSpec) -> None:
    quiet: dict[str, Any] = {"log_to_driver": False, "logging_level": logging.ERROR}
    try:
        if spec.ray_address:
            ray.init(address=spec.ray_address, **quiet)
        else:
            ray.init(
                address="local",
                num_cpus=spec.jobs,
                include_dashboard=False,
                object_store_memory=LOCAL_OBJECT_STORE_BYTES,
                **quiet,
            )
    except (ConnectionError, RuntimeError, ValueError) as exc:
        where = spec.ray_address or "a local Ray"
        raise BadInput(f"could not start or reach {where}: {' '.join(str(exc).split())[:300]}") from None
