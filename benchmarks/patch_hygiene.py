"""Patch hygiene on SWE-bench patches: acceptable patches rejected, defects caught, binaries (README: hygiene).

For every non-empty patch (gold rows of Lite and Verified, the officially resolved submissions, the predictions of
CodeR, moatless+gpt-4o and moatless+claude-3.5) the hygiene stage's own functions run:

- artifact-by-name and root-binary findings, on every patch (no checkout needed), with the base tree's tracked
  files when the repository's mirror is here (a sibling fixture of the same suffix keeps a file);
- the ``.gitignore`` part (``git check-ignore --no-index``) against the base tree's own ignore files: the
  ``.gitignore`` files of the base commit are written into an empty scratch repository (no checkout of the rest),
  which is all ``git check-ignore`` reads. Only for repositories whose mirror is here; the others are reported as
  "not run".

    python -m benchmarks.patch_hygiene --data ../shared/data/swebench --repos /work/.mirror \
        --out benchmarks/results/patch_hygiene
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks.undefined_names import Item, load_items
from cascade.bench.repos import RepoResolver
from cascade.errors import BadInput
from cascade.patch import parse_patch
from cascade.stages.hygiene import added_paths, artifact_findings, ignored_paths


def _mirror(repos: RepoResolver, item: Item) -> Path | None:
    path = repos.resolve(item.repo).path
    return Path(path) if path else None


def _git(mirror: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(mirror), *args], capture_output=True, text=True).stdout


def gitignore_tree(mirror: Path, commit: str, scratch: Path) -> Path:
    """A scratch repository holding only the base commit's .gitignore files."""
    tree = scratch / commit[:12]
    if tree.is_dir():
        return tree
    tree.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(tree)], check=True)
    for path in _git(mirror, "ls-tree", "-r", "--name-only", commit).splitlines():
        if path == ".gitignore" or path.endswith("/.gitignore"):
            (tree / path).parent.mkdir(parents=True, exist_ok=True)
            (tree / path).write_text(_git(mirror, "show", f"{commit}:{path}"))
    return tree


def tracked(mirror: Path, commit: str, directories: set[str]) -> set[str]:
    args = ["ls-tree", "-r", "--name-only", commit, "--", *sorted(d for d in directories if d != ".")]
    paths = set(_git(mirror, *args).splitlines()) if any(d != "." for d in directories) else set()
    if "." in directories:
        paths |= set(_git(mirror, "ls-tree", "--name-only", commit).splitlines())
    return paths


def measure(item: Item, repos: RepoResolver, scratch: Path) -> dict[str, Any]:
    row: dict[str, Any] = {"key": item.key, "instance": item.instance, "source": item.source, "model": item.model}
    row |= {"label": item.label, "repo": item.repo}
    try:
        patch = parse_patch(item.patch)
    except BadInput as exc:
        return row | {"error": str(exc)}
    paths = added_paths(patch)
    row["binary_files"] = [f.path for f in patch.binary_files]
    row["added"] = len(paths)
    mirror = _mirror(repos, item)
    known = tracked(mirror, item.base_commit, {str(Path(p).parent) for p in paths}) if mirror and paths else None
    row["artifact"] = [f.model_dump() for f in artifact_findings(patch, known)]
    if mirror is None:
        row["gitignore"] = None  # not run: no mirror of this repository
        return row
    ignored, error = ignored_paths(gitignore_tree(mirror, item.base_commit, scratch), paths)
    row["gitignore"] = ignored
    row["gitignore_error"] = error
    return row


def summarize(rows: list[dict[str, Any]], command: str) -> str:
    sources = ["coder", "moatless-gpt4o", "moatless-claude35", "gold", "resolved-submission"]
    out = [
        "# Patch hygiene on SWE-bench patches (README, How it decides: hygiene)",
        "",
        f"Command: `{command}`",
        "",
        "A patch is rejected when it has an artifact/root-binary finding or adds a file its base tree's "
        "`.gitignore` ignores. `.gitignore` part: run only where the repository's mirror is here; "
        "django, scikit-learn and matplotlib (no mirror) get the artifact part only.",
        "",
        "| source | label | patches | with binary files | artifact/root-binary rejects | .gitignore run on | "
        ".gitignore rejects | rejected (either) |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for source in sources:
        for label in ("acceptable", "defect"):
            part = [r for r in rows if r["source"] == source and r["label"] == label and "error" not in r]
            if not part:
                continue
            ran = [r for r in part if r["gitignore"] is not None]
            rejected = [r for r in part if r["artifact"] or r["gitignore"]]
            out.append(
                f"| {source} | {label} | {len(part)} | {sum(1 for r in part if r['binary_files'])} | "
                f"{sum(1 for r in part if r['artifact'])} | {len(ran)} | {sum(1 for r in ran if r['gitignore'])} | "
                f"{len(rejected)} |"
            )
    out += [
        "",
        "## Repositories without a mirror (django, scikit-learn, matplotlib): artifact part only",
        "",
        "The `.gitignore` part could not run for these patches (no base tree here).",
        "",
        "| source | label | patches | with binary files | artifact/root-binary rejects |",
        "|---|---|---:|---:|---:|",
    ]
    for source in sources:
        for label in ("acceptable", "defect"):
            part = [
                r
                for r in rows
                if r["source"] == source and r["label"] == label and "error" not in r and r["gitignore"] is None
            ]
            if part:
                binaries = sum(1 for r in part if r["binary_files"])
                artifacts = sum(1 for r in part if r["artifact"])
                out.append(f"| {source} | {label} | {len(part)} | {binaries} | {artifacts} |")
    out += ["", "## Every patch with a finding", ""]
    for r in sorted(rows, key=lambda r: (r["label"], r["source"], r["instance"])):
        if "error" in r or not (r["artifact"] or r["gitignore"]):
            continue
        listed = [f"{f['path']} ({f['why']})" for f in r["artifact"]] + [
            f"{p} (.gitignore)" for p in r["gitignore"] or []
        ]
        out.append(f"- **{r['label']}** {r['source']} `{r['model']}` {r['instance']}: " + "; ".join(listed))
    out += ["", "## Patches with binary files", ""]
    for r in rows:
        if r.get("binary_files"):
            verdict = "rejected by hygiene" if (r["artifact"] or r["gitignore"]) else "reviewed (text part)"
            out.append(f"- {r['label']} {r['source']} {r['instance']}: {', '.join(r['binary_files'])} — {verdict}")
    errors = [r for r in rows if "error" in r]
    if errors:
        out += ["", "## Not parsed", ""] + [f"- {r['key']}: {r['error']}" for r in errors]
    return "\n".join(out) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--repos", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True, help="Output path without extension (.jsonl, .md).")
    args = parser.parse_args()
    items = load_items(args.data, args.repos, Counter(), require_mirror=False)  # every repository
    with tempfile.TemporaryDirectory(prefix="hygiene-") as scratch:
        repos = RepoResolver(repos_dir=args.repos)
        rows = [measure(item, repos, Path(scratch)) for item in items]
    args.out.with_suffix(".jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    args.out.with_suffix(".md").write_text(summarize(rows, "python " + " ".join(sys.argv)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
