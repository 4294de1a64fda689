"""The pull-request review: line-anchored comments for the findings that have a place in the diff (static
diagnostics, failing tests at their traceback lines), beside the summary comment.

One review per head commit. GitHub takes a review's comments only when it is created and refuses the whole review
if one comment points outside the diff, so the comments are planned first — each finding at its first location on
a line the diff shows (the new side: added and context lines), at most ``MAX_REVIEW_COMMENTS`` — and the rest is
listed in the review's body. A re-run on the same head finds its review by a hidden marker and updates the body
and its comments instead of posting a second one; a new head commit gets a new review (GitHub marks the old
comments outdated).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from cascade.config import NoChangeConfig
from cascade.git import git
from cascade.github_action.api import GitHub, GitHubError, short_error
from cascade.github_action.event import ActionInputs, PullRequestEvent, PullReview
from cascade.models import Decision, Verdict
from cascade.patch import parse_patch
from cascade.report.findings import Finding, located_findings
from cascade.report.markdown import cell, fenced

MAX_REVIEW_COMMENTS = 50  # per review: GitHub answers large reviews slowly and rate-limits content creation
MAX_DETAIL_CHARS = 1_500  # a log excerpt or message in one comment
MAX_BODY_CHARS = 60_000  # GitHub's limit for a review body is 65,536 characters
MAX_LISTED = 30  # findings named in the body that are not anchored
DiffLines = dict[str, set[int]]
_ICON = {True: "❌", False: "⚠️"}
GONE = "(not found again on a re-run of this commit)"


def review_marker(head: str) -> str:
    return f"<!-- cascade-review head={head} -->"


def finding_marker(key: str) -> str:
    return f"<!-- cascade-finding {key} -->"


class ReviewComment(BaseModel):
    path: str
    line: int
    side: Literal["RIGHT"] = "RIGHT"
    body: str


class ReviewPlan(BaseModel):
    """What the review will say: the comments on the diff and the findings left for the body."""

    commit_id: str
    body: str
    comments: list[ReviewComment] = Field(default_factory=list)
    keys: list[str] = Field(default_factory=list, description="The finding of each comment, in order.")
    not_anchored: list[str] = Field(default_factory=list)

    def payload(self) -> dict[str, Any]:
        comments = [c.model_dump() for c in self.comments]
        return {"commit_id": self.commit_id, "event": "COMMENT", "body": self.body, "comments": comments}


class ReviewResult(BaseModel):
    action: Literal["created", "updated", "skipped", "none", "failed"]
    url: str = ""
    note: str = ""
    comments: int = 0


def diff_lines(repo: Path, base: str, head: str) -> DiffLines:
    """The lines of the PR's diff (base...head, as "Files changed" shows it) a review comment can point at: every
    line of each hunk's new side."""
    text = git(repo, "diff", "--no-color", "--no-ext-diff", f"{base}...{head}", timeout=300)
    lines: DiffLines = {}
    for f in parse_patch(text, NoChangeConfig()).files:
        if f.target_path is None or f.is_binary:
            continue
        shown = lines.setdefault(f.target_path, set())
        for hunk in f.hunks:
            shown.update(range(hunk.target_start, hunk.target_start + hunk.target_length))
    return lines


def comment_text(findings: list[Finding], key: str) -> str:
    """One comment for the findings at one line (ruff and pyright often report the same name)."""
    parts: list[str] = []
    for finding in findings:
        detail = finding.detail.strip()
        if len(detail) > MAX_DETAIL_CHARS:
            detail = "…" + detail[-MAX_DETAIL_CHARS:]  # a traceback's end says what failed
        parts.append(f"{_ICON[finding.decides]} **cascade**: {cell(finding.title)}")
        if detail:
            parts.append(fenced(detail, "text"))
    parts.append(finding_marker(key))
    return "\n\n".join(parts)


def _listed(finding: Finding, why: str) -> str:
    first = finding.locations[0]
    return f"{_ICON[finding.decides]} `{cell(first.path)}:{first.line}` ({why}): {cell(finding.title)}"


