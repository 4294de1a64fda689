"""Reproducible reports: no temporary paths in any report, times left out on request, and the demo's full cascade
recorded against a scripted OpenAI-compatible server, then replayed from its cassette byte for byte."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from cascade.config import CascadeConfig
from cascade.context import ReviewContext
from cascade.errors import EXIT_BAD_INPUT
from cascade.llm.errors import CassetteMiss
from cascade.models import (
    Cost,
    Decision,
    Evidence,
    EvidenceKind,
    Outcome,
    ProbeDetails,
    ProbeRunSide,
    ReviewRequest,
    SideEffect,
    StageResult,
    StaticTargetsNote,
    ToolTiming,
    TraceScanDetails,
    Verdict,
)
from cascade.patch import parse_patch
from cascade.pipeline import review
from cascade.probesources.generated import GeneratedProbeSource
from cascade.report import render
from cascade.stable import (
    BASE,
    PATCHED,
    PYRIGHT_CONFIG_DIR,
    SANDBOX_RUN_DIR,
    reproducible,
    run_placeholders,
    stable_result,
)
from cascade.stages.no_change import NoChangeStage
from cascade.stages.reviewer import ReviewerStage
from cascade.stages.static import StaticStage
from cascade.tools import find_tool
from tests.llm_server import Received, Reply, ScriptedServer, vote
from tests.support import run_git

ROOT = Path(__file__).resolve().parents[1]
KEY_ENV = "CASCADE_TEST_LLM_KEY"
SECRET = "sk-test-SECRET-0ddba11"
PATCH = "diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"
DEMO = ["review", "examples/demo/clean.diff", "--issue", "examples/demo/issue.md"]
PROBE = """\
import pytest
from examples.demo.calc.stats import stdev


def test_sample_stdev():
    assert stdev([1, 2, 3]) == 1.0


def test_single_value_raises():
    with pytest.raises(ValueError):
        stdev([5.0])
"""


@pytest.fixture
def demo_repo(tmp_path: Path) -> Path:
    """A git repository holding examples/demo at the same path, so the demo's diffs apply as written."""
    repo = tmp_path / "demo"
    shutil.copytree(
        ROOT / "examples" / "demo", repo / "examples" / "demo", ignore=shutil.ignore_patterns("__pycache__")
    )
    (repo / "examples" / "__init__.py").write_text("")
    run_git(repo, "init", "-q", "-b", "main")
    run_git(repo, "add", "-A")
    run_git(repo, "commit", "-q", "-m", "demo")
    return repo


def cascade(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, KEY_ENV: SECRET}
    argv = [sys.executable, "-m", "cascade", *args]
    return subprocess.run(argv, cwd=repo, env=env, capture_output=True, text=True, timeout=900)


def verdict_with(evidence: Evidence, seconds: float = 1.25) -> Verdict:
    stage = StageResult(stage="probes", outcome=Outcome.PASS, evidence=[evidence], cost=Cost(seconds=seconds))
    return Verdict(decision=Decision.UNCERTAIN, reason="r", stages=[stage], cost=Cost(seconds=seconds + 1))


# -- paths: one rewrite when a stage's result is recorded --------------------------------------------------------


