"""`cascade bench` as a new user meets it: the data directory from an option or CASCADE_SWEBENCH_DIR, a `--limit`
that keeps every label class, a risk–coverage chart that says when nothing was decided, an ETA that shows a time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.progress import Progress

from cascade.bench.cli import DATA_ENV
from cascade.bench.data import stratified
from cascade.bench.metrics import compute_metrics
from cascade.bench.progress import EtaColumn
from cascade.bench.report import plot_risk_coverage
from cascade.bench.results import read_rows
from cascade.bench.rows import BenchCase, LabelClass, TraceRow
from cascade.cli import cli
from cascade.errors import BadInput
from cascade.models import Decision
from tests.bench_support import run_args

ROOT = Path(__file__).resolve().parents[1]


def invoke(args: list[str], env: dict[str, str] | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(cli, args, env=env, catch_exceptions=False)
    return result.exit_code, result.output


# --- the data directory ------------------------------------------------------------------------------------


def test_relative_data_paths_are_found_under_the_data_directory(
    swe: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # a fresh clone's directory: the data is not here
    data = swe["tasks"].parent
    args = ["bench", "run", "--tasks", "tasks.jsonl", "--predictions", "preds.jsonl", "--results", "results.json"]
    args += ["--repos-dir", str(swe["repos"]), "--output", str(tmp_path / "out"), "--quiet", "--resamples", "0"]
    with pytest.raises(BadInput, match="not found here"):
        invoke(args, env={DATA_ENV: ""})
    code, output = invoke([*args, "--data-dir", str(data)])
    assert code == 0 and "7 trace(s) run" in output, output
    args[args.index("--output") + 1] = str(tmp_path / "out2")
    code, output = invoke(args, env={DATA_ENV: str(data)})
    assert code == 0 and "7 trace(s) run" in output, output


def test_a_missing_data_path_says_where_it_looked_and_how_to_set_the_directory(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop(DATA_ENV, None)
    argv = [sys.executable, "-m", "cascade", "bench", "run", "--tasks", "tasks.jsonl", "--gold", "--output", "o"]
    done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 3
    assert done.stderr.strip() == (
        f"cascade: error: --tasks tasks.jsonl: not found here and no data directory is set ({DATA_ENV} or --data-dir)"
    )


def test_the_readme_says_how_to_set_the_data_directory() -> None:
    section = (ROOT / "README.md").read_text().split("## Benchmark against SWE-bench labels", 1)[1].split("\n## ")[0]
    assert f"export {DATA_ENV}=" in section
    assert "../shared" not in section, "a path that exists on one machine only"


# --- --limit keeps every label class ----------------------------------------------------------------------


def case(index: int, label: LabelClass) -> BenchCase:
    return BenchCase(
        instance_id=f"o__n-{index}", model="m", repo="o/n", base_commit="0" * 40, patch_text="", label=label
    )


def test_limit_is_stratified_by_label() -> None:
    acceptable, defect, empty = LabelClass.ACCEPTABLE, LabelClass.DEFECT, LabelClass.EMPTY
    cases = [case(i, acceptable) for i in range(7)] + [case(i, defect) for i in range(7, 10)] + [case(10, empty)]
    picked = stratified(cases, 5)
    labels = [c.label for c in picked]
    assert len(picked) == 5 and set(labels) == {acceptable, defect, empty}
    assert labels.count(acceptable) >= labels.count(defect) >= labels.count(empty) == 1
    assert picked == sorted(picked, key=cases.index)  # the first of each class, in their original order
    assert [c.label for c in stratified(cases, 2)] == [acceptable, defect]  # the largest classes first
    assert stratified(cases, 50) == cases


def test_cli_limit_takes_both_acceptable_and_defect_traces(swe: dict[str, Path]) -> None:
    preds = [json.loads(line) for line in swe["preds"].read_text().splitlines()]
    first = ["acme__calc-1", "acme__calc-5"]  # the two resolved (acceptable) predictions lead the file
    preds.sort(key=lambda p: p["instance_id"] not in first)
    swe["preds"].write_text("".join(json.dumps(p) + "\n" for p in preds))
    code, output = invoke([*run_args(swe, jobs=1), "--limit", "2"])
    assert code == 0, output
    labels = sorted(r.label.value for r in read_rows(swe["out"] / "results.jsonl"))
    assert labels == ["acceptable", "defect"], labels


# --- the chart and the ETA ---------------------------------------------------------------------------------


def row(index: int, decision: Decision) -> TraceRow:
    fields = {"model": "m", "arm": "rules-only", "arm_stages": ["no_change"], "repo": "o/n", "repo_available": True}
    return TraceRow(instance_id=f"o__n-{index}", label=LabelClass.DEFECT, decision=decision, **fields)


def test_the_risk_coverage_chart_says_when_nothing_was_decided(tmp_path: Path) -> None:
    undecided = compute_metrics([row(i, Decision.UNCERTAIN) for i in range(3)], resamples=0)
    notes = plot_risk_coverage(undecided, tmp_path / "empty.png")
    assert (tmp_path / "empty.png").stat().st_size > 0
    assert notes and notes[0].startswith("nothing was decided"), notes
    rejected = row(0, Decision.REJECT).model_copy(update={"deciding_stage": "no_change"})
    decided = compute_metrics([rejected, row(1, Decision.UNCERTAIN)], resamples=0)
    assert plot_risk_coverage(decided, tmp_path / "some.png") == []


def test_the_eta_is_a_time_from_the_runs_own_pace() -> None:
    """rich's own column estimates speed over the last 30 s and shows -:--:-- when traces take longer."""
    clock = [1000.0]
    progress = Progress(EtaColumn(), get_time=lambda: clock[0], disable=True)
    task_id = progress.add_task("bench", total=4)
    task = progress.tasks[task_id]
    assert str(EtaColumn().render(task)) == "ETA after the first trace"
    clock[0] += 90.0  # one slow trace: 90 s
    progress.advance(task_id)
    assert str(EtaColumn().render(task)) == "ETA 0:04:30"  # three more at the same pace
    clock[0] += 10.0
    progress.advance(task_id)
    assert str(EtaColumn().render(task)) == "ETA 0:01:40"
