"""Stage-2 test runs kept in the result store (docs/architecture.md, Reuse; `cascade/store.py`).

A sandboxed run of tests is fully determined by: the tree (repository, base commit and, on the patched tree, the
patch's text), the files placed into the run's copy, the targets, the test environment, the sandbox and its limits,
whether coverage was measured (of the lines the patch changed: the patch again), and the gate's code that runs and
judges it (the sandbox package, the pytest runner). Each run gets fresh places (the run model), so nothing of an
earlier run can leak into a later one. Re-reviews of one base — the bench's several agents and arms per task, every
push to a pull request — reuse its base runs; a review of the very same patch again (a re-run of the Action, another
arm) reuses its patched runs too. A run comes back with its outcomes, its side-effect records (each tagged with its
test, so attribution works on a reused run as on a fresh one) and its coverage data. Only runs that gave test results
are stored: a timeout, a crash or a sandbox that never started the command is never replayed.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from cascade.execution.envs import Environment
from cascade.execution.runner import COVERAGE, PytestRun
from cascade.store import StoreKey

_PRODUCER_ROOTS = ("sandbox", "execution/runner.py", "execution/outcomes.py", "execution/channel_order.py")


class RunKey(StoreKey):
    kind: Literal["stage2-run"] = "stage2-run"
    repository: str
    base_commit: str
    patch: str  # "" on the base tree; on the patched tree the sha256 of the patch's text
    environment: str
    sandbox: str
    limits: dict[str, float]
    tree_name: str
    targets: list[str]
    placed: dict[str, str]  # path -> sha256 of the text placed there
    coverage: bool
    producer: str


class StoredRun(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run: PytestRun
    coverage: str | None = None  # base64 of the run's coverage data (a field the run itself never serialises)

    @classmethod
    def of(cls, run: PytestRun) -> StoredRun:
        """The run with its coverage data file moved from the read-back files (bytes, not text) to ``coverage``."""
        data = run.coverage
        texts = [r for r in run.result.results if r.name != COVERAGE]
        kept = run.model_copy(update={"result": run.result.model_copy(update={"results": texts})})
        return cls(run=kept, coverage=base64.b64encode(data).decode("ascii") if data is not None else None)

    def restored(self, tree: Path) -> PytestRun:
        """The stored run as a run on ``tree`` (this review's copy of the same pristine tree)."""
        data = base64.b64decode(self.coverage, validate=True) if self.coverage is not None else None
        return self.run.model_copy(update={"tree": str(tree), "coverage": data})


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@lru_cache(maxsize=1)
def producer_digest() -> str:
    """The gate's code that runs a test and judges what it did: a change to any of it is a new key."""
    package = Path(__file__).resolve().parents[2]
    files: list[Path] = []
    for root in _PRODUCER_ROOTS:
        path = package / root
        files += sorted(p for p in path.rglob("*.py")) if path.is_dir() else [path]
    return _digest(b"".join(_digest(p.read_bytes()).encode() for p in files))


def environment_identity(env: Environment) -> str:
    return "|".join([env.python, env.python_version, env.venv_dir or "", env.description])


def patch_identity(patch_text: str) -> str:
    """What names the patched tree besides its base: the same text applied to the same commit gives the same tree."""
    return _digest(patch_text.encode("utf-8", "surrogatepass"))


def run_key(
    repository: str,
    base_commit: str,
    patch: str,
    env: Environment,
    sandbox: str,
    limits: Mapping[str, float],
    tree_name: str,
    targets: list[str],
    place: dict[str, str],
    coverage: bool,
) -> RunKey:
    return RunKey(
        repository=repository,
        base_commit=base_commit,
        patch=patch,
        environment=environment_identity(env),
        sandbox=sandbox,
        limits=dict(limits),
        tree_name=tree_name,
        targets=list(targets),
        placed={path: _digest(text.encode("utf-8", "surrogatepass")) for path, text in sorted(place.items())},
        coverage=coverage,
        producer=producer_digest(),
    )


def storable(run: PytestRun) -> StoredRun | None:
    """The run as stored, or None when it gave no test result (never replay a failure of the run itself)."""
    if run.run_error or not run.tests:
        return None
    if any(e.kind == "other" and "never started" in e.detail for e in run.result.side_effects):
        return None
    return StoredRun.of(run)
