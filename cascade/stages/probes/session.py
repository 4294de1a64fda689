"""One Stage-2 run session: the two pristine trees, the sandbox and environment, every pytest run and whose doing its
records are.

It runs and records; what the runs mean is `judging.py`'s job. Every run gets a fresh copy of a pristine tree with the
files placed for it (`sandbox/places.py`): the workspace's trees are never given to a run, so nothing a run left can
be seen by a later run, nor reached by the host through them (docs/architecture.md, "Run model").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from cascade.config import CascadeConfig
from cascade.execution.envs import Environment
from cascade.execution.runner import PytestRun, run_pytest
from cascade.safety import SideEffect
from cascade.sandbox.base import Sandbox
from cascade.stages.probes import attribution, judging, reuse
from cascade.stages.probes.hooks import HookFinding
from cascade.stages.probes.judging import Findings
from cascade.store import ResultStore


@dataclass
class Tally:
    asked: int = 0  # runs the store was asked for …
    taken: int = 0  # … and of those, runs it gave back


class Session:
    def __init__(
        self,
        config: CascadeConfig,
        sandbox: Sandbox,
        env: Environment,
        base: Path,
        patched: Path,
        changed: dict[Path, set[int]],
        tree_name: str = "project",
        store: ResultStore | None = None,
        identity: tuple[str, str, str] | None = None,
    ) -> None:
        """``store`` and ``identity`` (repository, base commit, `reuse.patch_identity` of the patch): where runs are
        kept and reused."""
        self.config, self.sandbox, self.env = config, sandbox, env
        self.base, self.patched = base, patched
        self.changed = changed  # patched-tree file → lines a probe must execute (changes.changed_lines)
        self.tree_name = tree_name
        self.pr_hooks: list[HookFinding] = []  # outcome-changing pytest hooks the PR added or changed (hooks.py)
        self.findings = Findings()
        self.store, self.identity = store, identity
        self.reuse = {"base": Tally(), "patched": Tally()}  # per tree: runs asked of the store, runs taken from it
        self._runs = 0

    def pytest(
        self,
        tree: Path,
        targets: list[str],
        coverage: bool = False,
        whole_files: bool = False,
        timeout: float | None = None,
        place: dict[str, str] | None = None,
    ) -> PytestRun:
        """One sandboxed run in a fresh copy of ``tree`` with ``place`` written into it. Whole nearby test files get
        the sandbox's wall time; a probe gets the probe timeout. Its records are judged by the caller, paired with the
        run of the same tests on the other tree (`attribute`)."""
        self._runs += 1
        cfg = self.config
        seconds = timeout or (cfg.sandbox.timeout_seconds if whole_files else cfg.probes.timeout_seconds)
        limits = {
            "memory_mb": cfg.sandbox.memory_mb,
            "cpu_seconds": cfg.sandbox.cpu_seconds,
            "file_size_mb": cfg.sandbox.file_size_mb,
            "pids": cfg.sandbox.pids,
            "disk_mb": cfg.sandbox.disk_mb,
            "inodes": cfg.sandbox.inodes,
            "output_cap_mb": cfg.sandbox.output_mb,
        }
        # The wall timeout is no part of the key: a wider regression chunk gets what is left of the review's budget,
        # different on every review. A stored run finished within its own; it stands for a run given at least as long.
        key = self._key(tree, targets, place or {}, coverage, limits)
        tally = self.reuse["base" if tree == self.base else "patched"]
        tally.asked += bool(self.store and key)
        stored = self.store.get(key, reuse.StoredRun) if self.store and key else None
        if stored is not None and stored.value is not None and stored.value.run.result.seconds <= seconds:
            tally.taken += 1
            run = stored.value.restored(tree)
        else:
            run = run_pytest(
                self.sandbox, self.env, tree, targets, tag=f"{'base' if tree == self.base else 'patched'}-{self._runs}",
                timeout_seconds=seconds, limits=limits, place=place, tree_name=self.tree_name,
                coverage_include=[str(p.relative_to(self.patched)) for p in self.changed] if coverage else None,
            )  # fmt: skip
            fresh = reuse.storable(run) if self.store and key else None
            if self.store and key and fresh:
                self.store.put(key, fresh)
        self.findings.note_run(run)
        return run

    def _key(
        self, tree: Path, targets: list[str], place: dict[str, str], coverage: bool, limits: Mapping[str, float]
    ) -> reuse.RunKey | None:
        """The store key of a run: a base-tree run is named by its base, a patched-tree run by its base and the
        patch's text too (the same patch reviewed again, never another one)."""
        if self.identity is None:
            return None
        repository, base_commit, patch = self.identity
        image = getattr(self.sandbox, "image", "")  # the docker backend's image is part of what ran
        sandbox = f"{self.sandbox.isolation}:{image}" if image else self.sandbox.isolation
        return reuse.run_key(repository, base_commit, "" if tree == self.base else patch, self.env, sandbox, limits,
                             self.tree_name, targets, place, coverage)  # fmt: skip

    def reuse_line(self) -> str | None:
        """The hit rate, misses included (a first review says it computed every run), or None without a store."""
        base, patched = self.reuse["base"], self.reuse["patched"]
        if not (base.asked or patched.asked):
            return None
        return (f"{base.taken} of {base.asked} base-tree and {patched.taken} of {patched.asked} patched-tree test "
                "run(s) from the result store")  # fmt: skip

    def attribute(
        self, base: PytestRun | None, patched: PytestRun | None, touched: attribution.Touched, judge_base: bool = True
    ) -> None:
        """Record the side effects of a base run and the patched run of the same tests: the patch's count, what an
        untouched test also did on base is kept as allowed context."""
        counted, allowed = attribution.split(base, patched, touched, judge_base)
        self.note_side_effects([*counted, *allowed])

    def note_side_effects(self, effects: list[SideEffect]) -> None:
        seen = set(self.findings.side_effects)
        for effect in effects:
            if effect not in seen:
                seen.add(effect)
                self.findings.side_effects.append(effect)

    def info(self, summary: str, *runs: PytestRun) -> None:
        self.findings.add(judging.info(summary, *runs))
