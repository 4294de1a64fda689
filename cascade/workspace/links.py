"""Trees that share file inodes (hard links) with a pristine checkout, and making files private again.

A hard link is the same file, not a copy: writing it in place (``open(path, "w")``, ``truncate``, ``chmod``) changes
the pristine checkout and every other tree linked to it. So a linked tree is for reading; before anything writes a
file of it, that file is replaced by a private copy (`make_private`), and a tree in which code will run gets all its
files private first (docs/architecture.md, Checkouts). Replacing a file (write a new one, rename it over; what
``git apply`` does) leaves the shared inode alone, but nothing here relies on that.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict


class TreeEntry(BaseModel):
    """One entry of a pristine tree as it was built: a directory, a regular file or a symlink."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str
    kind: Literal["dir", "file", "symlink"]
    size: int = 0
    mtime_ns: int = 0
    mode: int = 0
    target: str = ""  # a symlink's target


class PristineChanged(Exception):
    """A pristine file is not as it was built (changed in place, removed): the checkout is not used."""


def scan(tree: Path) -> list[TreeEntry]:
    """Every entry under ``tree``, parents before children."""
    entries: list[TreeEntry] = []
    for dirpath, dirnames, filenames in os.walk(tree):
        dirnames.sort()
        base = Path(dirpath)
        for name in [*dirnames, *sorted(filenames)]:
            path = base / name
            rel = path.relative_to(tree).as_posix()
            st = path.lstat()
            if stat.S_ISLNK(st.st_mode):
                entries.append(TreeEntry(path=rel, kind="symlink", target=os.readlink(path)))
            elif stat.S_ISDIR(st.st_mode):
                entries.append(TreeEntry(path=rel, kind="dir"))
            else:
                entries.append(_file_entry(rel, st))
    return sorted(entries, key=lambda e: e.path.split("/"))


def _file_entry(rel: str, st: os.stat_result) -> TreeEntry:
    return TreeEntry(path=rel, kind="file", size=st.st_size, mtime_ns=st.st_mtime_ns, mode=st.st_mode)


def link_tree(source: Path, entries: Iterable[TreeEntry], dest: Path) -> None:
    """Recreate ``entries`` of ``source`` in the existing directory ``dest``: directories and symlinks anew, regular
    files as hard links after checking each is still as it was built (PristineChanged otherwise)."""
    for entry in entries:
        target = dest / entry.path
        if entry.kind == "dir":
            target.mkdir(exist_ok=True)
        elif entry.kind == "symlink":
            os.symlink(entry.target, target)
        else:
            origin = source / entry.path
            try:
                st = origin.lstat()
            except FileNotFoundError:
                raise PristineChanged(f"{entry.path} is missing") from None
            if _file_entry(entry.path, st) != entry:
                raise PristineChanged(f"{entry.path} changed since the checkout was made")
            os.link(origin, target)


def make_private(paths: Iterable[Path]) -> int:
    """Give each regular file among ``paths`` that shares its inode its own copy (same content, mode and times,
    swapped in by a rename); returns how many were copied. Missing paths and directories are left alone."""
    copied = 0
    for path in paths:
        try:
            st = path.lstat()
        except FileNotFoundError:
            continue
        if not stat.S_ISREG(st.st_mode) or st.st_nlink < 2:
            continue
        handle, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        os.close(handle)
        try:
            shutil.copy2(path, tmp)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        copied += 1
    return copied


def files_under(tree: Path) -> Iterable[Path]:
    """Every regular file or symlink under ``tree`` except its git link (``.git``)."""
    for dirpath, _dirnames, filenames in os.walk(tree):
        for name in filenames:
            if dirpath == str(tree) and name == ".git":
                continue
            yield Path(dirpath) / name


def make_tree_private(tree: Path) -> int:
    """No file of ``tree`` shares its inode any more (a full copy's cost, paid only where code will write)."""
    return make_private(files_under(tree))
