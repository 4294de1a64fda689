"""Agent trace readers: one module per format, chosen by content (never by file name), all producing `Trace`.

| module | format |
|---|---|
| `swe_agent.py` | SWE-agent `.traj` (`trajectory[]`), or a bare list of action / observation / thought steps |
| `moatless_steps.py` | moatless-tools `steps[]` trajectories |
| `moatless_transitions.py` | moatless-tools `transitions[]` (AgenticLoop) trajectories |
| `openhands.py` | OpenHands event streams (a list of events, or a row with `history`) |
| `claude_code.py` | Claude Code session transcripts (JSONL) |

To add a format: implement `TraceReader` (`base.py`) in a new module and list it in `READERS`; the first reader
whose `detect` accepts the content reads it, so a reader must not accept another's format."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cascade.errors import BadInput, read_input_text
from cascade.models import Trace
from cascade.traces.base import TraceReader
from cascade.traces.claude_code import ClaudeCodeReader
from cascade.traces.moatless_steps import MoatlessStepsReader
from cascade.traces.moatless_transitions import MoatlessTransitionsReader
from cascade.traces.openhands import OpenHandsReader
from cascade.traces.swe_agent import SweAgentReader

READERS: list[TraceReader] = [
    SweAgentReader(),
    MoatlessStepsReader(),
    MoatlessTransitionsReader(),
    OpenHandsReader(),
    ClaudeCodeReader(),
]


def reader_for(data: Any) -> TraceReader | None:
    """The reader that recognises this parsed content, if any."""
    return next((reader for reader in READERS if reader.detect(data)), None)


def trace_from_data(data: Any, source: str = "") -> Trace:
    """A parsed trace (JSON value, or the list of a JSONL file's values) in the gate's model."""
    reader = reader_for(data)
    if reader is None:
        names = ", ".join(r.name for r in READERS)
        raise BadInput(f"{source or 'trace'}: not a trace format cascade reads ({names})")
    return reader.read(data, source)


def load_trace(path: str | Path) -> Trace:
    """Read a trace file (JSON or JSONL) of any supported format."""
    text = read_input_text(path, "trace")
    try:
        data: Any = json.loads(text)
    except json.JSONDecodeError:
        try:
            data = [json.loads(line) for line in text.splitlines() if line.strip()]
        except json.JSONDecodeError as exc:
            raise BadInput(f"trace file is neither JSON nor JSONL: {path} (line {exc.lineno})") from None
    return trace_from_data(data, source=str(path))


__all__ = ["READERS", "TraceReader", "load_trace", "reader_for", "trace_from_data"]
