"""A review's two trees, made and removed: two `git worktree add` and their removal, against links from one pristine
checkout of the commit (cascade/workspace/pristine.py). Per repository here, the base commit of its first Lite task
(by instance id); per round the two ways alternate (so machine load hits both alike), after one ``first`` linked
review that builds the pristine checkout. Each row is one timed review's trees."""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict

from cascade.bench.scans import ScanInputs

if TYPE_CHECKING:
    from cascade.workspace import PristineCheckouts

Way = Literal["first", "worktree", "linked"]


class CheckoutRun(BaseModel):
    model_config = ConfigDict(extra="forbid")

    repo: str
    commit: str
    way: Way  # first: a linked review that builds the pristine checkout; worktree: `git worktree add` ×2
    round: int
    make_seconds: float
    remove_seconds: float
    method: str  # what the workspace says it did: "linked", "worktree", "linked, then copied"


class CheckoutsScan:
    name = "checkouts"
    title = "A review's two trees: `git worktree add` ×2 + removal against links from one pristine checkout"
    needs_data = True
    row = CheckoutRun

    def rows(self, inputs: ScanInputs) -> Iterator[CheckoutRun]:
        from cascade.workspace import PristineCheckouts

        bases: dict[str, str] = {}
        for task in sorted(inputs.dev.tasks("lite").values(), key=lambda t: t.instance_id):
            bases.setdefault(task.repo, task.base_commit)
        for repo, commit in sorted(bases.items()):
            path = inputs.repos.resolve(repo).path
            if path is None:
                continue
            with tempfile.TemporaryDirectory(prefix="checkouts-", dir=inputs.scratch) as name:
                checkouts = PristineCheckouts(Path(name), 1 << 40)
                yield _once(repo, path, commit, "first", 0, checkouts)
                for round_ in range(1, inputs.reps + 1):
                    yield _once(repo, path, commit, "worktree", round_, None)
                    yield _once(repo, path, commit, "linked", round_, checkouts)

    def summary(self, rows: list[CheckoutRun]) -> list[str]:
        lines = ["| base | worktree add ×2 + remove (s, median) | first linked review (s) | repeat linked (s, median) "
                 "| repeat ratio | first ratio |", "|---|---|---|---|---|---|"]  # fmt: skip
        for repo, commit in dict.fromkeys((r.repo, r.commit) for r in rows):
            mine = [r for r in rows if (r.repo, r.commit) == (repo, commit)]

            def total(way: str, runs: list[CheckoutRun] = mine) -> float:
                return statistics.median(r.make_seconds + r.remove_seconds for r in runs if r.way == way)

            old, first, new = total("worktree"), total("first"), total("linked")
            lines.append(f"| {repo} {commit[:12]} | {old:.3f} | {first:.3f} | {new:.3f} | {old / new:.1f}× | "
                         f"{old / first:.2f}× |")  # fmt: skip
        methods = sorted({f"{r.way}: {r.method}" for r in rows})
        return [*lines, "", "How the trees were made (the workspace's own word): " + "; ".join(methods) + "."]


def _once(repo: str, path: str, commit: str, way: Way, round_: int, checkouts: PristineCheckouts | None) -> CheckoutRun:
    from cascade.patch import parse_patch
    from cascade.workspace import Workspace

    started = time.perf_counter()
    workspace = Workspace(path, commit, checkouts)
    workspace.prepare(parse_patch(""))
    made = time.perf_counter()
    workspace.close()
    removed = time.perf_counter()
    return CheckoutRun(repo=repo, commit=commit, way=way, round=round_, make_seconds=round(made - started, 4),
                       remove_seconds=round(removed - made, 4), method=workspace.checkout_method)  # fmt: skip
