"""`cascade bench`: a self-made SWE-bench-format fixture with real git repos, replayed through real stages."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from cascade.bench.arms import ARMS, ArmBudget, get_arm
from cascade.bench.compare import compare, mcnemar_exact_p, paired_permutation_p
from cascade.bench.data import DevData, build_cases, gold_predictions, load_predictions, load_resolved, load_tasks
from cascade.bench.metrics import compute_metrics, metric_set
from cascade.bench.report import over_rejections
from cascade.bench.repos import RepoResolver, is_git_repo
from cascade.bench.results import read_rows
from cascade.bench.rows import BenchCase, LabelClass, TraceRow, TraceStatus
from cascade.bench.runner import RunOptions, run_bench
from cascade.cli import cli
from cascade.config import CascadeConfig
from cascade.context import ReviewContext
from cascade.errors import BadInput
from cascade.models import Decision, Outcome, Patch, ReviewRequest, StageResult
from cascade.stages.base import Stage
from cascade.stages.no_change import NoChangeStage
from tests.bench_support import MODEL, init_repo, run_args, run_cli
from tests.support import MIRROR_DIR, SWEBENCH_DIR

# --- test arms (top level: they are pickled into the worker processes) -------------------------------------


class SleepingStage:
    name = "sleeps"
    needs_sandbox = False
    title = "sleeps past the per-trace timeout"

    def run(self, ctx: ReviewContext) -> StageResult:
        time.sleep(60)
        return StageResult(stage=self.name, outcome=Outcome.ACCEPT)


class RaisingStage:
    name = "raises"
    needs_sandbox = False
    title = "a stage with a bug"

    def run(self, ctx: ReviewContext) -> StageResult:
        raise RuntimeError("stage bug")


class SlowArm:
    name = "test-slow"
    description = "times out"

    def stages(self, config: CascadeConfig) -> list[Stage]:
        return [SleepingStage()]

    def budget(self, config: CascadeConfig) -> ArmBudget:
        return ArmBudget()


class CrashingArm:
    name = "test-crash"
    description = "cannot even build its stage list"

    def stages(self, config: CascadeConfig) -> list[Stage]:
        raise RuntimeError("arm exploded")

    def budget(self, config: CascadeConfig) -> ArmBudget:
        return ArmBudget()


class BuggyStageArm:
    name = "test-buggy-stage"
    description = "Stage 0 passes, then a stage raises"

    def stages(self, config: CascadeConfig) -> list[Stage]:
        return [NoChangeStage(), RaisingStage()]

    def budget(self, config: CascadeConfig) -> ArmBudget:
        return ArmBudget(llm_calls=3, note="declared caps travel with the rows")


# --- end to end --------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_run_covers_every_label_class_resumes_and_report_recomputes(swe: dict[str, Path]) -> None:
    out = swe["out"]
    first = run_cli(run_args(swe, jobs=2))
    assert "7 trace(s) run, 0 already done" in first
    assert "ghost/missing" in first  # unavailable repos are named, not dropped
    rows = {r.instance_id: r for r in read_rows(out / "results.jsonl")}
    assert set(rows) == {f"acme__calc-{i}" for i in range(1, 6)} | {"ghost__missing-1", "ghost__missing-2"}

    ok = rows["acme__calc-1"]
    assert (ok.label, ok.status, ok.decision, ok.repo_available) == (
        LabelClass.ACCEPTABLE, TraceStatus.OK, Decision.UNCERTAIN, True,
    )  # fmt: skip
    assert [s.stage for s in ok.stages] == ["no_change", "hygiene", "static"] == ok.arm_stages
    caught = rows["acme__calc-2"]
    assert (caught.label, caught.decision, caught.deciding_stage) == (LabelClass.DEFECT, Decision.REJECT, "static")
    assert "static: reject" in caught.evidence
    empty = rows["acme__calc-3"]
    assert (empty.label, empty.decision, empty.deciding_stage) == (LabelClass.EMPTY, Decision.REJECT, "no_change")
    assert rows["acme__calc-4"].deciding_stage == "no_change"
    stale = rows["acme__calc-5"]
    assert (stale.status, stale.decision) == (TraceStatus.BAD_INPUT, Decision.UNCERTAIN)
    assert stale.error is not None and "does not apply" in stale.error
    ghost = rows["ghost__missing-1"]
    assert (ghost.repo_available, ghost.decision, ghost.status) == (False, Decision.UNCERTAIN, TraceStatus.OK)
    assert [(s.stage, s.outcome) for s in ghost.stages] == [
        ("no_change", Outcome.PASS), ("hygiene", Outcome.PASS), ("static", Outcome.SKIPPED),
    ]  # fmt: skip
    assert rows["ghost__missing-2"].decision == Decision.REJECT  # Stage 0 needs no checkout

    metrics = json.loads((out / "metrics.json").read_text())
    overall = metrics["arms"]["rules-only"]["overall"]
    # defects (incl. empty): calc-2,3,4 + ghost-1,2 = 5, all but ghost-1 rejected; acceptable: calc-1, calc-5
    assert (overall["catch"]["numerator"], overall["catch"]["denominator"]) == (4, 5)
    assert (overall["over_rejection"]["numerator"], overall["over_rejection"]["denominator"]) == (0, 2)
    assert (overall["coverage"]["numerator"], overall["coverage"]["denominator"]) == (4, 7)
    assert overall["risk"]["value"] == 0.0
    availability = metrics["arms"]["rules-only"]["repo_availability"]
    assert availability == {"acme/calc": "available", "ghost/missing": "unavailable"}
    assert metrics["arms"]["rules-only"]["by_availability"]["repo unavailable"]["traces"] == 2
    report = (out / "report.md").read_text()
    assert "Repository available vs unavailable" in report and "| ghost/missing | unavailable |" in report
    assert (out / "risk_coverage.png").read_bytes()[:4] == b"\x89PNG"
    assert (out / "COMMAND.txt").is_file() and len((out / "runs.jsonl").read_text().splitlines()) == 1

    second = run_cli(run_args(swe, jobs=1))
    assert "0 trace(s) run, 7 already done" in second
    assert len(read_rows(out / "results.jsonl")) == 7
    assert json.loads((out / "metrics.json").read_text()) == metrics

    run_cli(["bench", "report", str(out / "results.jsonl"), "--output", str(out / "again"), "--resamples", "500"])
    assert json.loads((out / "again" / "metrics.json").read_text()) == metrics


@pytest.mark.slow
def test_timeout_crash_and_buggy_stage_are_rows_and_the_run_goes_on(tmp_path: Path) -> None:
    def case(instance: str, patch: str) -> BenchCase:
        return BenchCase(
            instance_id=instance, model=MODEL, repo="ghost/missing", base_commit="0" * 40, patch_text=patch,
            label=LabelClass.DEFECT,
        )  # fmt: skip

    code = "--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"
    cases = [case("i-1", code), case("i-2", code)]
    out = tmp_path / "results.jsonl"
    arms = [SlowArm(), CrashingArm(), BuggyStageArm(), get_arm("rules-only")]
    options = RunOptions(jobs=2, timeout_seconds=2, progress=False)
    summary = run_bench(cases, arms, RepoResolver(), CascadeConfig(), out, options)
    assert summary.ran == 8
    rows = {(r.instance_id, r.arm): r for r in read_rows(out)}
    assert len(rows) == 8
    slow = rows[("i-1", "test-slow")]
    assert (slow.status, slow.decision) == (TraceStatus.TIMEOUT, Decision.UNCERTAIN)
    assert slow.cost.seconds < 30  # interrupted, not waited out
    crash = rows[("i-1", "test-crash")]
    assert crash.status == TraceStatus.ERROR and crash.error == "RuntimeError: arm exploded"
    buggy = rows[("i-2", "test-buggy-stage")]
    assert (buggy.status, buggy.decision) == (TraceStatus.OK, Decision.UNCERTAIN)  # a stage's bug is never accept
    assert buggy.stages[-1].outcome == Outcome.SKIPPED and "stage bug" in buggy.evidence
    assert buggy.arm_budget.llm_calls == 3
    assert rows[("i-2", "rules-only")].status == TraceStatus.OK

    again = run_bench(cases, arms, RepoResolver(), CascadeConfig(), out, options)
    assert (again.ran, again.skipped_existing) == (0, 8)
    retried = run_bench(cases, [CrashingArm()], RepoResolver(), CascadeConfig(), out, options.model_copy(
        update={"retry_errors": True}))  # fmt: skip
    assert retried.ran == 2  # only the crashed rows of the arm asked for run again
    after = read_rows(out)
    assert len(after) == 8 and len({r.key for r in after}) == 8  # one row per key, the timeouts untouched
    assert sum(r.status == TraceStatus.TIMEOUT for r in after) == 2


def test_torn_last_line_is_repaired_before_resuming(tmp_path: Path) -> None:
    row = TraceRow(
        instance_id="i", model="m", arm="rules-only", repo="o/n", label=LabelClass.EMPTY, decision=Decision.REJECT,
        repo_available=False,
    )  # fmt: skip
    out = tmp_path / "results.jsonl"
    out.write_text(row.model_dump_json() + "\n" + row.model_dump_json()[:40])
    assert [r.key for r in read_rows(out)] == [row.key]
    case = BenchCase(
        instance_id="j", model="m", repo="o/n", base_commit="0" * 40, patch_text="", label=LabelClass.EMPTY
    )
    run_bench([case], [get_arm("rules-only")], RepoResolver(), CascadeConfig(), out, RunOptions(progress=False))
    assert sorted(r.instance_id for r in read_rows(out)) == ["i", "j"]


# --- inputs ------------------------------------------------------------------------------------------------


def test_labels_from_results_gold_and_missing_results(swe: dict[str, Path]) -> None:
    tasks = load_tasks(swe["tasks"])
    preds = load_predictions(swe["preds"])
    labelled = build_cases(tasks, preds, load_resolved(swe["results"]))
    assert labelled.without_task == ["not__in-tasks-1"]
    labels = {c.instance_id: c.label for c in labelled.cases}
    assert labels["acme__calc-1"] == LabelClass.ACCEPTABLE
    assert labels["acme__calc-2"] == LabelClass.DEFECT
    assert labels["acme__calc-3"] == LabelClass.EMPTY
    unlabelled = build_cases(tasks, preds, None)  # e.g. resolved-submissions: all acceptable except empty
    assert {c.label for c in unlabelled.cases} == {LabelClass.ACCEPTABLE, LabelClass.EMPTY}
    gold = build_cases(tasks, gold_predictions(tasks), None)
    assert {(c.model, c.label) for c in gold.cases} == {("gold", LabelClass.ACCEPTABLE)}
    with pytest.raises(BadInput, match="not JSON"):
        load_resolved(swe["tasks"])
    no_list = swe["results"].with_name("report.json")
    no_list.write_text(json.dumps({"resolved_count": 2}))
    with pytest.raises(BadInput, match="'resolved' list"):
        load_resolved(no_list)


def test_cli_rejects_ambiguous_prediction_sets_and_unknown_arms(swe: dict[str, Path]) -> None:
    base = ["bench", "run", "--tasks", str(swe["tasks"]), "--output", str(swe["out"]), "--quiet"]
    both = CliRunner().invoke(cli, [*base, "--gold", "--predictions", str(swe["preds"])])
    assert both.exit_code != 0 and "exactly one prediction set" in str(both.exception)
    with pytest.raises(BadInput, match="unknown arm 'nope'"):
        get_arm("nope")
    assert "rules-only" in ARMS


def test_repo_layouts_bare_and_clone_with_short_timeout(tmp_path: Path) -> None:
    src = tmp_path / "src"
    init_repo(src, {"a.py": "x = 1\n"})
    repos = tmp_path / "repos"
    (repos / "o1").mkdir(parents=True)
    subprocess.run(["git", "clone", "-q", "--bare", str(src), str(repos / "o1" / "n1")], check=True)
    subprocess.run(["git", "clone", "-q", "--bare", str(src), str(repos / "o2+n2" / "repo")], check=True)
    subprocess.run(["git", "clone", "-q", str(src), str(repos / "o3__n3")], check=True)
    (repos / "o4__n4").mkdir()  # a plain directory is not a repository
    resolver = RepoResolver(repos, tmp_path / "cache")
    for repo in ("o1/n1", "o2/n2", "o3/n3"):
        assert resolver.resolve(repo).available, repo
    assert not resolver.resolve("o4/n4").available
    assert not is_git_repo(src / "sub") and is_git_repo(src)

    remotes = tmp_path / "remotes"
    subprocess.run(["git", "clone", "-q", "--bare", str(src), str(remotes / "o5" / "n5.git")], check=True)
    cloning = RepoResolver(None, tmp_path / "cache", clone=True, url_template=f"file://{remotes}/{{repo}}.git")
    cloned = cloning.resolve("o5/n5")
    assert cloned.available and cloned.path == str(tmp_path / "cache" / "o5__n5") and "cloned" in cloned.note
    started = time.perf_counter()
    unreachable = RepoResolver(
        None, tmp_path / "cache", clone=True, url_template="http://127.0.0.1:9/{repo}.git", probe_timeout=5
    ).resolve("o6/n6")
    assert not unreachable.available and "unreachable" in unreachable.note
    assert time.perf_counter() - started < 10


# --- metrics against hand-computed values ------------------------------------------------------------------


def _row(i: int, label: LabelClass, decision: Decision, arm: str = "a", stage: str | None = None) -> TraceRow:
    decided = decision != Decision.UNCERTAIN
    return TraceRow(
        instance_id=f"t{i:02d}", model="m", arm=arm, repo="o/r" if i % 2 else "o/s", label=label, decision=decision,
        deciding_stage=(stage or "s1") if decided else None, repo_available=True, arm_stages=["s1", "s2"],
    )  # fmt: skip


HAND = [
    (LabelClass.ACCEPTABLE, Decision.ACCEPT),
    (LabelClass.ACCEPTABLE, Decision.ACCEPT),
    (LabelClass.ACCEPTABLE, Decision.REJECT),
    (LabelClass.ACCEPTABLE, Decision.UNCERTAIN),
    (LabelClass.DEFECT, Decision.REJECT),
    (LabelClass.DEFECT, Decision.REJECT),
    (LabelClass.DEFECT, Decision.ACCEPT),
    (LabelClass.DEFECT, Decision.UNCERTAIN),
    (LabelClass.DEFECT, Decision.UNCERTAIN),
    (LabelClass.EMPTY, Decision.REJECT),
]


def test_metrics_match_hand_computed_values_and_bootstrap_is_seeded() -> None:
    rows = [_row(i, label, decision) for i, (label, decision) in enumerate(HAND)]
    m = metric_set(rows, seed=7, group="g", resamples=1000)
    assert (m.traces, m.defects, m.acceptable, m.decided, m.abstained) == (10, 6, 4, 7, 3)
    assert m.catch.value == 0.5 and (m.catch.numerator, m.catch.denominator) == (3, 6)
    assert m.miss.value == round(1 / 6, 4)
    assert m.over_rejection.value == 0.25 and m.over_rejection.denominator == 4
    assert m.coverage.value == 0.7
    assert m.risk.value == round(2 / 7, 4) and (m.risk.numerator, m.risk.denominator) == (2, 7)
    for name in ("catch", "miss", "over_rejection", "coverage", "risk"):
        e = getattr(m, name)
        assert e.low is not None and e.high is not None
        assert 0 <= e.low <= e.value <= e.high <= 1, name
        assert e.high > e.low, name  # 10 traces leave real uncertainty
    assert metric_set(rows, seed=7, group="g", resamples=1000) == m
    certain = metric_set([_row(i, LabelClass.DEFECT, Decision.REJECT) for i in range(5)], 7, "g", 200)
    assert (certain.catch.value, certain.catch.low, certain.catch.high) == (1.0, 1.0, 1.0)
    assert certain.over_rejection.value is None  # no acceptable trace: undefined, not 0


def test_per_stage_per_repo_and_label_breakdowns() -> None:
    rows = [_row(i, label, decision) for i, (label, decision) in enumerate(HAND)]
    rows[4] = _row(4, LabelClass.DEFECT, Decision.REJECT, stage="s2")
    arm = compute_metrics(rows, seed=1, resamples=200).arms["a"]
    assert arm.stages == ["s1", "s2"]
    s1, s2 = arm.by_stage
    assert (s1.alone.rejected, s2.alone.rejected) == (3, 1)
    assert (s2.cumulative.decided, s2.cumulative.risk.numerator) == (arm.overall.decided, arm.overall.risk.numerator)
    assert s2.cumulative.catch.numerator == arm.overall.catch.numerator == 3
    assert s1.cumulative.catch.numerator == 2
    assert arm.by_label["empty"].catch.value == 1.0 and arm.by_label["acceptable"].over_rejection.value == 0.25
    assert sum(m.traces for m in arm.by_repo.values()) == 10


def test_permutation_and_mcnemar_on_a_hand_computed_example() -> None:
    # diffs +1 +1 +1 -1: of the 16 sign patterns, |sum| >= 2 for 10 → p = 10/16
    assert paired_permutation_p([1, 1, 1, -1, 0, 0]) == 0.625
    # McNemar b=3, c=1: 2 * P(X <= 1 | n=4) = 2 * 5/16
    assert mcnemar_exact_p(3, 1) == 0.625
    assert mcnemar_exact_p(5, 0) == 0.0625 == paired_permutation_p([1] * 5)
    assert mcnemar_exact_p(0, 0) == 1.0 and paired_permutation_p([0, 0]) == 1.0
    many = paired_permutation_p([1.0] * 20, seed=3, resamples=5000)  # Monte Carlo branch
    assert 0 < many < 0.001 and many == paired_permutation_p([1.0] * 20, seed=3, resamples=5000)


def test_compare_pairs_commonly_decided_traces(tmp_path: Path) -> None:
    a = [_row(i, label, decision, arm="A") for i, (label, decision) in enumerate(HAND)]
    b_decisions = [
        Decision.ACCEPT, Decision.UNCERTAIN, Decision.ACCEPT, Decision.ACCEPT, Decision.REJECT,
        Decision.ACCEPT, Decision.REJECT, Decision.UNCERTAIN, Decision.REJECT, Decision.REJECT,
    ]  # fmt: skip
    b = [_row(i, HAND[i][0], d, arm="B") for i, d in enumerate(b_decisions)]
    c = compare(a, b, "A", "B", resamples=200)
    # both decided: t00 (both right), t02 (A wrong, B right), t04 (both right), t05 (A right, B wrong),
    # t06 (A wrong, B right), t09 (both right)
    assert c.commonly_decided == 6
    assert (c.a_right_b_wrong, c.a_wrong_b_right, c.both_right, c.both_wrong) == (1, 2, 3, 0)
    assert c.mcnemar_p == 1.0 and c.permutation_p == 1.0
    assert c.risk_difference == round(2 / 6 - 1 / 6, 4)
    assert c.coverage_difference == round(0.7 - 0.8, 4)

    path_a, path_b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    path_a.write_text("".join(r.model_dump_json() + "\n" for r in a))
    path_b.write_text("".join(r.model_dump_json() + "\n" for r in b))
    text = run_cli(["bench", "compare", str(path_a), str(path_b)])
    assert "McNemar discordant: A right & B wrong = 1, A wrong & B right = 2" in text
    assert "coverage difference (A − B, all common traces): -0.100" in text
    as_json = json.loads(run_cli(["bench", "compare", str(path_a), str(path_b), "--format", "json"]))
    assert as_json["commonly_decided"] == 6
    # the rows themselves, timings aside: 6 of the 10 traces got another decision from B
    assert "Rows, timings aside: 4 identical, 6 different, 0 only in A, 0 only in B." in text
    assert as_json["rows"]["different"][1] == {"instance_id": "t02", "model": "m", "fields": ["decision"]}


def test_compare_says_whether_two_runs_gave_the_same_rows_timings_aside() -> None:
    rows = [_row(i, label, decision) for i, (label, decision) in enumerate(HAND)]
    slower = [r.model_copy(update={"cost": r.cost.model_copy(update={"seconds": r.cost.seconds + 9})}) for r in rows]
    same = compare(rows, slower, "a", "a", resamples=0).rows
    assert (same.identical, same.different, same.only_a, same.only_b) == (10, [], 0, 0)
    changed = [*slower[:-1], slower[-1].model_copy(update={"evidence": "static: reject"})]
    differs = compare(rows, changed[1:], "a", "a", resamples=0).rows
    assert (differs.identical, differs.only_a, differs.only_b) == (8, 1, 0)
    assert [(d.instance_id, d.fields) for d in differs.different] == [(rows[-1].instance_id, ["evidence"])]


# --- the published data (skips when it is absent) ---------------------------------------------------------


@pytest.mark.swebench
def test_published_swebench_files_load_with_their_labels() -> None:
    dev = DevData(SWEBENCH_DIR)
    if not dev.has("lite"):
        pytest.skip("../shared/data/swebench is not here")
    tasks = dev.tasks("lite")
    preds, resolved = dev.agent_predictions("coder"), dev.agent_resolved("coder")
    cases = build_cases(tasks, preds, resolved, dev.agent_trajs("coder")).cases
    counts = {label: sum(c.label == label for c in cases) for label in LabelClass}
    assert counts == {LabelClass.ACCEPTABLE: 29, LabelClass.EMPTY: 16, LabelClass.DEFECT: 69}
    assert sum(c.trace_path is not None for c in cases) == 97
    moatless = "moatless-claude35"
    cases = build_cases(tasks, dev.agent_predictions(moatless), None, dev.agent_trajs(moatless)).cases
    assert sum(c.trace_path is not None and c.trace_path.endswith(".json") for c in cases) == 109
    resolver = RepoResolver(MIRROR_DIR)
    if MIRROR_DIR.is_dir() and (MIRROR_DIR / "sympy+sympy" / "repo").is_dir():
        assert resolver.resolve("sympy/sympy").available
    assert not resolver.resolve("django/django").available


def test_swebench_cases_get_the_harness_environment_unless_the_config_names_one() -> None:
    from cascade.bench.rows import BenchCase
    from cascade.bench.worker import config_for_case
    from cascade.config import CascadeConfig, parse_config

    def case(repo: str, version: str) -> BenchCase:
        return BenchCase(instance_id="x-1", model="m", repo=repo, base_commit="0" * 40, patch_text="", label="defect",
                         version=version)  # fmt: skip

    sympy = config_for_case(CascadeConfig(), case("sympy/sympy", "1.1"))
    assert sympy.env.python == "3.9" and "mpmath==1.3.0" in sympy.env.packages
    astropy = config_for_case(CascadeConfig(), case("astropy/astropy", "4.3"))
    assert astropy.env.build_extensions and astropy.probes.enabled
    old_astropy = config_for_case(CascadeConfig(), case("astropy/astropy", "1.3"))
    assert not old_astropy.probes.enabled
    # ... and the review says so: Stage 2 stays in the report, skipped with the table's reason, before the reviewer
    from cascade.bench.worker import case_stages

    names = [s.name for s in case_stages(get_arm("full-cascade"), old_astropy, case("astropy/astropy", "1.3"))]
    assert names[-2:] == ["probes", "reviewer"], names
    skipped = case_stages(get_arm("full-cascade"), old_astropy, case("astropy/astropy", "1.3"))[-2]
    result = skipped.run(ReviewContext(request=ReviewRequest(repo=".", patch_text=""), patch=Patch(text="", files=[])))
    assert result.outcome == Outcome.SKIPPED and "extension-helpers" in result.reason, result
    rules = [s.name for s in case_stages(get_arm("rules-only"), old_astropy, case("astropy/astropy", "1.3"))]
    assert "probes" not in rules
    explicit = parse_config({"env": {"python": "3.11"}})
    assert config_for_case(explicit, case("sympy/sympy", "1.1")) is explicit
    assert config_for_case(CascadeConfig(), case("someone/else", "1.0")) == CascadeConfig()


def test_the_report_lists_each_rejected_acceptable_patch_with_its_line() -> None:
    # a reader judges the label from the cited line
    def row(instance: str, label: LabelClass, decision: Decision, evidence: str) -> TraceRow:
        return TraceRow(
            instance_id=instance, model="m", arm="rules-only", repo="o/r", label=label, decision=decision,
            deciding_stage="static", evidence=evidence, repo_available=True,
        )  # fmt: skip

    cited = "static: reject — 2 patch-caused error(s) (ruff:F821:added-line ×1); first: a/f.py:9: Undefined name `X`"
    rows = [
        row("o__r-1", LabelClass.ACCEPTABLE, Decision.REJECT, cited),
        row("o__r-2", LabelClass.DEFECT, Decision.REJECT, "static: reject — other"),
        row("o__r-3", LabelClass.ACCEPTABLE, Decision.UNCERTAIN, ""),
    ]
    listed = over_rejections(rows)
    assert len(listed) == 3 and "o__r-1" in listed[2] and "a/f.py:9" in listed[2]
    assert over_rejections(rows[1:]) == ["None."]
