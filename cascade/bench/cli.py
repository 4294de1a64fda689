"""`cascade bench run | report | compare` — replay SWE-bench traces and score the gate.

Exit codes: 0 done (crashed or timed-out traces are rows, not failures of the run), 3 bad input or usage,
4 internal error. Heavy modules (numpy, matplotlib, the pipeline) load inside the commands so `cascade review`
starts fast.
"""

from __future__ import annotations

import json
import shlex
import signal
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

import click

from cascade.bench.data import DATA_ENV
from cascade.bench.repos import REPOS_ENV
from cascade.bench.rows import DEFAULT_RESAMPLES, DEFAULT_SEED, BenchCase, TraceRow
from cascade.errors import BadInput, check_output_path
from cascade.options import config_option, quiet_option

if TYPE_CHECKING:
    from cascade.bench.executors import Executor
    from cascade.bench.repos import RepoResolver

RESULTS_FILE = "results.jsonl"
COMMAND_FILE = "COMMAND.txt"
RUNS_FILE = "runs.jsonl"
DEFAULT_CACHE = Path.home() / ".cache" / "cascade" / "repos"
PATH = click.Path(path_type=str)


@click.group()
def bench() -> None:
    """Replay SWE-bench-format predictions through the gate and score it against execution labels."""


def in_data_dir(path: str | None, data_dir: str | None, option: str) -> str | None:
    """``path`` as given when it exists (or is absolute), else under ``data_dir``; a relative path found in neither
    is bad input that says where it was looked for and how to name the data directory."""
    if path is None or Path(path).is_absolute() or Path(path).exists():
        return path
    if data_dir and (Path(data_dir) / path).exists():
        return str(Path(data_dir) / path)
    unset = f"and no data directory is set ({DATA_ENV} or --data-dir)"
    where = f"nor under --data-dir {data_dir}" if data_dir else unset
    raise BadInput(f"{option} {path}: not found here {where}")


def _load_cases(
    tasks: str | None, predictions: str | None, results: str | None, trajs: str | None, gold: bool, with_tests: bool
) -> tuple[list[BenchCase], list[str]]:
    from cascade.bench.data import build_cases, gold_predictions, load_predictions, load_resolved, load_tasks
    from cascade.bench.merged_prs import merged_pr_cases

    if tasks is None:
        if predictions or gold or results or trajs:
            raise BadInput("--predictions, --gold, --results and --trajs need --tasks")
        return [], []
    if gold == (predictions is not None):
        raise BadInput("give exactly one prediction set: --predictions FILE or --gold")
    if gold and (results or trajs):
        raise BadInput("--results and --trajs belong to --predictions; gold patches are all acceptable")
    if with_tests and not gold:
        raise BadInput("--with-tests belongs to --gold (the pull request as merged: patch + test_patch)")
    task_rows = load_tasks(tasks)
    if with_tests:
        return merged_pr_cases(task_rows), []
    preds = gold_predictions(task_rows) if gold else load_predictions(predictions or "")
    resolved = load_resolved(results) if results else None
    case_set = build_cases(task_rows, preds, resolved, trajs)
    return list(case_set.cases), case_set.without_task


def _commit_cases(commit_files: tuple[str, ...], ranges: tuple[str, ...], resolver: RepoResolver) -> list[BenchCase]:
    """Merged fix commits named in list files or ranges, each as a pull request against its first parent."""
    from cascade.bench.fix_commits import commits_in_range, fix_commit_case, parse_range, read_commit_list

    commits = [c for path in commit_files for c in read_commit_list(path)]
    for spec in ranges:
        repo, rev_range = parse_range(spec)
        commits.extend(commits_in_range(_repo_path(resolver, repo), repo, rev_range))
    cases: dict[str, BenchCase] = {}
    for commit in commits:
        case = fix_commit_case(_repo_path(resolver, commit.repo), commit)
        cases.setdefault(case.instance_id, case)  # a commit named twice (a list and a range) runs once
    return list(cases.values())


def _repo_path(resolver: RepoResolver, repo: str) -> str:
    location = resolver.resolve(repo)
    if location.path is None:
        raise BadInput(f"merged commits of {repo} need its repository: {location.note}")
    return location.path


