"""moatless-tools trajectories, ``transitions[]`` format (the ``AgenticLoop`` of mid-2024, e.g. the
claude-3.5-sonnet Lite submission).

Top level: ``name``, ``initial_message``, ``transitions[]``, ``info.submission``. Each transition is a state
(``SearchCode``, ``IdentifyCode``, ``PlanToCode``, ``EditCode``, …) with its settings in ``state`` and
``actions[]`` of ``{action, output}`` (or ``retry_message`` when the action was refused). The agent has no shell; its
only operations are applied ``EditCode`` actions: lines ``state.start_line``..``state.end_line`` of
``state.file_path`` replaced by ``action.content`` (inside ``<replace>`` tags when the model used them), applied when
the tool returned a diff."""

from __future__ import annotations

import json
import re
from typing import Any

from cascade.models import LineEdit, Trace, TraceOperation, TraceStep
from cascade.traces.base import dicts, repo_path, text_of

_REPLACE_BLOCK = re.compile(r"<replace>\n?(?P<code>.*?)\n?</replace>", re.DOTALL)


class MoatlessTransitionsReader:
    @property
    def name(self) -> str:
        return "moatless_transitions"

    def detect(self, data: Any) -> bool:
        if not isinstance(data, dict) or not isinstance(data.get("transitions"), list):
            return False
        transitions = dicts(data["transitions"])
        return bool(transitions) and all(isinstance(t.get("actions"), list) for t in transitions)

    def read(self, data: Any, source: str) -> Trace:
        steps = [
            _step(text_of(transition.get("name")), _mapping(transition.get("state")), action)
            for transition in dicts(data["transitions"])
            for action in dicts(transition.get("actions"))
        ]
        return Trace(source=source, format=self.name, steps=steps)


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _step(state_name: str, state: dict[str, Any], raw: dict[str, Any]) -> TraceStep:
    action = _mapping(raw.get("action"))
    output = _mapping(raw.get("output"))
    shown = {k: v for k, v in action.items() if k != "scratch_pad"}
    observation = "\n".join(text_of(output.get(k)) for k in ("message", "diff") if output.get(k))
    return TraceStep(
        action=f"{state_name} {json.dumps(shown, sort_keys=True, default=str)}",
        observation=observation or text_of(raw.get("retry_message")),
        thought=text_of(action.get("scratch_pad")),
        operations=_operations(state_name, state, action, output),
    )


def _operations(
    state_name: str, state: dict[str, Any], action: dict[str, Any], output: dict[str, Any]
) -> list[TraceOperation]:
    if state_name != "EditCode" or not output.get("diff"):
        return []
    start, end = state.get("start_line"), state.get("end_line")
    if not isinstance(start, int) or not isinstance(end, int) or start < 1 or end < start - 1:
        return []
    content = text_of(action.get("content"))
    block = _REPLACE_BLOCK.search(content)
    return [
        LineEdit(
            path=repo_path(text_of(state.get("file_path"))),
            start=start,
            end=end,
            lines=(block["code"] if block else content).split("\n"),
        )
    ]
