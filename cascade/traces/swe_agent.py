"""SWE-agent trajectories: a `.traj` object (``trajectory[]`` of action / observation / thought), or a bare list of
such steps (hand-written traces, the red-team corpus).

An action is a shell command line or one of SWE-agent's own commands. ``create FILE`` writes an empty file and opens
it; ``open FILE`` opens one; ``edit N:M`` … ``end_of_edit`` replaces lines of the open file — unless the tool refused
it (its lint found a syntax error), which the observation says. Everything else the agent executed is a command."""

from __future__ import annotations

import re
import shlex
from typing import Any

from cascade.errors import BadInput
from cascade.models import FileWrite, LineEdit, ShellCommand, Trace, TraceOperation, TraceStep
from cascade.traces.base import repo_path, text_of

_REFUSED_EDIT = ("Your proposed edit has introduced new syntax error", "Your changes have not been applied")
_FILE_HEADER = re.compile(r"^\[File: (?P<path>.+?) \((?P<lines>\d+) lines total\)\]")  # the tool's own output header
_EDIT_RANGE = re.compile(r"^edit\s+(?P<start>\d+):(?P<end>\d+)\s*$")


class SweAgentReader:
    @property
    def name(self) -> str:
        return "swe_agent"

    def detect(self, data: Any) -> bool:
        if isinstance(data, dict):
            steps = data.get("trajectory")
            return isinstance(steps, list) and all(_is_plain_step(item) for item in steps)
        return isinstance(data, list) and bool(data) and all(_is_plain_step(item) for item in data)

    def read(self, data: Any, source: str) -> Trace:
        raw_steps: list[Any] = data["trajectory"] if isinstance(data, dict) else data
        if not isinstance(raw_steps, list):
            raise BadInput(f"{source or 'trace'}: a SWE-agent trajectory must be a list of steps")
        replay = _OpenFile()
        steps = [replay.step(raw) for raw in raw_steps]
        return Trace(source=source, format=self.name, steps=steps)


def _is_plain_step(item: Any) -> bool:
    if isinstance(item, str):
        return True
    return isinstance(item, dict) and isinstance(item.get("action"), str) and "args" not in item


class _OpenFile:
    """SWE-agent edits the file it last created or opened; the reader follows that to name each edit's file."""

    def __init__(self) -> None:
        self.path: str | None = None

    def step(self, raw: Any) -> TraceStep:
        if not isinstance(raw, dict):
            action, observation, thought = text_of(raw), "", ""
        else:
            action = text_of(raw.get("action"))
            observation = text_of(raw.get("observation"))
            thought = text_of(raw.get("thought"))
        return TraceStep(
            action=action, observation=observation, thought=thought, operations=self.operations(action, observation)
        )

    def operations(self, action: str, observation: str) -> list[TraceOperation]:
        first, _, body = action.partition("\n")
        words = _split(first)
        if not words:
            return []
        if words[0] == "create" and len(words) > 1:
            self.path = repo_path(words[1])
            return [FileWrite(path=self.path, content="")]  # SWE-agent's create leaves one empty line
        if words[0] == "open" and len(words) > 1:
            self.path = repo_path(words[1])
        match = _EDIT_RANGE.match(first.strip())
        if match is not None:
            return self._edit(int(match["start"]), int(match["end"]), body, observation)
        return [ShellCommand(command=action)]

    def _edit(self, start: int, end: int, body: str, observation: str) -> list[TraceOperation]:
        if self.path is None or observation.startswith(_REFUSED_EDIT) or start < 1 or end < start - 1:
            return []
        lines = body.split("\n")
        stripped = [line.strip() for line in lines]
        if "end_of_edit" in stripped:
            lines = lines[: stripped.index("end_of_edit")]
        header = _FILE_HEADER.match(observation.strip())
        return [
            LineEdit(
                path=self.path,
                start=start,
                end=end,
                lines=lines,
                lines_after=int(header["lines"]) if header else None,
            )
        ]


def _split(line: str) -> list[str]:
    try:
        return shlex.split(line)
    except ValueError:
        return line.split()