def _record_invocation(out_dir: Path, summary_json: str) -> None:
    """Keep the exact command beside the results, so every number there can be reproduced."""
    command = shlex.join(["cascade", *sys.argv[1:]])
    with (out_dir / COMMAND_FILE).open("a", encoding="utf-8") as f:
        f.write(command + "\n")
    entry = {"finished": datetime.now(timezone.utc).isoformat(timespec="seconds"), "command": command}
    entry["summary"] = json.loads(summary_json)
    with (out_dir / RUNS_FILE).open("a", encoding="utf-8") as f:
        f.write(json.dumps(entry) + "\n")


@bench.command("run")
@click.option(
    "--data-dir",
    default=None,
    envvar=DATA_ENV,
    show_envvar=True,
    type=click.Path(file_okay=False, path_type=str),
    help="Where relative --tasks, --predictions, --results and --trajs paths are found when they are not here.",
)
@click.option("--tasks", default=None, help="SWE-bench task rows (JSONL, Hugging Face schema).")
@click.option("--predictions", default=None, help="Predictions JSONL: instance_id, model_name_or_path, model_patch.")
@click.option("--results", default=None, help='Harness results JSON {"resolved": [...]}; none = all acceptable.')
@click.option("--trajs", default=None, help="Directory of <instance_id>.* agent trajectories (any format).")
@click.option("--gold", is_flag=True, help="Replay the task rows' gold patches as the prediction set.")
@click.option(
    "--with-tests", is_flag=True, help="With --gold: each row's patch + test_patch together (the PR as merged)."
)
@click.option(
    "--commits",
    "commit_files",
    multiple=True,
    help="Merged commits to replay (lines 'owner/name <sha> [subject]'), each against its first parent; repeatable.",
)
@click.option(
    "--commit-range",
    "commit_ranges",
    multiple=True,
    help="owner/name:A..B — first-parent commits of the range that change code and tests; repeatable.",
)
@click.option("--output", "out_dir", required=True, help=f"Output directory ({RESULTS_FILE}, metrics, report).")
@click.option(
    "--repos-dir",
    default=None,
    envvar=REPOS_ENV,
    show_envvar=True,
    help="Local repositories: DIR/<owner>__<name>, DIR/<owner>/<name>, or DIR/<owner>+<name>/repo; bare or not.",
)
@click.option("--cache-dir", default=str(DEFAULT_CACHE), show_default=True, help="Where --clone puts repositories.")
@click.option("--clone", is_flag=True, help="Clone repositories missing locally (short reachability timeout).")
@click.option("--url-template", default="https://github.com/{repo}.git", show_default=True)
@click.option("--arm", "arm_names", multiple=True, default=["rules-only"], show_default=True, help="Arm(s) to run.")
@click.option(
    "--executor",
    type=click.Choice(["local", "ray"]),
    default="local",
    show_default=True,
    help="local: a process pool here; ray: one Ray task per trace (pip install 'cascade-gate[ray]'; docs/ray.md).",
)
@click.option(
    "--ray-address",
    default=None,
    help="With --executor ray: 'auto' (this node's cluster), ray://HOST:10001, HOST:PORT; none = start a local Ray.",
)
@click.option(
    "--jobs", default=1, show_default=True, type=click.IntRange(1, 64), help="Worker processes (a local Ray's CPUs)."
)
@click.option("--timeout", default=600.0, show_default=True, type=click.FloatRange(min=1), help="Seconds per trace.")
@config_option("YAML config for the stages.")
@click.option("--repo", "repo_filter", multiple=True, help="Only these repos (owner/name); repeatable.")
@click.option("--instance", "instance_filter", multiple=True, help="Only these instance ids; repeatable.")
@click.option(
    "--limit",
    default=None,
    type=click.IntRange(min=1),
    help="Only N cases after filters, stratified by label (each label class present, shares kept).",
)
@click.option("--available-only", is_flag=True, help="Only cases whose repository is available locally.")
@click.option("--retry-errors", is_flag=True, help="Re-run rows that crashed or timed out.")
@click.option(
    "--reports", "reports_dir", default=None, help="Also write each trace's full verdict (JSON) into this directory."
)
@click.option("--model", default=None, help="litellm model string for the LLM stages (overrides llm.model).")
@click.option("--api-base", default=None, help="OpenAI-compatible server URL for --model (overrides llm.api_base).")
@click.option("--seed", default=DEFAULT_SEED, show_default=True, type=int, help="Bootstrap seed.")
@click.option(
    "--resamples", default=DEFAULT_RESAMPLES, show_default=True, type=click.IntRange(min=0), help="Bootstrap resamples."
)
@quiet_option("No progress bar.")
def run_command(
    data_dir: str | None,
    tasks: str | None,
    predictions: str | None,
    results: str | None,
    trajs: str | None,
    gold: bool,
    with_tests: bool,
    commit_files: tuple[str, ...],
    commit_ranges: tuple[str, ...],
    out_dir: str,
    repos_dir: str | None,
    cache_dir: str,
    clone: bool,
    url_template: str,
    arm_names: tuple[str, ...],
    executor: str,
    ray_address: str | None,
    jobs: int,
    timeout: float,
    config_file: str | None,
    repo_filter: tuple[str, ...],
    instance_filter: tuple[str, ...],
    limit: int | None,
    available_only: bool,
    retry_errors: bool,
    reports_dir: str | None,
    model: str | None,
    api_base: str | None,
    seed: int,
    resamples: int,
    quiet: bool,
) -> None:
    """Replay one prediction set; rows are appended to OUTPUT/results.jsonl (re-running resumes)."""
    from cascade.bench.arms import get_arm
    from cascade.bench.data import stratified
    from cascade.bench.repos import RepoResolver
    from cascade.bench.results import read_rows
    from cascade.bench.runner import RunOptions, run_bench
    from cascade.config import load_config
    from cascade.interrupt import raise_interrupt
    from cascade.llm.overrides import with_llm_overrides

    if repos_dir is not None and not Path(repos_dir).is_dir():
        raise BadInput(f"--repos-dir is not a directory: {repos_dir}")
    runner = _executor(executor, ray_address, jobs, repos_dir, cache_dir, clone, url_template)
    arms = [get_arm(name) for name in dict.fromkeys(arm_names)]
    config = with_llm_overrides(load_config(config_file), model, api_base=api_base)
    tasks, predictions, results, trajs = (
        in_data_dir(path, data_dir, option)
        for path, option in (
            (tasks, "--tasks"),
            (predictions, "--predictions"),
            (results, "--results"),
            (trajs, "--trajs"),
        )
    )
    cases, without_task = _load_cases(tasks, predictions, results, trajs, gold, with_tests)
    if tasks is None and not (commit_files or commit_ranges):
        raise BadInput("nothing to replay: give --tasks with a prediction set, or --commits / --commit-range")
    # with Ray, each node clones into its own cache: the driver only looks
    resolver = RepoResolver(repos_dir, cache_dir, clone=clone and executor == "local", url_template=url_template)
    cases += _commit_cases(commit_files, commit_ranges, resolver)
    cases = [c for c in cases if (not repo_filter or c.repo in repo_filter)]
    cases = [c for c in cases if (not instance_filter or c.instance_id in instance_filter)]
    if available_only:
        cases = [c for c in cases if resolver.resolve(c.repo).available]
    cases = stratified(cases, limit) if limit else cases  # small samples keep every label class
    if without_task:
        click.echo(f"{len(without_task)} prediction(s) have no task row in {tasks} and are not replayed", err=True)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    reports = str(Path(reports_dir).resolve()) if reports_dir else None
    options = RunOptions(
        jobs=jobs, timeout_seconds=timeout, retry_errors=retry_errors, progress=not quiet, reports_dir=reports
    )
    signal.signal(signal.SIGTERM, raise_interrupt)  # `kill` stops the run as Ctrl-C does: workers and trees too
    summary = run_bench(cases, arms, resolver, config, out / RESULTS_FILE, options, runner)
    unavailable = sorted({c.repo for c in cases if not resolver.resolve(c.repo).available})
    _record_invocation(out, summary.model_dump_json())
    outputs = _write_reports(read_rows(out / RESULTS_FILE), out, seed, resamples)
    click.echo(
        f"{summary.ran} trace(s) run, {summary.skipped_existing} already done; status {summary.statuses}; "
        f"decisions {summary.decisions}; {summary.wall_seconds:.1f} s wall"
        + (f", {summary.traces_per_minute:.2f} traces/minute" if summary.traces_per_minute else "")
        + (f" at --jobs {jobs}" if executor == "local" else " on Ray")
    )
    if unavailable:
        where = (
            "here (--clone: the Ray nodes clone them)"
            if clone and executor == "ray"
            else "(rows kept, no-checkout stages only)"
        )
        click.echo(f"repositories unavailable {where}: {', '.join(unavailable)}")
    click.echo(f"wrote {out / RESULTS_FILE}, {outputs}")


