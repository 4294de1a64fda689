"""The Ray executor against the local pool (docs/ray.md): same traces, same rows?, wall-time ratio, Ray's overhead.

Post-processes three `cascade bench` outputs in OUT (their commands in OUT/COMMAND.txt): the same dev subset (the
first 20 CodeR Lite traces whose repository is under --repos-dir, rules-only) through

    cascade bench run <coder data> --repos-dir R --available-only --limit 20 --arm rules-only --quiet \
        --resamples 200 --executor local --jobs 2 --output OUT/local
    cascade bench run … --executor ray --jobs 2 --output OUT/ray      (a local Ray the command starts and stops)
    cascade bench scan ray-startup --jobs 2 --reps 3 --output OUT/startup

then:

- compares the rows field by field with the timings removed, and with `cascade bench compare`;
- reports both wall times (from each run's runs.jsonl summary), their ratio, and Ray's per-trace overhead
  (ray wall − local wall) / traces, with and without Ray's start-up (the scan's median after its warm-up; an OUT
  made before the scan existed keeps the start-up its result.json recorded).

    python3 -m benchmarks.ray_executor OUT [--jobs 2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from pydantic import BaseModel

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


def _startup_seconds(out: Path) -> float:
    """The median start + stop of `cascade bench scan ray-startup` after its warm-up round; an OUT made before the
    scan keeps the value its result.json recorded (timed the same way, inside a fresh interpreter)."""
    rows = out / "startup" / "rows.jsonl"
    if rows.is_file():
        timed = [r["seconds"] for r in map(json.loads, rows.read_text().splitlines()) if r["round"] > 0]
        return round(statistics.median(timed), 2)
    return float(json.loads((out / "result.json").read_text())["ray_start_stop_seconds"])


def _compare(local: Path, ray: Path, out: Path) -> tuple[int, int]:
    command = [sys.executable, "-m", "cascade", "bench", "compare", str(local), str(ray), "--format", "json"]
    data = json.loads(subprocess.run(command, check=True, cwd=ROOT, capture_output=True, text=True).stdout)
    markdown = [sys.executable, "-m", "cascade", "bench", "compare", str(local), str(ray), "--output", str(out)]
    subprocess.run(markdown, check=True, cwd=ROOT)
    return data["a_right_b_wrong"], data["a_wrong_b_right"]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("out", type=Path, help="Holds local/, ray/ and startup/ (the commands in the docstring).")
    parser.add_argument("--jobs", type=int, default=2, help="The --jobs both runs were given.")
    args = parser.parse_args()
    out: Path = args.out
    local, ray = _summary_of("local", out / "local", args.jobs), _summary_of("ray", out / "ray", args.jobs)
    startup = _startup_seconds(out)
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
    )
    (out / "result.json").write_text(result.model_dump_json(indent=2) + "\n")
    print(result.model_dump_json(indent=2))


if __name__ == "__main__":
    main()
