"""Base and patched trees in temporary git worktrees; the user's checkout and index are never touched."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType

from cascade.errors import BadInput, CascadeError, IncompleteRepository
from cascade.git import git, run_git
from cascade.models import Patch

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


class Workspace:
    """Two detached worktrees of ``base_commit``: ``base_dir`` as is and ``patched_dir`` with the patch applied."""

    def __init__(self, repo: str | Path, base_ref: str = "HEAD") -> None:
        self.repo = resolve_repo(repo)
        self.base_commit = resolve_commit(self.repo, base_ref)
        self._tmp = Path(tempfile.mkdtemp(prefix="cascade-"))
        # git names a worktree's admin dir after its basename: unique names keep concurrent reviews of one repo apart
        self.base_dir = self._tmp / f"base-{self._tmp.name}"
        self.patched_dir = self._tmp / f"patched-{self._tmp.name}"
        self.apply_method: str | None = None
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
        self._add_worktree(self.base_dir)
        self._add_worktree(self.patched_dir)
        if patch.files:
            self.apply_method = apply_patch(self.patched_dir, patch.text, patch.text_part)

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

    def _add_worktree(self, path: Path) -> None:
        self._worktrees.append(path)  # registered first: a failed add still leaves an entry to remove
        try:
            git(self.repo, "worktree", "add", "--detach", "--force", str(path), self.base_commit)
        except CascadeError as exc:
            cause = missing_object_line(str(exc))
            if cause is None:
                raise
            raise IncompleteRepository(
                f"repository {self.repo} is incomplete: git cannot check out {self.base_commit[:12]} ({cause}); "
                "a partial clone or a mirror without some objects — fetch them or use a complete clone"
            ) from None

    def close(self) -> None:
        for path in self._worktrees:
            git(self.repo, "worktree", "remove", "--force", str(path), check=False)
        self._worktrees.clear()
        shutil.rmtree(self._tmp, ignore_errors=True)
        git(self.repo, "worktree", "prune", check=False)


def _git_apply(tree: Path, data: str) -> subprocess.CompletedProcess[str]:
    return run_git(tree, "apply", "--whitespace=nowarn", "-", input=data)


def missing_object_line(git_error: str) -> str | None:
    """git's line saying an object is missing, or None when the error is something else."""
    lines = [ln.strip() for ln in git_error.splitlines() if ln.strip()]
    hits = [ln for ln in lines if any(marker in ln for marker in _MISSING_OBJECT_MARKERS)]
    if not hits:
        return None
    # "fatal: Could not reset index file to revision 'HEAD'." is the line users search for; name it when present
    reset = [ln for ln in hits if "Could not reset index file" in ln]
    return (reset or hits)[0].removeprefix("fatal: ")


def apply_patch(tree: Path, patch_text: str, text_part: str = "") -> str:
    """Apply with ``git apply``; fall back to ``patch --fuzz``. Returns the method that worked.

    ``text_part`` is the patch without its binary files (see ``Patch.text_part``): when the whole patch does not
    apply because a binary file's data is missing ("Binary files … differ"), the text part is applied alone."""
    data = patch_text if patch_text.endswith("\n") else patch_text + "\n"
    proc = _git_apply(tree, data)
    if proc.returncode == 0:
        return "git-apply"
    git_error = proc.stderr.strip().splitlines()[:1]
    if text_part:
        data = text_part if text_part.endswith("\n") else text_part + "\n"
        if _git_apply(tree, data).returncode == 0:
            return "git-apply-text-part"
    if shutil.which("patch") is None:
        raise BadInput(f"patch does not apply: {' '.join(git_error)}")
    proc = subprocess.run(
        ["patch", "-p1", "--fuzz=3", "--batch", "--forward", "--no-backup-if-mismatch", "-r", "-", "-d", str(tree)],
        input=data,
        capture_output=True,
        text=True,
    )
    if proc.returncode == 0:
        return "patch-fuzz"
    run_git(tree, "checkout", "--", ".")
    run_git(tree, "clean", "-fdq")
    raise BadInput(f"patch does not apply: {' '.join(git_error) or proc.stdout.strip().splitlines()[-1:]}")
