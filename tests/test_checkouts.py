"""Pristine checkouts and the linked trees made from them: same trees as a git checkout, and no write ever reaches
the pristine files (real git, real hard links, real concurrent processes)."""

from __future__ import annotations

import multiprocessing
import os
import shutil
from pathlib import Path

import pytest

from cascade.config import CacheConfig, CascadeConfig
from cascade.context import ReviewContext
from cascade.models import Outcome, ReviewRequest, StageResult
from cascade.patch import parse_patch
from cascade.pipeline import review
from cascade.workspace import PristineCheckouts, Workspace
from tests.support import MakeRepo, diff_of, run_git

FILES = {
    "pkg/__init__.py": "",
    "pkg/core.py": "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n",
    "pkg/data/table.txt": "one\ntwo\nthree\n",
    "run.sh": "#!/bin/sh\necho hi\n",
    "README.md": "demo\n",
}
NEW_CORE = FILES["pkg/core.py"].replace("a + b", "b + a")


@pytest.fixture
def repo(make_repo: MakeRepo) -> Path:
    path = make_repo(FILES)
    (path / "run.sh").chmod(0o755)
    os.symlink("pkg/core.py", path / "core_link.py")
    run_git(path, "add", "-A")
    run_git(path, "commit", "-q", "-m", "mode and symlink")
    return path


def _checkouts(tmp_path: Path, max_bytes: int = 1 << 30) -> PristineCheckouts:
    return PristineCheckouts(tmp_path / "cache" / "checkouts", max_bytes)


def _listing(tree: Path) -> dict[str, tuple[str, int, str]]:
    """path → (kind, executable bit, content or link target), without the .git link."""
    out: dict[str, tuple[str, int, str]] = {}
    for path in sorted(tree.rglob("*")):
        rel = path.relative_to(tree).as_posix()
        if rel == ".git":
            continue
        if path.is_symlink():
            out[rel] = ("symlink", 0, os.readlink(path))
        elif path.is_dir():
            out[rel] = ("dir", 0, "")
        else:
            out[rel] = ("file", path.stat().st_mode & 0o100, path.read_text())
    return out


def _pristine_file(tmp_path: Path, rel: str) -> Path:
    found = list((tmp_path / "cache" / "checkouts").glob(f"*/*/tree/{rel}"))
    assert len(found) == 1
    return found[0]


def test_linked_trees_equal_a_git_checkout_and_git_sees_them_clean(repo: Path, tmp_path: Path) -> None:
    patch = parse_patch(diff_of(repo, {"pkg/core.py": NEW_CORE}))
    with Workspace(repo) as plain, Workspace(repo, checkouts=_checkouts(tmp_path)) as linked:
        plain.prepare(patch)
        linked.prepare(patch)
        assert (plain.checkout_method, linked.checkout_method) == ("worktree", "linked")
        for side in ("base_dir", "patched_dir"):
            assert _listing(getattr(linked, side)) == _listing(getattr(plain, side))
        assert run_git(linked.base_dir, "status", "--porcelain") == ""
        assert run_git(linked.patched_dir, "status", "--porcelain") == " M pkg/core.py\n"
        assert run_git(linked.base_dir, "ls-files") == run_git(plain.base_dir, "ls-files")
        assert (linked.base_dir / "pkg/data/table.txt").stat().st_nlink == 3  # pristine + two trees
    assert run_git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1  # only the main one is left


def test_applying_the_patch_never_writes_through_to_the_pristine_file(repo: Path, tmp_path: Path) -> None:
    patch = parse_patch(diff_of(repo, {"pkg/core.py": NEW_CORE, "pkg/data/table.txt": None}))
    with Workspace(repo, checkouts=_checkouts(tmp_path)) as ws:
        ws.prepare(patch)
        pristine = _pristine_file(tmp_path, "pkg/core.py")
        assert pristine.read_text() == FILES["pkg/core.py"]
        assert (ws.patched_dir / "pkg/core.py").read_text() == NEW_CORE
        assert (ws.patched_dir / "pkg/core.py").stat().st_ino != pristine.stat().st_ino
        assert _pristine_file(tmp_path, "pkg/data/table.txt").read_text() == FILES["pkg/data/table.txt"]
        assert (ws.base_dir / "pkg/core.py").stat().st_ino == pristine.stat().st_ino  # base still shares it


