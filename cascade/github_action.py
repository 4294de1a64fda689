"""The GitHub Action's entry script (`python -I -m cascade.github_action`, run by action.yml).

It reads the pull-request event, builds the task text (PR title and body, plus the issues it closes), runs
`cascade review --git BASE...HEAD` as a subprocess, and then reports the verdict the ways GitHub offers: one
persistent PR comment (found again by a hidden marker and edited on re-runs), the job summary, step outputs, check
annotations and, on request, a SARIF file for `github/codeql-action/upload-sarif`.

Exit status: per the `fail-on` input for a verdict; 3 (bad input) or 4 (internal error) with one line when the gate
could not run — whatever `fail-on` says, because a gate that could not run must not pass silently.

Secrets: the GitHub token goes to the GitHub API only (never to `cascade review`, never printed); the LLM key
(CASCADE_LLM_API_KEY, or the variable the config names in `llm.api_key_env`) stays in the environment for the LLM
client only, and the sandbox scrubs it (with every *TOKEN*/*KEY* name) before PR code runs.
"""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError

from cascade.errors import EXIT_BAD_INPUT, EXIT_INTERNAL, BadInput
from cascade.models import Decision, Verdict
from cascade.report import render

LLM_KEY_ENV = "CASCADE_LLM_API_KEY"  # the variable the README tells users to pass the LLM key in
MARKER = "<!-- cascade-gate -->"  # finds this action's own comment again on re-runs
COMMENT_LIMIT = 65_536  # characters GitHub accepts in one comment body
SUMMARY_LIMIT_BYTES = 1024 * 1024  # GitHub refuses a step summary over 1 MiB
HTTP_TIMEOUT_SECONDS = 20.0
FETCH_TIMEOUT_SECONDS = 300.0
MAX_COMMENT_PAGES = 30  # 3,000 comments at 100 a page: enough for any PR, and a bound on API calls
MAX_LINKED_ISSUES = 5
MAX_ISSUE_CHARS = 20_000
FAILING: dict[str, set[Decision]] = {
    "reject": {Decision.REJECT},
    "uncertain": {Decision.REJECT, Decision.UNCERTAIN},
    "never": set(),
}
# GitHub's closing keywords (close/closes/closed, fix/fixes/fixed, resolve/resolves/resolved) before `#N`.
LINKED_ISSUE = re.compile(r"\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)\s*:?\s+#(\d+)\b", re.IGNORECASE)
COMMAND_LINE = re.compile(r"^::(?:error|warning|notice)[ :]")
# The GitHub token under the names it may have, and the runner's own credentials: `cascade review` needs none of them.
SECRET_ENV = (
    "INPUT_GITHUB_TOKEN",
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "ACTIONS_RUNTIME_TOKEN",
    "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
    "ACTIONS_ID_TOKEN_REQUEST_URL",
)


# --------------------------------------------------------------------------------------------------------------------
# The event payload, reduced to the fields read here (GitHub sends many more; they are ignored)