def _executor(
    kind: str, ray_address: str | None, jobs: int, repos_dir: str | None, cache_dir: str, clone: bool, url_template: str
) -> Executor:
    """Built before any data is read, so a missing Ray is one line and exit 3 at once."""
    from cascade.bench.executors import ExecutorSpec, RepoSource, make_executor

    if ray_address is not None and kind != "ray":
        raise BadInput("--ray-address belongs to --executor ray")
    repos = RepoSource(
        repos_dir=str(Path(repos_dir).resolve()) if repos_dir else None,
        cache_dir=cache_dir,
        clone=clone,
        url_template=url_template,
    )
    spec = ExecutorSpec(kind="ray" if kind == "ray" else "local", jobs=jobs, ray_address=ray_address or "", repos=repos)
    return make_executor(spec)


def _write_reports(rows: list[TraceRow], out: Path, seed: int, resamples: int) -> str:
    from cascade.bench.report import write_outputs

    outputs = write_outputs(rows, out, seed=seed, resamples=resamples)
    return ", ".join(Path(p).name for p in (outputs.metrics, outputs.report, outputs.plot))


@bench.command("report")
@click.argument("results_jsonl")
@click.option(
    "--output", "output_dir", default=None, type=PATH, help="Output directory [default: the JSONL's directory]."
)
@click.option("--seed", default=DEFAULT_SEED, show_default=True, type=int, help="Bootstrap seed.")
@click.option(
    "--resamples", default=DEFAULT_RESAMPLES, show_default=True, type=click.IntRange(min=0), help="Bootstrap resamples."
)
def report_command(results_jsonl: str, output_dir: str | None, seed: int, resamples: int) -> None:
    """Recompute metrics.json, report.md and risk_coverage.png from RESULTS_JSONL alone."""
    from cascade.bench.results import read_rows

    rows = read_rows(results_jsonl)
    out = Path(output_dir) if output_dir else Path(results_jsonl).resolve().parent
    click.echo(f"{len(rows)} rows → {out}: {_write_reports(rows, out, seed, resamples)}")


