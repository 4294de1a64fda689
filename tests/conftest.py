"""Shared fixtures: real git repositories made in a temporary directory, and the sandbox backends (skipped with the
reason when one cannot run here; never silently replaced by the ``none`` backend). Plain helpers live in
tests/support.py."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from cascade.sandbox.base import Sandbox
from tests.bench_support import make_swe
from tests.support import BACKEND_PARAMS, MakeRepo, run_git, sandbox_backend


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


@pytest.fixture(scope="session")
def sandbox() -> Sandbox:
    """The sandbox Stage 2's tests run untrusted code in: bubblewrap (the default backend where it works)."""
    return sandbox_backend("bwrap")


@pytest.fixture(scope="module", params=BACKEND_PARAMS)
def isolating_sandbox(request: pytest.FixtureRequest) -> Sandbox:
    """Each backend that protects the host (bwrap, docker): what it must contain, both must contain."""
    return sandbox_backend(request.param)


@pytest.fixture
def swe(tmp_path: Path) -> dict[str, Path]:
    """A SWE-bench-format fixture (tests/bench_support.py): repos dir, task rows, predictions and results."""
    return make_swe(tmp_path)
