"""The `TraceReader` protocol and the path rule every reader shares.

A reader recognises its format by content (`detect`) and turns it into the one `Trace` model (`read`): each step
keeps the agent's own action text for people, and lists in `operations` what the action did — the commands it
executed and the file changes that were applied — which is all the trace scan and mined probes read."""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Any, Protocol

from cascade.models import Trace

# A SWE-bench checkout directory as agents name it: /sympy__sympy, /workspace/django__django__3.0, /testbed.
_CHECKOUT_DIR = re.compile(r"^(?!__)[A-Za-z0-9_.-]+__[A-Za-z0-9_.-]+$|^testbed$")


class TraceReader(Protocol):
    """One agent trace format."""

    @property
    def name(self) -> str:
        """The format's name, recorded as `Trace.format`."""
        ...

    def detect(self, data: Any) -> bool:
        """True when the parsed JSON (an object, or the list of a JSONL file's lines) is in this format."""
        ...

    def read(self, data: Any, source: str) -> Trace:
        """The trace as the gate's model; raises `BadInput` when the content is this format but malformed."""
        ...


def repo_path(path: str, root: str = "") -> str:
    """A path the agent wrote, relative to its checkout: under ``root`` when the trace names one, else with the
    SWE-bench checkout directory (``/owner__repo/``, ``/workspace/owner__repo__1.0/``, ``/testbed/``) and a leading
    ``./`` dropped. A path outside the checkout stays absolute, so safety rules still see where it points."""
    if root and path.startswith(root.rstrip("/") + "/"):
        path = path[len(root.rstrip("/")) + 1 :]
    parts = list(PurePosixPath(path).parts)
    absolute = bool(parts) and parts[0] == "/"
    parts = [p for p in parts if p not in ("/", ".")]
    for depth in range(min(2, len(parts) - 1)):
        if _CHECKOUT_DIR.match(parts[depth]):
            return "/".join(parts[depth + 1 :])
    return ("/" if absolute else "") + "/".join(parts)


def text_of(value: Any) -> str:
    """A JSON value as text for display: strings as they are, anything else as compact JSON-ish text."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(text_of(v) for v in value)
    return str(value)


def dicts(value: Any) -> list[dict[str, Any]]:
    """The dict items of a JSON list (anything else: none)."""
    if not isinstance(value, list):
        return []
    return [v for v in value if isinstance(v, dict)]
