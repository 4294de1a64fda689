"""Probes from the patch itself: the test files it adds or modifies, in the PR's version (Stage 2).

Stage 2 keeps, per file, only the tests that fail behaviourally on the base tree — the ones the PR added or changed to
pin the fix — so existing tests of a modified file that pass on base are not probes. PR tests share the author's
blind spots: they may reject, never accept.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from cascade.context import ReviewContext
from cascade.models import FileKind, FilePatch
from cascade.probesources.base import ProbeCandidate, ProbeFeedback, ProbeOrigin


def is_pytest_file(f: FilePatch) -> bool:
    name = PurePosixPath(f.path).name
    return (
        f.kind == FileKind.TEST
        and not f.is_removed
        and f.target_path is not None
        and name.endswith(".py")
        and (name.startswith("test_") or name.endswith("_test.py"))
    )


class PrTestProbeSource:
    """Each test file the patch adds or modifies is one candidate, at its own path (its conftest applies)."""

    @property
    def name(self) -> ProbeOrigin:
        return "pr_tests"

    is_pr_code = True

    @property
    def max_rounds(self) -> int:
        return 1

    def available(self, ctx: ReviewContext) -> str | None:
        if ctx.workspace is None:
            return "repository unavailable"
        if not any(is_pytest_file(f) for f in ctx.patch.files):
            return "the patch adds or modifies no pytest test file"
        return None

    def propose(self, ctx: ReviewContext, feedback: list[ProbeFeedback]) -> list[ProbeCandidate]:
        if ctx.workspace is None:
            return []
        candidates: list[ProbeCandidate] = []
        for f in ctx.patch.files:
            path = Path(ctx.workspace.patched_dir) / f.path
            if is_pytest_file(f) and path.is_file():
                content = path.read_text(encoding="utf-8", errors="replace")
                candidates.append(
                    ProbeCandidate(origin="pr_tests", name=f.path, path=f.path, content=content, may_accept=False)
                )
        return candidates
