"""The trace_scan stage through the real CLI: an unsafe command in the agent's trace rejects the patch with the
command and step as evidence; a clean trace, or trace_scan.mode: evidence, hands on to the next stage."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from cascade.cli import cli
from tests.support import MakeRepo, diff_of

CLEAN_STEPS = [
    {"action": "python reproduce.py", "observation": "ZeroDivisionError"},
    {"action": "edit 1:2\nimport os\nos.system('rm -rf ~/')\nend_of_edit", "observation": "edited"},
    {"action": "python -m pytest tests/ -q", "observation": "1 passed"},
]
UNSAFE_STEP = {"action": "echo 'export PATH=$HOME/.local/bin:$PATH' >> ~/.bashrc", "observation": ""}


def review(make_repo: MakeRepo, tmp_path: Path, steps: list[dict[str, str]], *extra: str) -> tuple[int, dict]:
    repo = make_repo({"calc.py": "def ratio(a, b):\n    return a / b\n"})
    patch = tmp_path / "fix.diff"
    patch.write_text(diff_of(repo, {"calc.py": "def ratio(a, b):\n    return a / b if b else 0.0\n"}))
    trace = tmp_path / "agent.traj"
    trace.write_text(json.dumps({"trajectory": steps}))
    args = ["review", str(patch), "--repo", str(repo), "--trace", str(trace), "--format", "json", *extra]
    result = CliRunner().invoke(cli, [*args, "--config", str(config_without_slow_stages(tmp_path))])
    return result.exit_code, json.loads(result.output)


def config_without_slow_stages(tmp_path: Path, trace_scan: str = "reject") -> Path:
    path = tmp_path / f"config-{trace_scan}.yaml"
    path.write_text(f"static: {{enabled: false}}\nprobes: {{enabled: false}}\ntrace_scan: {{mode: {trace_scan}}}\n")
    return path


def stage(verdict: dict, name: str) -> dict:
    return next(s for s in verdict["stages"] if s["stage"] == name)


def test_unsafe_command_in_the_trace_rejects_with_the_command_as_evidence(make_repo: MakeRepo, tmp_path: Path) -> None:
    code, verdict = review(make_repo, tmp_path, [*CLEAN_STEPS, UNSAFE_STEP])
    assert verdict["decision"] == "reject" and verdict["deciding_stage"] == "trace_scan"
    assert code == 1
    evidence = stage(verdict, "trace_scan")["evidence"][0]
    assert evidence["grounded"] is True
    assert evidence["commands"] == [UNSAFE_STEP["action"]]
    record = evidence["details"]["side_effects"][0]
    assert record["source"] == "trace_scan" and record["detail"].startswith("step 3: shell-profile")


def test_clean_trace_passes_and_file_content_in_edits_is_not_a_command(make_repo: MakeRepo, tmp_path: Path) -> None:
    _, verdict = review(make_repo, tmp_path, CLEAN_STEPS)
    assert stage(verdict, "trace_scan")["outcome"] == "pass"
    assert verdict["decision"] != "reject"


def test_evidence_mode_reports_without_rejecting(make_repo: MakeRepo, tmp_path: Path) -> None:
    repo = make_repo({"calc.py": "def ratio(a, b):\n    return a / b\n"})
    patch = tmp_path / "fix.diff"
    patch.write_text(diff_of(repo, {"calc.py": "def ratio(a, b):\n    return a / b if b else 0.0\n"}))
    trace = tmp_path / "agent.traj"
    trace.write_text(json.dumps({"trajectory": [UNSAFE_STEP]}))
    config = config_without_slow_stages(tmp_path, trace_scan="evidence")
    args = ["review", str(patch), "--repo", str(repo), "--trace", str(trace), "--format", "json", "--config"]
    result = CliRunner().invoke(cli, [*args, str(config)])
    verdict = json.loads(result.output)
    scan = stage(verdict, "trace_scan")
    assert scan["outcome"] == "pass" and scan["evidence"][0]["kind"] == "trace_scan"
    assert verdict["decision"] != "reject"
