"""Evidence details are models chosen by the evidence kind: they survive a JSON round trip as the same model (the
kinds that carry several shapes included), and a kind refuses details that are not its own."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ValidationError

from cascade.models import (
    DETAILS_BY_KIND,
    AbstentionDetails,
    BinaryFilesNote,
    Evidence,
    EvidenceKind,
    NoDetails,
    ReviewerPacketNote,
    RunNote,
    SandboxSetup,
    StageResult,
    StaticTargetsNote,
    ToolFailure,
    ToolTiming,
    VoteDetails,
)
from cascade.models import Outcome as StageOutcome
from cascade.stable import stable_result

SAMPLES: list[tuple[EvidenceKind, BaseModel]] = [
    (EvidenceKind.INFO, NoDetails()),
    (EvidenceKind.INFO, BinaryFilesNote(binary_files=["logo.png"])),
    (EvidenceKind.INFO, RunNote(commands=["pytest -q"], log_excerpt="1 failed")),
    (EvidenceKind.INFO, SandboxSetup(isolation="bwrap", python="3.11.9")),
    (
        EvidenceKind.INFO,
        StaticTargetsNote(
            changed=["m.py"],
            dependents=[],
            names=["m"],
            renamed={},
            tool_seconds=[ToolTiming(tool="ruff", tree="/t", seconds=0.1)],
        ),
    ),
    (
        EvidenceKind.INFO,
        ReviewerPacketNote(
            template="reviewer.v1",
            prompt_sha256="0" * 64,
            model="openai/m",
            votes_asked=3,
            temperature=0.8,
            evidence_ids={"E1": "a finding"},
            policy="grounded_only",
            evidence_mode="grounded",
        ),
    ),
    (EvidenceKind.UNAVAILABLE, ToolFailure(tool="pyright", base_error="crashed", patched_error=None)),
    (EvidenceKind.UNAVAILABLE, NoDetails()),
    (
        EvidenceKind.REVIEW_VOTE,
        VoteDetails(vote=1, decision="accept", rationale="r", cited_evidence=[], answered_by="m"),
    ),
    (
        EvidenceKind.REVIEW_VOTE,
        AbstentionDetails(vote=2, decision="abstain", reason="not JSON", raw_excerpt="{", answered_by="m"),
    ),
]


@pytest.mark.parametrize(("kind", "details"), SAMPLES, ids=[type(d).__name__ + "-" + k.value for k, d in SAMPLES])
def test_details_come_back_as_the_same_model(kind: EvidenceKind, details: BaseModel) -> None:
    evidence = Evidence(kind=kind, grounded=False, summary="s", details=details)
    again = Evidence.model_validate_json(evidence.model_dump_json())
    assert type(again.details) is type(details) and again == evidence
    result = StageResult(stage="s", outcome=StageOutcome.PASS, evidence=[evidence])
    assert stable_result(result, {}).evidence[0] == evidence  # the pipeline's dump-and-revalidate keeps the model


def test_a_kind_refuses_details_that_are_not_its_own() -> None:
    with pytest.raises(ValidationError, match="probe evidence cannot carry NoDetails"):
        Evidence(kind=EvidenceKind.PROBE, grounded=True, summary="s")
    with pytest.raises(ValidationError):
        Evidence.model_validate({"kind": "review_vote", "grounded": False, "summary": "s", "details": {"x": 1}})


def test_every_kind_names_its_details() -> None:
    assert set(DETAILS_BY_KIND) == set(EvidenceKind)
