"""Load agent traces: SWE-agent `.traj` JSON, or a JSONL/JSON list of {action, observation, thought} steps."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cascade.errors import BadInput, read_input_text
from cascade.models import Trace, TraceStep


def _step(raw: Any) -> TraceStep:
    if not isinstance(raw, dict):
        return TraceStep(action=str(raw))
    return TraceStep(
        action=str(raw.get("action") or ""),
        observation=str(raw.get("observation") or ""),
        thought=str(raw.get("thought") or ""),
    )


def trace_from_data(data: Any, source: str = "") -> Trace:
    if isinstance(data, dict) and isinstance(data.get("trajectory"), list):
        return Trace(source=source, steps=[_step(s) for s in data["trajectory"]])
    if isinstance(data, list):
        return Trace(source=source, steps=[_step(s) for s in data])
    raise BadInput(f"{source or 'trace'}: expected a SWE-agent .traj object or a list of steps")


def load_trace(path: str | Path) -> Trace:
    text = read_input_text(path, "trace")
    try:
        data: Any = json.loads(text)
    except json.JSONDecodeError:
        try:
            data = [json.loads(line) for line in text.splitlines() if line.strip()]
        except json.JSONDecodeError as exc:
            raise BadInput(f"trace file is neither JSON nor JSONL: {path} (line {exc.lineno})") from None
    return trace_from_data(data, source=str(path))
