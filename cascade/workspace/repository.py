"""The repository under review: finding it, resolving the base commit, naming missing objects."""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from cascade.errors import BadInput
from cascade.git import run_git

# What git prints when the object store lacks objects a checkout needs (partial clones, incomplete mirrors)
_MISSING_OBJECT_MARKERS = (
    "Could not reset index file",
    "unable to read sha1 file",
    "unable to read tree",
    "missing blob object",
    "bad object",
    "is corrupt",
    "promisor remote",
)


def resolve_repo(repo: str | Path) -> Path:
    path = Path(repo).expanduser().resolve()
    if not path.is_dir():
        raise BadInput(f"repository not found: {repo}")
    proc = run_git(path, "rev-parse", "--git-dir")
    if proc.returncode != 0:
        raise BadInput(f"not a git repository: {repo}")
    return path


def has_commits(repo: Path) -> bool:
    proc = run_git(repo, "rev-list", "-n", "1", "--all")
    return proc.returncode == 0 and bool(proc.stdout.strip())


def resolve_commit(repo: Path, ref: str) -> str:
    proc = run_git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    if proc.returncode != 0 or not proc.stdout.strip():
        if not has_commits(repo):
            raise BadInput(f"repository {repo} has no commits: commit the base tree first (the patch applies to it)")
        raise BadInput(f"unknown base ref '{ref}' in {repo}")
    return proc.stdout.strip()


def missing_object_line(git_error: str) -> str | None:
    """git's line saying an object is missing, or None when the error is something else."""
    lines = [ln.strip() for ln in git_error.splitlines() if ln.strip()]
    hits = [ln for ln in lines if any(marker in ln for marker in _MISSING_OBJECT_MARKERS)]
    if not hits:
        return None
    # "fatal: Could not reset index file to revision 'HEAD'." is the line users search for; name it when present
    reset = [ln for ln in hits if "Could not reset index file" in ln]
    return (reset or hits)[0].removeprefix("fatal: ")


@contextmanager
def worktree_lock(repo: Path) -> Iterator[None]:
    """Concurrent reviews of one repository (a benchmark's workers) must not run ``git worktree prune`` while another
    ``git worktree add`` is half done: prune deletes the new admin directory before add has written its lock file,
    and the add fails ("failed to read .git/worktrees/…/commondir"; measured: 5 of 480 adds with four concurrent
    loops); another add reads every registration too, so a half-made one fails it the same way (seen under load).
    Registering a worktree (without its checkout, which is the slow part) or pruning takes the lock alone. The lock
    file lives in the repository's git directory."""
    common = run_git(repo, "rev-parse", "--git-common-dir").stdout.strip() or ".git"
    path = (repo / common).resolve() / "cascade-worktrees.lock"
    try:
        handle = path.open("a")
    except OSError:  # a read-only repository: no concurrent writer of ours can be there either
        yield
        return
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
