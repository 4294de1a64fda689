"""What the gate reviews and how: the task text, the config from the base commit, the `cascade review` subprocess."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import yaml
from pydantic import BaseModel, ValidationError

from cascade.config import CascadeConfig, parse_yaml_config
from cascade.errors import EXIT_BAD_INPUT, EXIT_INTERNAL, BadInput, CascadeError
from cascade.git import git
from cascade.github_action.api import GitHub, GitHubError, short_error
from cascade.github_action.event import ActionInputs, PullRequest
from cascade.llm.overrides import with_llm_overrides
from cascade.models import Verdict
from cascade.workspace import resolve_commit

LLM_KEY_ENV = "CASCADE_LLM_API_KEY"  # the variable the README tells users to pass the LLM key in
NO_MODEL = "none"  # the `model` input's value that turns the LLM stages off
FETCH_TIMEOUT_SECONDS = 300.0
MAX_LINKED_ISSUES = 5
MAX_ISSUE_CHARS = 20_000
# GitHub's closing keywords (close/closes/closed, fix/fixes/fixed, resolve/resolves/resolved) before `#N`.
LINKED_ISSUE = re.compile(r"\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)\s*:?\s+#(\d+)\b", re.IGNORECASE)
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
            notes.append(f"linked issue #{number} could not be fetched ({short_error(exc)}); reviewed without it")
            continue
        parts += [f"## Linked issue #{issue.number}: {issue.title}", (issue.body or "").strip()[:MAX_ISSUE_CHARS]]
    return "\n\n".join(part for part in parts if part) + "\n"


# --------------------------------------------------------------------------------------------------------------------
# The commits and the config


def ensure_commits(repo: Path, shas: list[str], notes: list[str]) -> None:
    """Fetch a PR commit the checkout lacks (a shallow or single-ref checkout); failure is left to the review."""
    for sha in shas:
        try:
            resolve_commit(repo, sha)
            continue
        except BadInput:
            pass
        try:
            git(repo, "fetch", "--no-tags", "--quiet", "origin", sha, timeout=FETCH_TIMEOUT_SECONDS)
        except (CascadeError, subprocess.TimeoutExpired):
            notes.append(f"commit {sha[:12]} is not in the checkout; use actions/checkout with fetch-depth: 0")


def config_from_base(repo: Path, config: str, base: str) -> CascadeConfig:
    """The config file as the base commit has it: the PR under review must not be able to loosen its own gate."""
    try:
        text = git(repo, "show", f"{base}:{config.removeprefix('./')}", timeout=60)
    except CascadeError:
        raise BadInput(
            f"config {config} is not in the base commit {base[:12]}; the gate reads its config from the base "
            "branch so that a pull request cannot change its own gate"
        ) from None
    return parse_yaml_config(text, config)


def review_config(inputs: ActionInputs, base: str, environ: Mapping[str, str]) -> Path | None:
    """The config for `cascade review`: the base commit's version of the file, with the `model` input as `llm.model`
    and, when the step passes CASCADE_LLM_API_KEY and the config names no key variable, that one as the key's."""
    keyed = LLM_KEY_ENV in environ
    if inputs.config is None and inputs.model is None and not keyed:
        return None
    config = CascadeConfig() if inputs.config is None else config_from_base(inputs.workspace, inputs.config, base)
    config = with_llm_overrides(config, inputs.model, None, None)
    if inputs.model == NO_MODEL:  # action.yml: "none = no LLM stages", whatever the config names
        config = config.model_copy(update={"llm": config.llm.model_copy(update={"model": None})})
    if keyed and not config.llm.api_key_env and not config.llm.api_base:
        config = config.model_copy(update={"llm": config.llm.model_copy(update={"api_key_env": LLM_KEY_ENV})})
    merged = inputs.out_dir / "config.yaml"
    merged.write_text(yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False), encoding="utf-8")
    return merged


# --------------------------------------------------------------------------------------------------------------------
# Running `cascade review`


class ReviewRun(BaseModel):
    """What the `cascade review` subprocess produced: a verdict, or the one-line reason it could not run."""

    exit_code: int
    verdict: Verdict | None = None
    message: str = ""
    report_path: Path


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
    command += ["--require-tools"]  # a gate must not pass a PR on a weaker check because a checker is missing
    command += ["--git", f"{base}...{head}", "--issue", str(issue_file), "--format", "json", "--output", str(report)]
    if config is not None:
        command += ["--config", str(config)]
    done = subprocess.run(command, cwd=inputs.out_dir, env=review_env(), capture_output=True, text=True)
    message = last_line(done.stderr)
    if done.returncode in {0, 1, 2}:
        try:
            verdict = Verdict.model_validate_json(report.read_bytes())
        except (OSError, ValidationError) as exc:
            message = f"no readable report: {short_error(exc)}"
            return ReviewRun(exit_code=EXIT_INTERNAL, message=message, report_path=report)
        return ReviewRun(exit_code=done.returncode, verdict=verdict, message=message, report_path=report)
    code = done.returncode if done.returncode in {EXIT_BAD_INPUT, EXIT_INTERNAL} else EXIT_INTERNAL
    return ReviewRun(exit_code=code, message=message or f"exit status {done.returncode}", report_path=report)


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""
