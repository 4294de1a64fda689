"""Line-number-free identities of diagnostics, so code that merely moved does not look new.

A fingerprint hashes (tool, rule, path, normalized message, hash of the stripped source line, occurrence index
among diagnostics with the same key). Patch-caused diagnostics are the multiset difference patched − base, which
with the occurrence index is a plain set difference of fingerprints.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterable

from cascade.models import Diagnostic

# "from line 12", "line 12:4", "(12:4)", ":12:" — any position a message may cite
_LINE_REF = re.compile(r"\bline \d+(?::\d+)?|\b\d+:\d+\b|:\d+:")


def normalize_message(message: str, tree_dirs: Iterable[str] = ()) -> str:
    """The message without positions or worktree paths (base and patched trees live in different directories)."""
    for tree in tree_dirs:
        if tree:
            message = message.replace(tree.rstrip("/") + "/", "").replace(tree.rstrip("/"), "<tree>")
    message = _LINE_REF.sub("<pos>", message)
    return " ".join(message.split())


def _digest(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:16]


def fingerprint_all(diagnostics: list[Diagnostic], canonical_path: dict[str, str] | None = None) -> list[Diagnostic]:
    """Copies of the diagnostics with ``fingerprint`` set; ``canonical_path`` maps a renamed file to its old path."""
    canonical_path = canonical_path or {}
    seen: Counter[str] = Counter()
    out: list[Diagnostic] = []
    for d in sorted(diagnostics, key=lambda d: (d.path, d.line, d.column, d.tool, d.rule, d.message)):
        path = canonical_path.get(d.path, d.path)
        key = _digest(d.tool, d.rule, path, normalize_message(d.message), _digest(d.source_line.strip()))
        out.append(d.model_copy(update={"fingerprint": _digest(key, str(seen[key]))}))
        seen[key] += 1
    return out


def new_diagnostics(base: list[Diagnostic], patched: list[Diagnostic]) -> list[Diagnostic]:
    """Patched diagnostics whose fingerprint the base tree does not have (multiset patched − base)."""
    base_prints = {d.fingerprint for d in base}
    return [d for d in patched if d.fingerprint not in base_prints]
