"""Find the git repository of each SWE-bench ``repo`` (``owner/name``) locally, or clone it into a cache.

``--repos-dir DIR`` layout — the first of these that is a git repository (bare or with a work tree) wins:

- ``DIR/<owner>__<name>``       (SWE-bench's instance-id spelling, e.g. ``DIR/sympy__sympy``)
- ``DIR/<owner>/<name>``        (GitHub's path)
- ``DIR/<owner>+<name>/repo``   (the project's mirror layout, e.g. ``/work/.mirror/sympy+sympy/repo``)
- ``DIR/<owner>+<name>``

With ``--clone``, a repository found in none of these is cloned (bare) into ``--cache-dir`` as
``<owner>__<name>`` when its URL answers ``git ls-remote`` within a short timeout; otherwise it is unavailable and
its traces run only the stages that need no checkout. Worktrees are added to the repository, so it must be writable.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from cascade.git import run_git

DEFAULT_URL_TEMPLATE = "https://github.com/{repo}.git"
PROBE_TIMEOUT = 15.0  # seconds for `git ls-remote`: an unreachable host must not stall the run
CLONE_TIMEOUT = 1800.0

# No credential prompts, no askpass helpers: an unreachable or private URL fails at once instead of waiting.
_QUIET_GIT_ENV = {"GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "/bin/true", "SSH_ASKPASS": "/bin/true"}
REPOS_ENV = "CASCADE_REPOS_DIR"  # --repos-dir's default in `cascade bench run` and `cascade bench scan`


class RepoLocation(BaseModel):
    model_config = ConfigDict(frozen=True)

    repo: str
    path: str | None
    note: str

    @property
    def available(self) -> bool:
        return self.path is not None


def layout_candidates(repos_dir: Path, repo: str) -> list[Path]:
    owner, _, name = repo.partition("/")
    return [
        repos_dir / f"{owner}__{name}",
        repos_dir / owner / name,
        repos_dir / f"{owner}+{name}" / "repo",
        repos_dir / f"{owner}+{name}",
    ]


def _git(args: list[str], timeout: float, cwd: Path | None = None) -> subprocess.CompletedProcess[str] | None:
    """Run git; None when it did not finish in time or could not start."""
    try:
        return run_git(cwd, *args, timeout=timeout, env=_QUIET_GIT_ENV)
    except (subprocess.TimeoutExpired, OSError):
        return None


def is_git_repo(path: Path) -> bool:
    """A bare or non-bare repository rooted exactly at ``path`` (not a directory inside another checkout)."""
    if not path.is_dir():
        return False
    proc = _git(["-C", str(path), "rev-parse", "--is-bare-repository", "--absolute-git-dir"], timeout=30)
    if proc is None or proc.returncode != 0:
        return False
    bare, git_dir = [*proc.stdout.splitlines(), "", ""][:2]
    if bare.strip() != "true":
        top = _git(["-C", str(path), "rev-parse", "--show-toplevel"], timeout=30)
        return top is not None and top.returncode == 0 and Path(top.stdout.strip()).resolve() == path.resolve()
    return Path(git_dir).resolve() == path.resolve()


def has_commit(path: str | Path, sha: str) -> bool:
    proc = _git(["-C", str(path), "cat-file", "-e", f"{sha}^{{commit}}"], timeout=30)
    return proc is not None and proc.returncode == 0


class RepoResolver:
    """Resolve each ``owner/name`` once per run (memoised): repos dir first, then the clone cache."""

    def __init__(
        self,
        repos_dir: str | Path | None = None,
        cache_dir: str | Path | None = None,
        clone: bool = False,
        url_template: str = DEFAULT_URL_TEMPLATE,
        probe_timeout: float = PROBE_TIMEOUT,
        clone_timeout: float = CLONE_TIMEOUT,
    ) -> None:
        self.repos_dir = Path(repos_dir) if repos_dir else None
        self.cache_dir = Path(cache_dir) if cache_dir else None
        self.clone = clone
        self.url_template = url_template
        self.probe_timeout = probe_timeout
        self.clone_timeout = clone_timeout
        self._known: dict[str, RepoLocation] = {}

    def resolve(self, repo: str) -> RepoLocation:
        if repo not in self._known:
            self._known[repo] = self._locate(repo)
        return self._known[repo]

    def _locate(self, repo: str) -> RepoLocation:
        if "/" not in repo:
            return RepoLocation(repo=repo, path=None, note=f"repository name {repo!r} is not owner/name")
        if self.repos_dir is not None:
            for candidate in layout_candidates(self.repos_dir, repo):
                if is_git_repo(candidate):
                    return RepoLocation(repo=repo, path=str(candidate), note="repos-dir")
        cached = self._cache_path(repo)
        if cached is not None and is_git_repo(cached):
            return RepoLocation(repo=repo, path=str(cached), note="clone cache")
        if not self.clone or cached is None:
            where = str(self.repos_dir) if self.repos_dir else "no --repos-dir"
            return RepoLocation(repo=repo, path=None, note=f"not found under {where} (cloning off)")
        return self._clone(repo, cached)

    def _cache_path(self, repo: str) -> Path | None:
        if self.cache_dir is None:
            return None
        owner, _, name = repo.partition("/")
        return self.cache_dir / f"{owner}__{name}"

    def _clone(self, repo: str, into: Path) -> RepoLocation:
        url = self.url_template.format(repo=repo)
        probe = _git(["ls-remote", "--heads", url], timeout=self.probe_timeout)
        if probe is None or probe.returncode != 0:
            return RepoLocation(repo=repo, path=None, note=f"not found locally and {url} is unreachable")
        partial = into.with_name(into.name + ".part")
        shutil.rmtree(partial, ignore_errors=True)
        into.parent.mkdir(parents=True, exist_ok=True)
        proc = _git(["clone", "--bare", "--quiet", url, str(partial)], timeout=self.clone_timeout)
        if proc is None or proc.returncode != 0:
            shutil.rmtree(partial, ignore_errors=True)
            return RepoLocation(repo=repo, path=None, note=f"clone of {url} failed or timed out")
        partial.rename(into)  # only a complete clone ever sits at the cache path
        return RepoLocation(repo=repo, path=str(into), note=f"cloned from {url}")
