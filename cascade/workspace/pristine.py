"""One pristine checkout per (repository, commit), from which each review's trees are linked (docs/architecture.md,
Checkouts).

Layout, under ``<cache>/checkouts/<repository digest>/``: ``<commit>/`` holds ``tree/`` (the commit's files, as
``git checkout-index`` writes them), ``index`` (git's index for them) and ``manifest.json`` (every entry with the
size, modification time and mode it was built with); ``<commit>.lock`` serialises its users. A checkout is built in
a temporary directory and renamed into place whole, so a crashed build leaves only a ``.tmp-*`` directory that the
next build of that commit removes, never a half tree that a review would trust. Users hold a shared lock while they
link, builders and the eviction of the least recently used checkouts an exclusive one.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from cascade.errors import CascadeError
from cascade.git import run_git
from cascade.workspace.links import PristineChanged, TreeEntry, link_tree, scan

MANIFEST_SCHEMA = 1


class Manifest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int
    repository: str
    commit: str
    bytes: int
    entries: list[TreeEntry]


class PristineCheckouts:
    """Pristine checkouts under ``root`` (``<cache>/checkouts``), at most about ``max_bytes`` of files."""

    def __init__(self, root: Path, max_bytes: int) -> None:
        self.root = root
        self.max_bytes = max_bytes

    def _dir(self, repo: Path) -> Path:
        return self.root / hashlib.sha256(str(repo).encode()).hexdigest()[:16]

    def link_into(self, repo: Path, commit: str, dest: Path) -> Path:
        """Link the commit's files into the existing directory ``dest`` (a worktree made with ``--no-checkout``,
        its ``.git`` file kept); returns the pristine index to give that worktree. Builds the checkout first when
        there is none or it changed; raises CascadeError when git cannot build it, OSError when linking fails."""
        home = self._dir(repo)
        home.mkdir(mode=0o700, parents=True, exist_ok=True)
        lock = home / f"{commit}.lock"
        with _locked(lock, exclusive=False):
            manifest = _manifest(home / commit, repo, commit)
            if manifest is not None and _linked(home / commit, manifest, dest):
                return _used(home / commit)
        with _locked(lock, exclusive=True):
            manifest = _manifest(home / commit, repo, commit)
            if manifest is not None and _linked(home / commit, manifest, dest):
                return _used(home / commit)
            _discard(home / commit)
            manifest = _build(repo, commit, home)
            if not _linked(home / commit, manifest, dest):
                raise CascadeError(f"the fresh checkout of {commit[:12]} changed while it was linked")
            index = _used(home / commit)
        self._evict(keep=home / commit)
        return index

    def _evict(self, keep: Path) -> None:
        """Remove the least recently used checkouts beyond ``max_bytes``; one in use (locked) is skipped."""
        found: list[tuple[float, int, Path]] = []
        for meta in self.root.glob("*/*/manifest.json"):
            checkout = meta.parent
            if checkout == keep:
                continue
            try:
                found.append((meta.stat().st_mtime, _size(checkout), checkout))
            except OSError:
                continue
        total = sum(size for _, size, _ in found) + _size(keep)
        for _, size, checkout in sorted(found):
            if total <= self.max_bytes:
                return
            if _try_remove(checkout):
                total -= size


def _size(checkout: Path) -> int:
    try:
        return int((checkout / "bytes").read_text(encoding="ascii"))
    except (OSError, ValueError):
        return 0


def _try_remove(checkout: Path) -> bool:
    lock = checkout.parent / f"{checkout.name}.lock"
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return False
    try:
        _discard(checkout)
    finally:
        os.close(fd)
    return True


@contextmanager
def _locked(path: Path, *, exclusive: bool) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _manifest(checkout: Path, repo: Path, commit: str) -> Manifest | None:
    try:
        manifest = Manifest.model_validate_json((checkout / "manifest.json").read_bytes())
    except (OSError, ValidationError):
        return None
    expected = (MANIFEST_SCHEMA, str(repo), commit)
    return manifest if (manifest.schema_version, manifest.repository, manifest.commit) == expected else None


def _linked(checkout: Path, manifest: Manifest, dest: Path) -> bool:
    """Link the checkout into ``dest``; False (and ``dest`` emptied again) when a pristine file changed."""
    try:
        link_tree(checkout / "tree", manifest.entries, dest)
    except PristineChanged:
        _empty(dest)
        return False
    return True


def _empty(dest: Path) -> None:
    """Everything in ``dest`` but its ``.git`` link to the worktree's admin directory."""
    for child in dest.iterdir():
        if child.name == ".git":
            continue
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()


def _used(checkout: Path) -> Path:
    """Mark the checkout as just used (eviction goes by this) and return its index."""
    os.utime(checkout / "manifest.json")
    return checkout / "index"


def _discard(checkout: Path) -> None:
    """Remove a checkout, and what crashed builds of its commit left: renamed away first, so nobody sees half."""
    for stale in [checkout, *checkout.parent.glob(f".tmp-{checkout.name}-*")]:
        if stale.exists():
            trash = stale.parent / f".trash-{stale.name.lstrip('.')}-{os.getpid()}-{time.monotonic_ns()}"
            stale.rename(trash)
            shutil.rmtree(trash, ignore_errors=True)


def _build(repo: Path, commit: str, home: Path) -> Manifest:
    """Check the commit out into a temporary directory, describe it, rename it into place."""
    tmp = home / f".tmp-{commit}-{os.getpid()}-{time.monotonic_ns()}"
    tree = tmp / "tree"
    tree.mkdir(parents=True)
    env = {"GIT_INDEX_FILE": str(tmp / "index")}
    steps = {"read-tree": ["read-tree", commit], "checkout-index": [f"--work-tree={tree}", "checkout-index", "-afu"]}
    try:
        for name, args in steps.items():
            proc = run_git(repo, *args, env=env)
            if proc.returncode != 0:
                raise CascadeError(f"git {name} failed: {proc.stderr.strip()[-500:]}")
        entries = scan(tree)
        size = sum(e.size for e in entries)
        manifest = Manifest(schema_version=MANIFEST_SCHEMA, repository=str(repo), commit=commit, bytes=size,
                            entries=entries)  # fmt: skip
        (tmp / "manifest.json").write_text(manifest.model_dump_json(), encoding="utf-8")
        (tmp / "bytes").write_text(str(size), encoding="ascii")
        tmp.rename(home / commit)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return manifest
