"""Official-tests arm on the dev split: agreement with the official SWE-bench labels per
repository and per agent, from the result rows of `cascade bench run --arm official-tests`.

Each prediction set runs with its own command (each run directory's COMMAND.txt, listed in the summary), e.g.::

    python -m cascade bench run --tasks $D/lite.tasks.jsonl --predictions $D/coder-lite/all_preds.jsonl \
        --results $D/coder-lite/results.json --arm official-tests --repos-dir /work/.mirror \
        --repo pallets/flask … --jobs 2 --output benchmarks/results/official_tests/coder-lite

then this script summarises every run directory it is given::

    python -m benchmarks.official_tests benchmarks/results/official_tests/* \
        --summary benchmarks/results/official_tests.md

Agreement = the arm's decision matches the label (accept ↔ resolved, reject ↔ not resolved or empty); an
``uncertain`` row (a run cut short by its time limit, or tests that need the network) counts as a disagreement and
is listed. Every number is recomputable
from the run directories' results.jsonl.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

UNAVAILABLE = ("django/django", "scikit-learn/scikit-learn", "matplotlib/matplotlib")


def rows_of(directory: Path) -> list[dict[str, Any]]:
    path = directory / "results.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []


def agrees(row: dict[str, Any]) -> bool:
    acceptable = row["label"] == "acceptable"
    return (row["decision"] == "accept" and acceptable) or (row["decision"] == "reject" and not acceptable)


def seconds(row: dict[str, Any]) -> float:
    return sum(stage["seconds"] for stage in row["stages"])


def table(groups: dict[str, list[dict[str, Any]]], first: str) -> list[str]:
    lines = [
        f"| {first} | rows | officially resolved | accept | reject | uncertain | agree | agreement | false accept "
        "| false reject |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, rows in sorted(groups.items()):
        n = len(rows)
        agree = sum(agrees(r) for r in rows)
        count = {d: sum(r["decision"] == d for r in rows) for d in ("accept", "reject", "uncertain")}
        false_accept = sum(r["decision"] == "accept" and r["label"] != "acceptable" for r in rows)
        false_reject = sum(r["decision"] == "reject" and r["label"] == "acceptable" for r in rows)
        lines.append(
            f"| {name} | {n} | {sum(r['label'] == 'acceptable' for r in rows)} | {count['accept']} | "
            f"{count['reject']} | {count['uncertain']} | {agree} | {agree / n:.3f} | {false_accept} | {false_reject} |"
        )
    return lines


def commands_of(directory: Path) -> list[str]:
    path = directory / "COMMAND.txt"  # every `cascade bench run` that wrote into the directory, in order
    return [line for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []


def summary(runs: dict[str, list[dict[str, Any]]], commands: list[str]) -> str:
    everything = [dict(r, run=name) for name, rows in runs.items() for r in rows]
    by_repo: dict[str, list[dict[str, Any]]] = defaultdict(list)
    by_run: dict[str, list[dict[str, Any]]] = defaultdict(list)
    by_run_repo: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in everything:
        agent = r["run"].rsplit("/", 1)[-1]  # the prediction set, whichever group of repositories ran it
        by_repo[r["repo"]].append(r)
        by_run[agent].append(r)
        by_run_repo[f"{agent} · {r['repo']}"].append(r)
    ran = [r for r in everything if r["status"] == "ok" and r["stages"]]
    times = sorted(seconds(r) for r in ran)
    lines = [
        "# Official-tests arm: agreement with the official SWE-bench labels ",
        "",
        "Commands (each run directory's COMMAND.txt, in order), then `python -m benchmarks.official_tests …`:",
        "",
        *[f"    {c}" for c in commands],
        "",
        "## Per prediction set (all repositories that ran)",
        "",
        *table(by_run, "prediction set"),
        "",
        "## Per repository (all prediction sets)",
        "",
        *table(by_repo, "repository"),
        "",
        "## Per prediction set and repository",
        "",
        *table(by_run_repo, "set · repository"),
        "",
        f"Wall time of the stage per row (machine shared and loaded): median {statistics.median(times):.1f} s, "
        f"max {times[-1]:.1f} s over {len(times)} rows."
        if times
        else "No row ran.",
        "",
        f"Not run here: {', '.join(UNAVAILABLE)} (no checkout available: too large to fetch).",
        "",
        "## Disagreements",
        "",
        "| set | instance | label | decision | evidence |",
        "|---|---|---|---|---|",
    ]
    for r in sorted(everything, key=lambda r: (r["run"], r["instance_id"])):
        if not agrees(r):
            evidence = r["evidence"].replace("|", "\\|")[:300]
            lines.append(f"| {r['run']} | {r['instance_id']} | {r['label']} | {r['decision']} | {evidence} |")
    return "\n".join(lines) + "\n"


def _label(directory: Path) -> str:
    """``group/set`` for ``…/group/set`` run directories (e.g. sympy/coder-lite), else the directory name."""
    return f"{directory.parent.name}/{directory.name}" if directory.parent.name not in ("", ".") else directory.name


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", help="Run directories of `cascade bench run --arm official-tests`.")
    parser.add_argument("--summary", required=True)
    parser.add_argument("--command", action="append", default=[], help="Commands to record instead of COMMAND.txt.")
    args = parser.parse_args()
    runs = {_label(Path(d)): rows_of(Path(d)) for d in args.runs}
    commands = args.command or [c for d in args.runs for c in commands_of(Path(d))]
    text = summary(runs, commands)
    Path(args.summary).write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
