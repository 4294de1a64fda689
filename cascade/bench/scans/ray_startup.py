"""The Ray executor's own start-up: a local Ray started and stopped the way `cascade bench run --executor ray` does it
(`cascade/bench/executors/ray.py`), each round in a fresh interpreter, since every command pays the import as well.
Round 0 is a warm-up (the first start after a boot reads Ray's files from disk); `benchmarks/ray_executor.py`
takes the median of the rest off the Ray run's wall time to give Ray's per-trace overhead without its start."""

from __future__ import annotations

import importlib.util
import statistics
import subprocess
import sys
from collections.abc import Iterator

from pydantic import BaseModel, ConfigDict, Field

from cascade.bench.scans import ScanInputs
from cascade.errors import BadInput

START_STOP = """
import time
from cascade.bench.executors import ExecutorSpec
from cascade.bench.executors.ray import _connected
started = time.perf_counter()
with _connected(ExecutorSpec(kind="ray", jobs={jobs})):
    pass
print(time.perf_counter() - started)
"""


class RayStart(BaseModel):
    model_config = ConfigDict(extra="forbid")

    round: int = Field(description="0: the warm-up (not in the median)")
    jobs: int  # the local Ray's CPUs, as --jobs gives them
    seconds: float  # Ray's import, start and stop, timed inside a fresh interpreter (what `bench run` adds)


class RayStartupScan:
    name = "ray-startup"
    title = "The Ray executor's start-up: a local Ray started and stopped in a fresh interpreter"
    needs_data = False
    row = RayStart

    def rows(self, inputs: ScanInputs) -> Iterator[RayStart]:
        if importlib.util.find_spec("ray") is None:
            raise BadInput("the ray-startup scan needs Ray: pip install 'cascade-gate[ray]' (docs/ray.md)")
        jobs = max(1, inputs.jobs)
        for round_ in range(inputs.reps + 1):
            yield RayStart(round=round_, jobs=jobs, seconds=_start_stop(jobs))

    def summary(self, rows: list[RayStart]) -> list[str]:
        timed = [r.seconds for r in rows if r.round > 0]
        if not timed:
            return ["No round after the warm-up: give --reps 1 or more."]
        jobs = sorted({r.jobs for r in rows})
        return [f"{len(timed)} round(s) after one warm-up, --jobs {', '.join(map(str, jobs))}: median "
                f"{statistics.median(timed):.2f} s, min {min(timed):.2f} s, max {max(timed):.2f} s per start "
                "and stop (Ray's import included; not the interpreter's start and cascade's import, which both "
                "executors pay)."]  # fmt: skip


def _start_stop(jobs: int) -> float:
    proc = subprocess.run([sys.executable, "-c", START_STOP.format(jobs=jobs)], capture_output=True, text=True,
                          timeout=600)  # fmt: skip
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise BadInput(f"a local Ray did not start: {last}")
    return round(float(proc.stdout.split()[-1]), 3)
