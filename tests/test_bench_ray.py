"""`cascade bench run --executor ray` on a real Ray cluster started here (`ray start --head`, loopback only).

One module-scoped cluster serves every test (Ray's start-up is costly on 2 shared cores).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import cascade
from cascade.bench.arms import ArmBudget, get_arm
from cascade.bench.data import build_cases, load_predictions, load_resolved, load_tasks
from cascade.bench.executors import ExecutorSpec, RepoSource, TaskResources, arm_resources, make_executor
from cascade.bench.executors.ray import INSTALL_HINT, LOCAL_RAY_ENV, _fit, _on_this_node
from cascade.bench.repos import RepoResolver
from cascade.bench.results import read_rows
from cascade.bench.rows import LabelClass, TraceJob, TraceRow, TraceStatus
from cascade.bench.runner import RunOptions, run_bench
from cascade.bench.worker import run_trace
from cascade.config import CascadeConfig
from cascade.context import ReviewContext
from cascade.models import Decision, Outcome, StageResult
from cascade.stages.base import Stage
from cascade.stages.no_change import NoChangeStage
from cascade.stages.static import StaticStage
from tests.bench_support import run_args, run_cli

ROOT = Path(cascade.__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


# --- the cluster -------------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def ray_address(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A one-node Ray (2 CPUs) on 127.0.0.1; its workers import this checkout (PYTHONPATH) and the test arms."""
    if importlib.util.find_spec("ray") is None:
        pytest.skip("Ray is not installed: pip install 'cascade-gate[ray]' (.ci/run installs it)")
    saved = {key: os.environ.get(key) for key in LOCAL_RAY_ENV}
    os.environ.update(LOCAL_RAY_ENV)  # the driver (this process) must listen on loopback too: set before Ray loads
    port = _free_port()
    log = tmp_path_factory.mktemp("ray") / "ray-start.log"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    command = [
        sys.executable, "-m", "ray.scripts.scripts", "start", "--head", "--block", "--node-ip-address", "127.0.0.1",
        "--port", str(port), "--num-cpus", "2", "--include-dashboard", "false", "--disable-usage-stats",
    ]  # fmt: skip
    with log.open("w") as sink:
        head = subprocess.Popen(command, env=env, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        _wait_until_up(head, log)
        yield f"127.0.0.1:{port}"
    finally:
        _stop_cluster(head.pid)
        head.wait()
        for key, value in saved.items():
            os.environ.pop(key, None) if value is None else os.environ.__setitem__(key, value)


def _stop_cluster(session: int) -> None:
    """Kill the session started above (`ray start`, GCS, raylet) and its workers, which Ray puts in sessions of
    their own: nothing else (`ray stop` would stop every Ray on the machine)."""
    stats = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        stats[int(stat.parent.name)] = (int(fields[1]), int(fields[2]))  # ppid, pgid
    members = {pid for pid, (_ppid, pgid) in stats.items() if pgid == session}
    workers = {pid for pid, (ppid, _pgid) in stats.items() if ppid in members}
    for pid in members | workers:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _wait_until_up(head: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 180
    while "Ray runtime started" not in log.read_text():
        if head.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"ray start --head did not come up:\n{log.read_text()[-3000:]}")
        time.sleep(0.5)


# --- rows through Ray equal the local executor's ------------------------------------------------------------


def _by_key(path: Path) -> dict[tuple[str, str, str], TraceRow]:
    return {r.key: r.timeless() for r in read_rows(path)}


def test_dev_fixture_through_ray_equals_local_and_resumes(swe: dict[str, Path], ray_address: str) -> None:
    local_out, ray_out = swe["out"].with_name("local"), swe["out"].with_name("ray")
    run_cli([*run_args(swe, jobs=2), "--output", str(local_out)])
    ray_args = [*run_args(swe, jobs=2), "--output", str(ray_out), "--executor", "ray", "--ray-address", ray_address]
    first = run_cli(ray_args)
    assert "7 trace(s) run, 0 already done" in first and "on Ray" in first
    local_rows, ray_rows = _by_key(local_out / "results.jsonl"), _by_key(ray_out / "results.jsonl")
    assert len(ray_rows) == 7 and ray_rows == local_rows  # every field but the timings
    runs = [json.loads(line) for line in (ray_out / "runs.jsonl").read_text().splitlines()]
    assert runs[-1]["summary"]["executor"] == "ray"

    compared = json.loads(run_cli(["bench", "compare", str(local_out / "results.jsonl"),
                                    str(ray_out / "results.jsonl"), "--format", "json"]))  # fmt: skip
    assert (compared["a_right_b_wrong"], compared["a_wrong_b_right"]) == (0, 0)
    assert compared["coverage_difference"] == 0 and compared["risk_difference"] == 0

    # resume: drop two rows as a killed run would leave them missing; only those run again
    results = ray_out / "results.jsonl"
    lines = results.read_text().splitlines(keepends=True)
    results.write_text("".join(lines[:5]))
    again = run_cli(ray_args)
    assert "2 trace(s) run, 5 already done" in again
    assert _by_key(results) == local_rows


# --- a worker killed mid-trace ------------------------------------------------------------------------------


def _patch_key(patch_text: str) -> str:
    return hashlib.sha256(patch_text.encode()).hexdigest()[:12]


class PidStage:
    """Records its worker's pid as ``<patch key>.<attempt>.pid``, then waits for ``…go`` (or for a SIGKILL)."""

    name = "pid"
    needs_sandbox = False
    title = "waits for the test to kill or release its worker"

    def __init__(self, pid_dir: str) -> None:
        self.pid_dir = Path(pid_dir)

    def run(self, ctx: ReviewContext) -> StageResult:
        key = _patch_key(ctx.request.patch_text)
        attempt = 1 + len(list(self.pid_dir.glob(f"{key}.*.pid")))
        (self.pid_dir / f"{key}.{attempt}.pid.tmp").write_text(str(os.getpid()))
        (self.pid_dir / f"{key}.{attempt}.pid.tmp").rename(self.pid_dir / f"{key}.{attempt}.pid")
        deadline = time.monotonic() + 120
        while not (self.pid_dir / f"{key}.{attempt}.go").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        return StageResult(stage=self.name, outcome=Outcome.PASS)


class KillableArm:
    """rules-only behind a stage whose worker the test can kill (top level: pickled into the Ray workers)."""

    name = "test-killable"
    description = "pid stage, then Stage 0 + Stage 1"

    def __init__(self, pid_dir: str) -> None:
        self.pid_dir = pid_dir

    def stages(self, config: CascadeConfig) -> list[Stage]:
        return [PidStage(self.pid_dir), NoChangeStage(), StaticStage()]

    def budget(self, config: CascadeConfig) -> ArmBudget:
        return ArmBudget()


def _killer(pid_dir: Path, plan: dict[str, list[str]], stop: threading.Event, killed: list[int]) -> None:
    """Kill or release each attempt as the plan says, as soon as its pid file appears."""
    handled: set[Path] = set()
    while not stop.is_set():
        for pid_file in sorted(set(pid_dir.glob("*.pid")) - handled):
            key, attempt = pid_file.name.split(".")[:2]
            action = plan.get(key, ["go"] * 3)[int(attempt) - 1]
            if action == "kill":
                pid = int(pid_file.read_text())
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            else:
                pid_file.with_name(f"{key}.{attempt}.go").touch()
            handled.add(pid_file)
        time.sleep(0.05)


def test_killed_worker_is_retried_once_then_an_error_row_and_no_row_is_lost(
    swe: dict[str, Path],
    ray_address: str,
    tmp_path: Path,
) -> None:
    cases = build_cases(load_tasks(swe["tasks"]), load_predictions(swe["preds"]), load_resolved(swe["results"])).cases
    by_id = {c.instance_id: c for c in cases}
    once, twice, never = by_id["acme__calc-1"], by_id["acme__calc-2"], by_id["acme__calc-4"]
    plan = {_patch_key(once.patch_text): ["kill", "go"], _patch_key(twice.patch_text): ["kill", "kill"]}
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    out = tmp_path / "results.jsonl"
    earlier = TraceRow(
        instance_id="earlier-1", model="m", arm="test-killable", repo="o/n", label=LabelClass.EMPTY,
        decision=Decision.REJECT, repo_available=False,
    )  # fmt: skip
    out.write_text(earlier.model_dump_json() + "\n")  # a row a previous run wrote: it must survive

    stop, killed = threading.Event(), []
    watcher = threading.Thread(target=_killer, args=(pid_dir, plan, stop, killed), daemon=True)
    watcher.start()
    executor = make_executor(ExecutorSpec(kind="ray", ray_address=ray_address))
    try:
        summary = run_bench(
            [once, twice, never], [KillableArm(str(pid_dir))], RepoResolver(swe["repos"]), CascadeConfig(), out,
            RunOptions(timeout_seconds=300, progress=False), executor,
        )  # fmt: skip
    finally:
        stop.set()
        watcher.join()

    assert (summary.ran, summary.executor) == (3, "ray")
    assert len(killed) == 3 and len(set(killed)) == 3  # three distinct worker processes died
    rows = {r.instance_id: r for r in read_rows(out)}
    assert sorted(rows) == ["acme__calc-1", "acme__calc-2", "acme__calc-4", "earlier-1"]  # none lost, none doubled
    assert len(read_rows(out)) == 4
    retried, failed, clean = rows["acme__calc-1"], rows["acme__calc-2"], rows["acme__calc-4"]
    assert (retried.status, retried.decision) == (TraceStatus.OK, Decision.UNCERTAIN)  # the retry ran the trace
    assert [s.stage for s in retried.stages] == ["pid", "no_change", "static"]
    assert (failed.status, failed.decision) == (TraceStatus.ERROR, Decision.UNCERTAIN)
    assert failed.error is not None and "Ray worker or node died" in failed.error and "retried 1x" in failed.error
    assert (clean.status, clean.decision, clean.deciding_stage) == (TraceStatus.OK, Decision.REJECT, "no_change")
    assert len(list(pid_dir.glob(f"{_patch_key(once.patch_text)}.*.pid"))) == 2  # exactly one retry
    assert len(list(pid_dir.glob(f"{_patch_key(twice.patch_text)}.*.pid"))) == 2
    assert rows["earlier-1"] == earlier


# --- without Ray -------------------------------------------------------------------------------------------


def test_executor_ray_without_ray_is_exit_3_with_the_install_hint(swe: dict[str, Path]) -> None:
    hide_ray = "import sys; sys.modules['ray'] = None; from cascade.cli import main; sys.argv[0] = 'cascade'; main()"
    args = [*run_args(swe, jobs=1), "--executor", "ray"]
    proc = subprocess.run([sys.executable, "-c", hide_ray, *args], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 3, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and INSTALL_HINT in proc.stderr, proc.stderr
    assert not (swe["out"] / "results.jsonl").exists()  # failed before reading or writing anything


# --- the parts that need no cluster ------------------------------------------------------------------------


def test_arm_resources_follow_the_stages_and_fit_the_largest_node() -> None:
    config = CascadeConfig()
    assert arm_resources(get_arm("rules-only"), config) == TaskResources(cpus=1, memory_mb=1024)
    stage2 = arm_resources(get_arm("full-cascade"), config)  # Stage 2 (probes) runs tests in a sandbox
    assert stage2 == TaskResources(cpus=2, memory_mb=1024 + config.sandbox.memory_mb)
    assert arm_resources(get_arm("official-tests"), config) == stage2  # runs the PR's tests in the sandbox too
    assert _fit(stage2, TaskResources(cpus=1, memory_mb=4096)) == TaskResources(cpus=1, memory_mb=1024 + 2048)
    assert _fit(stage2, None) == stage2  # no node with CPUs yet (an autoscaler will add them): ask as is


def test_a_node_without_the_drivers_path_clones_into_its_own_cache(swe: dict[str, Path], tmp_path: Path) -> None:
    remotes = tmp_path / "remotes"
    bare = remotes / "acme" / "calc.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(swe["repos"] / "acme__calc"), str(bare)], check=True)
    cases = build_cases(load_tasks(swe["tasks"]), load_predictions(swe["preds"]), None).cases
    case = next(c for c in cases if c.instance_id == "acme__calc-2")
    job = TraceJob(case=case, arm="rules-only", repo_path=None, repo_note="not found under no --repos-dir")
    source = RepoSource(
        cache_dir=str(tmp_path / "node-cache"), clone=True, url_template=f"file://{remotes}/{{repo}}.git"
    )
    here = _on_this_node(job, source)
    assert here.repo_path == str(tmp_path / "node-cache" / "acme__calc") and "cloned" in here.repo_note
    assert _on_this_node(here, source) is here  # the path exists on this node now: nothing to do
    row = run_trace(here, get_arm("rules-only"))
    assert (row.repo_available, row.decision, row.deciding_stage) == (True, Decision.REJECT, "static")