def test_stage_results_name_no_temporary_path(tmp_path: Path) -> None:
    parent = tmp_path / "cascade-abc12345"
    base, patched = parent / "base-cascade-abc12345", parent / "patched-cascade-abc12345"
    pyright_dir = f"{tempfile.gettempdir()}/cascade-pyright-x1y2z3_4"
    side = ProbeRunSide(status="behavioural_fail", message="", excerpt=f"rootdir: {parent}")
    details = ProbeDetails(
        probe="p",
        origin="generated",
        test_id=f"{patched}/test_m.py::test_x",
        base=side,
        patched=side,
        executed_changed_lines={str(patched / "m.py"): [3]},
        probe_file="",
        source="generated",
        verdict="reject",
    )
    effect = SideEffect(
        kind="file_write", target=f"{tempfile.gettempdir()}/cascade-run-ab12cd34/home/.bashrc", source="home_diff"
    )
    evidence = Evidence(
        kind=EvidenceKind.PROBE,
        grounded=True,
        summary=f"ran in {patched}",
        commands=[f"cd {base} && pyright -p {pyright_dir}/pyrightconfig.json --rootdir={base}"],
        details=details,
    )
    effects = Evidence(
        kind=EvidenceKind.TRACE_SCAN, grounded=True, summary="s", details=TraceScanDetails(side_effects=[effect])
    )
    result = StageResult(stage="s", outcome=Outcome.PASS, reason=f"{patched}/m.py failed", evidence=[evidence, effects])
    stable = stable_result(result, run_placeholders(base, patched))
    text = stable.model_dump_json()
    assert str(tmp_path) not in text and "x1y2z3_4" not in text
    ev = stable.evidence[0]
    assert ev.commands == [f"cd {BASE} && pyright -p {PYRIGHT_CONFIG_DIR}/pyrightconfig.json --rootdir={BASE}"]
    assert isinstance(ev.details, ProbeDetails)
    assert ev.details.test_id == f"{PATCHED}/test_m.py::test_x"
    assert ev.details.executed_changed_lines == {f"{PATCHED}/m.py": [3]}
    assert ev.details.base.excerpt == "rootdir: <worktrees>"
    assert stable.evidence[1].details == TraceScanDetails(
        side_effects=[effect.model_copy(update={"target": f"{SANDBOX_RUN_DIR}/home/.bashrc"})]
    )
    assert (ev.summary, stable.reason) == (f"ran in {PATCHED}", f"{PATCHED}/m.py failed")


@pytest.mark.slow
def test_static_evidence_is_relative_and_its_command_reruns(demo_repo: Path, tmp_path: Path) -> None:
    """Stage 1 on the demo's broken fix: the report says <base>/<patched>, and the command works once filled in."""
    patch = (demo_repo / "examples" / "demo" / "fix.diff").read_text()
    request = ReviewRequest(repo=str(demo_repo), patch_text=patch, config=CascadeConfig())
    verdict = review(request, stages=[NoChangeStage(), StaticStage()])
    assert (verdict.decision, verdict.deciding_stage) == (Decision.REJECT, "static")
    assert tempfile.gettempdir() + "/" not in verdict.model_dump_json()
    rejecting = verdict.stages[-1].evidence[0]
    assert [d.path for d in rejecting.diagnostics] == ["examples/demo/calc/report.py"]
    pyright_cmd = next(c for c in rejecting.commands if c.startswith(f"cd {PATCHED} && ") and "pyright" in c)
    assert f"-p {PYRIGHT_CONFIG_DIR}/pyrightconfig.json" in pyright_cmd
    config = rejecting.details.tool_configs["pyright"]
    assert config["extraPaths"] == [PATCHED]
    markdown = render(verdict, "markdown")
    assert "&lt;patched&gt;</code> the same checkout with the patch applied" in markdown

    # re-run it as the report says: a checkout with the patch for <patched>, the shown config for the other
    checkout = tmp_path / "checkout"
    run_git(demo_repo, "worktree", "add", "--detach", str(checkout), "HEAD")
    subprocess.run(["git", "-C", str(checkout), "apply"], input=patch, text=True, check=True)
    config_dir = tmp_path / "pyright-config"
    config_dir.mkdir()
    filled = json.dumps(config).replace(PATCHED, str(checkout))
    (config_dir / "pyrightconfig.json").write_text(filled)
    assert pyright_cmd.startswith(f"cd {PATCHED} && <pyright> "), "the executable is a placeholder, never a path"
    command = pyright_cmd.replace(PATCHED, str(checkout)).replace(PYRIGHT_CONFIG_DIR, str(config_dir))
    command = command.replace("<pyright>", shlex.quote(find_tool("pyright") or "pyright"))
    rerun = subprocess.run(command, shell=True, capture_output=True, text=True, timeout=300)
    messages = [d["message"] for d in json.loads(rerun.stdout)["generalDiagnostics"]]
    assert '"stdev" is unknown import symbol' in messages


