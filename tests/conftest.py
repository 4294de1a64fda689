"""Shared fixtures: real git repositories made in a temporary directory."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

SWEBENCH_DIR = Path(
    os.environ.get("CASCADE_SWEBENCH_DIR", Path(__file__).resolve().parents[2] / "shared/data/swebench")
)
MIRROR_DIR = Path(os.environ.get("CASCADE_REPOS_DIR", "/work/.mirror"))


def run_git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
    }
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env).stdout


MakeRepo = Callable[[dict[str, str]], Path]


@pytest.fixture(autouse=True, scope="session")
def _session_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Reviews run by the tests reuse results and checkouts in a directory of this session, never the user's cache
    (child processes inherit it through the environment)."""
    previous = os.environ.get("CASCADE_CACHE_DIR")
    os.environ["CASCADE_CACHE_DIR"] = str(tmp_path_factory.mktemp("cascade-cache"))
    yield
    if previous is None:
        os.environ.pop("CASCADE_CACHE_DIR", None)
    else:
        os.environ["CASCADE_CACHE_DIR"] = previous


@pytest.fixture
def make_repo(tmp_path: Path) -> MakeRepo:
    """Create a git repository with the given files committed; returns its path."""
    counter = iter(range(1000))

    def make(files: dict[str, str]) -> Path:
        repo = tmp_path / f"repo{next(counter)}"
        repo.mkdir()
        run_git(repo, "init", "-q", "-b", "main")
        for rel, text in files.items():
            path = repo / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        run_git(repo, "add", "-A")
        run_git(repo, "commit", "-q", "-m", "base")
        return repo

    return make


def diff_of(repo: Path, changes: dict[str, str | None]) -> str:
    """Make a unified diff by editing files in the repo, diffing, and restoring the checkout."""
    for rel, text in changes.items():
        path = repo / rel
        if text is None:
            path.unlink()
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    run_git(repo, "add", "-A")
    patch = run_git(repo, "diff", "--cached")
    run_git(repo, "reset", "-q", "--hard", "HEAD")
    run_git(repo, "clean", "-fdq")
    return patch
