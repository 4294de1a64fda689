"""Summarise the interleaved before/after runs of benchmarks/reuse_timing.sh (reuse across reviews).

Reads OUT/times.tsv (each `cascade bench run`'s wall and CPU, children included, from /usr/bin/time), each run's
results.jsonl (wall per review, each stage's seconds) and, for the runs with the store, the full verdicts (--reports)
for what was reused. Prints per set: reviews, mean wall per review, CPU per review, their before/after ratios, static
store hits, and decision rows that differ (cascade bench compare is the paired test; this counts rows); then, where
Stage 2 ran, its seconds per review before/after and the base- and patched-tree runs taken from the store; and
stages 0-1 (each review's wall time less Stages 2 and 3: checkouts included) before/after.

    python3 -m benchmarks.reuse_timing OUT
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from cascade.bench.results import read_rows
from cascade.bench.rows import TraceRow


def _times(out: Path) -> dict[tuple[str, str], tuple[float, float, float]]:
    found: dict[tuple[str, str], tuple[float, float, float]] = {}
    for line in (out / "times.tsv").read_text().splitlines():
        side, name, measured, load = line.split("\t")
        wall, user, system = (float(x) for x in measured.split())
        found[(side, name)] = (wall, user + system, float(load))
    return found


def _hits(reports: Path) -> tuple[int, int, int]:
    """(static hits, static ran with targets, ignored entries) over the run's verdicts."""
    hits = ran = ignored = 0
    for path in reports.glob("**/*.json"):
        verdict = json.loads(path.read_text())
        static = next((s for s in verdict.get("stages", []) if s["stage"] == "static"), None)
        if static is None or static["outcome"] == "skipped":
            continue
        if static["reason"].startswith("no Python file changed"):
            continue
        ran += 1
        reuse = static["cost"].get("reuse", [])
        hits += any("from the result store" in r for r in reuse)
        ignored += any("ignored" in r for r in reuse)
    return hits, ran, ignored


def _stage2_hits(reports: Path) -> tuple[int, int, int, int]:
    """(base-tree runs from the store, asked for, patched-tree runs from the store, asked for) over the run's verdicts
    (Stage 2's reuse line)."""
    counts = [0, 0, 0, 0]
    for path in reports.glob("**/*.json"):
        verdict = json.loads(path.read_text())
        probes = next((s for s in verdict.get("stages", []) if s["stage"] == "probes"), None)
        for line in probes["cost"].get("reuse", []) if probes else []:
            # "probes: 3 of 5 base-tree and 0 of 4 patched-tree test run(s) from the result store"; before patched
            # runs were stored: "probes: 3 of 5 base-tree test run(s) from the result store"
            words = line.split()
            if len(words) > 9 and words[4] == "base-tree" and words[9] == "patched-tree":
                for i, at in enumerate((1, 3, 6, 8)):
                    counts[i] += int(words[at])
            elif len(words) > 5 and words[4] == "base-tree":
                counts[0], counts[1] = counts[0] + int(words[1]), counts[1] + int(words[3])
    return counts[0], counts[1], counts[2], counts[3]


def _stage2_seconds(rows: list[TraceRow]) -> dict[tuple[str, str, str], float]:
    found: dict[tuple[str, str, str], float] = {}
    for row in rows:
        probes = next((s for s in row.stages if s.stage == "probes" and s.outcome != "skipped"), None)
        if probes is not None:
            found[row.key] = probes.seconds
    return found


def _before_stage2(rows: list[TraceRow]) -> dict[tuple[str, str, str], float]:
    """Each review's seconds outside Stages 2 and 3: stages 0-1 with the checkouts they need (and their removal)."""
    later = ("probes", "reviewer")
    return {row.key: row.cost.seconds - sum(s.seconds for s in row.stages if s.stage in later) for row in rows}


def stages01_table(out: Path, names: list[str]) -> None:
    """Stages 0-1 alone (the review's wall time less Stages 2 and 3), on every review of both sides."""
    print("\n| set | reviews | stages 0-1 with checkouts, s/review before → after | ratio |")
    print("|---|---|---|---|")
    for name in names:
        before, after = (_before_stage2(read_rows(out / f"{side}-{name}" / "results.jsonl"))
                         for side in ("before", "after"))  # fmt: skip
        both = sorted(set(before) & set(after))
        b, a = statistics.mean(before[k] for k in both), statistics.mean(after[k] for k in both)
        print(f"| {name} | {len(both)} | {b:.2f} → {a:.2f} | {b / a:.2f}× |")


def stage2_table(out: Path, names: list[str]) -> None:
    """Stage 2 alone, on the reviews where it ran on both sides."""
    print("\n| set | reviews reaching Stage 2 | Stage 2 s/review before → after | ratio | base runs from the store | "
          "patched runs from the store |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for name in names:
        before, after = (_stage2_seconds(read_rows(out / f"{side}-{name}" / "results.jsonl"))
                         for side in ("before", "after"))  # fmt: skip
        both = sorted(set(before) & set(after))
        if not both:
            continue
        b, a = statistics.mean(before[k] for k in both), statistics.mean(after[k] for k in both)
        base, base_asked, patched, patched_asked = _stage2_hits(out / f"after-{name}" / "reports")
        print(f"| {name} | {len(both)} | {b:.1f} → {a:.1f} | {b / a:.2f}× | {base}/{base_asked} | "
              f"{patched}/{patched_asked} |")  # fmt: skip


def main(out: Path) -> None:
    times = _times(out)
    names = sorted({name for _, name in times}, key=["gold", "coder", "gpt4o", "claude", "gold-repeat"].index)
    print("| set | reviews | wall/review before → after (s) | ratio | CPU/review before → after (s) | ratio | "
          "static hits | decisions differing | load (1 min) before / after |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    for name in names:
        before, after = (read_rows(out / f"{side}-{name}" / "results.jsonl") for side in ("before", "after"))
        assert {r.key for r in before} == {r.key for r in after}, name
        n = len(before)
        walls = [statistics.mean(r.cost.seconds for r in rows) for rows in (before, after)]
        cpus = [times[(side, name)][1] / n for side in ("before", "after")]
        decided_a = {r.key: r.decision for r in before}
        differing = sum(decided_a[r.key] != r.decision for r in after)
        hits, ran, ignored = _hits(out / f"after-{name}" / "reports")
        loads = f"{times[('before', name)][2]:.1f} / {times[('after', name)][2]:.1f}"
        print(
            f"| {name} | {n} | {walls[0]:.2f} → {walls[1]:.2f} | {walls[0] / walls[1]:.2f}× | "
            f"{cpus[0]:.2f} → {cpus[1]:.2f} | {cpus[0] / cpus[1]:.2f}× | {hits}/{ran}"
            f"{f' ({ignored} ignored)' if ignored else ''} | {differing} | {loads} |"
        )
    stages01_table(out, names)
    stage2_table(out, names)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
