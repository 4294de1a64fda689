"""Touching a tree an untrusted run has written, from the host, without following anything it left there.

After a run the host reads back its report files, walks its places to diff them and removes them — with the gate's
own privileges, outside any sandbox. A name the run controls may by then be a symlink to ``~/.ssh``, a hard link to
a host file, a FIFO that blocks a reader forever, or a directory swapped for a link. So the host never resolves a
path through such a tree: it opens a place it made itself as a directory file descriptor, reaches entries only
relative to it (``openat``) with ``O_NOFOLLOW``, accepts only regular files with a single link and bounded size, and
walks with ``os.fwalk`` (descriptor-based, never following links). Removal uses ``shutil.rmtree``, which on Linux
is descriptor-based too and refuses to follow a link it meets."""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from pathlib import Path
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict

READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
CHUNK = 1 << 20


class ReadBack(BaseModel):
    """One file read back from a run's place: its bytes, or why it was refused (then ``data`` is None)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    data: bytes | None = None
    refused: str | None = None
    missing: bool = False


def read_capped(place: Path, name: str, cap: int) -> ReadBack:
    """The file ``name`` (no slashes) directly inside ``place`` (a directory the host made), never following a link:
    only a regular file with one link and at most ``cap`` bytes is read."""
    if "/" in name or name in ("", ".", ".."):
        return ReadBack(name=name, refused="not a plain file name")
    try:
        dir_fd = os.open(place, DIR_FLAGS)
    except OSError as exc:
        return ReadBack(name=name, refused=f"its directory cannot be opened ({exc.strerror})")
    try:
        return _read_at(dir_fd, name, cap)
    finally:
        os.close(dir_fd)


def _read_at(dir_fd: int, name: str, cap: int) -> ReadBack:
    try:
        fd = os.open(name, READ_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        return ReadBack(name=name, missing=True)
    except OSError as exc:  # ELOOP: a symlink in its place
        why = "it is a symbolic link" if exc.errno == 40 else exc.strerror
        return ReadBack(name=name, refused=f"not opened: {why}")
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return ReadBack(name=name, refused=f"not a regular file ({kind_of(info.st_mode)})")
        if info.st_nlink != 1:
            return ReadBack(name=name, refused=f"a hard link ({info.st_nlink} names for one file)")
        if info.st_size > cap:
            return ReadBack(name=name, refused=f"{info.st_size} bytes, over the {cap}-byte cap")
        chunks: list[bytes] = []
        size = 0
        while size <= cap and (chunk := os.read(fd, min(CHUNK, cap + 1 - size))):
            chunks.append(chunk)
            size += len(chunk)
        if size > cap:  # grew while being read
            return ReadBack(name=name, refused=f"over the {cap}-byte cap")
        return ReadBack(name=name, data=b"".join(chunks))
    finally:
        os.close(fd)


def kind_of(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "symlink"
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISFIFO(mode):
        return "fifo"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device"
    return "other"


class Entry(NamedTuple):
    """One entry of a snapshot: plain tuples, so a tree of thousands of files is cheap to take twice per run."""

    kind: str
    size: int
    mtime_ns: int
    mode: int
    ino: int
    nlink: int
    target: str  # a symlink's target as written; "" otherwise


Snapshot = dict[str, Entry]


def snapshot(root: Path) -> Snapshot:
    """Every entry under ``root`` (relative path → entry), walked by descriptor without following any link."""
    states: Snapshot = {}
    with contextlib.suppress(OSError):
        for dirpath, dirnames, filenames, dir_fd in os.fwalk(root, follow_symlinks=False):
            prefix = "" if dirpath == str(root) else os.path.relpath(dirpath, root) + "/"
            for name in [*dirnames, *filenames]:
                with contextlib.suppress(OSError):
                    states[prefix + name] = entry_at(dir_fd, name)
    return states


def entry_at(dir_fd: int, name: str) -> Entry:
    info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    kind = kind_of(info.st_mode)
    target = os.readlink(name, dir_fd=dir_fd) if kind == "symlink" else ""
    return Entry(kind, info.st_size, info.st_mtime_ns, info.st_mode, info.st_ino, info.st_nlink, target)


def read_entry(root: Path, relative: str, cap: int) -> bytes | None:
    """A regular file's bytes at ``relative`` under ``root`` (a place the host made), opened component by component
    without following links; None when it is anything else, bigger than ``cap``, or gone."""
    parts = [p for p in relative.split("/") if p]
    if not parts or any(p in (".", "..") for p in parts):
        return None
    try:
        fd = os.open(root, DIR_FLAGS)
    except OSError:
        return None
    try:
        for part in parts[:-1]:
            try:
                next_fd = os.open(part, DIR_FLAGS, dir_fd=fd)
            except OSError:
                return None
            os.close(fd)
            fd = next_fd
        back = _read_at(fd, parts[-1], cap)
        return back.data
    finally:
        os.close(fd)


def remove_tree(path: Path) -> None:
    """Remove a place the run wrote; descriptor-based on Linux, so a link left in it is removed, never followed."""
    if not shutil.rmtree.avoids_symlink_attacks:  # pragma: no cover - every Linux Python has the fd-based rmtree
        raise RuntimeError("this platform's shutil.rmtree can follow symlinks; refusing to clean a run's tree")
    shutil.rmtree(path, ignore_errors=True)


def write_entry(root: Path, relative: str, data: bytes) -> None:
    """Write ``data`` at ``relative`` under ``root`` (a fresh tree the host made), creating directories as needed and
    refusing to pass through a symlink (the tree may hold links the patch added): OSError when it would."""
    parts = [p for p in relative.split("/") if p]
    if not parts or any(p in (".", "..") for p in parts) or relative.startswith("/"):
        raise OSError(f"not a path inside the tree: {relative!r}")
    fd = os.open(root, DIR_FLAGS)
    try:
        for part in parts[:-1]:
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, 0o755, dir_fd=fd)
            next_fd = os.open(part, DIR_FLAGS, dir_fd=fd)  # ELOOP/ENOTDIR on a link: refused
            os.close(fd)
            fd = next_fd
        out = os.open(parts[-1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644,
                      dir_fd=fd)  # fmt: skip
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(out, view) :]
        finally:
            os.close(out)
    finally:
        os.close(fd)
