"""Finding decoy secrets in what a run produced, and redacting secrets from what the gate publishes.

Everything derived from a sandboxed run is untrusted text: its output, its files, the failure messages and command
lines the gate quotes. A test that copies a decoy (`cascade/decoys.py`) into any of them is exfiltrating, and it can
cheaply disguise the copy. So a secret is looked for in every form such a test can produce without effort: as
written, reversed, hex, base64 or urlsafe base64 (at each of the three byte alignments it can have inside a longer
encoded text), URL-encoded, and split across lines or joined with separators. The comparison runs on a canonical
view — lowercase letters and digits only — of both the secret's forms and the text, so separators, line breaks and
case changes do not hide a copy; a long secret (a key body) is matched by fixed windows of it, so a part of it
counts too. Windows are long and random, so a chance match in real test output is not a concern.

Redaction is the second line, never the only one: a leak found is a `leak` record that rejects (the oracle, the
pipeline); redaction only keeps the secret out of the report that then leaves the machine. Besides the decoys it
removes the common secret formats (GitHub tokens, ``x-access-token:`` URLs, AWS key ids, PEM private keys,
``Authorization:`` headers), whatever produced them."""

from __future__ import annotations

import base64
import functools
import re
import urllib.parse
from collections.abc import Iterable

import ahocorasick

from cascade.decoys import decoys

WINDOW = 24  # characters of a long secret's canonical form that identify it
STRIDE = 12
_KEEP = bytes(range(ord("a"), ord("z") + 1)) + bytes(range(ord("0"), ord("9") + 1))
_DROP = bytes(c for c in range(256) if c not in _KEEP)
REDACTED = "<redacted>"
SECRET_FORMATS = re.compile(
    r"\bgh[pousr]_[A-Za-z0-9]{20,}"
    r"|\bgithub_pat_[A-Za-z0-9_]{20,}"
    r"|\bnpm_[A-Za-z0-9]{30,}"
    r"|x-access-token:[^@\s'\"]+"
    r"|\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"
    r"|(?i:aws_secret_access_key)\s*[=:]\s*\S+"
    r"|-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)"
    r"|(?i:\bauthorization)\s*[:=]\s*[^\n'\"]+"
)


def canonical(data: bytes) -> bytes:
    """Lowercase letters and digits only: what survives case changes, separators and line breaks."""
    return data.lower().translate(None, _DROP)


def base64_middles(raw: bytes) -> list[bytes]:
    """The stable middle of ``raw``'s base64 encoding at each of the three byte offsets it can start at."""
    middles = []
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + raw + b"\0\0")
        middles.append(encoded[4:-8])
    return middles


def forms(secret: str) -> list[bytes]:
    """Canonical forms of one secret a cheap encoding produces: plain, reversed, hex, base64 (urlsafe base64 and
    URL-encoding differ only in what the canonical view drops, or decode back in `SecretScanner.views`)."""
    raw = secret.encode()
    found = [raw, raw[::-1], raw.hex().encode(), *base64_middles(raw)]
    return [canonical(f) for f in found]


def windows(form: bytes) -> list[bytes]:
    """A short form as itself; a long one as overlapping windows (any long enough part of it matches one)."""
    if len(form) <= WINDOW + STRIDE:
        return [form]
    starts = [*range(0, len(form) - WINDOW + 1, STRIDE), len(form) - WINDOW]
    return sorted({form[s : s + WINDOW] for s in starts})


class SecretScanner:
    """Looks for a fixed set of secrets (a process's decoys) in any text, in any cheap encoding."""

    def __init__(self, secrets: Iterable[str]) -> None:
        self.needles: list[bytes] = sorted({w for s in secrets for f in forms(s) for w in windows(f)
                                            if len(w) >= 16})  # fmt: skip
        # Every run's output, records and messages are scanned: one Aho-Corasick pass over a text finds any of the
        # ~1,200 windows, where a test per window cost 0.25 ms for each short string and 0.25 s per MiB.
        self._automaton = ahocorasick.Automaton()
        for needle in self.needles:
            self._automaton.add_word(needle.decode("ascii"), None)
        if self.needles:
            self._automaton.make_automaton()

    @staticmethod
    def views(data: bytes) -> list[bytes]:
        """The canonical text, and its URL-decoded twin when it holds escapes."""
        views = [canonical(data)]
        if b"%" in data:
            views.append(canonical(urllib.parse.unquote_to_bytes(data)))
        return views

    def found_in(self, data: bytes | str) -> bool:
        raw = data.encode("utf-8", "replace") if isinstance(data, str) else data
        if not self.needles:
            return False
        # a canonical view is lowercase letters and digits only: ASCII
        return any(next(self._automaton.iter(view.decode("ascii")), None) is not None for view in self.views(raw))

    def redact(self, text: str) -> str:
        """``text`` without the secrets: the lines that hold one, or the whole text when a copy spans lines."""
        if not self.found_in(text):
            return text
        lines = [REDACTED if self.found_in(line) else line for line in text.split("\n")]
        kept = "\n".join(lines)
        return kept if not self.found_in(kept) else REDACTED


def redact_formats(text: str) -> str:
    """Common secret formats replaced, whatever their origin."""
    return SECRET_FORMATS.sub(REDACTED, text)


@functools.lru_cache(maxsize=1)
def decoy_scanner() -> SecretScanner:
    """The scanner for this process's decoys (`cascade/decoys.py`)."""
    return SecretScanner(decoys().values())


def scrub(value: object, found: list[str]) -> object:
    """``value`` (plain JSON data) with every string redacted: decoys (noting where one was found in ``found``) and
    the common secret formats."""
    if isinstance(value, str):
        if decoy_scanner().found_in(value):
            found.append(value[:80])
            value = decoy_scanner().redact(value)
        return redact_formats(value)
    if isinstance(value, list):
        return [scrub(item, found) for item in value]
    if isinstance(value, dict):
        return {key: scrub(item, found) for key, item in value.items()}
    return value
