"""Patch hygiene on the dev data (README: hygiene): acceptable patches rejected, defects caught, binary files.

For every non-empty patch (`cascade/bench/items.py`) the hygiene stage's own functions run:

- artifact-by-name and root-binary findings, on every patch (no checkout needed), with the base tree's tracked files
  when the repository is here (a sibling fixture of the same suffix keeps a file);
- the ``.gitignore`` part (``git check-ignore --no-index``) against the base tree's own ignore files: the
  ``.gitignore`` files of the base commit are written into an empty scratch repository (no checkout of the rest),
  which is all ``git check-ignore`` reads. Only for repositories that are here; the others are reported as "not
  run", never dropped."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from pydantic import Field

from cascade.bench.items import SOURCES, PatchItem, PatchRow, patch_items
from cascade.bench.scans import ScanInputs
from cascade.errors import BadInput
from cascade.git import run_git
from cascade.models import ArtifactFinding
from cascade.patch import parse_patch
from cascade.stages.hygiene import added_paths, artifact_findings, ignored_paths


class HygieneRow(PatchRow):
    binary_files: list[str] = Field(default_factory=list)
    added: int = 0
    artifact: list[ArtifactFinding] = Field(default_factory=list)
    gitignore: list[str] | None = Field(default=None, description="Ignored added paths; None: not run (no repo here)")
    gitignore_error: str | None = None
    error: str | None = Field(default=None, description="Why the patch could not be parsed (nothing else ran).")

    @property
    def rejected(self) -> bool:
        return bool(self.artifact or self.gitignore)


class HygieneScan:
    name = "hygiene"
    title = "Patch hygiene on SWE-bench patches (README, How it decides: hygiene)"
    needs_data = True
    row = HygieneRow

    def rows(self, inputs: ScanInputs) -> Iterator[HygieneRow]:
        for item in patch_items(inputs.dev):  # every repository: the artifact part needs none
            path = inputs.repos.resolve(item.repo).path
            yield measure(item, Path(path) if path else None, inputs.scratch)

    def summary(self, rows: list[HygieneRow]) -> list[str]:
        out = [
            "A patch is rejected when it has an artifact/root-binary finding or adds a file its base tree's "
            "`.gitignore` ignores. `.gitignore` part: run only where the repository is here; the others get the "
            "artifact part only.",
            "",
            "| source | label | patches | with binary files | artifact/root-binary rejects | .gitignore run on | "
            ".gitignore rejects | rejected (either) |",
            "|---|---|---:|---:|---:|---:|---:|---:|",
        ]
        parsed = [r for r in rows if r.error is None]
        for source, label, part in _groups(parsed):
            ran = [r for r in part if r.gitignore is not None]
            out.append(f"| {source} | {label} | {len(part)} | {sum(bool(r.binary_files) for r in part)} | "
                       f"{sum(bool(r.artifact) for r in part)} | {len(ran)} | {sum(bool(r.gitignore) for r in ran)} | "
                       f"{sum(r.rejected for r in part)} |")  # fmt: skip
        absent = sorted({r.repo for r in parsed if r.gitignore is None})
        out += ["", f"## Repositories not here ({', '.join(absent) or 'none'}): artifact part only", "",
                "The `.gitignore` part could not run for these patches (no base tree here).", "",
                "| source | label | patches | with binary files | artifact/root-binary rejects |",
                "|---|---|---:|---:|---:|"]  # fmt: skip
        for source, label, part in _groups([r for r in parsed if r.gitignore is None]):
            binaries, artifacts = sum(bool(r.binary_files) for r in part), sum(bool(r.artifact) for r in part)
            out.append(f"| {source} | {label} | {len(part)} | {binaries} | {artifacts} |")
        out += ["", "## Every patch with a finding", ""]
        for r in sorted(parsed, key=lambda r: (r.label, r.source, r.instance)):
            if r.rejected:
                listed = [f"{f.path} ({f.why})" for f in r.artifact] + [f"{p} (.gitignore)" for p in r.gitignore or []]
                out.append(f"- **{r.label}** {r.source} `{r.model}` {r.instance}: " + "; ".join(listed))
        out += ["", "## Patches with binary files", ""]
        for r in parsed:
            if r.binary_files:
                verdict = "rejected by hygiene" if r.rejected else "reviewed (text part)"
                out.append(f"- {r.label} {r.source} {r.instance}: {', '.join(r.binary_files)} — {verdict}")
        errors = [r for r in rows if r.error is not None]
        if errors:
            out += ["", "## Not parsed", ""] + [f"- {r.key}: {r.error}" for r in errors]
        return out


def _groups(rows: list[HygieneRow]) -> Iterator[tuple[str, str, list[HygieneRow]]]:
    for source in SOURCES:
        for label in ("acceptable", "defect"):
            part = [r for r in rows if r.source == source and r.label == label]
            if part:
                yield source, label, part


def measure(item: PatchItem, mirror: Path | None, scratch: Path) -> HygieneRow:
    row = HygieneRow.of(item)
    try:
        patch = parse_patch(item.patch)
    except BadInput as exc:
        return row.model_copy(update={"error": str(exc)})
    paths = added_paths(patch)
    known = tracked(mirror, item.base_commit, {str(Path(p).parent) for p in paths}) if mirror and paths else None
    row = row.model_copy(update={"binary_files": [f.path for f in patch.binary_files], "added": len(paths),
                                 "artifact": artifact_findings(patch, known)})  # fmt: skip
    if mirror is None:
        return row
    ignored, error = ignored_paths(gitignore_tree(mirror, item.base_commit, scratch), paths)
    return row.model_copy(update={"gitignore": ignored, "gitignore_error": error})


def _git(mirror: Path, *args: str) -> str:
    return run_git(mirror, *args).stdout


def gitignore_tree(mirror: Path, commit: str, scratch: Path) -> Path:
    """A scratch repository holding only the base commit's .gitignore files."""
    tree = scratch / commit[:12]
    if tree.is_dir():
        return tree
    tree.mkdir(parents=True)
    run_git(None, "init", "-q", str(tree))
    for path in _git(mirror, "ls-tree", "-r", "--name-only", commit).splitlines():
        if path == ".gitignore" or path.endswith("/.gitignore"):
            (tree / path).parent.mkdir(parents=True, exist_ok=True)
            (tree / path).write_text(_git(mirror, "show", f"{commit}:{path}"))
    return tree


def tracked(mirror: Path, commit: str, directories: set[str]) -> set[str]:
    """The base commit's paths in ``directories`` (``.`` is the top level alone)."""
    args = ["ls-tree", "-r", "--name-only", commit, "--", *sorted(d for d in directories if d != ".")]
    paths = set(_git(mirror, *args).splitlines()) if any(d != "." for d in directories) else set()
    if "." in directories:
        paths |= set(_git(mirror, "ls-tree", "--name-only", commit).splitlines())
    return paths
