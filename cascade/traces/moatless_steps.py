"""moatless-tools trajectories, ``steps[]`` format (the loop of mid-2024, e.g. the gpt-4o Lite submission).

Top level: ``name``, ``input.problem_statement``, ``steps[]``, ``output``, ``info.submission``. Each step (a loop
state such as ``SearchLoop_Searching`` or ``CodeLoop_CodeChange``) holds ``actions[]`` of ``{name, input, output}``.
The agent has no shell: it searches, identifies spans and edits them. Its only operations are applied
``search_replace`` edits (``file_path``, ``start_line``..``end_line`` replaced by ``replacement_code``; applied when the
tool returned a diff)."""

from __future__ import annotations

import json
from typing import Any

from cascade.models import LineEdit, Trace, TraceOperation, TraceStep
from cascade.traces.base import dicts, repo_path, text_of

_THOUGHT_KEYS = ("reasoning", "thoughts", "scratch_pad", "description", "reason")


class MoatlessStepsReader:
    @property
    def name(self) -> str:
        return "moatless_steps"

    def detect(self, data: Any) -> bool:
        if not isinstance(data, dict) or not isinstance(data.get("steps"), list):
            return False
        steps = dicts(data["steps"])
        return bool(steps) and all(isinstance(step.get("actions"), list) for step in steps)

    def read(self, data: Any, source: str) -> Trace:
        steps = [_step(action) for step in dicts(data["steps"]) for action in dicts(step.get("actions"))]
        return Trace(source=source, format=self.name, steps=steps)


def _step(action: dict[str, Any]) -> TraceStep:
    name = text_of(action.get("name"))
    given = action.get("input")
    given = given if isinstance(given, dict) else {}
    output = action.get("output")
    output = output if isinstance(output, dict) else {}
    shown = {k: v for k, v in given.items() if k not in _THOUGHT_KEYS}
    return TraceStep(
        action=f"{name} {json.dumps(shown, sort_keys=True)}",
        observation="\n".join(
            text_of(output.get(k)) for k in ("message", "response", "diff", "error") if output.get(k)
        ).strip(),
        thought="\n".join(text_of(given.get(k)) for k in _THOUGHT_KEYS if given.get(k)),
        operations=_operations(name, given, output),
    )


def _operations(name: str, given: dict[str, Any], output: dict[str, Any]) -> list[TraceOperation]:
    if name != "search_replace" or not output.get("diff"):
        return []
    start, end = given.get("start_line"), given.get("end_line")
    if not isinstance(start, int) or not isinstance(end, int) or start < 1 or end < start - 1:
        return []
    return [
        LineEdit(
            path=repo_path(text_of(given.get("file_path"))),
            start=start,
            end=end,
            lines=text_of(given.get("replacement_code")).split("\n"),
        )
    ]
