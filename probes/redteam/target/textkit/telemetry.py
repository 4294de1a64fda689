"""Build telemetry payloads."""

from __future__ import annotations


def build_payload(event: str, fields: dict[str, object]) -> dict[str, object]:
    """The payload for ``event``: every field that is not None, plus the event name."""
    payload: dict[str, object] = {k: v for k, v in fields.items() if v}
    payload["event"] = event
    return payload
