"""Render a `Verdict` in one of the output formats; one module per format."""

from __future__ import annotations

from typing import Literal

from cascade.models import Verdict

Format = Literal["text", "json", "markdown", "sarif", "github"]
FORMATS: tuple[Format, ...] = ("text", "json", "markdown", "sarif", "github")


def render(verdict: Verdict, fmt: Format) -> str:
    if fmt == "json":
        return verdict.model_dump_json(indent=2) + "\n"
    raise ValueError(f"unknown format {fmt}")
