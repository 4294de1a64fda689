"""The GitHub Action: its entry script run the way action.yml runs it, against a local server speaking the GitHub
REST endpoints it uses, on real pull_request event payloads and a real git repository; plus lints of action.yml and
of the README's workflow."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from cascade.config import load_config
from cascade.errors import BadInput
from cascade.github_action.api import next_page
from cascade.github_action.event import IssueComment, parse_formats, read_inputs
from cascade.github_action.pr_review import MAX_REVIEW_COMMENTS, plan_review
from cascade.github_action.publish import (
    COMMENT_LIMIT,
    MARKER,
    clip_utf8,
    comment_body,
    find_own_comment,
    format_outputs,
)
from cascade.github_action.review import ReviewRun, linked_issue_numbers, review_config, review_env
from cascade.github_action.run import gate_exit_code
from cascade.models import Decision, Diagnostic, Evidence, EvidenceKind, Outcome, StageResult, StaticDetails, Verdict
from cascade.sandbox.process import is_secret_name
from tests.github_support import (
    FIXTURES,
    LLM_KEY,
    OWNER_REPO,
    ROOT,
    TOKEN,
    FakeGitHub,
    readme_workflow,
    serve,
)
from tests.support import run_git

BASE_FILES = {
    "pkg/__init__.py": "",
    "pkg/stats.py": "def mean(values):\n    return sum(values) / len(values)\n",
    "tests/test_stats.py": "from pkg.stats import mean\n\n\ndef test_mean():\n    assert mean([1, 2]) == 1.5\n",
    # Stages 1 and 2 off: a real change then ends "uncertain" in a second, with no tools run.
    "fast.yaml": "static:\n  enabled: false\nprobes:\n  enabled: false\n",
}
COSMETIC = "def mean(values):\n    # the arithmetic mean\n    return sum(values) / len(values)\n"
REAL_FIX = (
    "def mean(values):\n    if not values:\n        raise ValueError('mean of nothing')\n"
    "    return sum(values) / len(values)\n"
)
UNDEFINED_NAME = "def mean(values):\n    return sum(values) / len(valuez\n"  # syntax error: in the default allow-list


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    fake = FakeGitHub(issues={7: {"number": 7, "title": "mean() of [] crashes", "body": "ZeroDivisionError on []"}})
    fake.seed("LGTM, but please add a test", "maintainer")
    fake.seed(f"quoting the bot: {MARKER} accept!", "outside-dev")  # a person's comment with the marker
    fake.seed("ping", "maintainer")
    yield from serve(fake)


@pytest.fixture
def read_only_github() -> Iterator[FakeGitHub]:
    yield from serve(FakeGitHub(read_only=True))


# --------------------------------------------------------------------------------------------------------------------
# Running the entry script as the action does


@dataclass
class ActionRun:
    code: int
    stdout: str
    stderr: str
    summary: str
    outputs: dict[str, str]
    out_dir: Path

    def everything(self) -> str:
        return "\n".join([self.stdout, self.stderr, self.summary, json.dumps(self.outputs)])


def parse_output_file(text: str) -> dict[str, str]:
    """$GITHUB_OUTPUT as the runner reads it: `name=value` lines and `name<<DELIM` blocks."""
    values: dict[str, str] = {}
    lines = iter(text.splitlines())
    for line in lines:
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delimiter = line.split("<<", 1)
            block: list[str] = []
            for inner in lines:
                if inner == delimiter:
                    break
                block.append(inner)
            values[name] = "\n".join(block)
        else:
            name, _, value = line.partition("=")
            values[name] = value
    return values


@pytest.fixture
def pr_repo(make_repo: Any) -> dict[str, Any]:
    """A repository with the base commit and three candidate heads on branches."""
    repo: Path = make_repo(BASE_FILES)
    shas = {"base": run_git(repo, "rev-parse", "HEAD").strip()}
    for name, text in [("cosmetic", COSMETIC), ("fix", REAL_FIX), ("undefined", UNDEFINED_NAME)]:
        run_git(repo, "checkout", "-q", "-b", name, shas["base"])
        (repo / "pkg/stats.py").write_text(text)
        run_git(repo, "commit", "-qam", name)
        shas[name] = run_git(repo, "rev-parse", "HEAD").strip()
    run_git(repo, "checkout", "-q", "main")
    return {"path": repo, **shas}


def run_action(
    tmp_path: Path,
    server: FakeGitHub,
    repo: dict[str, Any],
    fixture: str,
    head: str,
    *,
    base: str | None = None,
    event_name: str = "pull_request",
    cwd: Path | None = None,
    **inputs: str,
) -> ActionRun:
    event = json.loads((FIXTURES / f"{fixture}.json").read_text())
    event["pull_request"]["base"]["sha"] = base or repo["base"]
    event["pull_request"]["head"]["sha"] = repo[head]
    run_dir = tmp_path / f"run-{len(list(tmp_path.glob('run-*')))}"
    runner_temp = run_dir / "runner"
    runner_temp.mkdir(parents=True)
    (run_dir / "event.json").write_text(json.dumps(event))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "INPUT_", "RUNNER_"))}
    env |= {
        "GITHUB_EVENT_NAME": event_name,
        "GITHUB_EVENT_PATH": str(run_dir / "event.json"),
        "GITHUB_API_URL": server.url,
        "GITHUB_WORKSPACE": str(repo["path"]),
        "GITHUB_STEP_SUMMARY": str(run_dir / "summary.md"),
        "GITHUB_OUTPUT": str(run_dir / "output.txt"),
        "GITHUB_SERVER_URL": "https://github.com",
        "GITHUB_REPOSITORY": OWNER_REPO,
        "GITHUB_RUN_ID": "1234",
        "RUNNER_TEMP": str(runner_temp),
        "INPUT_GITHUB_TOKEN": TOKEN,
        "CASCADE_LLM_API_KEY": LLM_KEY,
        "INPUT_CONFIG": "fast.yaml",
        "INPUT_FAIL_ON": "reject",
        "INPUT_COMMENT": "true",
        "INPUT_FORMAT": "markdown",
    }
    env |= {f"INPUT_{name.upper()}": value for name, value in inputs.items()}
    (run_dir / "summary.md").touch()
    (run_dir / "output.txt").touch()
    done = subprocess.run(
        [sys.executable, "-I", "-m", "cascade.github_action"],  # action.yml's command, from the runner's temp dir
        cwd=cwd or runner_temp,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return ActionRun(
        code=done.returncode,
        stdout=done.stdout,
        stderr=done.stderr,
        summary=(run_dir / "summary.md").read_text(),
        outputs=parse_output_file((run_dir / "output.txt").read_text()),
        out_dir=runner_temp / "cascade-1234-1",
    )


def assert_no_token(run: ActionRun, server: FakeGitHub) -> None:
    for secret in (TOKEN, LLM_KEY):
        assert secret not in run.everything()
        assert all(secret not in c["body"] for c in server.comments)
        assert all(secret not in body for _, _, body in server.requests)
        for path in run.out_dir.rglob("*"):
            if path.is_file():
                assert secret not in path.read_text(errors="replace"), path


# --------------------------------------------------------------------------------------------------------------------
# The action end to end


@pytest.mark.slow
def test_opened_creates_the_comment_and_synchronize_edits_it(
    tmp_path: Path, github: FakeGitHub, pr_repo: dict[str, Any]
) -> None:
    first = run_action(tmp_path, github, pr_repo, "pull_request_opened", "cosmetic")
    assert first.code == 1, first.stdout + first.stderr  # Stage 0 rejects a comment-only change; fail-on reject
    assert first.outputs["decision"] == "reject"
    assert first.outputs["stage"] == "no_change"
    report = Path(first.outputs["report-path"])
    assert Verdict.model_validate_json(report.read_text()).decision == Decision.REJECT
    assert Path(first.outputs["markdown-path"]).read_text().startswith("<!-- cascade-report -->")
    created = github.gate_comments()
    assert len(created) == 1
    assert "**reject**" in created[0]["body"] and created[0]["body"].rstrip().endswith(MARKER)
    assert set(first.outputs) <= set(yaml.safe_load((ROOT / "action.yml").read_text())["outputs"])
    assert first.outputs["comment-url"].endswith(f"#issuecomment-{created[0]['id']}")
    assert "**reject**" in first.summary
    # The person's comment carrying the marker was neither edited nor taken for the gate's own.
    assert github.comments[1]["body"] == f"quoting the bot: {MARKER} accept!"
    # The task text: PR title and body plus linked issue #7; #99 does not exist and is noted, not fatal.
    task = (first.out_dir / "task.md").read_text()
    assert "Fix mean() of an empty list" in task and "ZeroDivisionError on []" in task
    assert "linked issue #99 could not be fetched (HTTP 404: Not Found)" in first.summary
    assert ("GET", f"/repos/{OWNER_REPO}/issues/99", "") in github.requests

    second = run_action(tmp_path, github, pr_repo, "pull_request_synchronize", "fix")
    assert second.code == 0, second.stdout + second.stderr  # uncertain does not fail under fail-on reject
    assert second.outputs["decision"] == "uncertain"
    assert second.outputs["stage"] == ""
    edited = github.gate_comments()
    assert [c["id"] for c in edited] == [created[0]["id"]], "one comment in total, edited in place"
    assert "**uncertain**" in edited[0]["body"] and "**reject**" not in edited[0]["body"]
    assert pr_repo["fix"][:12] in edited[0]["body"]
    assert [r[0] for r in github.writes()] == ["POST", "PATCH"]
    # Listing followed the Link header past the first page of two comments.
    assert any("page=2" in r[1] for r in github.requests)
    for run in (first, second):
        assert_no_token(run, github)


@pytest.mark.parametrize(
    ("fail_on", "head", "code"),
    [("uncertain", "fix", 2), ("never", "cosmetic", 0)],  # the whole table: test_fail_on_table
)
@pytest.mark.slow
def test_exit_status_follows_fail_on(
    tmp_path: Path, github: FakeGitHub, pr_repo: dict[str, Any], fail_on: str, head: str, code: int
) -> None:
    run = run_action(tmp_path, github, pr_repo, "pull_request_opened", head, fail_on=fail_on, comment="false")
    assert run.code == code, run.stdout + run.stderr
    assert run.outputs["decision"] in {"reject", "uncertain"}
    assert Path(run.outputs["report-path"]).is_file()
    assert github.writes() == [], "comment: false writes nothing"
    assert "PR comment turned off" in run.summary
    if code:
        assert re.search(rf"^::error title=cascade gate::{run.outputs['decision']}: ", run.stdout, re.M)


@pytest.mark.slow
def test_fork_pr_writes_nothing_and_reports_in_the_summary(
    tmp_path: Path, github: FakeGitHub, pr_repo: dict[str, Any]
) -> None:
    # The fork ships its own `cascade` package; run from the checkout, `-I` still keeps it off sys.path.
    hostile = pr_repo["path"] / "cascade"
    hostile.mkdir()
    (hostile / "__init__.py").write_text("raise SystemExit(97)\n")
    run = run_action(tmp_path, github, pr_repo, "pull_request_fork", "cosmetic", cwd=pr_repo["path"])
    assert run.code == 1, run.stdout + run.stderr  # the gate ran, and still gates per fail-on
    assert github.writes() == []
    assert "fork PR: the token is read-only" in run.summary and "**reject**" in run.summary
    assert "::notice title=cascade gate::fork PR" in run.stdout
    assert run.outputs["decision"] == "reject" and run.outputs["comment-url"] == ""
    assert_no_token(run, github)


@pytest.mark.slow
def test_read_only_token_falls_back_without_failing(
    tmp_path: Path, read_only_github: FakeGitHub, pr_repo: dict[str, Any]
) -> None:
    run = run_action(tmp_path, read_only_github, pr_repo, "pull_request_opened", "fix", fail_on="reject")
    assert run.code == 0, run.stdout + run.stderr
    assert [r[0] for r in read_only_github.writes()] == ["POST"]  # tried once, no retry storm
    assert "could not write the PR comment (HTTP 403: Resource not accessible by integration)" in run.summary
    assert re.search(r"^::warning title=cascade gate::could not write the PR comment", run.stdout, re.M)
    assert run.outputs["decision"] == "uncertain"
    assert_no_token(run, read_only_github)


@pytest.mark.slow
def test_static_findings_become_annotations_and_sarif(
    tmp_path: Path, github: FakeGitHub, pr_repo: dict[str, Any]
) -> None:
    run = run_action(
        tmp_path, github, pr_repo, "pull_request_opened", "undefined", config="", format="sarif", comment="false"
    )
    assert run.code == 1, run.stdout + run.stderr
    assert run.outputs["decision"] == "reject" and run.outputs["stage"] == "static"
    annotations = re.findall(r"^::error file=pkg/stats.py,line=\d+,.*$", run.stdout, re.M)
    assert annotations
    sarif = json.loads(Path(run.outputs["sarif-path"]).read_text())
    assert sarif["version"] == "2.1.0"
    assert any(
        r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "pkg/stats.py"
        for r in sarif["runs"][0]["results"]
    )
    # Only workflow commands reach stdout from the renderer: no stray line that a runner could misread.
    assert all(line.startswith(("::", "cascade gate: ")) for line in run.stdout.splitlines())


@pytest.mark.slow
def test_a_review_that_cannot_run_fails_even_with_fail_on_never(
    tmp_path: Path, github: FakeGitHub, pr_repo: dict[str, Any]
) -> None:
    github.seed(f"## ✅ cascade: **accept**\n{MARKER}", "github-actions[bot]", "Bot")  # an earlier run's comment
    missing = "0123456789abcdef0123456789abcdef01234567"
    run = run_action(
        tmp_path, github, pr_repo, "pull_request_synchronize", "fix", base=missing, fail_on="never", config=""
    )
    assert run.code == 3, run.stdout + run.stderr
    assert run.outputs["decision"] == "error" and run.outputs["report-path"] == ""
    errors = re.findall(r"^::error title=cascade gate::cascade could not run \(exit 3\): .*$", run.stdout, re.M)
    assert len(errors) == 1
    assert "could not run" in run.summary and "fetch-depth: 0" in run.summary
    # The stale verdict of the earlier run is replaced, not left standing on the PR.
    (comment,) = github.gate_comments()
    assert "could not run" in comment["body"] and "**accept**" not in comment["body"]
    assert "Traceback" not in run.stdout + run.stderr


def test_other_events_are_bad_input(tmp_path: Path, github: FakeGitHub, pr_repo: dict[str, Any]) -> None:
    run = run_action(tmp_path, github, pr_repo, "pull_request_opened", "fix", event_name="push")
    assert run.code == 3
    assert (
        run.stdout.strip() == "::error title=cascade gate::cascade gates pull requests: run it on 'pull_request', "
        "not 'push'"
    )
    assert github.requests == []


def test_bad_input_value_is_one_line(tmp_path: Path, github: FakeGitHub, pr_repo: dict[str, Any]) -> None:
    run = run_action(tmp_path, github, pr_repo, "pull_request_opened", "fix", fail_on="sometimes")
    assert run.code == 3
    assert run.stdout.splitlines() == [
        "::error title=cascade gate::input 'fail-on' must be reject, uncertain or never, got 'sometimes'"
    ]


# --------------------------------------------------------------------------------------------------------------------
# Pieces, in process


def test_linked_issues_use_githubs_closing_keywords() -> None:
    text = "Fixes #12, closes: #3 and Resolved #12. See #5; fixed #42 (this PR); refixes #8"
    assert linked_issue_numbers(text, own_number=42) == [12, 3]


def test_next_page_reads_the_link_header() -> None:
    link = '<https://api.github.com/x?page=3>; rel="next", <https://api.github.com/x?page=9>; rel="last"'
    assert next_page(link) == "https://api.github.com/x?page=3"
    assert next_page('<https://api.github.com/x?page=1>; rel="prev"') is None
    assert next_page("") is None


def test_outputs_with_line_breaks_use_the_delimiter_form() -> None:
    text = format_outputs({"decision": "reject", "note": "two\nlines"})
    assert parse_output_file(text) == {"decision": "reject", "note": "two\nlines"}
    assert text.startswith("decision=reject\nnote<<ghadelimiter_")


def test_summary_and_comment_stay_under_githubs_limits() -> None:
    note = "\n> truncated\n"
    clipped = clip_utf8("é" * 600_000, 1024 * 1024 - 1024, note)  # 1.2 MB of two-byte characters
    assert len(clipped.encode()) <= 1024 * 1024 - 1024 and clipped.endswith(note)
    body = comment_body("x" * 100_000, "a" * 40, "https://github.com/o/r/actions/runs/1")
    assert len(body) < COMMENT_LIMIT and body.rstrip().endswith(MARKER) and "Comment truncated" in body


def test_only_a_bots_marked_comment_is_the_gates() -> None:
    person = IssueComment.model_validate({"id": 1, "body": MARKER, "user": {"login": "p", "type": "User"}})
    bot = IssueComment.model_validate({"id": 2, "body": f"x\n{MARKER}", "user": {"login": "b[bot]", "type": "Bot"}})
    assert find_own_comment([person, bot]) == bot
    assert find_own_comment([person]) is None


def test_fail_on_table() -> None:
    def verdict(decision: Decision) -> ReviewRun:
        return ReviewRun(exit_code=0, verdict=Verdict(decision=decision, reason="r"), report_path=Path("r.json"))

    table = {(d, f): gate_exit_code(verdict(d), f) for d in Decision for f in ("reject", "uncertain", "never")}
    assert table == {
        (Decision.ACCEPT, "reject"): 0,
        (Decision.ACCEPT, "uncertain"): 0,
        (Decision.ACCEPT, "never"): 0,
        (Decision.REJECT, "reject"): 1,
        (Decision.REJECT, "uncertain"): 1,
        (Decision.REJECT, "never"): 0,
        (Decision.UNCERTAIN, "reject"): 0,
        (Decision.UNCERTAIN, "uncertain"): 2,
        (Decision.UNCERTAIN, "never"): 0,
    }
    could_not_run = ReviewRun(exit_code=4, message="boom", report_path=Path("r.json"))
    assert {gate_exit_code(could_not_run, f) for f in ("reject", "uncertain", "never")} == {4}


def test_config_comes_from_the_base_commit_with_the_model_merged_in(tmp_path: Path, make_repo: Any) -> None:
    repo: Path = make_repo({"gate.yaml": "llm:\n  max_calls: 7\nprobes:\n  enabled: false\n"})
    base = run_git(repo, "rev-parse", "HEAD").strip()
    (repo / "gate.yaml").write_text("static:\n  enabled: false\n")  # the PR loosens its own gate
    run_git(repo, "commit", "-qam", "PR edits the config")
    env = {
        "GITHUB_EVENT_PATH": "event.json",
        "GITHUB_WORKSPACE": str(repo),
        "RUNNER_TEMP": str(tmp_path),
        "INPUT_CONFIG": "./gate.yaml",
        "INPUT_MODEL": "openai/gpt-4o-mini",
    }
    inputs = read_inputs(env)
    inputs.out_dir.mkdir()
    merged = review_config(inputs, base, {"CASCADE_LLM_API_KEY": LLM_KEY})
    assert merged is not None
    config = load_config(merged)
    assert (config.llm.model, config.llm.max_calls) == ("openai/gpt-4o-mini", 7)
    assert config.llm.api_key_env == "CASCADE_LLM_API_KEY" and LLM_KEY not in merged.read_text()
    assert (config.static.enabled, config.probes.enabled) == (True, False), "the base commit's config, not the PR's"
    with pytest.raises(BadInput, match="not in the base commit"):
        review_config(read_inputs({**env, "INPUT_CONFIG": "new.yaml"}), base, {})
    assert review_config(read_inputs({**env, "INPUT_CONFIG": "", "INPUT_MODEL": ""}), base, {}) is None
    # `model: none` turns the LLM stages off even when the config names a model (it was passed on as a model name).
    (repo / "gate.yaml").write_text("llm:\n  model: openai/gpt-4o-mini\n")
    run_git(repo, "commit", "-qam", "config names a model")
    head = run_git(repo, "rev-parse", "HEAD").strip()
    off = review_config(read_inputs({**env, "INPUT_MODEL": "none"}), head, {})
    assert off is not None and load_config(off).llm.model is None


def test_the_review_gets_the_llm_key_but_not_the_github_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INPUT_GITHUB_TOKEN", TOKEN)
    monkeypatch.setenv("ACTIONS_RUNTIME_TOKEN", TOKEN)
    monkeypatch.setenv("CASCADE_LLM_API_KEY", LLM_KEY)
    env = review_env()
    assert env["CASCADE_LLM_API_KEY"] == LLM_KEY and TOKEN not in env.values()
    # ...and the sandbox that runs PR code drops the key variables the README names.
    assert all(is_secret_name(name) for name in ("CASCADE_LLM_API_KEY", "ANTHROPIC_API_KEY", "GITHUB_TOKEN"))


def test_input_values_are_checked() -> None:
    env = {"GITHUB_EVENT_PATH": "e.json", "INPUT_COMMENT": "maybe"}
    with pytest.raises(BadInput, match="'comment' must be true or false"):
        read_inputs(env)
    assert parse_formats("sarif, markdown json") == ["sarif", "markdown"]
    with pytest.raises(BadInput, match="'html'"):
        parse_formats("html")
    assert "5e3c7a" not in repr(read_inputs({"GITHUB_EVENT_PATH": "e", "INPUT_GITHUB_TOKEN": TOKEN}))


# --------------------------------------------------------------------------------------------------------------------
# Lints: action.yml and the README's workflow


def check_jsonschema(schema: str, path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", schema, str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_action_yml_matches_the_actions_schema() -> None:
    done = check_jsonschema("vendor.github-actions", ROOT / "action.yml")
    assert done.returncode == 0, done.stdout + done.stderr


def test_action_yml_inputs_are_declared_and_steps_have_a_shell() -> None:
    text = (ROOT / "action.yml").read_text()
    action = yaml.safe_load(text)
    used = set(re.findall(r"\$\{\{\s*inputs\.([A-Za-z0-9_-]+)\s*\}\}", text))
    assert used and used <= set(action["inputs"]), used - set(action["inputs"])
    assert set(action["inputs"]) - {"python"} <= used, "every declared input is passed on"
    steps = action["runs"]["steps"]
    assert action["runs"]["using"] == "composite"
    for step in steps:
        if "run" in step:
            assert step.get("shell") == "bash", step["name"]
            assert "${{" not in step["run"], f"{step['name']}: expressions go through env, not into the script"
    assert any(
        "python -I -m cascade.github_action" in s.get("run", "").replace('/bin/python"', " python") for s in steps
    )
    gate = next(s for s in steps if s.get("id") == "gate")
    for name in ("decision", "stage", "report-path", "sarif-path", "markdown-path", "text-path", "comment-url"):
        assert action["outputs"][name]["value"] == f"${{{{ steps.gate.outputs.{name} }}}}"
    assert gate["env"]["INPUT_GITHUB_TOKEN"] == "${{ inputs.github-token }}"
    assert action["inputs"]["github-token"]["default"] == "${{ github.token }}"


def test_readme_workflow_matches_the_workflow_schema(tmp_path: Path) -> None:
    workflow = tmp_path / ".github" / "workflows" / "cascade.yml"
    workflow.parent.mkdir(parents=True)
    workflow.write_text(readme_workflow())
    done = check_jsonschema("vendor.github-workflows", workflow)
    assert done.returncode == 0, done.stdout + done.stderr


def test_readme_workflow_is_the_safe_one() -> None:
    text = readme_workflow()
    workflow = yaml.safe_load(text)
    triggers = workflow[True]  # YAML 1.1 reads the key `on` as true
    assert list(triggers) == ["pull_request"] and "pull_request_target" not in text
    assert workflow["permissions"] == {"contents": "read", "pull-requests": "write"}
    (job,) = workflow["jobs"].values()
    assert "github.event.pull_request.user.type == 'Bot'" in job["if"] and "labels" in job["if"]
    checkout = next(s for s in job["steps"] if s.get("uses", "").startswith("actions/checkout@"))
    assert checkout["with"]["fetch-depth"] == 0 and checkout["with"]["persist-credentials"] is False
    gate = next(s for s in job["steps"] if s.get("id") == "cascade")
    action_inputs = yaml.safe_load((ROOT / "action.yml").read_text())["inputs"]
    assert set(gate.get("with", {})) <= set(action_inputs)


# --------------------------------------------------------------------------------------------------------------------
# The PR review: line comments for located findings, one review per head commit, a dry run that posts nothing

VALUEZ = "def mean(values):\n    return sum(values) / len(valuez)\n"  # F821 on an added line: a static reject


@pytest.fixture
def valuez_repo(pr_repo: dict[str, Any]) -> dict[str, Any]:
    repo = pr_repo["path"]
    run_git(repo, "checkout", "-q", "-b", "valuez", pr_repo["base"])
    (repo / "pkg/stats.py").write_text(VALUEZ)
    run_git(repo, "commit", "-qam", "valuez")
    pr_repo["valuez"] = run_git(repo, "rev-parse", "HEAD").strip()
    run_git(repo, "checkout", "-q", "main")
    return pr_repo


def test_dry_run_prints_the_comment_and_the_review_and_posts_nothing(
    tmp_path: Path, github: FakeGitHub, valuez_repo: dict[str, Any]
) -> None:
    run = run_action(tmp_path, github, valuez_repo, "pull_request_opened", "valuez", config="", dry_run="true")
    assert run.code == 1 and run.outputs["decision"] == "reject", run.stdout + run.stderr
    assert github.writes() == [], "a dry run posts nothing"
    assert "cascade gate (dry run): the PR comment it would write:" in run.stdout
    assert "<!-- cascade-report -->" in run.stdout
    payload = json.loads(run.stdout.split("line comment(s)):\n", 1)[1].split("\n}\n", 1)[0] + "\n}")
    (comment,) = payload["comments"]  # ruff's F821 and pyright's undefined variable: one comment at their line
    assert (comment["path"], comment["line"], comment["side"]) == ("pkg/stats.py", 2, "RIGHT")
    assert "ruff F821" in comment["body"] and "pyright reportUndefinedVariable" in comment["body"]
    assert payload["commit_id"] == valuez_repo["valuez"] and payload["event"] == "COMMENT"
    assert "dry run: nothing was posted" in run.summary


def test_the_review_is_written_once_per_head_and_updated_on_a_rerun(
    tmp_path: Path, github: FakeGitHub, valuez_repo: dict[str, Any]
) -> None:
    github.diff_lines = {"pkg/stats.py": {1, 2}}
    # A person's review quoting the marker of this head is not the gate's own.
    github.reviews.append(
        {
            "id": 1,
            "pr": 42,
            "body": f"<!-- cascade-review head={valuez_repo['valuez']} --> lgtm",
            "commit_id": valuez_repo["valuez"],
            "user": {"login": "someone", "type": "User"},
        }
    )
    first = run_action(tmp_path, github, valuez_repo, "pull_request_opened", "valuez", config="")
    assert first.outputs["review-url"].endswith(f"#pullrequestreview-{github.reviews[1]['id']}"), first.stdout
    assert len(github.reviews) == 2 and len(github.review_comments) == 1
    assert github.review_comments[0]["line"] == 2 and "valuez" in github.review_comments[0]["body"]
    second = run_action(tmp_path, github, valuez_repo, "pull_request_synchronize", "valuez", config="")
    assert second.outputs["review-url"] == first.outputs["review-url"]
    assert len(github.reviews) == 2 and len(github.review_comments) == 1, "updated, never duplicated"
    assert [m for m, p, _ in github.review_writes()] == ["POST", "PUT"]
    assert github.reviews[0]["body"].endswith("lgtm")


def test_a_finding_off_the_diff_goes_in_the_review_body_and_comments_stay_within_the_limit() -> None:
    diagnostics = [
        Diagnostic(
            tool="ruff", rule="F821", path="pkg/a.py", line=n, message=f"Undefined name `x{n}`", fingerprint=f"f{n}"
        )
        for n in range(1, 61)
    ]
    stage = StageResult(
        stage="static",
        outcome=Outcome.REJECT,
        evidence=[
            Evidence(
                kind=EvidenceKind.STATIC,
                grounded=True,
                summary="s",
                diagnostics=diagnostics,
                details=StaticDetails(
                    counts_by_class={}, class_of={}, total=len(diagnostics), tool_configs={}, rejecting=True
                ),
            )
        ],
    )
    verdict = Verdict(decision=Decision.REJECT, deciding_stage="static", reason="r", stages=[stage])
    plan = plan_review(verdict, "c0ffee" * 6 + "abcd", {"pkg/a.py": set(range(3, 61))})
    assert len(plan.comments) == MAX_REVIEW_COMMENTS
    assert all(c.line in range(3, 61) for c in plan.comments)
    assert len({(c.path, c.line) for c in plan.comments}) == MAX_REVIEW_COMMENTS
    assert len(plan.not_anchored) == 60 - MAX_REVIEW_COMMENTS
    assert "`pkg/a.py:1` (not on this diff)" in plan.body and "(over the comment limit)" in plan.body
    assert len(json.dumps(plan.payload())) < 1_000_000


def test_every_action_input_and_output_is_documented_in_the_readme() -> None:
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    section = (ROOT / "README.md").read_text().split("## Gate agent pull requests (GitHub Action)", 1)[1]
    rows = dict(re.findall(r"^\| `([\w-]+)` \| ([^|]+) \|", section, re.M))
    assert set(rows) == set(action["inputs"]), "the README's input table lists every input of action.yml, no more"
    for name, spec in action["inputs"].items():
        shown = rows[name].strip()
        assert str(spec["default"]) in shown or shown.startswith("("), (name, shown, spec["default"])
    for name in action["outputs"]:
        assert f"`{name}`" in section, name
