"""`--format text`: a readable terminal report, drawn with rich; plain text (no ANSI codes) unless colour is on."""

from __future__ import annotations

import io

from rich import box
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from cascade.models import Decision, Evidence, Outcome, Verdict
from cascade.report import view
from cascade.stable import placeholders_used, seconds_label

WIDTH = 100

_DECISION_STYLE = {Decision.ACCEPT: "bold green", Decision.REJECT: "bold red", Decision.UNCERTAIN: "bold yellow"}
_OUTCOME_STYLE = {
    Outcome.ACCEPT: "green",
    Outcome.REJECT: "red",
    Outcome.UNCERTAIN: "yellow",
    Outcome.PASS: "cyan",
    Outcome.SKIPPED: "dim",
    Outcome.INCONCLUSIVE: "magenta",
}


def _summary(verdict: Verdict) -> RenderableType:
    title = Text("cascade ", style="bold")
    title.append(verdict.decision.value.upper(), style=_DECISION_STYLE[verdict.decision])
    title.append(f"  (exit {verdict.exit_code})")
    grid = Table.grid(padding=(0, 1), expand=True)
    grid.add_column(no_wrap=True, style="bold")
    grid.add_column(ratio=1, overflow="fold")
    grid.add_row("Decided by:", Text(verdict.deciding_stage or "no stage (nothing decisive ran)"))
    grid.add_row("Reason:", Text(verdict.reason))
    if verdict.apply_method:
        grid.add_row("Applied by:", Text(verdict.apply_method))
    grid.add_row("Cost:", Text(view.cost_line(verdict)))
    reviewed = view.reviewed_line(verdict)
    if reviewed:
        grid.add_row("Reviewed:", Text(reviewed))
    return Group(title, grid)


def _stages_table(verdict: Verdict) -> Table:
    table = Table(title="Stages", title_justify="left", box=box.SIMPLE_HEAD, expand=True)
    table.add_column("#", justify="right", width=2)
    table.add_column("stage", no_wrap=True)
    table.add_column("outcome", no_wrap=True)
    table.add_column("seconds", justify="right", no_wrap=True)
    table.add_column("reason", ratio=1)
    for i, s in enumerate(verdict.stages):
        outcome = Text(s.outcome.value, style=_OUTCOME_STYLE[s.outcome])
        table.add_row(str(i), s.stage, outcome, seconds_label(verdict, s.cost), Text(s.reason))
    return table


def _evidence_text(e: Evidence) -> Text:
    text = Text(e.kind.value)
    text.append(" grounded" if e.grounded else " ungrounded", style="green" if e.grounded else "yellow")
    text.append(f": {e.summary}")
    for command in e.commands:
        text.append(f"\n$ {command}", style="dim")
    return text


def _evidence(verdict: Verdict) -> RenderableType | None:
    items = [(s.stage, e) for s in verdict.stages for e in s.evidence]
    if not items:
        return None
    # A grid keeps wrapped summaries and commands indented under their own item.
    grid = Table.grid(padding=(0, 1), expand=True)
    grid.add_column(no_wrap=True, style="bold")
    grid.add_column(ratio=1, overflow="fold")
    for stage, e in items:
        grid.add_row(stage, _evidence_text(e))
    legend = [Text(f"  {token}: {meaning}", style="dim") for token, meaning in placeholders_used(verdict).items()]
    if legend:
        legend.insert(0, Text("Placeholders in the evidence (replace them to re-run a command):", style="dim"))
    return Group(Text("Evidence", style="bold italic"), grid, *legend)


def _diagnostics_table(rows: list[view.Row]) -> Table | None:
    if not rows:
        return None
    table = Table(title=f"New static diagnostics ({len(rows)})", title_justify="left", box=box.SIMPLE_HEAD, expand=True)
    table.add_column("", width=1, no_wrap=True)
    table.add_column("location", no_wrap=True, overflow="fold")
    table.add_column("rule", no_wrap=True)
    table.add_column("message", ratio=1)
    for r in rows:
        mark = Text("✗", style="bold red") if r.decides else Text("·", style="yellow")
        table.add_row(mark, r.location, r.rule_label, Text(r.diagnostic.message))
    return table


def _stripped(verdict: Verdict) -> RenderableType | None:
    stripped = view.stripped_hunks(verdict)
    if not stripped:
        return None
    lines = [Text(f"  {s.path} hunk {s.hunk}: {s.why}") for s in stripped]
    return Group(Text(f"Stripped by Stage 0 ({len(stripped)})", style="bold italic"), *lines)


def _votes(verdict: Verdict) -> RenderableType | None:
    votes = view.votes(verdict)
    if not votes:
        return None
    lines: list[Text] = []
    for i, vote in enumerate(votes, 1):
        decision, rationale = view.vote_fields(vote)
        lines.append(Text(f"  {i}. {decision}: {rationale}"))
    return Group(Text(f"Reviewer votes ({len(votes)})", style="bold italic"), *lines)


def _skipped(verdict: Verdict) -> RenderableType | None:
    skipped = view.skipped_stages(verdict)
    if not skipped:
        return None
    lines = [Text(f"  {s.stage}: {s.reason or 'no reason given'}") for s in skipped]
    return Group(Text("Skipped stages", style="bold italic"), *lines)


def _legend(rows: list[view.Row]) -> Text | None:
    if not rows:
        return None
    return Text("✗ decides the reject   · new, reported as context", style="dim")


def render_text(verdict: Verdict, *, color: bool = False) -> str:
    """The report as terminal text, ``WIDTH`` columns wide; ANSI styles only when ``color`` is true."""
    buffer = io.StringIO()
    console = Console(
        file=buffer,
        width=WIDTH,
        force_terminal=color,
        color_system="standard" if color else None,
        no_color=not color,
        highlight=False,
        emoji=False,
        markup=False,
        soft_wrap=False,
    )
    rows = view.diagnostic_rows(verdict)
    sections: list[RenderableType | None] = [
        _summary(verdict),
        _stages_table(verdict),
        _evidence(verdict),
        _diagnostics_table(rows),
        _legend(rows),
        _stripped(verdict),
        _votes(verdict),
        _skipped(verdict),
    ]
    for section in (s for s in sections if s is not None):
        console.print(section)
        console.line()
    # rich pads every line to the console width; trailing blanks only get in the way of logs and diffs.
    return "\n".join(line.rstrip() for line in buffer.getvalue().rstrip().splitlines()) + "\n"