def test_patch_fuzz_fallback_never_writes_through_either(repo: Path, tmp_path: Path) -> None:
    # a hunk whose last context line differs from the file: git apply refuses, patch --fuzz applies it
    text = diff_of(repo, {"pkg/core.py": NEW_CORE}).replace(" def sub(a, b):", " def sub(a, c):")
    with Workspace(repo, checkouts=_checkouts(tmp_path)) as ws:
        ws.prepare(parse_patch(text))
        assert ws.apply_method == "patch-fuzz"
        assert (ws.patched_dir / "pkg/core.py").read_text() == NEW_CORE
        assert _pristine_file(tmp_path, "pkg/core.py").read_text() == FILES["pkg/core.py"]
        assert all(p.stat().st_nlink == 1 for p in (ws.patched_dir / "pkg").rglob("*") if p.is_file())


def test_a_write_in_place_reaches_the_pristine_file_unless_made_private(repo: Path, tmp_path: Path) -> None:
    """Why trees are made private before code runs in them: a linked file written in place is the pristine one."""
    with Workspace(repo, checkouts=_checkouts(tmp_path)) as ws:
        ws.prepare(parse_patch(diff_of(repo, {"pkg/core.py": NEW_CORE})))
        with (ws.base_dir / "README.md").open("w") as f:  # in place: the same inode
            f.write("changed\n")
        assert _pristine_file(tmp_path, "README.md").read_text() == "changed\n"
    with Workspace(repo, checkouts=_checkouts(tmp_path)) as ws:  # the changed pristine file is noticed: rebuilt
        ws.prepare(parse_patch(diff_of(repo, {"pkg/core.py": NEW_CORE})))
        assert (ws.base_dir / "README.md").read_text() == "demo\n"
        ws.make_private()
        assert ws.checkout_method == "linked, then copied"
        for tree in (ws.base_dir, ws.patched_dir):
            assert all(p.stat().st_nlink == 1 for p in tree.rglob("*") if p.is_file() and not p.is_symlink())
            with (tree / "README.md").open("w") as f:
                f.write("changed again\n")
            (tree / "run.sh").chmod(0o700)
        assert _pristine_file(tmp_path, "README.md").read_text() == "demo\n"
        assert _pristine_file(tmp_path, "run.sh").stat().st_mode & 0o777 == 0o755


class WritingStage:
    """A stage outside the read-only list that writes a tree file in place, as a test suite might."""

    name = "writes_in_place"
    title = "writes"

    def run(self, ctx: ReviewContext) -> StageResult:
        assert ctx.workspace is not None
        for tree in (ctx.workspace.base_dir, ctx.workspace.patched_dir):
            with (tree / "pkg/data/table.txt").open("a") as f:
                f.write("appended\n")
        return StageResult(stage=self.name, outcome=Outcome.PASS, reason="wrote")


def test_the_pipeline_makes_trees_private_before_a_stage_that_may_write(repo: Path, tmp_path: Path) -> None:
    config = CascadeConfig(cache=CacheConfig(dir=str(tmp_path / "cache")))
    request = ReviewRequest(repo=str(repo), patch_text=diff_of(repo, {"pkg/core.py": NEW_CORE}), config=config)
    verdict = review(request, stages=[WritingStage()])
    assert verdict.stages[0].reason == "wrote"
    assert _pristine_file(tmp_path, "pkg/data/table.txt").read_text() == FILES["pkg/data/table.txt"]


