"""Reporting a review the ways GitHub offers: the PR comment, the job summary, step outputs, annotations, files."""

from __future__ import annotations

import html
import re
import uuid
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ValidationError

from cascade.github_action.api import GitHub, GitHubError, short_error
from cascade.github_action.event import ActionInputs, IssueComment, PullRequestEvent
from cascade.github_action.review import ReviewRun
from cascade.leaks import redact_formats
from cascade.models import Verdict
from cascade.report import render
from cascade.report.github import command

MARKER = "<!-- cascade-gate -->"  # finds this action's own comment again on re-runs
COMMENT_LIMIT = 65_536  # characters GitHub accepts in one comment body
SUMMARY_LIMIT_BYTES = 1024 * 1024  # GitHub refuses a step summary over 1 MiB
COMMAND_LINE = re.compile(r"^::(?:error|warning|notice)[ :]")

# --------------------------------------------------------------------------------------------------------------------
# Annotations (workflow commands on stdout)


def annotate(kind: Literal["error", "warning", "notice"], message: str, title: str = "cascade gate") -> None:
    print(command(kind, message, title=title))


def emit_annotations(verdict: Verdict) -> None:
    """The github renderer's annotations (10 per type; the rest are in the summary's diagnostics table)."""
    for line in render(verdict, "github").splitlines():
        if COMMAND_LINE.match(line):
            print(line)


# --------------------------------------------------------------------------------------------------------------------
# The report as Markdown, and the PR comment


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
        return CommentResult(action="failed", note=f"could not write the PR comment ({short_error(exc)})")


def publish_comment(inputs: ActionInputs, event: PullRequestEvent, body: str) -> CommentResult:
    if not inputs.comment:
        return CommentResult(action="skipped", note="PR comment turned off (comment: false)")
    if event.pull_request.from_fork:
        return CommentResult(action="skipped", note="fork PR: the token is read-only, so no PR comment was written")
    if not inputs.token.get_secret_value():
        return CommentResult(action="skipped", note="no github-token given, so no PR comment was written")
    github = GitHub(inputs.api_url, event.repository.full_name, inputs.token)
    return upsert_comment(github, event.pull_request.number, body)


# --------------------------------------------------------------------------------------------------------------------
# The job summary, step outputs and report files


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
        shown = (html.escape(redact_formats(note), quote=False) for note in notes)
        text += "\n### Gate notes\n\n" + "".join(f"- {note}\n" for note in shown)
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
