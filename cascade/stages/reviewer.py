"""Stage 3 — weak reviewer: k votes of an LLM on a plainly rendered evidence packet (docs/architecture.md, Stages).

The prompt holds the grounded results of the earlier stages first (static diagnostics, probe and regression
results with their log excerpts; nothing unchecked), then the issue, the patch and a trace excerpt — each inside a
data block whose boundary nonce the text cannot know (cascade.llm.prompts). The same prompt is sent k times
(``reviewer.votes``, temperature ``reviewer.temperature``) so a server can reuse the processed prompt. Each answer
must be one JSON object ``{decision, rationale, cited_evidence}``; anything else is an abstention.

Tally: at least a majority of the k votes must be valid (quorum), the most frequent decision wins, a tie for
first place is uncertain. Policy ``reviewer_may_reject: grounded_only`` (default) keeps a reject only when a
reject vote cites a grounded finding (static, probe, regression, side-effect or trace-scan evidence of an earlier
stage); otherwise the reject becomes uncertain. ``any`` lets the majority reject on its own.

No model configured → ``skipped`` (the verdict is uncertain and says why). A budget running out or a failing model
→ ``uncertain`` with that reason; a cassette replay miss ends the review (exit 3). The stage never accepts on an
error.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from cascade.context import ReviewContext
from cascade.errors import BadInput
from cascade.llm.cassette import CallParams, ChatMessage
from cascade.llm.client import LLMClient, LLMReply
from cascade.llm.errors import LLMError, LLMNotConfigured
from cascade.llm.prompts import boundary_nonce, data_block, load_template, run_paths, stabilize, truncate
from cascade.models import (
    AbstentionDetails,
    Cost,
    Evidence,
    EvidenceKind,
    NoDetails,
    Outcome,
    ReviewerPacketNote,
    StageResult,
    VoteDetails,
)

TEMPLATE = "reviewer.v1"
VOTE_MAX_TOKENS = 1024
PATCH_CHARS = 60_000
ISSUE_CHARS = 20_000
EVIDENCE_CHARS = 30_000
DETAILS_CHARS = 2_000
TRACE_STEPS = 5
TRACE_STEP_CHARS = 600
RAW_EXCERPT_CHARS = 300
NO_MODEL = "no LLM configured (llm.model)"
NOT_GIVEN = "(not given to this reviewer)"
EvidenceMode = Literal["grounded", "none"]
RejectPolicy = Literal["grounded_only", "any"]
# Grounded evidence kinds that can show a defect; a grounded_only reject must cite one of these.
FINDING_KINDS = {
    EvidenceKind.STATIC,
    EvidenceKind.PROBE,
    EvidenceKind.REGRESSION,
    EvidenceKind.SIDE_EFFECT,
    EvidenceKind.TRACE_SCAN,
}


class ReviewVote(BaseModel):
    """One reviewer answer, validated strictly: unknown keys or wrong types make the vote an abstention."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    decision: Literal["accept", "reject", "uncertain"]
    rationale: str
    cited_evidence: list[str]


@dataclass
class Ballot:
    """A vote as cast: the parsed answer, or why it abstained."""

    index: int
    vote: ReviewVote | None
    abstain_reason: str = ""
    raw: str = ""
    answered_by: str = ""


@dataclass
class Packet:
    """The rendered prompt and the evidence IDs it offered (ID → evidence)."""

    messages: list[ChatMessage]
    ids: dict[str, Evidence] = field(default_factory=dict)

    @property
    def sha256(self) -> str:
        text = json.dumps([m.model_dump() for m in self.messages], sort_keys=True)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()


def parse_vote(content: str) -> ReviewVote | str:
    """The vote, or the reason it is not one. A single surrounding Markdown code fence is tolerated."""
    text = content.strip()
    if text.startswith("```") and text.endswith("```") and text.count("```") == 2:
        text = text[3:-3].removeprefix("json").strip()
    try:
        return ReviewVote.model_validate_json(text)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "answer"
        return f"not a valid vote ({where}: {first['msg']})"


def _without_timings(node: Any) -> Any:
    """Details minus wall times: they differ on every run and say nothing about the patch."""
    if isinstance(node, dict):
        return {k: _without_timings(v) for k, v in node.items() if k != "seconds"}
    if isinstance(node, list):
        return [_without_timings(v) for v in node]
    return node


