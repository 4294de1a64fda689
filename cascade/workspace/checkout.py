"""Base and patched trees in temporary git worktrees; the user's checkout and index are never touched.

Each tree is a detached worktree of the base commit. With pristine checkouts (``cache.checkouts``, on by default) its
files are hard links to the one pristine checkout of that commit (`cascade/workspace/pristine.py`) and its index a
copy of the pristine one; otherwise, or when linking cannot work (another filesystem, an unwritable cache), git
checks the files out. Files the patch touches are made private before it is applied, and `make_private` makes whole
trees private before code runs in them (docs/architecture.md, Checkouts).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from types import TracebackType

from cascade.errors import BadInput, CascadeError, IncompleteRepository
from cascade.git import git, run_git
from cascade.models import Patch
from cascade.workspace.apply import apply_patch
from cascade.workspace.links import make_private, make_tree_private
from cascade.workspace.pristine import PristineCheckouts
from cascade.workspace.repository import missing_object_line, resolve_commit, resolve_repo, worktree_lock


class Workspace:
    """Two detached worktrees of ``base_commit``: ``base_dir`` as is and ``patched_dir`` with the patch applied."""

    def __init__(self, repo: str | Path, base_ref: str = "HEAD", checkouts: PristineCheckouts | None = None) -> None:
        self.repo = resolve_repo(repo)
        self.base_commit = resolve_commit(self.repo, base_ref)
        self._checkouts = checkouts
        self._tmp = Path(tempfile.mkdtemp(prefix="cascade-", dir=_scratch_dir(checkouts)))
        # git names a worktree's admin dir after its basename: unique names keep concurrent reviews of one repo apart
        self.base_dir = self._tmp / f"base-{self._tmp.name}"
        self.patched_dir = self._tmp / f"patched-{self._tmp.name}"
        self.apply_method: str | None = None
        self.checkout_method = "worktree"  # "linked" when the trees share the pristine checkout's files
        self._worktrees: list[Path] = []

    def __enter__(self) -> Workspace:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def prepare(self, patch: Patch) -> None:
        """Create both trees and apply the patch; BadInput when it cannot apply."""
        self._check_sources_exist(patch)
        linked = self._checkouts is not None and self._add_linked(self.base_dir) and self._add_linked(self.patched_dir)
        if not linked:
            self._drop_worktrees()
            self._add_worktree(self.base_dir)
            self._add_worktree(self.patched_dir)
        self.checkout_method = "linked" if linked else "worktree"
        if patch.files:
            touched = {p for f in patch.files for p in (f.path, f.source_path) if p}
            make_private(self.patched_dir / p for p in sorted(touched))  # never write through a shared inode
            self.apply_method = apply_patch(self.patched_dir, patch.text, patch.text_part)

    def make_private(self) -> None:
        """No file of either tree shares its inode with the pristine checkout any more: for stages that write in
        the trees or run code there (the pipeline calls it; docs/architecture.md, Checkouts)."""
        if self.checkout_method == "linked":
            for tree in (self.base_dir, self.patched_dir):
                make_tree_private(tree)
            self.checkout_method = "linked, then copied"

    def _check_sources_exist(self, patch: Patch) -> None:
        for f in patch.files:
            if f.source_path is None:
                continue
            proc = run_git(self.repo, "cat-file", "-e", f"{self.base_commit}:{f.source_path}")
            if proc.returncode != 0:
                if self._in_tree(f.source_path):
                    raise IncompleteRepository(
                        f"repository {self.repo} is incomplete: the object of {f.source_path} at "
                        f"{self.base_commit[:12]} is missing (a partial clone or mirror)"
                    )
                raise BadInput(f"patch modifies {f.source_path}, which does not exist at {self.base_commit[:12]}")

    def _in_tree(self, path: str) -> bool:
        """The base commit's tree lists ``path`` (its object may still be missing from the object store)."""
        listed = git(self.repo, "ls-tree", "--name-only", self.base_commit, "--", path, check=False)
        return bool(listed.strip())

    def _add_linked(self, path: Path) -> bool:
        """A worktree without a checkout, filled with links to the pristine checkout; False when that failed (the
        caller then checks out instead; a commit git cannot check out fails there with git's own reason)."""
        assert self._checkouts is not None
        self._worktrees.append(path)
        try:
            with worktree_lock(self.repo):
                git(self.repo, "worktree", "add", "--no-checkout", "--detach", "--force", str(path), self.base_commit)
            index = self._checkouts.link_into(self.repo, self.base_commit, path)
            shutil.copyfile(index, _admin_dir(path) / "index")
        except (CascadeError, OSError):
            return False
        return True

    def _add_worktree(self, path: Path) -> None:
        self._worktrees.append(path)  # registered first: a failed add still leaves an entry to remove
        try:
            # Registered alone (another add reads every registration, and a half-made one fails it), checked out
            # after, outside the lock
            with worktree_lock(self.repo):
                git(self.repo, "worktree", "add", "--no-checkout", "--detach", "--force", str(path), self.base_commit)
            git(path, "reset", "--hard", "--quiet")
        except CascadeError as exc:
            cause = missing_object_line(str(exc))
            if cause is None:
                raise
            raise IncompleteRepository(
                f"repository {self.repo} is incomplete: git cannot check out {self.base_commit[:12]} ({cause}); "
                "a partial clone or a mirror without some objects — fetch them or use a complete clone"
            ) from None

    def _drop_worktrees(self) -> None:
        for path in self._worktrees:
            shutil.rmtree(path, ignore_errors=True)
        if self._worktrees:
            with worktree_lock(self.repo):
                git(self.repo, "worktree", "prune", check=False)
        self._worktrees.clear()

    def close(self) -> None:
        """Delete the trees (unlinking a linked tree's files frees nothing the pristine checkout holds), then let
        git forget them."""
        self._drop_worktrees()
        shutil.rmtree(self._tmp, ignore_errors=True)


def _admin_dir(worktree: Path) -> Path:
    """The worktree's directory in the repository's git directory, as its ``.git`` file names it."""
    text = (worktree / ".git").read_text(encoding="utf-8").strip()
    if not text.startswith("gitdir: "):
        raise OSError(f"{worktree}/.git does not name a git directory")
    return Path(text.removeprefix("gitdir: "))


def _scratch_dir(checkouts: PristineCheckouts | None) -> str | None:
    """Where the trees go: the system's temporary directory, unless it is on another filesystem than the pristine
    checkouts (hard links cannot cross filesystems), then beside them."""
    if checkouts is None:
        return None
    try:
        checkouts.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        if os.stat(tempfile.gettempdir()).st_dev == os.stat(checkouts.root).st_dev:
            return None
        work = checkouts.root / "work"
        work.mkdir(mode=0o700, exist_ok=True)
    except OSError:
        return None  # an unusable cache: linking fails too, and the trees are checked out instead
    return str(work)
