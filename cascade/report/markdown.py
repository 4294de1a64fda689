"""`--format markdown`: a GitHub pull-request comment, kept short and under GitHub's 65,536-character limit.

The decision, its reason and the stages come first; the evidence is one collapsed table (a row per item) with the
commands that reproduce it — never raw JSON, which `--format json` holds. A footer names what was reviewed (base,
head, the patch's sha256). Everything taken from the patch, the tools or a model is HTML-escaped: the comment must
show PR text, never let it add markup (a `<details>` or a link) of its own.
"""

from __future__ import annotations

import html
import re

from cascade.models import Decision, Evidence, Verdict
from cascade.report import view
from cascade.stable import placeholders_used, seconds_label

GITHUB_COMMENT_LIMIT = 65_536
DEFAULT_LIMIT = 60_000  # well under GitHub's limit, leaving room for anything a workflow wraps around it
MAX_DETAILS_CHARS = 4_000  # the reproduce commands inside the evidence block
MAX_SUMMARY_CHARS = 300  # one evidence item's summary in the evidence table
MAX_TABLE_ROWS = 100
MARKER = "<!-- cascade-report -->"  # first line: tells a cascade report from other Markdown (the Action checks it)
MAX_CELL_CHARS = 1_000  # one message or reason; a stage's reason can quote a whole tool output

_ICON = {Decision.ACCEPT: "✅", Decision.REJECT: "❌", Decision.UNCERTAIN: "⚠️"}


def cell(value: object, limit: int = MAX_CELL_CHARS) -> str:
    """Text safe inside a table cell: escaped HTML, no pipes or line breaks, at most ``limit`` characters."""
    flat = " ".join(str(value).split())
    if len(flat) > limit:
        flat = flat[:limit] + "…"
    return html.escape(flat, quote=False).replace("|", "\\|")


def code(value: object) -> str:
    return f"<code>{cell(value)}</code>"


