"""Record/replay cassette: model answers keyed by a sha256 of (model, messages, params).

Identical requests are legitimate (the reviewer asks the same prompt k times), so each key holds a list of
replies consumed in order: the n-th identical request of a run replays the n-th recorded reply. Failed calls are
recorded too, so a replay reproduces a failure's verdict and cost exactly. A replay never falls through to a live
call: a missing reply raises `CassetteMiss`. Nothing secret is stored: no API key, no headers, no api_base.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cascade.errors import BadInput
from cascade.llm.errors import CassetteMiss
from cascade.models import Cost

CASSETTE_VERSION = 1
CassetteMode = Literal["off", "record", "replay"]


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    role: Literal["system", "user", "assistant"]
    content: str


class CallParams(BaseModel):
    """The sampling parameters that change an answer, and so belong to the cassette key."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    temperature: float = 0.0
    max_tokens: int = 1024


class RecordedReply(BaseModel):
    """One logical call's outcome: the answer (or the failure) and what it cost, including retries."""

    model_config = ConfigDict(extra="forbid")

    content: str | None = None
    error: str | None = Field(default=None, description="Why the call failed after retries and fallbacks.")
    answered_by: str | None = None
    cost: Cost = Field(default_factory=Cost)


class RecordedRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str
    params: CallParams
    messages: list[ChatMessage]


class Interaction(BaseModel):
    model_config = ConfigDict(extra="forbid")

    request: RecordedRequest
    replies: list[RecordedReply] = Field(default_factory=list)


class CassetteFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: int = CASSETTE_VERSION
    interactions: dict[str, Interaction] = Field(default_factory=dict)


def request_key(model: str, messages: list[ChatMessage], params: CallParams) -> str:
    """sha256 of the canonical JSON of what determines an answer; where the model is served does not count."""
    payload = {
        "model": model,
        "messages": [m.model_dump() for m in messages],
        "params": params.model_dump(),
    }
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _load(path: Path) -> CassetteFile:
    try:
        return CassetteFile.model_validate_json(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return CassetteFile()
    except (ValidationError, UnicodeDecodeError, IsADirectoryError) as exc:
        raise BadInput(f"LLM cassette {path} is not a cascade cassette ({type(exc).__name__})") from None


def _write_atomically(path: Path, data: CassetteFile) -> None:
    text = json.dumps(data.model_dump(mode="json"), indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(tmp, path)


class Cassette:
    """One run's view of a cassette file; counts identical requests so each gets its own reply."""

    def __init__(self, path: str | Path, mode: Literal["record", "replay"]) -> None:
        self.path = Path(path)
        self.mode = mode
        self._seen: dict[str, int] = {}
        if mode == "replay" and not self.path.is_file():
            raise BadInput(f"LLM cassette not found for replay: {self.path}")
        self._data = _load(self.path) if mode == "replay" else CassetteFile()

    def next_index(self, key: str) -> int:
        index = self._seen.get(key, 0)
        self._seen[key] = index + 1
        return index

    def replay(self, key: str, index: int) -> RecordedReply:
        interaction = self._data.interactions.get(key)
        if interaction is None or index >= len(interaction.replies):
            have = 0 if interaction is None else len(interaction.replies)
            raise CassetteMiss(
                f"LLM cassette replay miss: no recorded reply #{index + 1} for request {key[:12]} "
                f"({have} recorded) in {self.path}; re-record with --llm-mode record"
            )
        return interaction.replies[index]

    def record(self, key: str, index: int, request: RecordedRequest, reply: RecordedReply) -> None:
        """Store the reply and write the file at once, merging with what other clients (stages of this run,
        benchmark workers in other processes) wrote; the lock keeps concurrent writers from losing entries."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_name(self.path.name + ".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            data = _load(self.path)
            interaction = data.interactions.setdefault(key, Interaction(request=request))
            del interaction.replies[index:]
            interaction.replies.append(reply)
            _write_atomically(self.path, data)


def open_cassette(path: str | None, mode: CassetteMode) -> Cassette | None:
    if mode == "off":
        return None
    if not path:
        raise BadInput(f"llm.cassette_mode is '{mode}' but no cassette path is set (--llm-cassette / llm.cassette)")
    return Cassette(path, mode)
