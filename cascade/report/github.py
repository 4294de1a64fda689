"""`--format github`: GitHub Actions workflow commands that become annotations on the pull request.

`::error` for diagnostics the reject rests on, `::warning` for other patch-caused diagnostics, one `::notice` for
the verdict. GitHub shows about ten annotations of each type per step, so each type is capped at ten and what was
left out is counted in the notice and in a closing summary line.
"""

from __future__ import annotations

from cascade.models import Verdict
from cascade.report import view

MAX_PER_TYPE = 10


def escape_data(value: str) -> str:
    """The message part of a workflow command (as @actions/core escapes it)."""
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(value: str) -> str:
    """A `key=value` property of a workflow command: also `:` and `,`, which would end the value."""
    return escape_data(value).replace(":", "%3A").replace(",", "%2C")


def command(kind: str, message: str, **properties: str | int | None) -> str:
    props = ",".join(f"{key}={escape_property(str(value))}" for key, value in properties.items() if value is not None)
    return f"::{kind}{' ' + props if props else ''}::{escape_data(message)}"


def _annotation(kind: str, row: view.Row) -> str:
    d = row.diagnostic
    return command(
        kind,
        d.message,
        file=d.path,
        line=max(d.line, 1),
        col=row.column,
        endLine=d.end_line if d.end_line is not None and d.end_line >= d.line else None,
        endColumn=row.end_column if d.end_line == d.line and row.column is not None else None,
        title=f"cascade: {row.rule_label}",
    )


def render_github(verdict: Verdict) -> str:
    rows = view.diagnostic_rows(verdict)
    errors = [r for r in rows if r.decides]
    warnings = [r for r in rows if not r.decides]
    lines = [_annotation("error", r) for r in errors[:MAX_PER_TYPE]]
    lines += [_annotation("warning", r) for r in warnings[:MAX_PER_TYPE]]
    more_errors, more_warnings = max(len(errors) - MAX_PER_TYPE, 0), max(len(warnings) - MAX_PER_TYPE, 0)
    more = ""
    if more_errors or more_warnings:
        counts = f"{more_errors} error(s), {more_warnings} warning(s)"
        more = f" …and {more_errors + more_warnings} more ({counts}) not annotated"
    title = f"cascade: {view.headline(verdict)}"
    lines.append(command("notice", f"{verdict.reason}{more}", title=title))
    shown = f"{min(len(errors), MAX_PER_TYPE)} error(s) and {min(len(warnings), MAX_PER_TYPE)} warning(s) annotated"
    lines.append(f"cascade: {verdict.decision.value}: {verdict.reason} — {shown}{';' + more if more else ''}")
    return "\n".join(lines) + "\n"
