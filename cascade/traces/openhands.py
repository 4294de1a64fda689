"""OpenHands event streams: the list of serialised events (a conversation's events, or the ``history`` of an
evaluation output row).

An action event has ``action`` (its type) and ``args``; an observation event has ``observation``, ``content`` and
``extras``, and names the action it answers in ``cause``. Operations:

- ``run``: ``args.command`` is a shell command; ``run_ipython``: the cell's ``!`` lines are shell commands (its
  Python is code, not a command);
- ``write``: ``args.content`` written to ``args.path`` (whole file, or lines ``start``..``end``);
- ``edit`` with the file-editor ``args.command``: ``create`` (``file_text``), ``str_replace`` (``old_str`` →
  ``new_str``), ``insert`` (``new_str`` after line ``insert_line``); ``view`` and ``undo_edit`` change nothing the
  reader can follow, and an LLM-drafted edit (no ``command``) has no exact effect to replay.

A file change whose observation is an ``error`` was not applied and yields no operation."""

from __future__ import annotations

from typing import Any

from cascade.models import FileWrite, LineEdit, ShellCommand, TextReplace, Trace, TraceOperation, TraceStep
from cascade.traces.base import dicts, repo_path, text_of

_CONTAINER_KEYS = ("history", "events", "trajectory")


class OpenHandsReader:
    @property
    def name(self) -> str:
        return "openhands"

    def detect(self, data: Any) -> bool:
        events = _events(data)
        return (
            bool(events)
            and any(_is_action(e) or _is_observation(e) for e in events)
            and all(_is_action(e) or _is_observation(e) or "message" in e for e in events)
        )

    def read(self, data: Any, source: str) -> Trace:
        steps: list[_Step] = []
        by_id: dict[Any, _Step] = {}
        for event in _events(data):
            if _is_action(event):
                step = _Step(event)
                steps.append(step)
                by_id[event.get("id")] = step
            elif _is_observation(event) and event.get("cause") in by_id:
                by_id[event.get("cause")].observe(event)
        return Trace(source=source, format=self.name, steps=[step.model() for step in steps])


def _events(data: Any) -> list[dict[str, Any]]:
    if isinstance(data, dict):
        for key in _CONTAINER_KEYS:
            if isinstance(data.get(key), list):
                return dicts(data[key])
        return []
    return dicts(data)


def _is_action(event: dict[str, Any]) -> bool:
    return isinstance(event.get("action"), str) and isinstance(event.get("args"), dict)


def _is_observation(event: dict[str, Any]) -> bool:
    return isinstance(event.get("observation"), str) and ("extras" in event or "cause" in event)


def _args(event: dict[str, Any]) -> dict[str, Any]:
    args = event.get("args")
    return args if isinstance(args, dict) else {}


class _Step:
    """An action event and what answered it, until the stream is read."""

    def __init__(self, event: dict[str, Any]) -> None:
        self.kind = text_of(event.get("action"))
        self.args = _args(event)
        self.message = text_of(event.get("message"))
        self.observation = ""
        self.failed = False

    def observe(self, event: dict[str, Any]) -> None:
        self.observation = text_of(event.get("content"))
        self.failed = event.get("observation") == "error"

    def model(self) -> TraceStep:
        # a failed command still ran; a failed file change was not applied
        operations: list[TraceOperation] = [
            op for op in self.operations() if not self.failed or isinstance(op, ShellCommand)
        ]
        return TraceStep(
            action=self.action_text(),
            observation=self.observation,
            thought=text_of(self.args.get("thought")),
            operations=operations,
        )

    def action_text(self) -> str:
        if self.kind == "run":
            return text_of(self.args.get("command"))
        if self.kind == "run_ipython":
            return text_of(self.args.get("code"))
        return self.message or f"{self.kind} {text_of(self.args.get('path'))}".strip()

    def operations(self) -> list[TraceOperation]:
        args = self.args
        path = repo_path(text_of(args.get("path")))
        if self.kind == "run" and args.get("command"):
            return [ShellCommand(command=text_of(args.get("command")))]
        if self.kind == "run_ipython":
            lines = [line.strip() for line in text_of(args.get("code")).splitlines()]
            return [
                ShellCommand(command=line[1:].strip()) for line in lines if line.startswith("!") and line[1:].strip()
            ]
        if self.kind == "write" and path:
            return [_write(path, text_of(args.get("content")), args.get("start"), args.get("end"))]
        if self.kind == "edit" and path:
            return _edit(path, args)
        return []


def _write(path: str, content: str, start: Any, end: Any) -> TraceOperation:
    if isinstance(start, int) and isinstance(end, int) and start >= 1 and end >= start - 1:
        return LineEdit(path=path, start=start, end=end, lines=content.split("\n"))
    return FileWrite(path=path, content=content)


def _edit(path: str, args: dict[str, Any]) -> list[TraceOperation]:
    command = args.get("command")
    if command == "create":
        return [FileWrite(path=path, content=text_of(args.get("file_text")))]
    if command == "str_replace" and args.get("old_str"):
        return [TextReplace(path=path, old=text_of(args.get("old_str")), new=text_of(args.get("new_str")))]
    line = args.get("insert_line")
    if command == "insert" and isinstance(line, int) and line >= 0:
        return [LineEdit(path=path, start=line + 1, end=line, lines=text_of(args.get("new_str")).split("\n"))]
    return []
