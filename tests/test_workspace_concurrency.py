"""Concurrent reviews of one repository (a benchmark's --jobs, Ray workers) never break each other's checkouts: one
review's `git worktree prune` (every review prunes when it closes) used to delete another's half-made worktree
("failed to read .git/worktrees/…/commondir"), an error row under load — what made the Ray test that compares its
rows with the local pool's flaky."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import MakeRepo, run_git

ROOT = Path(__file__).resolve().parents[1]
WORKERS, CYCLES = 3, 15
REVIEWS = """
import sys
from cascade.models import Patch
from cascade.workspace import Workspace
failures = 0
for _ in range(int(sys.argv[2])):
    try:
        with Workspace(sys.argv[1]) as workspace:
            workspace.prepare(Patch(text="", files=[]))
    except Exception as exc:
        failures += 1
        print(f"{type(exc).__name__}: {exc}".splitlines()[0], file=sys.stderr)
print(failures)
"""
# Reviews that end at once (a patch that does not apply): each close prunes, as fast as it can.
CLOSING = """
import sys
from pathlib import Path
from cascade.errors import BadInput
from cascade.patch import parse_patch
from cascade.workspace import Workspace
stale = parse_patch("--- a/pkg/m0.py\\n+++ b/pkg/m0.py\\n@@ -1 +1 @@\\n-X = 'not there'\\n+X = 1\\n")
while not Path(sys.argv[2]).exists():
    with Workspace(sys.argv[1]) as workspace:
        try:
            workspace.prepare(stale)
        except BadInput:
            pass
"""


@pytest.mark.slow
def test_concurrent_workspaces_of_one_repository_never_fail(make_repo: MakeRepo, tmp_path: Path) -> None:
    repo = make_repo({f"pkg/m{i}.py": f"X = {i}\n" for i in range(100)})
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    stop = tmp_path / "stop"
    pruner = subprocess.Popen([sys.executable, "-c", CLOSING, str(repo), str(stop)], env=env)
    argv = [sys.executable, "-c", REVIEWS, str(repo), str(CYCLES)]
    workers = [subprocess.Popen(argv, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)]
    workers += [subprocess.Popen(argv, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                for _ in range(WORKERS - 1)]  # fmt: skip
    try:
        outcomes = [proc.communicate(timeout=900) for proc in workers]
    finally:
        stop.touch()
        pruner.wait(timeout=120)
    failures = [err for out, err in outcomes if out.strip() != "0"]
    assert failures == [], failures
    assert pruner.returncode == 0, "a review whose patch does not apply ended with another error"
    listed = run_git(repo, "worktree", "list", "--porcelain").splitlines()
    assert [ln for ln in listed if ln.startswith("worktree ")] == [f"worktree {repo}"]
