"""A CRLF patch gets exactly the verdict of its LF twin, over every patch case of the bad-input matrix."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cascade.patch import normalize_line_endings, parse_patch
from tests.bad_inputs import cases, run, with_crlf


def test_crlf_headers_normalise_but_crlf_content_of_an_lf_diff_stays() -> None:
    lf = "--- a/w.py\n+++ b/w.py\n@@ -1 +1 @@\n-a = 1\n+a = 2\n"
    assert parse_patch(lf.replace("\n", "\r\n")).files[0].path == "w.py"
    assert normalize_line_endings(lf.replace("\n", "\r\n")) == lf
    crlf_file = "--- a/w.py\n+++ b/w.py\n@@ -1 +1 @@\n-a = 1\r\n+a = 2\r\n"  # git diff of a file with CRLF lines
    assert normalize_line_endings(crlf_file) == crlf_file


def _same_case(line: str) -> str:
    """The first line with what legitimately differs between twins left out: the file name and its byte count."""
    return re.sub(r"\d+ bytes", "N bytes", re.sub(r"<tmp>/[^ ']*", "<tmp>/…", line))


@pytest.mark.slow
def test_every_crlf_twin_gets_the_verdict_of_its_lf_patch(tmp_path: Path) -> None:
    matrix = cases(tmp_path, twins_only=True)
    assert len(matrix) >= 10
    verdicts = {}
    for case in matrix:
        assert case.patch is not None
        raw = case.patch.encode() if isinstance(case.patch, str) else case.patch
        _, lf_exit, lf_first, lf_reason, _ = run(case, tmp_path, raw, f"{case.name} LF")
        _, crlf_exit, crlf_first, crlf_reason, _ = run(case, tmp_path, with_crlf(raw), f"{case.name} CRLF")
        lf_first, crlf_first = (_same_case(line) for line in (lf_first, crlf_first))
        assert (crlf_exit, crlf_first, crlf_reason) == (lf_exit, lf_first, lf_reason), case.name
        verdicts[case.name] = lf_exit
    # the matrix holds patches each stage decides on, so the comparison above is not vacuous
    assert verdicts["demo fix.diff (LF)"] == 1 and verdicts["syntax error"] == 1
    assert verdicts["demo clean.diff (LF)"] == 2 and verdicts["not a diff"] == 3
