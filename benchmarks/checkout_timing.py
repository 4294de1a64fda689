"""A review's two trees: `git worktree add` ×2 and removal (before) against links from one pristine checkout (after).

For each repository's base commit, rounds alternate the two ways (interleaved, so machine load hits both alike):
``worktree`` makes and removes the trees as before pristine checkouts; ``linked`` makes them from the pristine
checkout (warm: built once before the rounds) and removes them. ``first`` is a linked review of a commit with no
pristine checkout yet (it builds one). Prints medians and the ratio worktree / linked, from one run.

    python3 benchmarks/checkout_timing.py /work/.mirror/sympy+sympy/repo 8dcb12a6cf50 [REPO COMMIT ...] --rounds 7
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from cascade.patch import parse_patch
from cascade.workspace import PristineCheckouts, Workspace

NO_PATCH = parse_patch("")


def _once(repo: str, commit: str, checkouts: PristineCheckouts | None) -> tuple[float, float, str]:
    """(seconds to make both trees, seconds to remove them, how they were made)."""
    started = time.perf_counter()
    workspace = Workspace(repo, commit, checkouts)
    workspace.prepare(NO_PATCH)
    made = time.perf_counter()
    workspace.close()
    return made - started, time.perf_counter() - made, workspace.checkout_method


def measure(repo: str, commit: str, rounds: int, root: Path) -> str:
    checkouts = PristineCheckouts(root / "checkouts", 1 << 40)
    first, first_rm, method = _once(repo, commit, checkouts)
    assert method == "linked", method
    times: dict[str, list[float]] = {"worktree": [], "linked": []}
    for _ in range(rounds):
        for way, use in (("worktree", None), ("linked", checkouts)):
            make, remove, _ = _once(repo, commit, use)
            times[way].append(make + remove)
    old, new = (statistics.median(times[w]) for w in ("worktree", "linked"))
    name = Path(repo).parent.name if Path(repo).name == "repo" else Path(repo).name
    return (
        f"| {name} {commit[:12]} | {old:.3f} | {first + first_rm:.3f} | {new:.3f} | {old / new:.1f}× | "
        f"{old / (first + first_rm):.2f}× |"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("pairs", nargs="+", help="REPO COMMIT pairs")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    print("| base | worktree add ×2 + remove (s, median) | first linked review (s) | repeat linked (s, median) "
          "| repeat ratio | first ratio |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    root = Path(tempfile.mkdtemp(prefix="cascade-checkout-timing-"))
    try:
        for repo, commit in zip(args.pairs[::2], args.pairs[1::2], strict=True):
            print(measure(repo, commit, args.rounds, root), flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