def test_a_crashed_build_is_never_trusted_and_is_cleaned_up(repo: Path, tmp_path: Path) -> None:
    checkouts = _checkouts(tmp_path)
    commit = run_git(repo, "rev-parse", "HEAD").strip()
    with Workspace(repo, checkouts=checkouts) as ws:  # find where checkouts of this repository go
        ws.prepare(parse_patch(diff_of(repo, {"pkg/core.py": NEW_CORE})))
    home = _pristine_file(tmp_path, "README.md").parents[2]
    shutil.rmtree(home / commit)
    half = home / f".tmp-{commit}-1-2"  # what a build killed halfway leaves
    (half / "tree" / "pkg").mkdir(parents=True)
    (half / "tree" / "pkg" / "core.py").write_text("half written")
    with Workspace(repo, checkouts=checkouts) as ws:
        ws.prepare(parse_patch(diff_of(repo, {"pkg/core.py": NEW_CORE})))
        assert (ws.base_dir / "pkg/core.py").read_text() == FILES["pkg/core.py"]
        assert ws.checkout_method == "linked"
    assert not half.exists()
    assert sorted(p.name for p in home.iterdir()) == [commit, f"{commit}.lock"]


def _prepare_many(repo: str, root: str, rounds: int) -> list[str]:
    checkouts = PristineCheckouts(Path(root), 1 << 30)
    seen = []
    for _ in range(rounds):
        with Workspace(repo, checkouts=checkouts) as ws:
            ws.prepare(parse_patch(Path(root).parent.joinpath("fix.diff").read_text()))
            seen.append(f"{ws.checkout_method} {(ws.base_dir / 'pkg/core.py').read_text() == FILES['pkg/core.py']}")
            seen.append(f"patched {(ws.patched_dir / 'pkg/core.py').read_text() == NEW_CORE}")
    return seen


@pytest.mark.slow
def test_concurrent_reviews_of_one_commit_share_one_pristine_checkout(repo: Path, tmp_path: Path) -> None:
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "fix.diff").write_text(diff_of(repo, {"pkg/core.py": NEW_CORE}))
    root = str(tmp_path / "cache" / "checkouts")
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        results = pool.starmap(_prepare_many, [(str(repo), root, 4)] * 2)
    assert [line for r in results for line in r] == ["linked True", "patched True"] * 8
    assert len(list(Path(root).glob("*/*/manifest.json"))) == 1
    assert not list(Path(root).glob("*/.tmp-*")) and not list(Path(root).glob("*/.trash-*"))
    assert run_git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1


def test_least_recently_used_checkouts_go_beyond_the_size_limit(make_repo: MakeRepo, tmp_path: Path) -> None:
    repos = [make_repo({**FILES, "n.txt": str(i) * 1000}) for i in range(3)]
    checkouts = _checkouts(tmp_path, max_bytes=2500)  # room for two checkouts of ~1.1 kB
    for repo in repos:
        with Workspace(repo, checkouts=checkouts) as ws:
            ws.prepare(parse_patch(diff_of(repo, {"pkg/core.py": NEW_CORE})))
    kept = sorted(p.read_text() for p in (tmp_path / "cache" / "checkouts").glob("*/*/tree/n.txt"))
    assert kept == ["1" * 1000, "2" * 1000]


@pytest.mark.parametrize("where", ["cache", "repository"])
def test_an_unusable_cache_falls_back_to_git_checkouts(repo: Path, tmp_path: Path, where: str) -> None:
    checkouts = _checkouts(tmp_path)
    if where == "cache":
        (tmp_path / "cache").write_text("a file where the cache directory should be")
    else:
        checkouts.root.mkdir(parents=True)
        (checkouts.root / checkouts._dir(repo.resolve()).name).write_text("a file where its checkouts should be")
    with Workspace(repo, checkouts=checkouts) as ws:
        ws.prepare(parse_patch(diff_of(repo, {"pkg/core.py": NEW_CORE})))
        assert ws.checkout_method == "worktree"
        assert (ws.patched_dir / "pkg/core.py").read_text() == NEW_CORE
        assert (ws.base_dir / "pkg/core.py").read_text() == FILES["pkg/core.py"]
    assert run_git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1
