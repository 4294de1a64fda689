"""The result of running one static tool over one tree."""

from __future__ import annotations

import shlex
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from cascade.models import Diagnostic


class ToolRun(BaseModel):
    """One tool over one tree. ``error`` is set when the tool is missing, crashed or timed out."""

    model_config = ConfigDict(extra="forbid")

    tool: str
    tree: str = Field(description="Directory the tool ran in (the worktree).")
    argv: list[str] = Field(default_factory=list)
    diagnostics: list[Diagnostic] = Field(default_factory=list)
    config: dict[str, Any] = Field(default_factory=dict, description="Generated tool configuration, if any.")
    error: str | None = None
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None

    def command(self) -> str:
        """A shell line that re-runs exactly this invocation."""
        return f"cd {shlex.quote(self.tree)} && {shlex.join(self.argv)}"