# -- times: kept in a normal report, left out of a reproducible one ---------------------------------------------


def test_reproducible_leaves_out_wall_clock_times_only() -> None:
    details = StaticTargetsNote(
        changed=["m.py"],
        dependents=[],
        names=[],
        renamed={},
        tool_seconds=[ToolTiming(tool="ruff", tree="<base>", seconds=0.31)],
    )
    evidence = Evidence(
        kind=EvidenceKind.INFO, grounded=True, summary="1 failed in 0.28s", details=details, seconds=0.5
    )
    timed = verdict_with(evidence)
    same = reproducible(timed)
    assert same.reproducible and not timed.reproducible
    assert same.cost.seconds == 0 and same.stages[0].cost.seconds == 0 and same.stages[0].evidence[0].seconds == 0
    assert same.stages[0].evidence[0].details == details.model_copy(
        update={"tool_seconds": [ToolTiming(tool="ruff", tree="<base>", seconds=0.0)]}
    )
    assert same.stages[0].evidence[0].summary == "1 failed in <t>s"
    assert reproducible(verdict_with(evidence, seconds=9.0)) == same  # what differed between the runs is gone
    for fmt in ("text", "markdown"):
        assert "1.25" in render(timed, fmt) and "1.25" not in render(same, fmt)
        assert "times left out (reproducible report)" in render(same, fmt)


# -- the demo, end to end: record against the server, replay with it stopped ------------------------------------


def demo_script(request: Received) -> Reply:
    """The probe generator gets a probe that fails on base and passes on the fix; each reviewer vote accepts."""
    system = request.body["messages"][0]["content"]
    if "pytest test file" in system:
        return Reply(content=f"```python\n{PROBE}```")
    return vote("accept", "the probe E1 now passes on the patch", ["E1"])


def llm_config(tmp_path: Path, api_base: str) -> Path:
    cfg = tmp_path / "llm.yaml"
    cfg.write_text(
        f"llm:\n  model: openai/demo\n  api_base: {api_base}\n  api_key_env: {KEY_ENV}\n"
        "  max_retries: 0\n  timeout_seconds: 30\nreviewer:\n  votes: 3\n"
    )
    return cfg


