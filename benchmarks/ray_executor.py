"""The Ray executor against the local pool (docs/ray.md): same traces, same rows?, wall-time ratio, Ray's overhead.

Runs one dev subset (default: the first 20 CodeR Lite traces whose repository is under --repos-dir, rules-only)
through `cascade bench run --executor local --jobs N` and then `--executor ray --jobs N` (a local Ray with N CPUs
that the command starts and stops itself), in one invocation, then:

- compares the rows field by field with the timings removed, and with `cascade bench compare`;
- reports both wall times (from each run's runs.jsonl summary), their ratio, and Ray's per-trace overhead
  (ray wall − local wall) / traces, with and without Ray's start-up, which is timed apart (start + stop of the
  same local Ray the executor starts);
- records the load average before and after: on a shared machine the ratio, not the seconds, is the result.

    python3 -m benchmarks.ray_executor --data D --repos-dir R [--limit 20] [--jobs 2] [--out …/ray-executor]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from pydantic import BaseModel

from cascade.bench.data import DevData
from cascade.bench.results import read_rows

ROOT = Path(__file__).resolve().parents[1]


class ExecutorRun(BaseModel):
    executor: str
    command: str
    wall_seconds: float
    traces: int
    statuses: dict[str, int]
    mean_trace_seconds: float  # inside the worker: the trace itself, whatever ran it
    # (wall − Σ trace seconds / jobs) / traces: start-up, dispatch and idle slots, per trace. Load on a shared
    # machine inflates the trace seconds of both executors alike, so this is the executor's own cost.
    outside_traces_per_trace_seconds: float


class Result(BaseModel):
    traces: int
    jobs: int
    local: ExecutorRun
    ray: ExecutorRun
    ray_start_stop_seconds: float
    wall_ratio_ray_over_local: float
    overhead_per_trace_seconds: float
    overhead_per_trace_without_startup_seconds: float
    rows_identical: int
    rows_different: list[str]
    compare_discordant: tuple[int, int]
    loadavg_before: tuple[float, float, float]
    loadavg_after: tuple[float, float, float]


def _bench_run(executor: str, base_args: list[str], out: Path, jobs: int) -> ExecutorRun:
    shutil.rmtree(out, ignore_errors=True)
    args = [*base_args, "--executor", executor, "--jobs", str(jobs), "--output", str(out)]
    command = [sys.executable, "-m", "cascade", *args]
    subprocess.run(command, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    return _summary_of(executor, out, jobs)


def _summary_of(executor: str, out: Path, jobs: int) -> ExecutorRun:
    """The run's numbers from its own files (runs.jsonl, results.jsonl, COMMAND.txt): recomputable."""
    run = json.loads((out / "runs.jsonl").read_text().splitlines()[-1])
    rows = read_rows(out / "results.jsonl")
    wall, in_traces = run["summary"]["wall_seconds"], sum(r.cost.seconds for r in rows)
    return ExecutorRun(
        executor=executor,
        command=run["command"],
        wall_seconds=wall,
        traces=len(rows),
        statuses=run["summary"]["statuses"],
        mean_trace_seconds=round(in_traces / max(1, len(rows)), 2),
        outside_traces_per_trace_seconds=round((wall - in_traces / jobs) / max(1, len(rows)), 2),
    )


def _ray_start_stop_seconds(jobs: int) -> float:
    """The executor's own start + stop of a local Ray, timed in a fresh process (as each CLI run pays it)."""
    code = (
        "import time\n"
        "from cascade.bench.executors import ExecutorSpec\n"
        "from cascade.bench.executors.ray import _connected\n"
        "started = time.perf_counter()\n"
        f"with _connected(ExecutorSpec(kind='ray', jobs={jobs})):\n"
        "    pass\n"
        "print(time.perf_counter() - started)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, capture_output=True, text=True)
    return round(float(proc.stdout.strip().splitlines()[-1]), 2)


def _compare(local: Path, ray: Path, out: Path) -> tuple[int, int]:
    command = [sys.executable, "-m", "cascade", "bench", "compare", str(local), str(ray), "--format", "json"]
    data = json.loads(subprocess.run(command, check=True, cwd=ROOT, capture_output=True, text=True).stdout)
    markdown = [sys.executable, "-m", "cascade", "bench", "compare", str(local), str(ray), "--output", str(out)]
    subprocess.run(markdown, check=True, cwd=ROOT)
    return data["a_right_b_wrong"], data["a_wrong_b_right"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="The SWE-bench dev data (its README names the files).")
    parser.add_argument("--repos-dir", required=True, help="Repositories, as `cascade bench run --repos-dir`.")
    parser.add_argument("--limit", type=int, default=20)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--arm", default="rules-only")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "ray-executor"))
    parser.add_argument("--from-existing", action="store_true", help="Recompute result.json from OUT's runs only.")
    args = parser.parse_args()

    out = Path(args.out)
    base_args = [
        "bench", "run", *DevData(args.data).run_arguments("coder"), "--repos-dir", args.repos_dir,
        "--available-only", "--limit", str(args.limit), "--arm", args.arm, "--quiet", "--resamples", "200",
    ]  # fmt: skip
    if args.from_existing:
        previous = json.loads((out / "result.json").read_text())
        local, ray = _summary_of("local", out / "local", args.jobs), _summary_of("ray", out / "ray", args.jobs)
        startup = previous["ray_start_stop_seconds"]
        before, after = tuple(previous["loadavg_before"]), tuple(previous["loadavg_after"])
    else:
        before = os.getloadavg()
        local = _bench_run("local", base_args, out / "local", args.jobs)
        ray = _bench_run("ray", base_args, out / "ray", args.jobs)
        startup = _ray_start_stop_seconds(args.jobs)
        after = os.getloadavg()

    local_rows = {r.key: r.timeless() for r in read_rows(out / "local" / "results.jsonl")}
    ray_rows = {r.key: r.timeless() for r in read_rows(out / "ray" / "results.jsonl")}
    different = sorted("/".join(k) for k in local_rows.keys() | ray_rows.keys() if local_rows.get(k) != ray_rows.get(k))
    discordant = _compare(out / "local" / "results.jsonl", out / "ray" / "results.jsonl", out / "compare.md")
    n = local.traces
    result = Result(
        traces=n,
        jobs=args.jobs,
        local=local,
        ray=ray,
        ray_start_stop_seconds=startup,
        wall_ratio_ray_over_local=round(ray.wall_seconds / local.wall_seconds, 3),
        overhead_per_trace_seconds=round((ray.wall_seconds - local.wall_seconds) / n, 2),
        overhead_per_trace_without_startup_seconds=round((ray.wall_seconds - startup - local.wall_seconds) / n, 2),
        rows_identical=len(local_rows.keys() & ray_rows.keys()) - len(different),
        rows_different=different,
        compare_discordant=discordant,
        loadavg_before=before,
        loadavg_after=after,
    )
    (out / "result.json").write_text(result.model_dump_json(indent=2) + "\n")
    command = shlex.join(["python3", "benchmarks/ray_executor.py", *sys.argv[1:]])
    with (out / "COMMAND.txt").open("a") as f:
        f.write(f"{command}\n" if args.from_existing else f"{command}\n# which ran:\n{local.command}\n{ray.command}\n")
    print(result.model_dump_json(indent=2))


if __name__ == "__main__":
    main()