def _render_item(ident: str, stage: str, ev: Evidence) -> str:
    lines = [f"{ident} [{ev.kind.value}, from stage {stage}] {ev.summary}"]
    lines += [f"  {d.tool} {d.rule} {d.path}:{d.line}: {d.message}" for d in ev.diagnostics]
    lines += [f"  command: {c}" for c in ev.commands]
    if not isinstance(ev.details, NoDetails):
        dumped = _without_timings(ev.details.model_dump())
        details = json.dumps(dumped, sort_keys=True, ensure_ascii=False, default=str)
        lines.append("  details: " + truncate(details, DETAILS_CHARS))
    return "\n".join(lines)


def render_evidence(ctx: ReviewContext) -> tuple[str, dict[str, Evidence]]:
    """Grounded items of earlier stages with IDs (findings first), then one line per stage. Unchecked notes are
    left out: only what a re-run would reproduce reaches the reviewer."""
    grounded = [(r.stage, ev) for r in ctx.results for ev in r.evidence if ev.grounded]
    grounded.sort(key=lambda pair: pair[1].kind not in FINDING_KINDS)  # stable: findings first, order kept
    ids = {f"E{i}": ev for i, (_, ev) in enumerate(grounded, start=1)}
    items = [_render_item(ident, stage, ev) for ident, (stage, ev) in zip(ids, grounded, strict=True)]
    stages = [f"stage {r.stage}: {r.outcome.value} — {r.reason}" for r in ctx.results]
    text = "\n\n".join(items) if items else "(no grounded results: the earlier checks found nothing to report)"
    text = stabilize(text + "\n\nStages run so far:\n" + "\n".join(stages), run_paths(ctx))
    return truncate(text, EVIDENCE_CHARS), ids


def render_trace(ctx: ReviewContext) -> str:
    trace = ctx.request.trace
    if trace is None or not trace.steps:
        return "(no trace given)"
    steps = trace.steps[-TRACE_STEPS:]
    return "\n".join(f"- {truncate(s.action.strip(), TRACE_STEP_CHARS)}" for s in steps if s.action.strip())


def build_packet(ctx: ReviewContext, evidence_mode: EvidenceMode = "grounded") -> Packet:
    """The prompt; ``evidence_mode="none"`` is the patch-only baseline (issue and patch, nothing else)."""
    evidence, ids = render_evidence(ctx) if evidence_mode == "grounded" else (NOT_GIVEN, {})
    blocks = {
        "evidence": evidence,
        "issue": truncate(ctx.request.issue_text or "(no issue text given)", ISSUE_CHARS),
        "patch": truncate(ctx.patch.text, PATCH_CHARS),
        "trace": render_trace(ctx) if evidence_mode == "grounded" else NOT_GIVEN,
    }
    template = load_template(TEMPLATE)
    nonce = boundary_nonce(template.system, template.user, *blocks.values())
    values = {name: data_block(name, text, nonce) for name, text in blocks.items()}
    return Packet(messages=template.render(nonce=nonce, **values), ids=ids)


def tally(ballots: list[Ballot], votes_asked: int) -> tuple[str | None, str]:
    """The majority decision (or None = uncertain) and a sentence saying how it came about."""
    valid = [b.vote.decision for b in ballots if b.vote is not None]
    quorum = votes_asked // 2 + 1
    abstained = votes_asked - len(valid)
    if len(valid) < quorum:
        return None, f"only {len(valid)} of {votes_asked} votes were valid (need {quorum})"
    ranked = Counter(valid).most_common()
    counts = ", ".join(f"{n} {d}" for d, n in ranked)
    suffix = f"{counts}; {abstained} abstained" if abstained else counts
    if len(ranked) > 1 and ranked[0][1] == ranked[1][1]:
        return None, f"tie between {ranked[0][0]} and {ranked[1][0]} ({suffix})"
    return ranked[0][0], f"majority {ranked[0][0]} ({suffix})"


def grounded_reject_citations(ballots: list[Ballot], ids: dict[str, Evidence]) -> list[str]:
    """IDs of grounded findings that reject votes cite (the only backing a grounded_only reject accepts)."""
    findings = {ident for ident, ev in ids.items() if ev.kind in FINDING_KINDS}
    cited = {c.strip() for b in ballots if b.vote and b.vote.decision == "reject" for c in b.vote.cited_evidence}
    return sorted(cited & findings)


def _ballot_evidence(ballot: Ballot) -> Evidence:
    details: VoteDetails | AbstentionDetails
    if ballot.vote is None:
        summary = f"vote {ballot.index}: abstained — {ballot.abstain_reason}"
        details = AbstentionDetails(
            vote=ballot.index,
            decision="abstain",
            reason=ballot.abstain_reason,
            raw_excerpt=ballot.raw[:RAW_EXCERPT_CHARS],
            answered_by=ballot.answered_by,
        )
    else:
        summary = f"vote {ballot.index}: {ballot.vote.decision} — {truncate(ballot.vote.rationale, 300).strip()}"
        details = VoteDetails(vote=ballot.index, **ballot.vote.model_dump(), answered_by=ballot.answered_by)
    return Evidence(kind=EvidenceKind.REVIEW_VOTE, grounded=False, summary=summary, details=details)


