"""What every report format shows, read out of a `Verdict` once so the formats agree with each other."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from cascade.models import (
    AbstentionDetails,
    Decision,
    Diagnostic,
    Evidence,
    EvidenceKind,
    NoChangeDetails,
    Outcome,
    StageResult,
    StaticDetails,
    StrippedHunk,
    Verdict,
    VoteDetails,
)


class Row(BaseModel):
    """One patch-caused static diagnostic, with the stage that reported it and whether it decided a reject."""

    model_config = ConfigDict(frozen=True)

    stage: str
    diagnostic: Diagnostic
    decides: bool

    @property
    def column(self) -> int | None:
        """1-based start column, or None when the tool gave none."""
        return one_based(self.diagnostic, self.diagnostic.column)

    @property
    def end_column(self) -> int | None:
        """1-based column just past the end (SARIF's and GitHub's convention), or None."""
        end = self.diagnostic.end_column
        return None if end is None else one_based(self.diagnostic, end)

    @property
    def location(self) -> str:
        d = self.diagnostic
        return f"{d.path}:{d.line}:{self.column}" if self.column else f"{d.path}:{d.line}"

    @property
    def rule_label(self) -> str:
        return f"{self.diagnostic.tool} {self.diagnostic.rule}"


def one_based(diagnostic: Diagnostic, column: int) -> int | None:
    """A column as a reader counts it. Stage 1 records each tool's own convention: pyright's JSON counts
    characters from 0 (and Stage 1 matches them against `ast` offsets), ruff's counts from 1 with 0 = unknown."""
    if diagnostic.tool == "pyright":
        return column + 1 if column >= 0 else None
    return column if column > 0 else None


def _rule_matches(rule: str, diagnostic: Diagnostic) -> bool:
    """`tool:rule[:qualifier]` from the policy against a diagnostic; the qualifier was applied by the stage."""
    tool, _, rest = rule.partition(":")
    return tool == diagnostic.tool and rest.split(":", 1)[0] == diagnostic.rule


def decides_reject(verdict: Verdict, stage: str, evidence: Evidence, diagnostic: Diagnostic) -> bool:
    """Whether this diagnostic is one the verdict's reject rests on.

    Only diagnostics of the stage that rejected count. Stage 1 says which of its evidence items hold the
    rejecting diagnostics (`StaticDetails.rejecting`); other new diagnostics are context that decided nothing.
    Evidence without that flag falls back to the policy's reject rules (``tool:rule``, qualifiers aside).
    """
    if verdict.decision != Decision.REJECT or stage != verdict.deciding_stage:
        return False
    if isinstance(evidence.details, StaticDetails):
        return evidence.details.rejecting
    rules = verdict.policy.reject_rules if verdict.policy else []
    if not rules:
        return True
    return any(_rule_matches(rule, diagnostic) for rule in rules)


def diagnostic_rows(verdict: Verdict) -> list[Row]:
    """Every static diagnostic in the evidence, deciding ones first, then by location."""
    rows = [
        Row(stage=s.stage, diagnostic=d, decides=decides_reject(verdict, s.stage, e, d))
        for s in verdict.stages
        for e in s.evidence
        for d in e.diagnostics
    ]
    return sorted(rows, key=lambda r: (not r.decides, r.diagnostic.path, r.diagnostic.line, r.diagnostic.column))


def stripped_hunks(verdict: Verdict) -> list[StrippedHunk]:
    """What Stage 0 stripped (test-file and cosmetic hunks), from its evidence."""
    return [
        h
        for s in verdict.stages
        for e in s.evidence
        if isinstance(e.details, NoChangeDetails)
        for h in e.details.stripped
    ]


def skipped_stages(verdict: Verdict) -> list[StageResult]:
    return [s for s in verdict.stages if s.outcome in (Outcome.SKIPPED, Outcome.INCONCLUSIVE)]


def votes(verdict: Verdict) -> list[Evidence]:
    """Stage 3 reviewer votes (evidence kind `review_vote`)."""
    return [e for s in verdict.stages for e in s.evidence if e.kind == EvidenceKind.REVIEW_VOTE]


def vote_fields(vote: Evidence) -> tuple[str, str]:
    """(decision, rationale) of a vote; a vote that did not parse shows as an abstention."""
    details = vote.details
    if isinstance(details, VoteDetails):
        return details.decision, details.rationale or vote.summary
    if isinstance(details, AbstentionDetails):
        return "abstain", details.reason or vote.summary  # why it abstained
    return "abstain", vote.summary


def reviewed_line(verdict: Verdict) -> str | None:
    """What exactly was reviewed: the base commit, the head (a commit, or the working tree with the patch), the
    patch's digest — so a report can be matched to its inputs."""
    if not verdict.patch_sha256:
        return None
    base = verdict.base_commit or "unknown (no checkout)"
    return f"base {base}, head {verdict.head or 'unknown'}, patch sha256 {verdict.patch_sha256}"


def headline(verdict: Verdict) -> str:
    decided_by = f" by {verdict.deciding_stage}" if verdict.deciding_stage else ""
    return f"{verdict.decision.value.upper()}{decided_by} (exit {verdict.exit_code})"


def cost_line(verdict: Verdict) -> str:
    """The review's wall time with what it went into (setup, stages, cleanup), then its LLM spend."""
    c = verdict.cost
    line = "times left out (reproducible report)" if verdict.reproducible else f"{c.seconds:.2f} s wall"
    if verdict.phases and not verdict.reproducible:
        stages = sum(s.cost.seconds for s in verdict.stages)
        parts = [f"{p.name} {p.seconds:.2f} s" for p in verdict.phases if p.name != "cleanup"]
        parts += [f"stages {stages:.2f} s"] + [
            f"{p.name} {p.seconds:.2f} s" for p in verdict.phases if p.name == "cleanup"
        ]
        line += f" ({', '.join(parts)})"
    if c.llm_calls:
        line += f", {c.llm_calls} LLM call(s), {c.prompt_tokens + c.completion_tokens} tokens, ${c.dollars:.4f}"
    else:
        line += ", no LLM calls"
    if c.reuse:
        line += "; reused: " + "; ".join(c.reuse)
    return line
