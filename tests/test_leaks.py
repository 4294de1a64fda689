"""Decoys in everything a run produced: found in every cheap encoding, never in real test output, redacted."""

from __future__ import annotations

import base64
import codecs
import urllib.parse

import pytest

from cascade.config import CascadeConfig
from cascade.decoys import Decoys, decoys
from cascade.leaks import REDACTED, SecretScanner, redact_formats
from cascade.models import Evidence, EvidenceKind, Outcome, ReviewRequest, RunNote, StageResult
from cascade.pipeline import review
from cascade.report import FORMATS, render

SECRETS = Decoys.generate()
SCANNER = SecretScanner(SECRETS.values())
TOKEN = SECRETS.github_token


def split_lines(text: str, width: int = 7) -> str:
    return "\n".join(text[i : i + width] for i in range(0, len(text), width))


ENCODINGS = {
    "plain": lambda s: s,
    "base64": lambda s: base64.b64encode(s.encode()).decode(),
    "base64-shifted": lambda s: base64.b64encode(b"ab" + s.encode()).decode(),
    "urlsafe-base64": lambda s: base64.urlsafe_b64encode(b"x" + s.encode()).decode(),
    "hex": lambda s: s.encode().hex(),
    "HEX": lambda s: s.encode().hex().upper(),
    "reversed": lambda s: s[::-1],
    "split-lines": split_lines,
    "joined-with-dashes": lambda s: "-".join(s),
    "url-encoded": lambda s: urllib.parse.quote(s, safe=""),
    "fully-url-encoded": lambda s: "".join(f"%{b:02X}" for b in s.encode()),
    "base64-split": lambda s: split_lines(base64.b64encode(s.encode()).decode(), 10),
    "rot13-then-nothing": lambda s: s,  # sanity: the identity again under another name
}


@pytest.mark.parametrize("encoding", sorted(ENCODINGS))
def test_a_decoy_is_found_in_every_cheap_encoding(encoding: str) -> None:
    text = f"assert env == expected\nE  got {ENCODINGS[encoding](TOKEN)} in the output\n"
    assert SCANNER.found_in(text), encoding


def test_a_part_of_a_key_counts_and_a_similar_looking_secret_does_not() -> None:
    key_lines = [line for line in SECRETS.ssh_rsa.splitlines() if "-----" not in line]
    assert SCANNER.found_in("leaked:\n" + "\n".join(key_lines[3:5]))
    other = Decoys.generate()
    assert not SCANNER.found_in(other.github_token + other.ssh_rsa + other.aws_secret)
    assert not SCANNER.found_in(codecs.encode(TOKEN, "rot13"))  # not a cheap encoding the scan claims to cover


def test_real_test_output_does_not_look_like_a_decoy() -> None:
    noise = "\n".join(["=" * 80, "tests/test_x.py::test_y PASSED", "0123456789abcdef" * 64,
                       base64.b64encode(bytes(range(256)) * 8).decode(), "ghp_" + "a" * 36])  # fmt: skip
    assert not SCANNER.found_in(noise)


def test_redaction_removes_the_lines_or_the_whole_text() -> None:
    text = f"line one\ntoken {TOKEN} here\nline three"
    assert SCANNER.redact(text) == f"line one\n{REDACTED}\nline three"
    spread = "start\n" + split_lines(TOKEN) + "\nend"
    assert SCANNER.redact(spread) == REDACTED  # no single line holds it: the whole text goes
    assert SCANNER.redact("nothing here") == "nothing here"


def test_common_secret_formats_are_redacted_whatever_made_them() -> None:
    samples = [
        "ghp_" + "A1b2" * 9,
        "github_pat_11ABCDEFGHIJKLMNOPQRSTUV_abcdefghijklmnopqrstuvwxyz0123456789",
        "https://x-access-token:ghs_abcdefabcdefabcdefabcdefabcdefabcdef@github.com/o/r",
        "AKIAIOSFODNN7EXAMPLE",
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----",
        "http.https://github.com/.extraheader AUTHORIZATION: basic eC1hY2Nlc3MtdG9rZW46",
    ]
    for sample in samples:
        out = redact_formats(f"before {sample} after")
        assert REDACTED in out and sample not in out, sample


def test_decoys_look_real_and_never_name_the_gate() -> None:
    found = decoys()
    assert found.github_token.startswith("ghp_") and len(found.github_token) == 40
    assert found.aws_key_id.startswith("AKIA") and len(found.aws_key_id) == 20
    everything = " ".join([*found.env(), *found.env().values(), *found.home_files(), *found.home_files().values()])
    assert "cascade" not in everything.lower() and "canary" not in everything.lower()
    assert "-----BEGIN OPENSSH PRIVATE KEY-----" in found.home_files()[".ssh/id_ed25519"]


class Echo:
    """A stage that quotes run output: a decoy and an AWS key id reach its evidence."""

    name, title = "echo", "a stage that quotes run output"
    needs_sandbox = False

    def run(self, ctx: object) -> StageResult:
        evidence = Evidence(kind=EvidenceKind.INFO, grounded=False, summary=f"log tail: token={decoys().github_token}",
                            details=RunNote(commands=[], log_excerpt="AKIAIOSFODNN7EXAMPLE in a config"))  # fmt: skip
        return StageResult(stage=self.name, outcome=Outcome.PASS, reason="quoted", evidence=[evidence])


def test_a_stage_result_holding_a_decoy_is_a_leak_and_is_redacted_in_every_format() -> None:
    """The pipeline's second line: whatever a stage reports is scanned; a decoy there came out of a run."""
    request = ReviewRequest(repo=".", patch_text="", config=CascadeConfig())
    verdict = review(request, stages=[Echo()], with_repo=False)
    result = verdict.stages[0]
    assert result.outcome == Outcome.REJECT and "decoy credential" in result.reason
    for fmt in FORMATS:
        published = render(verdict, fmt)
        assert decoys().github_token not in published and "AKIAIOSFODNN7EXAMPLE" not in published, fmt
