"""Undefined names on added lines (README: static): how many patches the added-line rule rejects, per source.

Every non-empty patch (`cascade/bench/items.py`) of a repository that is here is screened with ruff alone (``F821``
undefined name and ``F405`` name that may come from a star import, where ruff defers and pyright decides), on the
changed Python files of the base and the patched tree, read from the repository without a checkout. A patch is
*selected* when ruff reports a new F821 or F405 on a line the patch added. Only selected patches are then reviewed
for real — Stage 0 and Stage 1 (ruff and pyright over the full trees, the default reject rules) — because a patch ruff
clears of both can only reach ``pyright:reportUndefinedVariable`` where ruff and pyright disagree about a name's
binding, which outside star imports they do not. Patches of repositories not here are rows too ("not measurable
here"), never dropped."""

from __future__ import annotations

import subprocess
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field
from unidiff.errors import UnidiffParseError
from unidiff.patch import PatchSet

from cascade.bench.items import SOURCES, PatchItem, PatchRow, patch_items
from cascade.bench.scans import ScanInputs, in_order
from cascade.errors import CascadeError

SCREEN_RULES = ["F821", "F405"]


class ScreenHit(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rule: str
    path: str
    line: int
    message: str
    source_line: str


class RejectingDiagnostic(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rule_class: str  # "pyright:reportUndefinedVariable:added-line"
    path: str
    line: int
    message: str
    source_line: str


class UndefinedNamesRow(PatchRow):
    here: bool = Field(description="The repository is here; otherwise nothing ran (Stage 1 needs a checkout).")
    screened: list[ScreenHit] = Field(default_factory=list, description="ruff F821/F405 new on added lines.")
    selected: bool = False
    decision: str | None = None
    deciding_stage: str | None = None
    reason: str = ""
    rejecting: list[RejectingDiagnostic] = Field(default_factory=list)
    error: str | None = None

    @property
    def added_line_rejects(self) -> list[RejectingDiagnostic]:
        return [d for d in self.rejecting if d.rule_class.endswith(":added-line")] if self.decision == "reject" else []


class UndefinedNamesScan:
    name = "undefined-names"
    title = "Undefined names on added lines"
    needs_data = True
    row = UndefinedNamesRow

    def rows(self, inputs: ScanInputs) -> Iterator[UndefinedNamesRow]:
        work = [(item, inputs.repos.resolve(item.repo).path) for item in patch_items(inputs.dev)]
        yield from in_order(_measure, work, inputs.jobs)

    def summary(self, rows: list[UndefinedNamesRow]) -> list[str]:
        lines = [
            "Screen: ruff F821/F405 new on a line the patch added (changed Python files from the repository, no "
            "checkout). Selected patches then get the real Stage 0 + Stage 1 with the default reject rules "
            "(ruff and pyright on full trees).",
            "",
            "| source | label | patches | screen errors | ruff-flagged (selected) | rejected | rejected by an "
            "added-line undefined name |",
            "|---|---|---:|---:|---:|---:|---:|",
        ]
        here = [r for r in rows if r.here]
        for source in SOURCES:
            for label in ("acceptable", "defect"):
                part = [r for r in here if r.source == source and r.label == label]
                if part:
                    lines.append(f"| {source} | {label} | {len(part)} | {sum(bool(r.error) for r in part)} | "
                                 f"{sum(r.selected for r in part)} | {sum(r.decision == 'reject' for r in part)} | "
                                 f"{sum(bool(r.added_line_rejects) for r in part)} |")  # fmt: skip
        absent = Counter(r.source for r in rows if not r.here)
        listed = ", ".join(f"{s} {n}" for s, n in sorted(absent.items())) or "none"
        lines += ["", f"Not measurable here (repository not here; Stage 1 needs a checkout): {listed}"]
        lines += ["", "## Every reject by an added-line undefined name", ""]
        for r in sorted(here, key=lambda r: (r.label, r.source, r.instance)):
            if r.added_line_rejects:
                first = r.added_line_rejects[0]
                lines.append(f"- **{r.label}** {r.source} `{r.model}` {r.instance}: `{first.path}:{first.line}` "
                             f"`{first.source_line.strip()}` — {first.message.splitlines()[0]} "
                             f"({len(r.added_line_rejects)} cited)")  # fmt: skip
        errors = [r for r in here if r.error]
        if errors:
            lines += ["", "## Errors", ""] + [f"- {r.key}: {r.error}" for r in errors]
        return lines


def _measure(work: tuple[PatchItem, str | None]) -> UndefinedNamesRow:
    item, repo = work
    row = UndefinedNamesRow.of(item, here=repo is not None)
    if repo is None:
        return row
    try:
        row.screened = screen(item, Path(repo))
    except (CascadeError, UnidiffParseError, OSError) as exc:
        row.error = f"screen: {exc}"
        return row
    if row.screened:
        row.selected = True
        _review(row, item, repo)
    return row


def _review(row: UndefinedNamesRow, item: PatchItem, repo: str) -> None:
    """Stage 0 and Stage 1 for real; the diagnostics a reject rests on, with their rule classes."""
    from cascade.models import ReviewRequest, StaticDetails
    from cascade.pipeline import review
    from cascade.stages.no_change import NoChangeStage
    from cascade.stages.static import StaticStage

    request = ReviewRequest(repo=repo, base_ref=item.base_commit, patch_text=item.patch)
    try:
        verdict = review(request, stages=[NoChangeStage(), StaticStage()])
    except CascadeError as exc:
        row.error = f"review: {exc}"
        return
    row.decision, row.deciding_stage, row.reason = verdict.decision.value, verdict.deciding_stage, verdict.reason
    for evidence in (e for stage in verdict.stages for e in stage.evidence):
        details = evidence.details
        if isinstance(details, StaticDetails) and details.rejecting:
            row.rejecting += [RejectingDiagnostic(rule_class=details.class_of.get(d.fingerprint, ""), path=d.path,
                                                  line=d.line, message=d.message, source_line=d.source_line)
                              for d in evidence.diagnostics]  # fmt: skip


def screen(item: PatchItem, repo: Path) -> list[ScreenHit]:
    """ruff F821/F405 new in the patched files on lines the patch added (no checkout: files from the repository)."""
    from cascade.config import CascadeConfig
    from cascade.stages.static import python_version
    from cascade.static.dependents import added_lines
    from cascade.static.fingerprint import fingerprint_all, new_diagnostics
    from cascade.static.ruff import run_ruff
    from cascade.workspace import apply_patch

    text, paths = _python_sections(item.patch)
    if not paths:
        return []
    target = "py" + python_version(CascadeConfig().static).replace(".", "")
    with tempfile.TemporaryDirectory(prefix="cascade-undefined-") as tmp:
        base, head = Path(tmp, "base"), Path(tmp, "head")
        for tree in (base, head):
            for source in (s for s, _ in paths if s):
                content = _show(repo, item.base_commit, source)
                if content is not None:
                    (tree / source).parent.mkdir(parents=True, exist_ok=True)
                    (tree / source).write_text(content)
        head.mkdir(exist_ok=True)
        apply_patch(head, text)
        base_run = run_ruff(base, [s for s, _ in paths if s and (base / s).is_file()], SCREEN_RULES, target, 120)
        head_run = run_ruff(head, [t for _, t in paths if t and (head / t).is_file()], SCREEN_RULES, target, 120)
        if not (base_run.ok and head_run.ok):
            raise CascadeError(f"ruff failed: {base_run.error or head_run.error}")
        renamed = {t: s for s, t in paths if s and t and s != t}
        new = new_diagnostics(fingerprint_all(base_run.diagnostics, renamed),
                              fingerprint_all(head_run.diagnostics, renamed))  # fmt: skip
        added = {t: added_lines(_read(base, s), _read(head, t)) for s, t in paths if t}
        return [ScreenHit(rule=d.rule, path=d.path, line=d.line, message=d.message, source_line=d.source_line)
                for d in new if d.line in added.get(d.path, set())]  # fmt: skip


def _python_sections(patch: str) -> tuple[str, list[tuple[str | None, str | None]]]:
    """The patch restricted to its text Python files, and (base path, patched path) of each."""
    pieces: list[str] = []
    paths: list[tuple[str | None, str | None]] = []
    for pf in PatchSet(patch):
        source = None if pf.is_added_file else pf.source_file[2:]
        target = None if pf.is_removed_file else pf.target_file[2:]
        if pf.is_binary_file or not (target or source or "").endswith(".py"):
            continue
        pieces.append(str(pf))
        paths.append((source, target))
    return "".join(pieces), paths


def _show(repo: Path, commit: str, path: str) -> str | None:
    """The file at the base commit, decoded as ruff will read it (undecodable bytes replaced, as before)."""
    proc = subprocess.run(["git", "-C", str(repo), "show", f"{commit}:{path}"], capture_output=True, text=True,
                          errors="replace")  # fmt: skip
    return proc.stdout if proc.returncode == 0 else None


def _read(tree: Path, rel: str | None) -> str | None:
    if rel is None or not (tree / rel).is_file():
        return None
    return (tree / rel).read_text(errors="replace")
