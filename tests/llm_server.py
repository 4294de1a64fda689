"""A small OpenAI-compatible chat server on 127.0.0.1 with scripted answers, so tests exercise litellm's HTTP path."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """One scripted answer: a chat completion with ``content``, an HTTP error ``status``, or a ``hang``."""

    content: str | None = None
    status: int = 200
    body: str = ""
    hang_seconds: float = 0.0
    prompt_tokens: int = 100
    completion_tokens: int = 20


@dataclass
class Received:
    model: str
    body: dict[str, Any]
    headers: dict[str, str]  # lower-case names


Script = Callable[[Received], Reply]


@dataclass
class ScriptedServer:
    """Answers each request with ``script(request)``; records every request it saw."""

    script: Script
    received: list[Received] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None

    @property
    def api_base(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def start(self) -> ScriptedServer:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # silence per-request logging
                return

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                request = Received(
                    model=str(body.get("model")), body=body, headers={k.lower(): v for k, v in self.headers.items()}
                )
                owner.received.append(request)
                owner.answer(self, owner.script(request))

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def answer(self, handler: BaseHTTPRequestHandler, reply: Reply) -> None:
        if reply.hang_seconds:
            time.sleep(reply.hang_seconds)
        if reply.status != 200:
            payload = reply.body or json.dumps({"error": {"message": f"scripted {reply.status}", "type": "x"}})
        else:
            payload = json.dumps(completion(reply))
        data = payload.encode("utf-8")
        try:
            handler.send_response(reply.status)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(data)))
            handler.end_headers()
            handler.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            return  # the client gave up (timeout test)

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


def completion(reply: Reply) -> dict[str, Any]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 1,
        "model": "scripted",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": reply.content}, "finish_reason": "stop"}],
        "usage": {
            "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": reply.completion_tokens,
            "total_tokens": reply.prompt_tokens + reply.completion_tokens,
        },
    }


def sequence(*replies: Reply) -> Script:
    """Answer requests in order; the last reply repeats."""
    lock = threading.Lock()
    queue = list(replies)

    def script(_: Received) -> Reply:
        with lock:
            return queue.pop(0) if len(queue) > 1 else queue[0]

    return script


def vote(decision: str, rationale: str = "scripted", cited: list[str] | None = None) -> Reply:
    return Reply(content=json.dumps({"decision": decision, "rationale": rationale, "cited_evidence": cited or []}))
