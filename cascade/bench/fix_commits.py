"""A repository's own merged fix commits as acceptable controls: code and tests as committed.

Each commit is reviewed the way a pull request is: its diff against its **first parent** (for a merge commit that
is the whole merged branch; for a squash or rebase merge, the commit itself), with the commit message as the issue
text. Acceptable by construction: the maintainers merged it.

Commits come from a list file (``owner/name <sha> <subject>`` per line, ``#`` comments; ours is
``benchmarks/data/merged_fixes.txt``) or from a range (``owner/name:A..B``): the first-parent commits of the range
whose diff changes both code and tests (a ``.py`` file outside the test directories, and a test file).
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from pydantic import BaseModel, ConfigDict, Field

from cascade.bench.rows import BenchCase, LabelClass
from cascade.errors import BadInput, read_input_text
from cascade.git import run_git
from cascade.paths import is_test_file, under_test_dir

FIX_COMMIT_MODEL = "merged-commit"
_NON_CODE_DIRS = {"doc", "docs", "examples", "bench", "benchmarks", "scripts", "ci"}


class FixCommit(BaseModel):
    """One merged commit of a repository, named by its full sha."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    repo: str = Field(description="owner/name")
    sha: str
    subject: str = ""

    @property
    def instance_id(self) -> str:
        return f"{self.repo.replace('/', '__')}-{self.sha[:12]}"


def read_commit_list(path: str | Path) -> list[FixCommit]:
    """``owner/name <sha> [subject]`` per line; blank lines and ``#`` comments are skipped."""
    commits: list[FixCommit] = []
    for number, line in enumerate(read_input_text(path, "commit list").splitlines(), start=1):
        fields = line.split(maxsplit=2)
        if not fields or fields[0].startswith("#"):
            continue
        if len(fields) < 2 or "/" not in fields[0] or not _is_sha(fields[1]):
            raise BadInput(f"{path}:{number}: expected 'owner/name <sha> [subject]'")
        commits.append(FixCommit(repo=fields[0], sha=fields[1], subject=fields[2] if len(fields) > 2 else ""))
    return commits


def _is_sha(text: str) -> bool:
    return 7 <= len(text) <= 40 and all(c in "0123456789abcdef" for c in text.lower())


def _git(repo_path: str, *args: str) -> str:
    proc = run_git(repo_path, *args, timeout=300)
    if proc.returncode != 0:
        raise BadInput(f"git {' '.join(args[:2])} failed in {repo_path}: {proc.stderr.strip()[:200]}")
    return proc.stdout


def is_test_path(path: str) -> bool:
    return is_test_file(path) or path.endswith("conftest.py") or under_test_dir(path)


def is_code_path(path: str) -> bool:
    parts = PurePosixPath(path).parts
    return path.endswith(".py") and not is_test_path(path) and not (parts and parts[0] in _NON_CODE_DIRS)


def changes_code_and_tests(paths: list[str]) -> bool:
    return any(is_code_path(p) for p in paths) and any(is_test_path(p) for p in paths)


def commits_in_range(repo_path: str, repo: str, rev_range: str) -> list[FixCommit]:
    """First-parent commits of ``rev_range`` (oldest first) whose diff changes code and tests."""
    found: list[FixCommit] = []
    for line in _git(repo_path, "log", "--first-parent", "--reverse", "--format=%H %s", rev_range).splitlines():
        sha, _, subject = line.partition(" ")
        if changes_code_and_tests(_changed_paths(repo_path, sha)):
            found.append(FixCommit(repo=repo, sha=sha, subject=subject))
    return found


def _changed_paths(repo_path: str, sha: str) -> list[str]:
    return _git(repo_path, "diff", "--name-only", "--no-renames", f"{sha}^1", sha).splitlines()


def parse_range(spec: str) -> tuple[str, str]:
    """``owner/name:A..B`` → (owner/name, A..B); BadInput otherwise."""
    repo, sep, rev_range = spec.partition(":")
    if not sep or "/" not in repo or ".." not in rev_range:
        raise BadInput(f"--commit-range {spec!r}: expected owner/name:A..B")
    return repo, rev_range


def fix_commit_case(repo_path: str, commit: FixCommit) -> BenchCase:
    """The commit as a pull request: its diff against its first parent, its message as the issue text."""
    full = _git(repo_path, "rev-parse", "--verify", f"{commit.sha}^{{commit}}").strip()
    parent = _git(repo_path, "rev-parse", "--verify", f"{full}^1").strip()
    patch = _git(repo_path, "diff", "--binary", "--no-color", "--no-ext-diff", "--full-index", parent, full)
    message = _git(repo_path, "log", "-1", "--format=%B", full).strip()
    return BenchCase(
        instance_id=FixCommit(repo=commit.repo, sha=full).instance_id,
        model=FIX_COMMIT_MODEL,
        repo=commit.repo,
        base_commit=parent,
        patch_text=patch,
        issue_text=message or commit.subject or None,
        label=LabelClass.ACCEPTABLE,
    )
