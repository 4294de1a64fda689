"""Optional on-disk reuse of base-tree tool runs (``static.cache_dir``).

A base tree is fully determined by its commit, so ruff's and pyright's findings on it depend only on the commit,
the file list, cascade's settings for the tools and the tools' versions; that tuple is the key. Re-reviews
against the same base (a CI re-run, several candidate patches for one task) then analyse only the patched tree.
Only runs where every tool worked are stored, so a crash is never replayed.
"""

from __future__ import annotations

import hashlib
import json
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from cascade.config import StaticConfig
from cascade.static.toolrun import ToolRun

CACHE_FORMAT = 1


def _tool_version(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return "unknown"


def cache_key(commit: str, files: list[str], cfg: StaticConfig, python: str) -> str:
    payload = {
        "format": CACHE_FORMAT,
        "commit": commit,
        "files": files,
        "ruff_select": cfg.ruff_select,
        "python": python,
        "ruff": _tool_version("ruff"),
        "pyright": _tool_version("pyright"),
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def load_runs(directory: Path, key: str, tree: Path) -> list[ToolRun] | None:
    """The cached runs for ``key``, re-pointed at ``tree``; None on a miss or an unreadable entry."""
    path = directory / f"{key}.json"
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        runs = [ToolRun.model_validate(item) for item in raw]
    except (OSError, ValueError):
        return None
    return [r.model_copy(update={"tree": str(tree)}) for r in runs]


def store_runs(directory: Path, key: str, runs: list[ToolRun]) -> None:
    if not all(r.ok for r in runs):
        return
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / f"{key}.json.tmp"
    tmp.write_text(json.dumps([r.model_dump(mode="json") for r in runs]), encoding="utf-8")
    tmp.replace(directory / f"{key}.json")