@bench.command("compare")
@click.argument("a_jsonl")
@click.argument("b_jsonl")
@click.option("--arm-a", default=None, help="Arm of A to compare (needed when A holds several).")
@click.option("--arm-b", default=None, help="Arm of B to compare (needed when B holds several).")
@click.option("--format", "fmt", type=click.Choice(["markdown", "json"]), default="markdown", show_default=True)
@click.option("--output", default=None, help="Write here instead of stdout.")
@click.option(
    "--seed",
    default=DEFAULT_SEED,
    show_default=True,
    type=int,
    help="Seed of the bootstrap and Monte Carlo permutation test.",
)
def compare_command(
    a_jsonl: str, b_jsonl: str, arm_a: str | None, arm_b: str | None, fmt: str, output: str | None, seed: int
) -> None:
    """Paired comparison of two result sets on their common (instance, model) traces; of two red-team runs
    (``redteam.jsonl``), whether each case gave the same row."""
    from cascade.bench.compare import compare, only_arm
    from cascade.bench.report import render_comparison
    from cascade.bench.results import read_rows
    from cascade.redteam.compare import case_identity, is_case_rows, read_cases, render_case_identity

    if output:
        check_output_path(output)
    if is_case_rows(a_jsonl):  # two `cascade bench redteam` runs: their rows, case by case
        identity = case_identity(read_cases(a_jsonl), read_cases(b_jsonl))
        text = (
            identity.model_dump_json(indent=2) + "\n"
            if fmt == "json"
            else render_case_identity(identity, a_jsonl, b_jsonl)
        )
    else:
        name_a, rows_a = only_arm(read_rows(a_jsonl), arm_a, a_jsonl, "--arm-a")
        name_b, rows_b = only_arm(read_rows(b_jsonl), arm_b, b_jsonl, "--arm-b")
        result = compare(rows_a, rows_b, name_a, name_b, seed=seed)
        text = result.model_dump_json(indent=2) + "\n" if fmt == "json" else render_comparison(result)
    if output:
        Path(output).write_text(text, encoding="utf-8")
    else:
        click.echo(text, nl=False)


def _register_suites() -> None:
    from cascade.bench.scans.cli import scan_command  # scans of the dev data: `cascade bench scan NAME`
    from cascade.redteam.cli import redteam  # the red-team suite (README): `cascade bench redteam`

    bench.add_command(redteam)
    bench.add_command(scan_command)


_register_suites()
