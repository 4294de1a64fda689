"""Stage 2a — the LLM probe generator: issue + patch (+ the changed files' original source) → one pytest file.

It implements the `ProbeSource` protocol, so Stage 2 validates its candidates exactly like mined probes: kept only
if they fail behaviourally on the base tree, then run on the patched tree. Up to ``min(3, probes.max_attempts)``
rounds; a repair round sees only the base-side result of the previous candidate (`ProbeFeedback`), never the
patched run, so the generator cannot fit its test to the patch. Generated probes are independent of the agent, so
they may support an accept (``may_accept=True``). The prompt is the versioned template
``probes/probe_generator.v1.md``; every untrusted text sits in a nonce-delimited data block.

An LLM failure (budget, model) ends the source for this review: it proposes nothing more, and the reason is
kept in ``notes`` for Stage 2's report; the LLM cost is kept in ``cost``. A cassette replay miss ends the review.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from cascade.config import CascadeConfig
from cascade.context import ReviewContext
from cascade.errors import BadInput
from cascade.llm.cassette import CallParams, ChatMessage
from cascade.llm.client import LLMClient
from cascade.llm.errors import LLMError
from cascade.llm.prompts import boundary_nonce, data_block, load_template, run_paths, stabilize, truncate
from cascade.models import Cost, Evidence, EvidenceKind, FileKind
from cascade.probesources.base import ProbeCandidate, ProbeFeedback, ProbeOrigin, ProbeSource

TEMPLATE = "probe_generator.v1"
PROBE_PATH = "test_cascade_generated_probe.py"
MAX_TOKENS = 2048
TEMPERATURE = 0.0  # one careful attempt per round; variety comes from the repair feedback
ISSUE_CHARS = 20_000
PATCH_CHARS = 40_000
SOURCE_FILE_CHARS = 12_000
SOURCE_TOTAL_CHARS = 36_000
_FENCE = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.DOTALL)


def extract_code(answer: str) -> str | None:
    """The first fenced code block, or the whole answer when it has no fence; None when there is no code."""
    match = _FENCE.search(answer)
    code = match.group(1) if match else answer
    code = code.strip()
    return code + "\n" if code else None


def relevant_source(ctx: ReviewContext) -> str:
    """The original text of the Python files the patch changes, so the test targets the real API."""
    if ctx.workspace is None:
        return "(the original source is not available)"
    base = Path(ctx.workspace.base_dir)
    parts: list[str] = []
    budget = SOURCE_TOTAL_CHARS
    for f in ctx.patch.files:
        if f.kind != FileKind.CODE or not f.is_python or not f.source_path or budget <= 0:
            continue
        path = base / f.source_path
        if not path.is_file():
            continue
        text = truncate(path.read_text(encoding="utf-8", errors="replace"), min(SOURCE_FILE_CHARS, budget))
        budget -= len(text)
        parts.append(f"# file: {f.source_path}\n{text}")
    return "\n\n".join(parts) or "(no changed Python file in the original tree)"


def feedback_text(feedback: Sequence[ProbeFeedback]) -> str:
    """Base-side results of the previous round (the only feedback a generator may see)."""
    if not feedback:
        return ""
    lines = ["Your previous test did not reproduce the issue on the original code:"]
    for fb in feedback:
        lines.append(f"- outcome on the original code: {fb.outcome}: {fb.message}")
        lines.append(f"  previous file:\n{fb.candidate.content}")
    lines.append("Fix the test so it fails on the original code because of the issue, and only because of it.")
    return "\n".join(lines)


def build_messages(ctx: ReviewContext, feedback: Sequence[ProbeFeedback]) -> list[ChatMessage]:
    blocks = {
        "issue": truncate(ctx.request.issue_text or "", ISSUE_CHARS),
        "patch": truncate(ctx.patch.text, PATCH_CHARS),
        "source": relevant_source(ctx),
    }
    repair = stabilize(feedback_text(feedback), run_paths(ctx))
    template = load_template(TEMPLATE)
    nonce = boundary_nonce(template.system, template.user, *blocks.values(), repair)
    values = {name: data_block(name, text, nonce) for name, text in blocks.items()}
    values["feedback"] = data_block("feedback", repair, nonce) + "\n" if repair else ""
    return template.render(nonce=nonce, **values)


class GeneratedProbeSource:
    """One per review: it holds the review's LLM client, its cost, and notes on why it stopped."""

    def __init__(self, config: CascadeConfig, extra_params: dict[str, object] | None = None) -> None:
        self._max_rounds = min(3, config.probes.max_attempts)
        self._extra = extra_params  # passed to litellm as is (unit tests: mock_response)
        self._client: LLMClient | None = None
        self._round = 0
        self.cost = Cost()
        self.notes: list[Evidence] = []

    @property
    def name(self) -> ProbeOrigin:
        return "generated"

    is_pr_code = False

    @property
    def max_rounds(self) -> int:
        return self._max_rounds

    def available(self, ctx: ReviewContext) -> str | None:
        if not ctx.config.llm.model:
            return "no LLM configured (llm.model)"
        if not (ctx.request.issue_text or "").strip():
            return "no issue text: the generator writes its test from the issue"
        return None

    def propose(self, ctx: ReviewContext, feedback: list[ProbeFeedback]) -> list[ProbeCandidate]:
        self._round += 1
        try:
            client = self._client_for(ctx)
            reply = client.complete(
                build_messages(ctx, feedback), CallParams(temperature=TEMPERATURE, max_tokens=MAX_TOKENS)
            )
        except (LLMError, BadInput) as exc:
            self._note(f"probe generator stopped in round {self._round}: {exc}")
            return []
        finally:
            self.cost = self._client.cost if self._client is not None else self.cost
        code = extract_code(reply.content)
        if code is None:
            self._note(f"probe generator round {self._round}: the model returned no code")
            return []
        name = f"generated-r{self._round}"
        return [ProbeCandidate(origin="generated", name=name, path=PROBE_PATH, content=code, may_accept=True)]

    def _client_for(self, ctx: ReviewContext) -> LLMClient:
        if self._client is None:
            spent = sum((r.cost for r in ctx.results), Cost())
            self._client = LLMClient(ctx.config.llm, spent=spent, extra_params=self._extra)
        return self._client

    def _note(self, summary: str) -> None:
        self.notes.append(Evidence(kind=EvidenceKind.INFO, grounded=False, summary=summary))


def llm_accounting(sources: Sequence[ProbeSource]) -> tuple[Cost, list[Evidence]]:
    """What LLM-backed sources spent and noted, for Stage 2's result (mined sources contribute nothing)."""
    cost, notes = Cost(), []
    for source in sources:
        if isinstance(source, GeneratedProbeSource):
            cost = cost + source.cost
            notes.extend(source.notes)
    return cost, notes
