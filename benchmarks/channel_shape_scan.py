"""Check the channel's shape rules (`cascade/execution/channel_order.py`) against every stored base-tree run: real
suites' records as the gate's plugin wrote them, which no rule may call forged.

Reads the result store's ``stage2-base-run`` entries (written by `cascade bench run` and `cascade review`), keeps the
runs of repositories under ``--repos`` (the red-team target and test fixtures also live in a store), and prints per
repository the runs, their tests and the runs any rule flags (with the first finding).

    python3 -m benchmarks.channel_shape_scan [--store DIR] [--repos /work/.mirror]
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from cascade.execution.channel_order import order_breaks
from cascade.sandbox.base import RunnerRecord
from cascade.store import cache_root


def main() -> None:
    parser = argparse.ArgumentParser(description="Check the channel's shape rules against stored base-tree runs.")
    parser.add_argument("--store", type=Path, default=cache_root(None) / "results" / "stage2-base-run")
    parser.add_argument("--repos", default="/work/.mirror", help="Only runs of repositories under this directory.")
    args = parser.parse_args()
    runs: Counter[str] = Counter()
    tests: Counter[str] = Counter()
    flagged: dict[str, list[str]] = {}
    for path in sorted(args.store.glob("*/*.json")):
        entry = json.loads(path.read_text())
        repository = str(entry["key"]["repository"])
        if not repository.startswith(args.repos):
            continue
        name = repository[len(args.repos) :].strip("/").split("/")[0]
        reports = [RunnerRecord.model_validate(r) for r in entry["value"]["run"]["result"]["reports"]]
        runs[name] += 1
        tests[name] += sum(r.event == "test_begin" for r in reports)
        breaks = order_breaks(reports)
        if breaks:
            flagged.setdefault(name, []).append(f"{path.name}: {breaks[0][1]}")
    print("| repository | stored base runs | tests | runs breaking the shape |\n|---|---|---|---|")
    for name in sorted(runs):
        print(f"| {name} | {runs[name]} | {tests[name]} | {len(flagged.get(name, []))} |")
    print(f"| all | {sum(runs.values())} | {sum(tests.values())} | {sum(len(v) for v in flagged.values())} |")
    for name, found in flagged.items():
        print(f"\n{name}: " + "; ".join(found[:5]))


if __name__ == "__main__":
    main()
