"""Patch hygiene: files a pull request should never add — build output, caches, databases, backups — and binaries.

Two grounded checks over the files the patch adds (new files and rename targets):

- the base tree's own ignore rules: ``git check-ignore --no-index`` in the base worktree, with the user's global
  excludes file switched off, so only the repository's ``.gitignore`` files decide. A file the project ignores
  reached the patch by accident (an agent's ``git add -A``), whatever its name. Needs a checkout.
- compiled or generated artifacts by name (``hygiene.artifact_files`` / ``hygiene.artifact_dirs``, defaults
  in cascade/defaults.py; ``extend_artifact_files`` adds to them): bytecode, native objects,
  databases, pickles, coverage data, build/dist/egg-info/Sphinx output, merge leftovers, editor backups, caches.
  A file of an artifact kind is kept when the base tree already tracks a file of the same suffix in the same
  directory (a project's own fixtures, e.g. ``tests/data/v1.pkl`` next to a new ``v2.pkl``), a ``build``/
  ``dist`` directory is source when it is a Python package, and an empty new file holds nothing generated
  (measured: a resolved submission adds an empty ``test_db.sqlite3``; clutter, but no artifact content).
- a binary file added at the repository root that is no known asset kind (an image, font, document, archive):
  a database or dump an agent left behind (measured: CodeR adds a sqlite file named ``mydatabase``).

Binary files elsewhere (images, fonts and other assets under docs or package data) are fine; every binary file is
listed as evidence, since the text part is what the other stages review. With ``hygiene.reject_artifacts`` off
the findings are evidence only.

A symbolic link the patch adds that points out of the repository always rejects, whatever that setting: every later
stage reads the patched tree (the static checkers open the changed files), so such a link would make the gate read a
file of the host it runs on and could quote it in the report (docs/architecture.md, "Run model").
"""

from __future__ import annotations

import os
import subprocess
from fnmatch import fnmatchcase
from pathlib import Path, PurePosixPath

from cascade.config import HygieneConfig
from cascade.context import ReviewContext
from cascade.git import run_git
from cascade.models import (
    ArtifactFinding,
    BinaryFilesNote,
    EscapingLinksDetails,
    Evidence,
    EvidenceKind,
    HygieneDetails,
    Outcome,
    Patch,
    StageResult,
)

PACKAGE_DIR_NAMES = {"build", "dist"}  # names that are source, not output, when they hold a Python package
ASSET_SUFFIXES = {  # binary kinds a repository keeps on purpose (images, fonts, documents, archives, media)
    ".png", ".jpg", ".jpeg", ".gif", ".svg", ".ico", ".webp", ".bmp", ".tif", ".tiff", ".eps", ".pdf", ".ps",
    ".woff", ".woff2", ".ttf", ".otf", ".eot", ".afm", ".pfb",
    ".zip", ".gz", ".bz2", ".xz", ".tar", ".whl",
    ".mp3", ".wav", ".ogg", ".mp4", ".webm",
}  # fmt: skip


def added_paths(patch: Patch) -> list[str]:
    """Paths the patch brings into the tree: added files and the targets of renames."""
    return [f.target_path for f in patch.files if f.target_path and (f.is_added or f.is_rename)]


def artifact_kind(path: str, is_package_dir: set[str], rules: HygieneConfig | None = None) -> str | None:
    """What generated kind ``path`` is by its name (``rules``: the configured patterns), or None.
    ``is_package_dir`` holds directories known to be Python packages (``build``/``dist`` there are source)."""
    rules = rules or HygieneConfig()
    dirs, files = rules.artifact_dirs, rules.artifact_files
    parts = PurePosixPath(path).parts
    for depth, name in enumerate(parts[:-1]):
        for glob, what in dirs.items():
            if not fnmatchcase(name, glob):
                continue
            directory = "/".join(parts[: depth + 1])
            if name in PACKAGE_DIR_NAMES and directory in is_package_dir:
                continue
            return f"{what} ({glob}/)"
    base = parts[-1] if parts else path
    for glob, what in files.items():
        if fnmatchcase(base, glob):
            return f"{what} ({glob})"
    return None


def artifact_findings(
    patch: Patch,
    tracked: set[str] | None = None,
    packages: set[str] | None = None,
    rules: HygieneConfig | None = None,
) -> list[ArtifactFinding]:
    """Artifact-by-name findings; ``tracked`` (base-tree paths) keeps a project's own fixtures, ``packages`` its
    ``build``/``dist`` packages. Both are optional so the check runs without a checkout."""
    packages = set(packages or set()) | _package_dirs_in(patch)
    found: list[ArtifactFinding] = []
    empty = {f.path for f in patch.files if f.is_added and not f.is_binary and not f.hunks}
    for path in added_paths(patch):
        if path in empty:
            continue
        kind = artifact_kind(path, packages, rules)
        if kind is None or (tracked is not None and _sibling_tracked(path, tracked)):
            continue
        found.append(ArtifactFinding(path=path, why=kind, check="artifact"))
    binary = {f.path for f in patch.binary_files if f.is_added or f.is_rename}
    listed = {f.path for f in found}
    for path in sorted(binary - listed):
        suffix = PurePosixPath(path).suffix.lower()
        if "/" not in path and suffix not in ASSET_SUFFIXES:
            found.append(
                ArtifactFinding(
                    path=path, why="binary file at the repository root that is no asset", check="root-binary"
                )
            )
    return found


def _package_dirs_in(patch: Patch) -> set[str]:
    paths = [f.target_path for f in patch.files if f.target_path]
    return {str(PurePosixPath(p).parent) for p in paths if PurePosixPath(p).name == "__init__.py"}


