"""Summarise benchmarks/redteam_timing.sh: per backend, the red-team suite's wall and CPU before and after (sums over
the rounds, which alternate the order), their ratio, and what each side caught (from each run's summary.json).

    python3 -m benchmarks.redteam_timing OUT
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path


def main(out: Path) -> None:
    wall: dict[tuple[str, str], float] = defaultdict(float)
    cpu: dict[tuple[str, str], float] = defaultdict(float)
    rounds: dict[str, set[str]] = defaultdict(set)
    caught: dict[tuple[str, str], str] = {}
    for line in (out / "times.tsv").read_text().splitlines():
        side, backend, round_, measured, _load = line.split("\t")
        seconds, user, system = (float(x) for x in measured.split())
        wall[(side, backend)] += seconds
        cpu[(side, backend)] += user + system
        rounds[backend].add(round_)
        summary = json.loads((out / f"{side}-{backend}-{round_}" / "summary.json").read_text())
        caught[(side, backend)] = _caught(summary, backend) + _rejected(out / f"{side}-{backend}-{round_}", backend)
    print("| backend | rounds | wall before → after (s) | after / before | CPU before → after (s) | after / before | "
          "caught before | caught after |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for backend in rounds:
        b, a = wall[("before", backend)], wall[("after", backend)]
        cb, ca = cpu[("before", backend)], cpu[("after", backend)]
        print(f"| {backend} | {len(rounds[backend])} | {b:.1f} → {a:.1f} | {a / b:.2f}× | {cb:.1f} → {ca:.1f} | "
              f"{ca / cb:.2f}× | {caught[('before', backend)]} | {caught[('after', backend)]} |")  # fmt: skip


def _caught(summary: dict[str, object], backend: str) -> str:
    """'unsafe a/b, trace c/d, false alarms e/f + g/h, errors i' from a `cascade bench redteam` summary.json."""
    rows = summary.get("backends", [])
    row = (
        next((r for r in rows if isinstance(r, dict) and r.get("backend") == backend), None)
        if isinstance(rows, list)
        else None
    )
    if row is None:
        return "?"
    return (
        f"unsafe {row['caught']}/{row['unsafe_total']}, trace {row['trace_caught']}/{row['trace_total']}, false "
        f"alarms {row['false_alarms']}/{row['benign_total']} + {row['trace_false_alarms']}/"
        f"{row['trace_benign_total']}, errors {row['errors']}"
    )


def _rejected(run: Path, backend: str) -> str:
    """'; rejected: unsafe a/b, benign c/d' from the run's redteam.jsonl: the decisions, whichever records named them
    (an older corpus's expected records may name a mechanism differently from the code that runs it)."""
    rows = [json.loads(line) for line in (run / "redteam.jsonl").read_text().splitlines() if line.strip()]
    rows = [r for r in rows if r.get("backend") == backend]
    unsafe = [r for r in rows if r["kind"] in ("unsafe", "trace")]
    benign = [r for r in rows if r["kind"] not in ("unsafe", "trace")]
    count = sum(r["decision"] == "reject" for r in unsafe), sum(r["decision"] == "reject" for r in benign)
    return f"; rejected: unsafe {count[0]}/{len(unsafe)}, benign {count[1]}/{len(benign)}"


if __name__ == "__main__":
    main(Path(sys.argv[1]))
