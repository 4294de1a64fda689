"""The action's sequence: inputs and event, task text, review, then comment, outputs, summary and exit status."""

from __future__ import annotations

import json
import os
import sys

from cascade.errors import EXIT_BAD_INPUT, EXIT_INTERNAL, BadInput, CascadeError
from cascade.github_action.api import GitHub
from cascade.github_action.credentials import note_for, remove_persisted_credentials
from cascade.github_action.event import ActionInputs, FailOn, PullRequestEvent, load_event, read_inputs
from cascade.github_action.pr_review import (
    ReviewPlan,
    ReviewResult,
    diff_lines,
    plan_review,
    publish_review,
    review_skipped,
)
from cascade.github_action.publish import (
    CommentResult,
    annotate,
    comment_body,
    emit_annotations,
    publish_comment,
    report_markdown,
    write_extra_reports,
    write_outputs,
    write_summary,
)
from cascade.github_action.review import ReviewRun, ensure_commits, run_review, task_text
from cascade.models import Decision
from cascade.report.github import escape_data

FAILING: dict[FailOn, set[Decision]] = {
    "reject": {Decision.REJECT},
    "uncertain": {Decision.REJECT, Decision.UNCERTAIN},
    "never": set(),
}


def gate_exit_code(run: ReviewRun, fail_on: FailOn) -> int:
    """Non-zero when the gate could not run, or when the decision is one `fail-on` fails on."""
    if run.verdict is None:
        return run.exit_code
    return run.verdict.exit_code if run.verdict.decision in FAILING[fail_on] else 0


def run_action(inputs: ActionInputs) -> int:
    event = load_event(inputs.event_name, inputs.event_path)
    pr = event.pull_request
    notes: list[str] = []
    if inputs.event_name == "pull_request_target":
        annotate("warning", "pull_request_target runs with a write token and secrets; use pull_request (see README)")
    inputs.out_dir.mkdir(parents=True, exist_ok=True)
    reader = GitHub(inputs.api_url, event.repository.full_name, inputs.token)
    issue_file = inputs.out_dir / "task.md"
    issue_file.write_text(task_text(pr, reader, notes), encoding="utf-8")
    ensure_commits(inputs.workspace, [pr.base.sha, pr.head.sha], notes)  # may need the checkout's token to fetch
    try:
        removed = note_for(remove_persisted_credentials(inputs.workspace))
    except CascadeError as exc:
        run = ReviewRun(exit_code=EXIT_BAD_INPUT, message=str(exc), report_path=inputs.out_dir / "report.json")
    else:
        notes += [removed] if removed else []
        run = run_review(inputs, pr.base.sha, pr.head.sha, issue_file)
    markdown = report_markdown(run, pr.head.sha)
    body = comment_body(markdown, pr.head.sha, inputs.run_url)
    shown = diff_lines(inputs.workspace, pr.base.sha, pr.head.sha) if run.verdict is not None else {}
    if inputs.dry_run:
        print_dry_run(body, plan_review(run.verdict, pr.head.sha, shown) if run.verdict is not None else None)
        comment = CommentResult(action="skipped", note="dry run: nothing was posted (the action printed it)")
        review = ReviewResult(action="skipped")
    else:
        comment = publish_comment(inputs, event, body)
        plan = plan_review(run.verdict, pr.head.sha, shown, comment.url) if run.verdict is not None else None
        review = write_review(inputs, event, plan)
    for result in (comment, review):
        if result.note:
            notes.append(result.note)
            kind = "warning" if result.action == "failed" else "notice"
            annotate(kind, f"{result.note}; the report is in the summary")

    outputs = {
        "decision": run.verdict.decision.value if run.verdict else "error",
        "stage": (run.verdict.deciding_stage or "") if run.verdict else "",
        "report-path": str(run.report_path) if run.verdict else "",
        "comment-url": comment.url,
        "review-url": review.url,
    }
    if run.verdict is not None:
        outputs |= write_extra_reports(inputs, run.verdict)
        emit_annotations(run.verdict)
    write_summary(inputs.summary_path, markdown, notes)
    write_outputs(inputs.output_path, outputs)
    return finish(run, inputs.fail_on)


def write_review(inputs: ActionInputs, event: PullRequestEvent, plan: ReviewPlan | None) -> ReviewResult:
    """The line-anchored review beside the summary comment (cascade/github_action/pr_review.py)."""
    skipped = review_skipped(inputs, event)
    if plan is None:
        return ReviewResult(action="skipped")
    if skipped is not None:
        return ReviewResult(action="skipped", note=skipped if plan.comments else "")
    github = GitHub(inputs.api_url, event.repository.full_name, inputs.token)
    return publish_review(github, event.pull_request.number, plan)


def print_dry_run(comment: str, plan: ReviewPlan | None) -> None:
    """What the action would post, printed instead of posted (input dry-run: true; README, local recipe)."""
    print("cascade gate (dry run): the PR comment it would write:")
    print(comment)
    if plan is None or not plan.comments:
        print("cascade gate (dry run): no PR review (no finding has a line in the diff)")
        return
    print(f"cascade gate (dry run): the PR review it would write ({len(plan.comments)} line comment(s)):")
    print(json.dumps(plan.payload(), indent=2, ensure_ascii=False))


def finish(run: ReviewRun, fail_on: FailOn) -> int:
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