def plan_review(verdict: Verdict, head: str, shown: DiffLines, summary_url: str = "") -> ReviewPlan:
    """Each finding at its first location on the diff, findings at one line in one comment, at most
    ``MAX_REVIEW_COMMENTS`` comments; the rest is named in the body."""
    at_line: dict[tuple[str, int], list[Finding]] = {}
    left: list[str] = []
    for finding in located_findings(verdict):
        where = next((loc for loc in finding.locations if loc.line in shown.get(loc.path, set())), None)
        if where is None:
            left.append(_listed(finding, "not on this diff"))
        else:
            at_line.setdefault((where.path, where.line), []).append(finding)
    comments: list[ReviewComment] = []
    keys: list[str] = []
    for (path, line), findings in at_line.items():
        if len(comments) >= MAX_REVIEW_COMMENTS:
            left += [_listed(f, "over the comment limit") for f in findings]
            continue
        key = "-".join(sorted(f.key for f in findings))[:64]
        comments.append(ReviewComment(path=path, line=line, body=comment_text(findings, key)))
        keys.append(key)
    body = review_body(verdict, head, len(comments), left, summary_url)
    return ReviewPlan(commit_id=head, body=body, comments=comments, keys=keys, not_anchored=left)


def review_body(verdict: Verdict, head: str, anchored: int, left: list[str], summary_url: str) -> str:
    icon = {Decision.ACCEPT: "✅", Decision.REJECT: "❌", Decision.UNCERTAIN: "⚠️"}[verdict.decision]
    decided = f" by `{verdict.deciding_stage}`" if verdict.deciding_stage else ""
    report = f"the [summary comment]({summary_url})" if summary_url else "the summary comment and the job summary"
    lines = [
        review_marker(head),
        f"{icon} **cascade: {verdict.decision.value}**{decided} on `{head[:12]}` — {anchored} finding(s) on the "
        f"lines below; the whole report is in {report}.",
    ]
    if left:
        lines += ["", f"{len(left)} more finding(s) without a comment here:", ""]
        lines += [f"- {item}" for item in left[:MAX_LISTED]]
        if len(left) > MAX_LISTED:
            lines.append(f"- …and {len(left) - MAX_LISTED} more")
    body = "\n".join(lines) + "\n"
    return body if len(body) <= MAX_BODY_CHARS else body[:MAX_BODY_CHARS] + "\n…\n"


def own_review(reviews: list[PullReview], head: str) -> PullReview | None:
    """This commit's review written by a bot account (never a person's review that quotes the marker)."""
    marker = review_marker(head)
    for review in reviews:
        if marker in (review.body or "") and review.user is not None and review.user.type == "Bot":
            return review
    return None


def update_review(github: GitHub, number: int, existing: PullReview, plan: ReviewPlan) -> ReviewResult:
    """The same commit reviewed again: the body says what this run found, each comment of a finding found again
    gets its current text, and a comment whose finding is gone says so."""
    review = github.update_review(number, existing.id, plan.body)
    wanted = dict(zip(plan.keys, plan.comments, strict=True))
    for posted in github.list_review_comments(number, existing.id):
        key = next((k for k in wanted if finding_marker(k) in (posted.body or "")), None)
        if key is not None:
            if posted.body != wanted[key].body:
                github.update_review_comment(posted.id, wanted[key].body)
        elif "not found again" not in (posted.body or ""):
            github.update_review_comment(
                posted.id, f"~~{posted.body}~~\n\n(not found again on a re-run of this commit)"
            )
    return ReviewResult(action="updated", url=review.html_url, comments=len(plan.comments))


def publish_review(github: GitHub, number: int, plan: ReviewPlan) -> ReviewResult:
    try:
        existing = own_review(github.list_reviews(number), plan.commit_id)
        if existing is not None:
            return update_review(github, number, existing, plan)
        if not plan.comments:
            return ReviewResult(action="none", note="no finding has a line in the diff: no review comments")
        review = github.create_review(number, plan.payload())
        return ReviewResult(action="created", url=review.html_url, comments=len(plan.comments))
    except (GitHubError, ValidationError) as exc:
        return ReviewResult(action="failed", note=f"could not write the PR review ({short_error(exc)})")


def review_skipped(inputs: ActionInputs, event: PullRequestEvent) -> str | None:
    """Why no review is written, or None."""
    if not inputs.review:
        return "PR review turned off (review: false)"
    if event.pull_request.from_fork:
        return "fork PR: the token is read-only, so no PR review was written"
    if not inputs.token.get_secret_value():
        return "no github-token given, so no PR review was written"
    return None