class ReviewerStage:
    name = "reviewer"
    needs_sandbox = False
    title = "Stage 3 — weak reviewer"

    def __init__(
        self,
        extra_params: dict[str, object] | None = None,
        *,
        evidence: EvidenceMode = "grounded",
        may_reject: RejectPolicy | None = None,
    ) -> None:
        """``evidence``/``may_reject`` exist for benchmark arms (patch-only baseline); None = the config's policy."""
        self._extra = extra_params  # passed to litellm as is (unit tests: mock_response)
        self._evidence: EvidenceMode = evidence
        self._may_reject = may_reject

    def run(self, ctx: ReviewContext) -> StageResult:
        cfg = ctx.config
        if not cfg.llm.model:
            return StageResult.skipped(self.name, NO_MODEL)
        try:
            client = LLMClient(cfg.llm, spent=sum((r.cost for r in ctx.results), Cost()), extra_params=self._extra)
        except (LLMNotConfigured, BadInput) as exc:
            return StageResult.skipped(self.name, str(exc))
        packet = build_packet(ctx, self._evidence)
        ballots, failure = self._collect(client, packet, cfg.reviewer.votes, cfg.reviewer.temperature)
        evidence = [self._packet_note(ctx, packet), *(_ballot_evidence(b) for b in ballots)]
        outcome, reason = self._decide(ctx, ballots, packet, failure)
        return self._result(outcome, reason, evidence, client.cost)

    def _collect(
        self, client: LLMClient, packet: Packet, votes: int, temperature: float
    ) -> tuple[list[Ballot], str | None]:
        """Ask for ``votes`` answers with the identical prompt; stop at the first call that yields no answer."""
        ballots: list[Ballot] = []
        params = CallParams(temperature=temperature, max_tokens=VOTE_MAX_TOKENS)
        for index in range(1, votes + 1):
            try:
                reply: LLMReply = client.complete(packet.messages, params)
            except LLMError as exc:
                return ballots, str(exc)
            parsed = parse_vote(reply.content)
            if isinstance(parsed, str):
                ballots.append(Ballot(index, None, parsed, reply.content, reply.answered_by))
            else:
                ballots.append(Ballot(index, parsed, answered_by=reply.answered_by))
        return ballots, None

    def _decide(
        self, ctx: ReviewContext, ballots: list[Ballot], packet: Packet, failure: str | None
    ) -> tuple[Outcome, str]:
        decision, how = tally(ballots, ctx.config.reviewer.votes)
        if failure is not None:
            if decision is None:
                return Outcome.UNCERTAIN, f"uncertain — {failure}; {how}"
            how += f" (no further votes: {failure})"
        if decision is None or decision == "uncertain":
            return Outcome.UNCERTAIN, f"reviewer: {how}"
        if decision == "accept":
            return Outcome.ACCEPT, f"reviewer: {how}"
        citations = grounded_reject_citations(ballots, packet.ids)
        policy = self._may_reject or ctx.config.reviewer.reviewer_may_reject
        if policy == "grounded_only" and not citations:
            return Outcome.UNCERTAIN, (
                f"reviewer: {how}, but no reject vote cites a grounded finding "
                "(policy reviewer_may_reject=grounded_only)"
            )
        backing = f"; cites {', '.join(citations)}" if citations else ""
        return Outcome.REJECT, f"reviewer: {how}{backing}"

    def _packet_note(self, ctx: ReviewContext, packet: Packet) -> Evidence:
        details = ReviewerPacketNote(
            template=TEMPLATE,
            prompt_sha256=packet.sha256,
            model=ctx.config.llm.model,
            votes_asked=ctx.config.reviewer.votes,
            temperature=ctx.config.reviewer.temperature,
            evidence_ids={ident: ev.summary for ident, ev in packet.ids.items()},
            policy=self._may_reject or ctx.config.reviewer.reviewer_may_reject,
            evidence_mode=self._evidence,
        )
        summary = f"asked {ctx.config.llm.model} for {ctx.config.reviewer.votes} votes on prompt {TEMPLATE}"
        return Evidence(kind=EvidenceKind.INFO, grounded=False, summary=summary, details=details)

    def _result(self, outcome: Outcome, reason: str, evidence: list[Evidence], cost: Cost) -> StageResult:
        return StageResult(stage=self.name, outcome=outcome, reason=reason, evidence=evidence, cost=cost)
