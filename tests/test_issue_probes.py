"""The issue probe source (cascade/probesources/issue.py): extraction from real-looking issue texts, and Stage 2 judging
its probes on real repositories with real pytest runs in the sandbox."""

from __future__ import annotations

from pathlib import Path

import pytest

from cascade.config import parse_config
from cascade.models import EvidenceKind, Outcome, ReviewRequest, StageResult
from cascade.pipeline import review
from cascade.probesources.issue import (
    FailureSignature,
    IssueProbeSource,
    example_as_pytest,
    extract_examples,
    signatures_in,
)
from cascade.sandbox.base import Sandbox
from cascade.stages.probes import ProbesStage
from tests.support import MakeRepo, diff_of

TRACEBACK_ISSUE = """\
Averaging an empty list crashes

```python
from pkg.stats import mean
mean([])
```

```
Traceback (most recent call last):
  File "<stdin>", line 2, in <module>
  File "/home/me/pkg/stats.py", line 2, in mean
    return sum(xs) / len(xs)
ZeroDivisionError: division by zero
```
It should return 0.
"""

SESSION_ISSUE = """\
`double` is wrong for negative numbers:

    >>> from pkg.stats import double
    >>> double(2)
    4
    >>> double(-2)
    -3

but it should be -4.
"""

STATS = "def mean(xs):\n    return sum(xs) / len(xs)\n\n\ndef double(x):\n    return 2 * x if x > 0 else 2 * x + 1\n"
FIXED_MEAN = STATS.replace(
    "    return sum(xs) / len(xs)", "    if not xs:\n        return 0\n    return sum(xs) / len(xs)"
)
FIXED_DOUBLE = STATS.replace("2 * x if x > 0 else 2 * x + 1", "2 * x")


def test_traceback_gives_the_signature_and_the_code_block_the_script() -> None:
    examples = extract_examples(TRACEBACK_ISSUE)
    assert len(examples) == 1
    ex = examples[0]
    assert ex.kind == "code_block" and "mean([])" in ex.steps[0].source
    assert ex.signatures == [FailureSignature(exception="ZeroDivisionError", fragment="division by zero")]


def test_doctest_session_with_a_value_shown_as_wrong_checks_output() -> None:
    (ex,) = extract_examples(SESSION_ISSUE)
    assert ex.kind == "session" and ex.check_output
    assert [(s.source.strip(), s.shown_output) for s in ex.steps] == [
        ("from pkg.stats import double", None),
        ("double(2)", "4\n"),
        ("double(-2)", "-3\n"),
    ]


def test_network_errors_and_warnings_are_no_signature() -> None:
    text = "Traceback (most recent call last):\nrequests.exceptions.ConnectionError: boom\n"
    text += "Traceback (most recent call last):\nDeprecationWarning: old\n"
    text += "Traceback (most recent call last):\nfoo.bar.BadThing" + "Error: at 0xdeadbeef now\n"
    assert signatures_in(text) == [FailureSignature(exception="BadThingError", fragment="at")]


def test_an_issue_without_failure_or_runnable_code_gives_nothing() -> None:
    assert extract_examples("The docs say `foo` but should say `bar`.\n\n```\n$ make docs\n```\n") == []
    assert extract_examples("```python\nprint(1)\n```\nworks fine") == []  # no failure shown


def test_generated_file_is_old_python_syntax() -> None:
    (ex,) = extract_examples(TRACEBACK_ISSUE)
    text = example_as_pytest(ex)
    compile(text, "probe.py", "exec")
    assert "->" not in text and ": str" not in text  # no annotations: it runs on 3.6+


def run_issue_stage(repo: Path, patch: str, issue: str, sandbox: Sandbox) -> StageResult:
    config = parse_config({"env": {"use_current_interpreter": True}, "probes": {"regression": False}})
    request = ReviewRequest(repo=str(repo), patch_text=patch, issue_text=issue, config=config)
    return review(request, stages=[ProbesStage(sources=[IssueProbeSource()], sandbox=sandbox)]).stages[0]


BASE = {"pkg/__init__.py": "", "pkg/stats.py": STATS}


@pytest.mark.slow
def test_issue_failure_still_there_on_the_patch_rejects_with_both_outputs(
    make_repo: MakeRepo, sandbox: Sandbox
) -> None:
    repo = make_repo(BASE)
    patch = diff_of(repo, {"pkg/stats.py": STATS.replace("return sum(xs) / len(xs)", "return sum(xs) / len(xs) + 0")})
    result = run_issue_stage(repo, patch, TRACEBACK_ISSUE, sandbox)
    assert result.outcome == Outcome.REJECT, result.reason
    probe = next(e for e in result.evidence if e.kind == EvidenceKind.PROBE)
    assert probe.details.source == "issue" and probe.details.verdict == "reject"
    assert "ZeroDivisionError: division by zero" in probe.details.base.message
    assert "ZeroDivisionError: division by zero" in probe.details.patched.message


