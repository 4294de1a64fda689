from __future__ import annotations

from pathlib import Path

import pytest

from cascade.models import Decision, Outcome, ReviewRequest
from cascade.pipeline import review
from cascade.stages.no_change import NoChangeStage, significant_tokens
from tests.support import MakeRepo, diff_of

BASE = {
    "pkg/__init__.py": "",
    "pkg/core.py": "def add(a, b):\n    # sum\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n",
    "tests/test_core.py": "from pkg.core import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n",
}


def _review(repo: Path, patch: str):
    return review(ReviewRequest(repo=str(repo), patch_text=patch), stages=[NoChangeStage()])


def test_comment_and_whitespace_only_patch_is_rejected_with_the_stripped_list(make_repo: MakeRepo) -> None:
    repo = make_repo(BASE)
    patch = diff_of(repo, {"pkg/core.py": BASE["pkg/core.py"].replace("# sum", "# the sum of a and b  ") + "\n\n"})
    verdict = _review(repo, patch)
    assert verdict.decision == Decision.REJECT
    assert verdict.deciding_stage == "no_change"
    stripped = verdict.stages[0].evidence[0].details.stripped
    assert {s.path for s in stripped} == {"pkg/core.py"}
    assert all("comment" in s.why for s in stripped)


def test_test_only_patch_is_rejected(make_repo: MakeRepo) -> None:
    repo = make_repo(BASE)
    patch = diff_of(repo, {"tests/test_core.py": BASE["tests/test_core.py"] + "\n\ndef test_more():\n    assert 1\n"})
    verdict = _review(repo, patch)
    assert verdict.decision == Decision.REJECT
    assert verdict.stages[0].evidence[0].details.stripped[0].why == "test file"


def test_real_change_passes_on(make_repo: MakeRepo) -> None:
    repo = make_repo(BASE)
    patch = diff_of(repo, {"pkg/core.py": BASE["pkg/core.py"].replace("a - b", "a - b - 0")})
    verdict = _review(repo, patch)
    assert verdict.stages[0].outcome == Outcome.PASS
    assert verdict.decision == Decision.UNCERTAIN


def test_reindent_is_a_real_change(make_repo: MakeRepo) -> None:
    src = "def f(x):\n    if x:\n        x += 1\n    return x\n"
    repo = make_repo({"m.py": src})
    patch = diff_of(repo, {"m.py": src.replace("        x += 1\n    return x", "        x += 1\n        return x")})
    assert _review(repo, patch).stages[0].outcome == Outcome.PASS


def test_rewrapped_call_is_cosmetic() -> None:
    assert significant_tokens(["f(a, b)"]) == significant_tokens(["f(a,", "  b)  # wrapped"])


@pytest.mark.parametrize("fragment", [['x = """open'], ["    if x:", "  y = 1"]])
def test_untokenizable_fragment_counts_as_change(fragment: list[str]) -> None:
    assert significant_tokens(fragment) is None


def test_empty_patch_is_rejected_without_a_checkout() -> None:
    verdict = review(ReviewRequest(repo="/nonexistent", patch_text=""), stages=[NoChangeStage()], with_repo=False)
    assert verdict.decision == Decision.REJECT
    assert verdict.reason == "the patch is empty"


def test_reordered_statements_are_a_change(make_repo: MakeRepo) -> None:
    """sympy-15346's gold patch only moves one list item: removed == added, yet behaviour changes."""
    src = "STEPS = [\n    a,\n    b,  # second\n    c,\n]\n"
    repo = make_repo({"m.py": src})
    patch = diff_of(repo, {"m.py": "STEPS = [\n    b,  # second\n    a,\n    c,\n]\n"})
    assert _review(repo, patch).stages[0].outcome == Outcome.PASS


def test_untracked_scratch_files_only_is_rejected(make_repo: MakeRepo) -> None:
    repo = make_repo(BASE)
    patch = diff_of(repo, {"test_reproduce.py": "\n", "pkg/notes.py": "# just a comment\n"})
    verdict = _review(repo, patch)
    assert verdict.decision == Decision.REJECT
