"""Base and patched trees in temporary git worktrees; the user's checkout and index are never touched."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType

from cascade.errors import BadInput, CascadeError
from cascade.models import Patch

GIT_TIMEOUT = 600


def git(repo: Path | str, *args: str, check: bool = True, timeout: float = GIT_TIMEOUT) -> str:
    """Run git with hooks and user config that could alter the result neutralised."""
    proc = subprocess.run(
        ["git", "-C", str(repo), "-c", "core.hooksPath=/dev/null", "-c", "advice.detachedHead=false", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check and proc.returncode != 0:
        raise CascadeError(f"git {' '.join(args[:2])} failed: {proc.stderr.strip()}")
    return proc.stdout


def resolve_repo(repo: str | Path) -> Path:
    path = Path(repo).expanduser().resolve()
    if not path.is_dir():
        raise BadInput(f"repository not found: {repo}")
    proc = subprocess.run(["git", "-C", str(path), "rev-parse", "--git-dir"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise BadInput(f"not a git repository: {repo}")
    return path


def has_commits(repo: Path) -> bool:
    proc = subprocess.run(["git", "-C", str(repo), "rev-list", "-n", "1", "--all"], capture_output=True, text=True)
    return proc.returncode == 0 and bool(proc.stdout.strip())


def resolve_commit(repo: Path, ref: str) -> str:
    proc = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"],
        capture_output=True,
        text=True,
    )
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
            proc = subprocess.run(
                ["git", "-C", str(self.repo), "cat-file", "-e", f"{self.base_commit}:{f.source_path}"],
                capture_output=True,
            )
            if proc.returncode != 0:
                raise BadInput(f"patch modifies {f.source_path}, which does not exist at {self.base_commit[:12]}")

    def _add_worktree(self, path: Path) -> None:
        git(self.repo, "worktree", "add", "--detach", "--force", str(path), self.base_commit)
        self._worktrees.append(path)

    def close(self) -> None:
        for path in self._worktrees:
            git(self.repo, "worktree", "remove", "--force", str(path), check=False)
        self._worktrees.clear()
        shutil.rmtree(self._tmp, ignore_errors=True)
        git(self.repo, "worktree", "prune", check=False)


def _git_apply(tree: Path, data: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "-C", str(tree), "apply", "--whitespace=nowarn", "-"], input=data, capture_output=True, text=True
    )


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
    subprocess.run(["git", "-C", str(tree), "checkout", "--", "."], capture_output=True)
    subprocess.run(["git", "-C", str(tree), "clean", "-fdq"], capture_output=True)
    raise BadInput(f"patch does not apply: {' '.join(git_error) or proc.stdout.strip().splitlines()[-1:]}")
