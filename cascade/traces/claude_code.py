"""Claude Code session transcripts: JSONL, one entry per line.

Entries have ``type`` (``user``, ``assistant``, and bookkeeping types such as ``summary``), ``cwd`` (the session's
working directory) and ``message`` (``role``, ``content``). An assistant message's content blocks are ``text``,
``thinking`` and ``tool_use`` (``id``, ``name``, ``input``); the answer comes back in a later user message as a
``tool_result`` block (``tool_use_id``, ``content``, ``is_error``). Operations, per tool:

- ``Bash``: ``input.command`` is a shell command;
- ``Write``: ``input.content`` written to ``input.file_path``;
- ``Edit``: ``old_string`` → ``new_string`` in ``file_path`` (every occurrence with ``replace_all``);
  ``MultiEdit``: its ``edits[]`` in order.

Reads and searches (``Read``, ``Grep``, ``Glob``, …) are steps without operations; a file change whose result is an
error was not applied. Paths are made relative to the session's ``cwd``."""

from __future__ import annotations

import json
from typing import Any

from cascade.models import FileWrite, ShellCommand, TextReplace, Trace, TraceOperation, TraceStep
from cascade.traces.base import dicts, repo_path, text_of

_MESSAGE_TYPES = ("user", "assistant")


class ClaudeCodeReader:
    @property
    def name(self) -> str:
        return "claude_code"

    def detect(self, data: Any) -> bool:
        entries = dicts(data)
        if not entries or len(entries) != len(data):
            return False
        messages = [e for e in entries if e.get("type") in _MESSAGE_TYPES]
        return bool(messages) and all(isinstance(e.get("message"), dict) for e in messages)

    def read(self, data: Any, source: str) -> Trace:
        entries = dicts(data)
        root = next((text_of(e.get("cwd")) for e in entries if e.get("cwd")), "")
        calls: list[_Call] = []
        by_id: dict[str, _Call] = {}
        for entry in entries:
            if entry.get("type") not in _MESSAGE_TYPES:
                continue
            thought: list[str] = []
            for block in _blocks(entry):
                kind = block.get("type")
                if kind in ("text", "thinking"):
                    thought.append(text_of(block.get(kind)))
                elif kind == "tool_use":
                    call = _Call(block, "\n".join(thought).strip(), root)
                    calls.append(call)
                    by_id[text_of(block.get("id"))] = call
                    thought = []
                elif kind == "tool_result" and text_of(block.get("tool_use_id")) in by_id:
                    by_id[text_of(block.get("tool_use_id"))].answer(block)
        return Trace(source=source, format=self.name, root=root, steps=[call.model() for call in calls])


def _blocks(entry: dict[str, Any]) -> list[dict[str, Any]]:
    message = entry.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    return dicts(content)


def _input(block: dict[str, Any]) -> dict[str, Any]:
    given = block.get("input")
    return given if isinstance(given, dict) else {}


class _Call:
    """A tool call and its result, until the transcript is read."""

    def __init__(self, block: dict[str, Any], thought: str, root: str) -> None:
        self.tool = text_of(block.get("name"))
        self.input = _input(block)
        self.thought = thought
        self.root = root
        self.result = ""
        self.failed = False

    def answer(self, block: dict[str, Any]) -> None:
        content = block.get("content")
        parts = dicts(content)
        self.result = "\n".join(text_of(p.get("text")) for p in parts) if parts else text_of(content)
        self.failed = block.get("is_error") is True

    def model(self) -> TraceStep:
        # a failed command still ran; a failed file change was not applied
        operations: list[TraceOperation] = [
            op for op in self.operations() if not self.failed or isinstance(op, ShellCommand)
        ]
        action = (
            text_of(self.input.get("command"))
            if self.tool == "Bash"
            else f"{self.tool} {json.dumps(self.input, sort_keys=True, default=str)}"
        )
        return TraceStep(action=action, observation=self.result, thought=self.thought, operations=operations)

    def operations(self) -> list[TraceOperation]:
        given = self.input
        path = repo_path(text_of(given.get("file_path")), self.root)
        if self.tool == "Bash" and given.get("command"):
            return [ShellCommand(command=text_of(given.get("command")))]
        if self.tool == "Write" and path:
            return [FileWrite(path=path, content=text_of(given.get("content")))]
        if self.tool == "Edit" and path:
            return [_replace(path, given)]
        if self.tool == "MultiEdit" and path:
            return [_replace(path, edit) for edit in dicts(given.get("edits"))]
        return []


def _replace(path: str, edit: dict[str, Any]) -> TraceOperation:
    return TextReplace(
        path=path,
        old=text_of(edit.get("old_string")),
        new=text_of(edit.get("new_string")),
        every=edit.get("replace_all") is True,
    )