def _sibling_tracked(path: str, tracked: set[str]) -> bool:
    """True when the base tree tracks another file with the same suffix in the same directory."""
    p = PurePosixPath(path)
    if not p.suffix:
        return False
    return any(PurePosixPath(t).parent == p.parent and PurePosixPath(t).suffix == p.suffix for t in tracked)


def ignored_paths(tree: Path, paths: list[str], timeout: float = 60) -> tuple[list[str], str | None]:
    """The paths the tree's own ``.gitignore`` files ignore, and an error text when git could not tell."""
    if not paths:
        return [], None
    args = ["-c", "core.excludesFile=/dev/null", "check-ignore", "--no-index", "--stdin", "-z"]
    try:
        proc = run_git(tree, *args, input="\0".join(paths) + "\0", timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return [], f"git check-ignore failed: {exc}"
    if proc.returncode not in (0, 1):  # 1: nothing ignored
        return [], f"git check-ignore exited {proc.returncode}: {proc.stderr.strip()[:200]}"
    return [p for p in proc.stdout.split("\0") if p], None


def tracked_paths(tree: Path, directories: set[str]) -> set[str]:
    """Paths the base tree tracks in ``directories`` (``.`` is the root; subdirectories are listed too)."""
    if not directories:
        return set()
    proc = run_git(tree, "ls-files", "--", *sorted(directories))
    return set(proc.stdout.splitlines()) if proc.returncode == 0 else set()


def package_dirs(tree: Path) -> set[str]:
    """Directories named like build output that hold a Python package in the tree."""
    proc = run_git(tree, "ls-files", "--", "*__init__.py")
    parents = {str(PurePosixPath(p).parent) for p in proc.stdout.splitlines()}
    return {d for d in parents if PurePosixPath(d).name in PACKAGE_DIR_NAMES}


def hygiene_findings(
    patch: Patch, base: Path | None, rules: HygieneConfig | None = None
) -> tuple[list[ArtifactFinding], str | None]:
    """All findings, and why the ``.gitignore`` check could not run (None when it ran)."""
    paths = added_paths(patch)
    if base is None:
        return artifact_findings(patch, rules=rules), "no checkout of the base tree: its .gitignore was not consulted"
    tracked = tracked_paths(base, {str(PurePosixPath(p).parent) for p in paths})
    found = artifact_findings(patch, tracked, package_dirs(base), rules)
    ignored, error = ignored_paths(base, paths)
    listed = {f.path for f in found}
    found += [
        ArtifactFinding(path=p, why="ignored by the base tree's .gitignore", check="gitignore")
        for p in ignored
        if p not in listed
    ]
    return found, error


def escaping_links(patch: Patch, patched: Path) -> list[str]:
    """``path -> target`` of every symbolic link the patch adds or changes whose target leaves the repository."""
    found: list[str] = []
    for changed in patch.files:
        path = changed.target_path
        if not path or not (patched / path).is_symlink():
            continue
        target = os.readlink(patched / path)
        resolved = os.path.normpath(os.path.join(os.path.dirname(path), target))
        if os.path.isabs(target) or resolved == ".." or resolved.startswith("../"):
            found.append(f"{path} -> {target}")
    return found


class HygieneStage:
    name = "hygiene"
    needs_sandbox = False
    title = "Patch hygiene — ignored files, generated artifacts, binaries"

    def run(self, ctx: ReviewContext) -> StageResult:
        workspace = ctx.workspace
        links = escaping_links(ctx.patch, Path(workspace.patched_dir)) if workspace else []
        if links:
            summary = f"the patch adds a symbolic link that leaves the repository: {'; '.join(links[:5])}"
            link = Evidence(
                kind=EvidenceKind.HYGIENE,
                grounded=True,
                summary=summary,
                details=EscapingLinksDetails(links=links),
                commands=["git diff --summary BASE | grep 'mode 120000'"],
            )
            return StageResult(stage=self.name, outcome=Outcome.REJECT, reason=summary, evidence=[link])
        found, not_run = hygiene_findings(ctx.patch, workspace.base_dir if workspace else None, ctx.config.hygiene)
        evidence: list[Evidence] = []
        binaries = [f.path for f in ctx.patch.binary_files]
        if binaries:
            summary = f"{len(binaries)} binary file(s), not reviewed as text: {', '.join(binaries[:10])}"
            evidence.append(
                Evidence(
                    kind=EvidenceKind.INFO,
                    grounded=True,
                    summary=summary,
                    details=BinaryFilesNote(binary_files=binaries),
                )
            )
        if not_run:
            evidence.append(Evidence(kind=EvidenceKind.UNAVAILABLE, grounded=False, summary=not_run))
        if not found:
            summary = f"no ignored or generated file among the {len(added_paths(ctx.patch))} file(s) the patch adds"
            evidence.insert(0, Evidence(kind=EvidenceKind.INFO, grounded=True, summary=summary))
            return StageResult(stage=self.name, outcome=Outcome.PASS, reason=summary, evidence=evidence)
        listed = "; ".join(f"{f.path} ({f.why})" for f in found[:5]) + ("; …" if len(found) > 5 else "")
        summary = f"the patch adds {len(found)} file(s) that do not belong in a pull request: {listed}"
        commands = [
            "git -c core.excludesFile=/dev/null check-ignore --no-index -v -- " + " ".join(f.path for f in found)
        ]
        evidence.insert(
            0,
            Evidence(
                kind=EvidenceKind.HYGIENE,
                grounded=True,
                summary=summary,
                details=HygieneDetails(findings=found),
                commands=commands,
            ),
        )
        rejects = ctx.config.hygiene.reject_artifacts
        outcome = Outcome.REJECT if rejects else Outcome.PASS
        return StageResult(stage=self.name, outcome=outcome, reason=summary, evidence=evidence)
