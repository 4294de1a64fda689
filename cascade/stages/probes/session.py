"""One Stage-2 run session: the two trees, the sandbox and environment, every pytest run and what it touched.

It runs and records; what the runs mean is `judging.py`'s job. Files are placed in a tree only for the duration
of a run and restored afterwards, so the trees stay what the workspace made them.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from cascade.config import CascadeConfig
from cascade.execution.envs import Environment
from cascade.execution.runner import WORK_DIR, PytestRun, run_pytest
from cascade.safety import SideEffect
from cascade.sandbox.base import Sandbox
from cascade.stages.probes import judging
from cascade.stages.probes.judging import Findings


class Session:
    def __init__(
        self,
        config: CascadeConfig,
        sandbox: Sandbox,
        env: Environment,
        base: Path,
        patched: Path,
        changed: dict[Path, set[int]],
    ) -> None:
        self.config, self.sandbox, self.env = config, sandbox, env
        self.base, self.patched = base, patched
        self.changed = changed  # patched-tree file → lines a probe must execute (changes.changed_lines)
        self.findings = Findings()
        self._runs = 0

    def pytest(
        self,
        tree: Path,
        targets: list[str],
        coverage: bool = False,
        whole_files: bool = False,
        timeout: float | None = None,
        count_effects: bool = True,
    ) -> PytestRun:
        """One sandboxed run. Whole nearby test files get the sandbox's wall time; a probe gets the probe timeout.
        Its side effects are findings unless ``count_effects`` is False (the caller attributes them itself)."""
        self._runs += 1
        side = "base" if tree == self.base else "patched"
        cfg = self.config
        run = run_pytest(
            self.sandbox,
            self.env,
            tree,
            targets,
            tag=f"{side}-{self._runs}",
            timeout_seconds=timeout or (cfg.sandbox.timeout_seconds if whole_files else cfg.probes.timeout_seconds),
            limits={
                "memory_mb": cfg.sandbox.memory_mb,
                "cpu_seconds": cfg.sandbox.cpu_seconds,
                "file_size_mb": cfg.sandbox.file_size_mb,
                "pids": cfg.sandbox.pids,
            },
            coverage_include=[str(p) for p in self.changed] if coverage else None,
        )
        if count_effects:
            self.note_side_effects(run.result.side_effects, tree)
        return run

    def note_side_effects(self, effects: list[SideEffect], tree: Path) -> None:
        """Every record, allowed ones too: the oracle already judged them against the allow-list (the worktree's
        own files are no records; its git directory and leaks into it are)."""
        seen = set(self.findings.side_effects)
        for effect in effects:
            if effect not in seen:
                seen.add(effect)
                self.findings.side_effects.append(effect)

    def info(self, summary: str, *runs: PytestRun) -> None:
        self.findings.add(judging.info(summary, *runs))

    def cleanup(self) -> None:
        for tree in (self.base, self.patched):
            shutil.rmtree(tree / WORK_DIR, ignore_errors=True)


@contextmanager
def placed(tree: Path, rel: str, content: str) -> Iterator[None]:
    """Write ``content`` at ``tree/rel`` for the duration, then restore what was there (or remove it)."""
    path = tree / rel
    before = path.read_bytes() if path.is_file() else None
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content, encoding="utf-8")
    try:
        yield
    finally:
        if before is None:
            path.unlink(missing_ok=True)
        else:
            path.write_bytes(before)


@contextmanager
def placed_many(tree: Path, files: dict[str, str]) -> Iterator[None]:
    if not files:
        yield
        return
    rel, content = next(iter(files.items()))
    rest = {k: v for k, v in files.items() if k != rel}
    with placed(tree, rel, content), placed_many(tree, rest):
        yield
