"""Undefined names on added lines (README: static): how many patches the added-line rule rejects, per source.

Every non-empty patch of a fetched repository is screened with ruff alone (``F821`` undefined name and ``F405``
name that may come from a star import, where ruff defers and pyright decides), on the changed Python files of the
base and the patched tree, extracted from the bare mirror without a checkout. A patch is *selected* when ruff
reports a new F821 or F405 on a line the patch added. Only selected patches are then reviewed for real — Stage 0
and Stage 1 (ruff and pyright over the full worktrees, the default reject rules) — because a patch ruff clears of
both can only reach ``pyright:reportUndefinedVariable`` where ruff and pyright disagree about a name's binding,
which outside star imports they do not. Writes one JSON line per patch and a Markdown summary::

    python -m benchmarks.undefined_names --data ../shared/data/swebench --repos /work/.mirror --jobs 2 \
        --out benchmarks/results/undefined_names
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections import Counter
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from unidiff import PatchSet
from unidiff.errors import UnidiffParseError

from cascade.bench.data import DevData
from cascade.bench.items import PatchItem, patch_items
from cascade.bench.repos import RepoResolver
from cascade.config import CascadeConfig
from cascade.errors import CascadeError
from cascade.models import ReviewRequest
from cascade.pipeline import review
from cascade.stages.no_change import NoChangeStage
from cascade.stages.static import StaticStage, python_version
from cascade.static.dependents import added_lines
from cascade.static.fingerprint import fingerprint_all, new_diagnostics
from cascade.static.ruff import run_ruff
from cascade.workspace import apply_patch

SCREEN_RULES = ["F821", "F405"]


class Record(BaseModel):
    model_config = ConfigDict(extra="forbid")

    key: str
    instance: str
    source: str
    model: str
    label: str
    repo: str
    screened: list[dict[str, Any]] = Field(default_factory=list, description="ruff F821/F405 new on added lines.")
    selected: bool = False
    decision: str | None = None
    deciding_stage: str | None = None
    reason: str = ""
    rejecting: list[dict[str, Any]] = Field(default_factory=list)
    error: str | None = None


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


def _show(mirror: Path, commit: str, path: str) -> str | None:
    proc = subprocess.run(
        ["git", "--git-dir", str(mirror), "show", f"{commit}:{path}"], capture_output=True, text=True, errors="replace"
    )
    return proc.stdout if proc.returncode == 0 else None


def screen(item: PatchItem, repos: Path) -> list[dict[str, Any]]:
    """ruff F821/F405 new in the patched files on lines the patch added (no checkout: files from the mirror)."""
    mirror = repos / item.repo.replace("/", "+") / "repo"
    text, paths = _python_sections(item.patch)
    if not paths:
        return []
    target = "py" + python_version(CascadeConfig().static).replace(".", "")
    with tempfile.TemporaryDirectory(prefix="undef-") as tmp:
        base, head = Path(tmp, "base"), Path(tmp, "head")
        for tree in (base, head):
            for source in (s for s, _ in paths if s):
                content = _show(mirror, item.base_commit, source)
                if content is not None:
                    (tree / source).parent.mkdir(parents=True, exist_ok=True)
                    (tree / source).write_text(content)
        head.mkdir(exist_ok=True)
        apply_patch(head, text)
        base_files = [s for s, _ in paths if s and (base / s).is_file()]
        head_files = [t for _, t in paths if t and (head / t).is_file()]
        base_run = run_ruff(base, base_files, SCREEN_RULES, target, 120)
        head_run = run_ruff(head, head_files, SCREEN_RULES, target, 120)
        if not (base_run.ok and head_run.ok):
            raise CascadeError(f"ruff failed: {base_run.error or head_run.error}")
        renamed = {t: s for s, t in paths if s and t and s != t}
        new = new_diagnostics(
            fingerprint_all(base_run.diagnostics, renamed), fingerprint_all(head_run.diagnostics, renamed)
        )
        added = {t: added_lines(_read(base, s), _read(head, t)) for s, t in paths if t}
        return [
            {"rule": d.rule, "path": d.path, "line": d.line, "message": d.message, "source_line": d.source_line}
            for d in new
            if d.line in added.get(d.path, set())
        ]


def _read(tree: Path, rel: str | None) -> str | None:
    if rel is None or not (tree / rel).is_file():
        return None
    return (tree / rel).read_text(errors="replace")


def measure(item: PatchItem, repos: Path) -> Record:
    record = Record(
        key=item.key, instance=item.instance, source=item.source, model=item.model, label=item.label, repo=item.repo
    )
    try:
        record.screened = screen(item, repos)
    except (CascadeError, UnidiffParseError, OSError) as exc:
        record.error = f"screen: {exc}"
        return record
    if not record.screened:
        return record
    record.selected = True
    request = ReviewRequest(
        repo=str(repos / item.repo.replace("/", "+") / "repo"), base_ref=item.base_commit, patch_text=item.patch
    )
    try:
        verdict = review(request, stages=[NoChangeStage(), StaticStage()])
    except CascadeError as exc:
        record.error = f"review: {exc}"
        return record
    record.decision = verdict.decision.value
    record.deciding_stage = verdict.deciding_stage
    record.reason = verdict.reason
    for stage in verdict.stages:
        for evidence in stage.evidence:
            if evidence.details.model_dump().get("rejecting"):
                classes = evidence.details.model_dump().get("class_of", {})
                record.rejecting += [
                    {
                        "class": classes.get(d.fingerprint, ""),
                        "path": d.path,
                        "line": d.line,
                        "message": d.message,
                        "source_line": d.source_line,
                    }
                    for d in evidence.diagnostics
                ]
    return record


def summarize(records: list[Record], unfetchable: Counter[str], command: str) -> str:
    sources = ["coder", "moatless-gpt4o", "moatless-claude35", "gold", "resolved-submission"]
    lines = [
        "# Undefined names on added lines",
        "",
        f"Command: `{command}`",
        "",
        "Screen: ruff F821/F405 new on a line the patch added (changed Python files from the mirror, no checkout). "
        "Selected patches then get the real Stage 0 + Stage 1 with the default reject rules "
        "(ruff and pyright on full worktrees).",
        "",
        "| source | label | patches | screen errors | ruff-flagged (selected) | rejected | rejected by an added-line "
        "undefined name |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for source in sources:
        for label in ("acceptable", "defect"):
            rows = [r for r in records if r.source == source and r.label == label]
            if not rows:
                continue
            rejected = [r for r in rows if r.decision == "reject"]
            by_rule = [r for r in rejected if any(d["class"].endswith(":added-line") for d in r.rejecting)]
            lines.append(
                f"| {source} | {label} | {len(rows)} | {sum(1 for r in rows if r.error)} | "
                f"{sum(1 for r in rows if r.selected)} | {len(rejected)} | {len(by_rule)} |"
            )
    lines += ["", "Not measurable here (repository not fetched; Stage 1 needs a checkout): "]
    lines[-1] += ", ".join(f"{s} {n}" for s, n in sorted(unfetchable.items())) or "none"
    lines += ["", "## Every reject by an added-line undefined name", ""]
    for r in sorted(records, key=lambda r: (r.label, r.source, r.instance)):
        cited = [d for d in r.rejecting if d["class"].endswith(":added-line")]
        if r.decision != "reject" or not cited:
            continue
        first = cited[0]
        lines.append(
            f"- **{r.label}** {r.source} `{r.model}` {r.instance}: `{first['path']}:{first['line']}` "
            f"`{first['source_line'].strip()}` — {first['message'].splitlines()[0]} ({len(cited)} cited)"
        )
    errors = [r for r in records if r.error]
    if errors:
        lines += ["", "## Errors", ""] + [f"- {r.key}: {r.error}" for r in errors]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--repos", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True, help="Output path without extension (.jsonl, .md).")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--limit", type=int, default=0)
    args = parser.parse_args()
    unfetchable: Counter[str] = Counter()
    items = patch_items(DevData(args.data), RepoResolver(repos_dir=str(args.repos)), unfetchable)
    if args.limit:
        items = items[: args.limit]
    jsonl = args.out.with_suffix(".jsonl")
    done = {json.loads(line)["key"] for line in jsonl.read_text().splitlines() if line} if jsonl.exists() else set()
    todo = [i for i in items if i.key not in done]
    print(f"{len(items)} patches, {len(todo)} to do", file=sys.stderr)
    with ProcessPoolExecutor(max_workers=args.jobs) as pool, jsonl.open("a") as out:
        futures = [pool.submit(measure, item, args.repos) for item in todo]
        for n, future in enumerate(as_completed(futures), 1):
            record = future.result()
            out.write(record.model_dump_json() + "\n")
            out.flush()
            if n % 50 == 0:
                print(f"{n}/{len(todo)}", file=sys.stderr)
    records = [Record.model_validate_json(line) for line in jsonl.read_text().splitlines() if line]
    keys = {i.key for i in items}
    records = [r for r in records if r.key in keys]
    command = "python " + " ".join(sys.argv)
    args.out.with_suffix(".md").write_text(summarize(records, unfetchable, command))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