@pytest.mark.slow
def test_issue_failure_gone_is_evidence_never_accept(make_repo: MakeRepo, sandbox: Sandbox) -> None:
    repo = make_repo(BASE)
    patch = diff_of(repo, {"pkg/stats.py": FIXED_MEAN})
    probes = {"regression": False, "probe_pass": "accept"}  # even under the accepting policy
    config = parse_config({"env": {"use_current_interpreter": True}, "probes": probes})
    request = ReviewRequest(repo=str(repo), patch_text=patch, issue_text=TRACEBACK_ISSUE, config=config)
    result = review(request, stages=[ProbesStage(sources=[IssueProbeSource()], sandbox=sandbox)]).stages[0]
    assert result.outcome == Outcome.PASS, result.reason
    probe = next(e for e in result.evidence if e.kind == EvidenceKind.PROBE)
    assert probe.details.patched.status == "pass" and probe.details.verdict == "evidence"


@pytest.mark.slow
def test_different_failure_on_the_patch_is_no_verdict(make_repo: MakeRepo, sandbox: Sandbox) -> None:
    repo = make_repo(BASE)
    raising = STATS.replace("    return sum(xs) / len(xs)", "    if not xs:\n        raise ValueError('empty')\n"
                            "    return sum(xs) / len(xs)")  # fmt: skip
    result = run_issue_stage(repo, diff_of(repo, {"pkg/stats.py": raising}), TRACEBACK_ISSUE, sandbox)
    assert result.outcome == Outcome.PASS, result.reason
    assert not [e for e in result.evidence if e.kind == EvidenceKind.PROBE]
    assert any("inconclusive" in e.summary for e in result.evidence), [e.summary for e in result.evidence]


@pytest.mark.slow
def test_printed_value_shown_as_wrong_rejects_when_unchanged_and_passes_when_fixed(
    make_repo: MakeRepo, sandbox: Sandbox
) -> None:
    repo = make_repo(BASE)
    unchanged = STATS.replace("2 * x if x > 0 else 2 * x + 1", "2 * x if x >= 1 else 2 * x + 1")
    result = run_issue_stage(repo, diff_of(repo, {"pkg/stats.py": unchanged}), SESSION_ISSUE, sandbox)
    assert result.outcome == Outcome.REJECT, result.reason
    assert "prints what the issue shows as wrong" in result.reason
    fixed = run_issue_stage(repo, diff_of(repo, {"pkg/stats.py": FIXED_DOUBLE}), SESSION_ISSUE, sandbox)
    assert fixed.outcome == Outcome.PASS, fixed.reason


def test_example_that_does_not_fail_the_issues_way_on_base_is_not_kept(make_repo: MakeRepo, sandbox: Sandbox) -> None:
    repo = make_repo({"pkg/__init__.py": "", "pkg/stats.py": FIXED_MEAN})  # base already fixed
    patch = diff_of(repo, {"pkg/stats.py": FIXED_MEAN.replace("return 0", "return 0.0")})
    result = run_issue_stage(repo, patch, TRACEBACK_ISSUE, sandbox)
    assert result.outcome == Outcome.PASS
    assert any("not kept" in e.summary for e in result.evidence)


SIDE_EFFECT_ISSUE = """\
`mean` crashes on an empty list:

```python
import os
open(os.path.expanduser("~/.issue-example-was-here"), "w").close()  # the reporter's own setup step
from pkg.stats import mean
mean([])
```

```
Traceback (most recent call last):
ZeroDivisionError: division by zero
```
"""


@pytest.mark.slow
def test_side_effects_of_the_issue_example_itself_are_not_the_patchs(make_repo: MakeRepo, sandbox: Sandbox) -> None:
    """The example writes to HOME on both trees: the probe's doing. The patch writing there too would be the patch's."""
    repo = make_repo(BASE)
    fixed = run_issue_stage(repo, diff_of(repo, {"pkg/stats.py": FIXED_MEAN}), SIDE_EFFECT_ISSUE, sandbox)
    assert fixed.outcome == Outcome.PASS, fixed.reason
    assert not [e for e in fixed.evidence if e.kind == EvidenceKind.SIDE_EFFECT and e.grounded]
    writing = FIXED_MEAN.replace(
        "    if not xs:\n",
        "    if not xs:\n        import os\n        open(os.path.expanduser('~/.pkg-state'), 'w').close()\n",
    )
    bad = run_issue_stage(repo, diff_of(repo, {"pkg/stats.py": writing}), SIDE_EFFECT_ISSUE, sandbox)
    assert bad.outcome == Outcome.REJECT, bad.reason
    effects = next(e for e in bad.evidence if e.kind == EvidenceKind.SIDE_EFFECT).details.side_effects
    assert {e.target.rsplit("/", 1)[-1] for e in effects if not e.benign} == {".pkg-state"}  # by its oracles