def fenced(body: str, lang: str = "") -> str:
    """A code block whose fence is longer than any backtick run in ``body``, so the body cannot close it."""
    longest = max((len(m) for m in re.findall(r"`+", body)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{lang}\n{body}\n{fence}"


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f"\n… ({len(text) - limit} more characters cut)"


class _Budget:
    """Collects blocks until the size limit; what does not fit is counted and reported in a closing note."""

    NOTE_ROOM = 300

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.blocks: list[str] = []
        self.size = 0
        self.dropped = 0

    def add(self, block: str) -> bool:
        cost = len(block) + 2
        if self.dropped or self.size + cost > self.limit - self.NOTE_ROOM:
            self.dropped += 1
            return False
        self.blocks.append(block)
        self.size += cost
        return True

    def text(self) -> str:
        blocks = list(self.blocks)
        if self.dropped:
            blocks.append(
                f"> **Report truncated** to stay under GitHub's comment limit: {self.dropped} more block(s) left "
                "out. Run with `--format json` for the full report."
            )
        return "\n\n".join(blocks) + "\n"


def _headline(verdict: Verdict) -> list[str]:
    decided = f"decided by {code(verdict.deciding_stage)}" if verdict.deciding_stage else "no stage decided"
    apply = f" · applied with {code(verdict.apply_method)}" if verdict.apply_method else ""
    return [
        MARKER,
        f"## {_ICON[verdict.decision]} cascade: **{verdict.decision.value}**",
        "",
        f"> {cell(verdict.reason)}",
        "",
        f"{decided} · exit {verdict.exit_code} · {cell(view.cost_line(verdict))}{apply} · "
        f"cascade {cell(verdict.tool_version)}",
    ]


def _stages_table(verdict: Verdict) -> str:
    lines = ["### Stages", "", "| # | Stage | Outcome | Seconds | Reason |", "|---:|---|---|---:|---|"]
    for i, s in enumerate(verdict.stages):
        seconds = seconds_label(verdict, s.cost)
        lines.append(f"| {i} | {code(s.stage)} | {s.outcome.value} | {seconds} | {cell(s.reason)} |")
    return "\n".join(lines)


def _table(title: str, header: str, rows: list[str]) -> str:
    shown = rows[:MAX_TABLE_ROWS]
    lines = [title, "", header, *shown]
    if len(rows) > len(shown):
        lines += ["", f"…and {len(rows) - len(shown)} more."]
    return "\n".join(lines)


def _diagnostics(rows: list[view.Row]) -> str | None:
    if not rows:
        return None
    body = [
        f"| {'❌' if r.decides else '⚠️'} | {code(r.location)} | {code(r.rule_label)} | {cell(r.diagnostic.message)} |"
        for r in rows
    ]
    header = "| | Location | Rule | Message |\n|---|---|---|---|"
    title = f"### New static diagnostics ({len(rows)})\n\n❌ decides the reject · ⚠️ new, reported as context"
    return _table(title, header, body)


def _votes(verdict: Verdict) -> str | None:
    votes = view.votes(verdict)
    if not votes:
        return None
    body = []
    for i, vote in enumerate(votes, 1):
        decision, rationale = view.vote_fields(vote)
        body.append(f"| {i} | {cell(decision)} | {cell(rationale)} |")
    return _table(f"### Reviewer votes ({len(votes)})", "| # | Vote | Rationale |\n|---:|---|---|", body)


def _evidence(verdict: Verdict) -> str | None:
    """Every evidence item as one table row, collapsed, with the commands that reproduce them and the legend of the
    placeholders those commands use."""
    items = [(s.stage, e) for s in verdict.stages for e in s.evidence]
    if not items:
        return None
    rows = [
        f"| {code(stage)} | {cell(e.kind.value)} | {_grounded(e)} | {cell(e.summary, MAX_SUMMARY_CHARS)} |"
        for stage, e in items
    ]
    shown = rows[:MAX_TABLE_ROWS] + (
        [f"| | | | …and {len(rows) - MAX_TABLE_ROWS} more |"] if len(rows) > MAX_TABLE_ROWS else []
    )
    parts = ["<details>", f"<summary>Evidence ({len(items)} item(s))</summary>", ""]
    parts += ["| Stage | Kind | Grounded | Summary |", "|---|---|---|---|", *shown, ""]
    commands = list(dict.fromkeys(c for _, e in items for c in e.commands))
    if commands:
        # Code blocks show their body literally, so the commands go in unescaped; the fence cannot be closed early.
        parts += ["Reproduce:", "", fenced(_clip("\n".join(commands), MAX_DETAILS_CHARS), "bash"), ""]
    legend = _legend(verdict)
    if legend:
        parts += [legend, ""]
    parts.append("</details>")
    return "\n".join(parts)


def _grounded(e: Evidence) -> str:
    return "yes" if e.grounded else "no"


def _footer(verdict: Verdict) -> str | None:
    reviewed = view.reviewed_line(verdict)
    return f"<sub>Reviewed: {cell(reviewed)}</sub>" if reviewed else None


def _stripped(verdict: Verdict) -> str | None:
    stripped = view.stripped_hunks(verdict)
    if not stripped:
        return None
    body = [f"| {code(s.path)} | {s.hunk} | {cell(s.why)} |" for s in stripped]
    return _table(f"### Stripped by Stage 0 ({len(stripped)})", "| File | Hunk | Why |\n|---|---:|---|", body)


def _skipped(verdict: Verdict) -> str | None:
    skipped = view.skipped_stages(verdict)
    if not skipped:
        return None
    lines = ["### Skipped stages", ""] + [f"- {code(s.stage)}: {cell(s.reason or 'no reason given')}" for s in skipped]
    return "\n".join(lines)


def _legend(verdict: Verdict) -> str | None:
    """What the placeholders in the evidence stand for: replace them to re-run a command."""
    used = placeholders_used(verdict)
    if not used:
        return None
    return "Placeholders: " + "; ".join(f"{code(token)} {cell(meaning)}" for token, meaning in used.items()) + "."


def render_markdown(verdict: Verdict, *, limit: int = DEFAULT_LIMIT) -> str:
    """The PR comment; at most ``limit`` characters (blocks that do not fit are dropped with a note; the footer
    naming what was reviewed always stays)."""
    footer = _footer(verdict)
    budget = _Budget(min(limit, GITHUB_COMMENT_LIMIT) - len(footer or "") - 2)
    blocks: list[str | None] = [
        "\n".join(_headline(verdict)),
        _stages_table(verdict),
        _diagnostics(view.diagnostic_rows(verdict)),
        _votes(verdict),
        _skipped(verdict),
        _stripped(verdict),
        _evidence(verdict),
    ]
    for block in blocks:
        if block is not None:
            budget.add(block)
    text = budget.text()
    return text + "\n" + footer + "\n" if footer else text
