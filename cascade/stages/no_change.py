"""Stage 0 — no code change: strip test-file hunks and whitespace/comment-only hunks; nothing left → reject."""

from __future__ import annotations

import io
import tokenize

from cascade.context import ReviewContext
from cascade.models import (
    Evidence,
    EvidenceKind,
    FileKind,
    FilePatch,
    Hunk,
    NoChangeDetails,
    Outcome,
    StageResult,
    StrippedHunk,
)

_INSIGNIFICANT = {
    tokenize.COMMENT,
    tokenize.NL,
    tokenize.NEWLINE,
    tokenize.INDENT,
    tokenize.DEDENT,
    tokenize.ENDMARKER,
    tokenize.ENCODING,
}

Token = tuple[int, str] | tuple[str, int]


def significant_tokens(lines: list[str]) -> list[Token] | None:
    """Python tokens that carry meaning: no comments or layout, but each logical line's indentation.

    Indentation is kept because moving a statement in or out of a block changes behaviour. Returns None when the
    fragment cannot be tokenized (e.g. half of a triple-quoted string): the caller then treats it as a change.
    """
    source = "\n".join(lines) + "\n"  # not dedented: absolute columns are compared across both sides
    tokens: list[Token] = []
    at_line_start = True
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.NEWLINE:
                at_line_start = True
            if tok.type in _INSIGNIFICANT:
                continue
            if at_line_start:
                tokens.append(("indent", tok.start[1]))
                at_line_start = False
            tokens.append((tok.type, tok.string))
    except tokenize.TokenError as exc:
        # An unclosed bracket at the end of a hunk is normal and comes after every token; anything else
        # (an unterminated string) means the fragment was not fully read.
        if "multi-line statement" not in str(exc.args[0]):
            return None
    except (IndentationError, SyntaxError):
        return None
    return tokens


def hunk_is_cosmetic(hunk: Hunk, is_python: bool) -> bool:
    """True when the hunk changes only whitespace (any file) or comments/layout (Python, token-level)."""
    # Whole sides (context included, in order): comparing only removed vs added lines would call a reordering
    # of statements cosmetic.
    if is_python:
        before, after = significant_tokens(hunk.before), significant_tokens(hunk.after)
        return before is not None and after is not None and before == after
    squash = "".join("".join(line.split()) for line in hunk.before)
    return squash == "".join("".join(line.split()) for line in hunk.after)


def _strip_file(f: FilePatch) -> tuple[list[StrippedHunk], int]:
    """What is stripped from one file, and how many of its hunks remain as code changes."""
    if f.kind == FileKind.TEST:
        return [StrippedHunk(path=f.path, hunk=i, why="test file") for i in range(len(f.hunks))] or [
            StrippedHunk(path=f.path, hunk=0, why="test file")
        ], 0
    if f.is_rename and not f.hunks:
        return [], 1  # a pure rename changes what importers see
    if not f.hunks:
        return [], 1  # added/removed empty file or mode change: still a change
    stripped = [
        StrippedHunk(path=f.path, hunk=i, why=_why_cosmetic(f))
        for i, h in enumerate(f.hunks)
        if hunk_is_cosmetic(h, f.is_python)
    ]
    return stripped, len(f.hunks) - len(stripped)


def _why_cosmetic(f: FilePatch) -> str:
    return "whitespace/comment-only (token-level)" if f.is_python else "whitespace-only"


class NoChangeStage:
    name = "no_change"
    needs_sandbox = False
    title = "Stage 0 — no code change"

    def run(self, ctx: ReviewContext) -> StageResult:
        stripped: list[StrippedHunk] = []
        remaining: list[str] = []
        for f in ctx.patch.files:
            gone, left = _strip_file(f)
            stripped.extend(gone)
            if left:
                remaining.append(f.path)
        details = NoChangeDetails(stripped=stripped, remaining_files=remaining)
        if remaining:
            summary = f"{len(remaining)} file(s) with code changes; {len(stripped)} hunk(s) stripped"
            evidence = Evidence(kind=EvidenceKind.NO_CHANGE, grounded=True, summary=summary, details=details)
            return StageResult(stage=self.name, outcome=Outcome.PASS, reason=summary, evidence=[evidence])
        if not ctx.patch.files:
            summary = "the patch is empty"
        else:
            summary = f"no code change left after stripping {len(stripped)} test-only or cosmetic hunk(s)"
        evidence = Evidence(kind=EvidenceKind.NO_CHANGE, grounded=True, summary=summary, details=details)
        return StageResult(stage=self.name, outcome=Outcome.REJECT, reason=summary, evidence=[evidence])