def run_to_file(repo: Path, common: list[str], mode: str, fmt: str, out: Path) -> bytes:
    path = out / f"{mode}.{fmt}"
    proc = cascade(repo, *common, "--llm-mode", mode, "--format", fmt, "--output", str(path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return path.read_bytes()


@pytest.mark.slow
def test_demo_records_then_replays_byte_identically(demo_repo: Path, tmp_path: Path) -> None:
    srv = ScriptedServer(demo_script).start()
    cassette = tmp_path / "demo.cassette.json"
    common = [*DEMO, "--config", str(llm_config(tmp_path, srv.api_base)), "--llm-cassette", str(cassette)]
    try:
        recorded_json = run_to_file(demo_repo, common, "record", "json", tmp_path)
    finally:
        srv.stop()
    report = json.loads(recorded_json)
    assert (report["decision"], report["deciding_stage"], report["reproducible"]) == ("accept", "reviewer", True)
    assert report["cost"]["llm_calls"] == len(srv.received)  # every request is accounted in the report
    probes = next(s for s in report["stages"] if s["stage"] == "probes")
    if probes["outcome"] != "skipped":  # where a sandbox runs tests, the generated probe was validated
        assert probes["cost"]["llm_calls"] >= 1
        assert any(e["kind"] == "probe" and e["details"]["origin"] == "generated" for e in probes["evidence"])
    reviewer = report["stages"][-1]
    assert reviewer["cost"]["llm_calls"] == 3
    assert [e["details"]["decision"] for e in reviewer["evidence"] if e["kind"] == "review_vote"] == ["accept"] * 3
    assert SECRET not in cassette.read_text() and tempfile.gettempdir() + "/" not in recorded_json.decode()

    # The recorded run's report in each format: what `--format F --output` writes is `render(verdict, F)`.
    recorded_verdict = Verdict.model_validate_json(recorded_json)
    recorded = {"json": recorded_json, **{f: render(recorded_verdict, f).encode() for f in ("markdown", "text")}}
    assert render(recorded_verdict, "json").encode() == recorded_json
    # The server is stopped: any call would fail, so equal reports mean every answer came from the cassette.
    for fmt, expected in recorded.items():
        assert run_to_file(demo_repo, common, "replay", fmt, tmp_path) == expected, fmt


def test_replay_miss_is_not_swallowed_by_the_llm_stages(tmp_path: Path) -> None:
    """Both LLM users turn model failures into notes or `uncertain`; a replay miss must get past them and the
    pipeline's crash guard, or a replay would quietly report something its recording never said."""
    cassette = tmp_path / "empty.cassette.json"
    cassette.write_text('{"version": 1, "interactions": {}}\n')
    llm = {"model": "openai/demo", "cassette": str(cassette), "cassette_mode": "replay"}
    cfg = CascadeConfig.model_validate({"llm": llm})
    request = ReviewRequest(repo=".", patch_text=PATCH, issue_text="fix x", config=cfg)
    with pytest.raises(CassetteMiss, match="replay miss"):
        review(request, stages=[ReviewerStage()], with_repo=False)
    ctx = ReviewContext(request=request, patch=parse_patch(PATCH, cfg.no_change))
    with pytest.raises(CassetteMiss, match="replay miss"):
        GeneratedProbeSource(cfg).propose(ctx, [])


@pytest.mark.slow
def test_replay_miss_ends_the_review_with_exit_3(demo_repo: Path, tmp_path: Path) -> None:
    cassette = tmp_path / "empty.cassette.json"
    cassette.write_text('{"version": 1, "interactions": {}}\n')
    cfg = llm_config(tmp_path, "http://127.0.0.1:9/v1")  # nothing listens: a replay must not call out anyway
    proc = cascade(demo_repo, *DEMO, "--config", str(cfg), "--llm-cassette", str(cassette), "--llm-mode", "replay")
    assert proc.returncode == EXIT_BAD_INPUT
    assert proc.stdout == ""  # no verdict: a replay that cannot reproduce its recording has none to give
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("cascade: error: LLM cassette replay miss: no recorded reply #1")
    assert "re-record with --llm-mode record" in lines[0]


@pytest.mark.slow
def test_normal_run_keeps_its_times(demo_repo: Path, tmp_path: Path) -> None:
    proc = cascade(demo_repo, *DEMO, "--format", "json")  # no model, no cassette: stages 0-2 run, Stage 3 skips
    assert proc.returncode == 2, proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    assert report["reproducible"] is False
    static = next(s for s in report["stages"] if s["stage"] == "static")
    assert static["cost"]["seconds"] > 0 and report["cost"]["seconds"] >= static["cost"]["seconds"]
    assert tempfile.gettempdir() + "/" not in proc.stdout
    cheap = tmp_path / "cheap.yaml"  # --reproducible is a rendering rule: Stage 0 alone shows it
    cheap.write_text("static: {enabled: false}\nprobes: {enabled: false}\n")
    forced = json.loads(cascade(demo_repo, *DEMO, "--config", str(cheap), "--format", "json", "--reproducible").stdout)
    assert forced["reproducible"] is True
    assert forced["cost"]["seconds"] == 0 and all(s["cost"]["seconds"] == 0 for s in forced["stages"])
