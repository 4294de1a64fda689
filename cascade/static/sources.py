"""Reading the source lines diagnostics point at, tolerant of encodings and missing files."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path


@lru_cache(maxsize=512)
def _lines(path: str) -> tuple[str, ...]:
    try:
        return tuple(Path(path).read_text(encoding="utf-8", errors="replace").splitlines())
    except OSError:
        return ()


def source_line(tree: Path, rel_path: str, line: int) -> str:
    """Line ``line`` (1-based) of ``tree/rel_path``, or "" when it does not exist."""
    lines = _lines(str(tree / rel_path))
    return lines[line - 1] if 0 < line <= len(lines) else ""


def forget_sources() -> None:
    """Drop cached file contents (worktrees are deleted and re-created between reviews)."""
    _lines.cache_clear()


def relative_to_tree(tree: Path, filename: str) -> str:
    """A tool's file name as a path relative to the tree (tools report absolute paths)."""
    path = Path(filename)
    try:
        return path.resolve().relative_to(tree.resolve()).as_posix()
    except ValueError:
        return path.as_posix()


def strip_tree(message: str, tree: Path) -> str:
    """Remove the worktree's absolute path from a message (base and patched trees differ only there)."""
    root = str(tree.resolve())
    return message.replace(root + "/", "").replace(root, ".")