class Payload(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class Account(Payload):
    login: str = ""
    type: str = ""


class Repository(Payload):
    full_name: str


class Branch(Payload):
    sha: str
    ref: str = ""
    repo: Repository | None = None  # None when the fork the PR came from was deleted


class Label(Payload):
    name: str


class PullRequest(Payload):
    number: int
    title: str = ""
    body: str | None = None
    user: Account = Field(default_factory=Account)
    head: Branch
    base: Branch
    labels: list[Label] = Field(default_factory=list)

    @property
    def from_fork(self) -> bool:
        """A fork's PR gets a read-only token under `pull_request`: no comment can be written."""
        if self.head.repo is None or self.base.repo is None:
            return True
        return self.head.repo.full_name.lower() != self.base.repo.full_name.lower()


class PullRequestEvent(Payload):
    action: str = ""
    pull_request: PullRequest
    repository: Repository


class Issue(Payload):
    number: int
    title: str = ""
    body: str | None = None


class IssueComment(Payload):
    id: int
    body: str | None = None
    html_url: str = ""
    user: Account | None = None


# --------------------------------------------------------------------------------------------------------------------
# Inputs


class ActionInputs(BaseModel):
    """The action's inputs (INPUT_* variables set by action.yml) and the runner's GITHUB_* variables."""

    model_config = ConfigDict(frozen=True)

    config: str | None = None
    model: str | None = None
    fail_on: Literal["reject", "uncertain", "never"] = "reject"
    comment: bool = True
    formats: list[Literal["markdown", "sarif", "text"]] = Field(default_factory=list)
    token: SecretStr = SecretStr("")
    event_name: str = ""
    event_path: Path
    api_url: str = "https://api.github.com"
    workspace: Path
    out_dir: Path
    summary_path: Path | None = None
    output_path: Path | None = None
    run_url: str | None = None


def parse_bool(value: str, name: str) -> bool:
    lowered = value.strip().lower()
    if lowered in {"true", "yes", "on", "1"}:
        return True
    if lowered in {"false", "no", "off", "0"}:
        return False
    raise BadInput(f"input '{name}' must be true or false, got {value!r}")


def parse_formats(value: str) -> list[str]:
    names = [name for name in re.split(r"[\s,]+", value.strip().lower()) if name and name != "json"]
    unknown = sorted(set(names) - {"markdown", "sarif", "text"})
    if unknown:
        raise BadInput(f"input 'format' accepts markdown, sarif, text (json is always written); got {unknown[0]!r}")
    return list(dict.fromkeys(names))


def _run_url(env: dict[str, str]) -> str | None:
    parts = [env.get(name) for name in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID")]
    return "{}/{}/actions/runs/{}".format(*parts) if all(parts) else None


def read_inputs(env: dict[str, str]) -> ActionInputs:
    event_path = env.get("GITHUB_EVENT_PATH")
    if not event_path:
        raise BadInput("GITHUB_EVENT_PATH is not set: run this inside a GitHub Actions pull_request workflow")
    fail_on = env.get("INPUT_FAIL_ON", "").strip().lower() or "reject"
    if fail_on not in FAILING:
        raise BadInput(f"input 'fail-on' must be reject, uncertain or never, got {fail_on!r}")
    run_dir = f"cascade-{env.get('GITHUB_RUN_ID', 'local')}-{env.get('GITHUB_RUN_ATTEMPT', '1')}"
    return ActionInputs.model_validate(
        {
            "config": env.get("INPUT_CONFIG") or None,
            "model": env.get("INPUT_MODEL") or None,
            "fail_on": fail_on,
            "comment": parse_bool(env.get("INPUT_COMMENT") or "true", "comment"),
            "formats": parse_formats(env.get("INPUT_FORMAT") or "markdown"),
            "token": env.get("INPUT_GITHUB_TOKEN", ""),
            "event_name": env.get("GITHUB_EVENT_NAME", ""),
            "event_path": event_path,
            "api_url": (env.get("GITHUB_API_URL") or "https://api.github.com").rstrip("/"),
            "workspace": Path(env.get("GITHUB_WORKSPACE") or os.getcwd()).resolve(),
            "out_dir": Path(env.get("RUNNER_TEMP") or tempfile.gettempdir()) / run_dir,
            "summary_path": env.get("GITHUB_STEP_SUMMARY") or None,
            "output_path": env.get("GITHUB_OUTPUT") or None,
            "run_url": _run_url(env),
        }
    )


def load_event(inputs: ActionInputs) -> PullRequestEvent:
    if inputs.event_name not in {"pull_request", "pull_request_target"}:
        got = inputs.event_name or "no event"
        raise BadInput(f"cascade gates pull requests: run it on 'pull_request', not {got!r}")
    try:
        return PullRequestEvent.model_validate_json(inputs.event_path.read_bytes())
    except OSError as exc:
        raise BadInput(f"cannot read the event payload {inputs.event_path}: {exc.strerror}") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise BadInput(f"event payload is not a pull_request event: '{where}': {first['msg']}") from None


# --------------------------------------------------------------------------------------------------------------------
# GitHub REST API (stdlib HTTP; one attempt per call, a timeout on each)


class GitHubError(Exception):
    def __init__(self, status: int | None, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}" if status else message)
        self.status = status


class GitHub:
    def __init__(self, api_url: str, repository: str, token: SecretStr) -> None:
        self.api_url = api_url.rstrip("/")
        self.repository = repository
        self._token = token

    def url(self, path: str) -> str:
        return f"{self.api_url}/repos/{self.repository}{path}"

    def request(self, method: str, url: str, body: dict[str, Any] | None = None) -> tuple[Any, str]:
        """The decoded JSON answer and the `Link` header; only URLs under the API base ever get the token."""
        if not url.startswith(self.api_url + "/"):
            raise GitHubError(None, f"refusing to send the token outside {self.api_url}")
        headers = {
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": "2022-11-28",
            "User-Agent": "cascade-gate",
        }
        if self._token.get_secret_value():
            headers["Authorization"] = f"Bearer {self._token.get_secret_value()}"
        data = json.dumps(body).encode() if body is not None else None
        if data is not None:
            headers["Content-Type"] = "application/json"
        req = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=HTTP_TIMEOUT_SECONDS) as response:
                raw = response.read()
                return (json.loads(raw) if raw else None), response.headers.get("Link", "")
        except urllib.error.HTTPError as exc:
            raise GitHubError(exc.code, _api_message(exc)) from None
        except (urllib.error.URLError, TimeoutError, OSError, json.JSONDecodeError) as exc:
            raise GitHubError(None, f"{method} {urllib.parse.urlsplit(url).path} failed: {exc}") from None

    def get_issue(self, number: int) -> Issue:
        data, _ = self.request("GET", self.url(f"/issues/{number}"))
        return Issue.model_validate(data)

    def list_comments(self, number: int) -> list[IssueComment]:
        comments: list[IssueComment] = []
        url: str | None = self.url(f"/issues/{number}/comments?per_page=100")
        for _ in range(MAX_COMMENT_PAGES):
            if url is None:
                break
            data, link = self.request("GET", url)
            comments += [IssueComment.model_validate(item) for item in data or []]
            url = next_page(link)
        return comments

    def create_comment(self, number: int, body: str) -> IssueComment:
        data, _ = self.request("POST", self.url(f"/issues/{number}/comments"), {"body": body})
        return IssueComment.model_validate(data)

    def update_comment(self, comment_id: int, body: str) -> IssueComment:
        data, _ = self.request("PATCH", self.url(f"/issues/comments/{comment_id}"), {"body": body})
        return IssueComment.model_validate(data)


def _api_message(exc: urllib.error.HTTPError) -> str:
    try:
        message = json.loads(exc.read() or b"{}").get("message")
    except (ValueError, AttributeError, OSError):
        message = None
    return str(message or exc.reason)


def next_page(link_header: str) -> str | None:
    """The `rel="next"` URL of a GitHub `Link` header, if any."""
    for part in link_header.split(","):
        match = re.match(r'\s*<([^>]+)>\s*;\s*rel="next"', part)
        if match:
            return match.group(1)
    return None


# --------------------------------------------------------------------------------------------------------------------
# Task text


def linked_issue_numbers(text: str, own_number: int) -> list[int]:
    """Issues the PR text closes ("Fixes #12", "closes: #3"), in order, without the PR itself."""
    numbers = [int(n) for n in LINKED_ISSUE.findall(text)]
    return [n for n in dict.fromkeys(numbers) if n != own_number][:MAX_LINKED_ISSUES]


def task_text(pr: PullRequest, github: GitHub, notes: list[str]) -> str:
    """The task the patch is judged against: the PR's title and body, then each linked issue (fetch failures noted)."""
    body = pr.body or ""
    parts = [f"# {pr.title}", body.strip()]
    for number in linked_issue_numbers(f"{pr.title}\n{body}", pr.number):
        try:
            issue = github.get_issue(number)
        except (GitHubError, ValidationError) as exc:
            notes.append(f"linked issue #{number} could not be fetched ({_short(exc)}); reviewed without it")
            continue
        parts += [f"## Linked issue #{issue.number}: {issue.title}", (issue.body or "").strip()[:MAX_ISSUE_CHARS]]
    return "\n\n".join(part for part in parts if part) + "\n"


def _short(exc: Exception) -> str:
    return str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__


# --------------------------------------------------------------------------------------------------------------------
# Running `cascade review`


class ReviewRun(BaseModel):
    """What the `cascade review` subprocess produced: a verdict, or the one-line reason it could not run."""

    exit_code: int
    verdict: Verdict | None = None
    message: str = ""
    report_path: Path


def git_output(repo: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=timeout)


def ensure_commits(repo: Path, shas: list[str], notes: list[str]) -> None:
    """Fetch a PR commit the checkout lacks (a shallow or single-ref checkout); failure is left to the review."""
    for sha in shas:
        if git_output(repo, "cat-file", "-e", f"{sha}^{{commit}}").returncode == 0:
            continue
        try:
            fetched = git_output(repo, "fetch", "--no-tags", "--quiet", "origin", sha, timeout=FETCH_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            fetched = None
        if fetched is None or fetched.returncode != 0:
            notes.append(f"commit {sha[:12]} is not in the checkout; use actions/checkout with fetch-depth: 0")


def config_from_base(repo: Path, config: str, base: str) -> str:
    """The config file's text as the base commit has it: the PR under review must not be able to loosen its own gate."""
    shown = git_output(repo, "show", f"{base}:{config.removeprefix('./')}")
    if shown.returncode != 0:
        raise BadInput(
            f"config {config} is not in the base commit {base[:12]}; the gate reads its config from the base "
            "branch so that a pull request cannot change its own gate"
        )
    return shown.stdout


def review_config(inputs: ActionInputs, base: str, environ: Mapping[str, str]) -> Path | None:
    """The config for `cascade review`: the base commit's version of the file, with the `model` input as `llm.model`
    and, when the step passes CASCADE_LLM_API_KEY and the config names no key variable, that one as the key's."""
    keyed = LLM_KEY_ENV in environ
    if inputs.config is None and inputs.model is None and not keyed:
        return None
    raw: Any = {}
    if inputs.config is not None:
        try:
            raw = yaml.safe_load(config_from_base(inputs.workspace, inputs.config, base)) or {}
        except yaml.YAMLError as exc:
            raise BadInput(f"{inputs.config}: not valid YAML ({type(exc).__name__})") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("llm", {}), dict):
        raise BadInput(f"{inputs.config}: the config and its 'llm' section must be mappings")
    llm = dict(raw.get("llm", {}))
    if inputs.model is not None:
        llm["model"] = inputs.model
    if keyed and not llm.get("api_key_env") and not llm.get("api_base"):
        llm["api_key_env"] = LLM_KEY_ENV
    merged = inputs.out_dir / "config.yaml"
    merged.write_text(yaml.safe_dump({**raw, "llm": llm}, sort_keys=False), encoding="utf-8")
    return merged


def review_env() -> dict[str, str]:
    """The environment for `cascade review`: the GitHub token removed (the LLM key stays for the LLM client)."""
    return {name: value for name, value in os.environ.items() if name not in SECRET_ENV}


def run_review(inputs: ActionInputs, base: str, head: str, issue_file: Path) -> ReviewRun:
    report = inputs.out_dir / "report.json"
    report.unlink(missing_ok=True)
    try:
        config = review_config(inputs, base, os.environ)
    except BadInput as exc:
        return ReviewRun(exit_code=EXIT_BAD_INPUT, message=str(exc), report_path=report)
    # Three dots: the diff from the merge base, which is what the PR's "Files changed" shows. `-I` keeps the
    # checkout (PR code) off sys.path, so a `cascade/` directory in the PR cannot replace the gate.
    command = [sys.executable, "-I", "-m", "cascade", "review", "--repo", str(inputs.workspace)]
    command += ["--git", f"{base}...{head}", "--issue", str(issue_file), "--format", "json", "--output", str(report)]
    if config is not None:
        command += ["--config", str(config)]
    done = subprocess.run(command, cwd=inputs.out_dir, env=review_env(), capture_output=True, text=True)
    message = last_line(done.stderr)
    if done.returncode in {0, 1, 2}:
        try:
            verdict = Verdict.model_validate_json(report.read_bytes())
        except (OSError, ValidationError) as exc:
            return ReviewRun(exit_code=EXIT_INTERNAL, message=f"no readable report: {_short(exc)}", report_path=report)
        return ReviewRun(exit_code=done.returncode, verdict=verdict, message=message, report_path=report)
    code = done.returncode if done.returncode in {EXIT_BAD_INPUT, EXIT_INTERNAL} else EXIT_INTERNAL
    return ReviewRun(exit_code=code, message=message or f"exit status {done.returncode}", report_path=report)


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


# --------------------------------------------------------------------------------------------------------------------
# Reporting: comment, summary, outputs, annotations


def escape_data(value: str) -> str:
    """A workflow command's message: no raw line break, so untrusted text cannot start a command of its own."""
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def annotate(kind: Literal["error", "warning", "notice"], message: str, title: str = "cascade gate") -> None:
    print(f"::{kind} title={escape_data(title).replace(':', '%3A').replace(',', '%2C')}::{escape_data(message)}")


def emit_annotations(verdict: Verdict) -> None:
    """The github renderer's annotations (10 per type; the rest are in the summary's diagnostics table)."""
    for line in render(verdict, "github").splitlines():
        if COMMAND_LINE.match(line):
            print(line)


def failure_markdown(run: ReviewRun, head: str) -> str:
    return "\n".join(
        [
            "## ⛔ cascade: **could not run**",
            "",
            f"> {html.escape(run.message, quote=False)}",
            "",
            f"The gate did not review `{head[:12]}`, so the check fails: a gate that could not run never passes.",
            "",
        ]
    )


def report_markdown(run: ReviewRun, head: str) -> str:
    return render(run.verdict, "markdown") if run.verdict is not None else failure_markdown(run, head)


def comment_body(markdown: str, head: str, run_url: str | None) -> str:
    link = f" · [workflow run]({run_url})" if run_url else ""
    footer = f"\n<sub>cascade gate · head `{head[:12]}`{link}</sub>\n{MARKER}\n"
    room = COMMENT_LIMIT - len(footer) - 200
    if len(markdown) > room:
        markdown = markdown[:room] + "\n\n> **Comment truncated** at GitHub's size limit; the job summary has more.\n"
    return markdown.rstrip("\n") + "\n" + footer


class CommentResult(BaseModel):
    action: Literal["created", "updated", "skipped", "failed"]
    url: str = ""
    note: str = ""


def find_own_comment(comments: list[IssueComment]) -> IssueComment | None:
    """The first marked comment written by a bot account (the Actions token posts as github-actions[bot]).

    Anyone can type the marker into a comment; were the report written into a person's comment, they could edit
    it afterwards to show a verdict the gate never gave. A bot's comment cannot be edited by the PR's author."""
    for comment in comments:
        if MARKER in (comment.body or "") and comment.user is not None and comment.user.type == "Bot":
            return comment
    return None


def upsert_comment(github: GitHub, number: int, body: str) -> CommentResult:
    try:
        existing = find_own_comment(github.list_comments(number))
        if existing is not None:
            try:
                return CommentResult(action="updated", url=github.update_comment(existing.id, body).html_url)
            except GitHubError as exc:
                if exc.status != 404:  # 404: deleted since the listing; post a new one
                    raise
        return CommentResult(action="created", url=github.create_comment(number, body).html_url)
    except (GitHubError, ValidationError) as exc:
        return CommentResult(action="failed", note=f"could not write the PR comment ({_short(exc)})")


def publish_comment(inputs: ActionInputs, event: PullRequestEvent, body: str) -> CommentResult:
    if not inputs.comment:
        return CommentResult(action="skipped", note="PR comment turned off (comment: false)")
    if event.pull_request.from_fork:
        return CommentResult(action="skipped", note="fork PR: the token is read-only, so no PR comment was written")
    if not inputs.token.get_secret_value():
        return CommentResult(action="skipped", note="no github-token given, so no PR comment was written")
    github = GitHub(inputs.api_url, event.repository.full_name, inputs.token)
    return upsert_comment(github, event.pull_request.number, body)


def clip_utf8(text: str, limit_bytes: int, note: str) -> str:
    """``text`` cut so that it plus ``note`` fit in ``limit_bytes`` of UTF-8 (never splitting a character)."""
    data = text.encode("utf-8")
    if len(data) <= limit_bytes:
        return text
    room = max(limit_bytes - len(note.encode("utf-8")), 0)
    return data[:room].decode("utf-8", errors="ignore") + note


def write_summary(path: Path | None, markdown: str, notes: list[str]) -> None:
    if path is None:
        return
    text = markdown.rstrip("\n") + "\n"
    if notes:
        text += "\n### Gate notes\n\n" + "".join(f"- {html.escape(note, quote=False)}\n" for note in notes)
    note = "\n\n> **Summary truncated** at GitHub's 1 MiB step-summary limit; the full report is the JSON output.\n"
    with path.open("a", encoding="utf-8") as handle:
        handle.write(clip_utf8(text, SUMMARY_LIMIT_BYTES - 1024, note))


def format_outputs(values: dict[str, str]) -> str:
    """`$GITHUB_OUTPUT` lines; a value with a line break uses the heredoc form with a delimiter it cannot contain."""
    lines: list[str] = []
    for name, value in values.items():
        if "\n" in value or "\r" in value:
            delimiter = f"ghadelimiter_{uuid.uuid4()}"
            lines += [f"{name}<<{delimiter}", value, delimiter]
        else:
            lines.append(f"{name}={value}")
    return "".join(line + "\n" for line in lines)


def write_outputs(path: Path | None, values: dict[str, str]) -> None:
    if path is not None:
        with path.open("a", encoding="utf-8") as handle:
            handle.write(format_outputs(values))


def write_extra_reports(inputs: ActionInputs, verdict: Verdict) -> dict[str, str]:
    """The formats asked for besides JSON, written next to it; returns the outputs naming them."""
    outputs: dict[str, str] = {}
    suffix = {"markdown": "md", "sarif": "sarif", "text": "txt"}
    for fmt in inputs.formats:
        path = inputs.out_dir / f"report.{suffix[fmt]}"
        path.write_text(render(verdict, fmt, color=False), encoding="utf-8")  # no ANSI colour in a file
        outputs[f"{fmt}-path"] = str(path)
    return outputs


def gate_exit_code(run: ReviewRun, fail_on: str) -> int:
    """Non-zero when the gate could not run, or when the decision is one `fail-on` fails on."""
    if run.verdict is None:
        return run.exit_code
    return run.verdict.exit_code if run.verdict.decision in FAILING[fail_on] else 0


# --------------------------------------------------------------------------------------------------------------------
# Main


def run_action(inputs: ActionInputs) -> int:
    event = load_event(inputs)
    pr = event.pull_request
    notes: list[str] = []
    if inputs.event_name == "pull_request_target":
        annotate("warning", "pull_request_target runs with a write token and secrets; use pull_request (see README)")
    inputs.out_dir.mkdir(parents=True, exist_ok=True)
    reader = GitHub(inputs.api_url, event.repository.full_name, inputs.token)
    issue_file = inputs.out_dir / "task.md"
    issue_file.write_text(task_text(pr, reader, notes), encoding="utf-8")
    ensure_commits(inputs.workspace, [pr.base.sha, pr.head.sha], notes)

    run = run_review(inputs, pr.base.sha, pr.head.sha, issue_file)
    markdown = report_markdown(run, pr.head.sha)
    comment = publish_comment(inputs, event, comment_body(markdown, pr.head.sha, inputs.run_url))
    if comment.note:
        notes.append(comment.note)
        annotate("warning" if comment.action == "failed" else "notice", f"{comment.note}; the report is in the summary")

    outputs = {
        "decision": run.verdict.decision.value if run.verdict else "error",
        "stage": (run.verdict.deciding_stage or "") if run.verdict else "",
        "report-path": str(run.report_path) if run.verdict else "",
        "comment-url": comment.url,
    }
    if run.verdict is not None:
        outputs |= write_extra_reports(inputs, run.verdict)
        emit_annotations(run.verdict)
    write_summary(inputs.summary_path, markdown, notes)
    write_outputs(inputs.output_path, outputs)
    return finish(run, inputs.fail_on)


def finish(run: ReviewRun, fail_on: str) -> int:
    code = gate_exit_code(run, fail_on)
    if run.verdict is None:
        annotate("error", f"cascade could not run (exit {run.exit_code}): {run.message}")
    elif code:
        annotate("error", f"{run.verdict.decision.value}: {run.verdict.reason} (fail-on: {fail_on})")
    print(f"cascade gate: {outputs_line(run)}; fail-on {fail_on} → exit {code}")
    return code


def outputs_line(run: ReviewRun) -> str:
    if run.verdict is None:
        return escape_data(f"could not run: {run.message}")
    return escape_data(f"{run.verdict.decision.value} by {run.verdict.deciding_stage or 'no stage'}")


def main() -> None:
    try:
        code = run_action(read_inputs(dict(os.environ)))
    except BadInput as exc:
        annotate("error", str(exc))
        code = EXIT_BAD_INPUT
    except Exception as exc:  # the action's own failure: one line, never a traceback, never a pass
        annotate("error", f"internal error: {type(exc).__name__}: {exc}")
        code = EXIT_INTERNAL
    sys.exit(code)


if __name__ == "__main__":
    main()
