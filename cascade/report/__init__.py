"""Render a `Verdict` in one of the output formats; one module per format."""

from __future__ import annotations

import os
import sys
from typing import Literal

from cascade.leaks import decoy_scanner, redact_formats
from cascade.models import Verdict

Format = Literal["text", "json", "markdown", "sarif", "github"]
FORMATS: tuple[Format, ...] = ("text", "json", "markdown", "sarif", "github")


def stdout_wants_color() -> bool:
    """Colour only for a terminal, and never when the user set NO_COLOR (https://no-color.org)."""
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")


def render(verdict: Verdict, fmt: Format, *, color: bool | None = None) -> str:
    """The report in ``fmt``, with secrets redacted (a second line of defence: the pipeline already screened every
    stage's result — docs/architecture.md, "Run model"). ``color`` applies to text only."""
    text = _render(verdict, fmt, color=color)
    if fmt != "json" and decoy_scanner().found_in(text):
        text = decoy_scanner().redact(text)
    return redact_formats(text)


def _render(verdict: Verdict, fmt: Format, *, color: bool | None = None) -> str:
    if fmt == "json":
        return verdict.model_dump_json(indent=2) + "\n"
    if fmt == "text":
        from cascade.report.text import render_text

        return render_text(verdict, color=stdout_wants_color() if color is None else color)
    if fmt == "markdown":
        from cascade.report.markdown import render_markdown

        return render_markdown(verdict)
    if fmt == "sarif":
        from cascade.report.sarif import render_sarif

        return render_sarif(verdict)
    if fmt == "github":
        from cascade.report.github import render_github

        return render_github(verdict)
    raise ValueError(f"unknown format {fmt}")
