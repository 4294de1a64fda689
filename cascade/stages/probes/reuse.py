"""Base-tree test runs kept in the result store (docs/architecture.md, Reuse; `cascade/store.py`).

A sandboxed run of tests on the base tree is fully determined by: the tree (repository and base commit), the files
placed into the run's copy, the targets, the test environment, the sandbox and its limits, and the gate's code that
runs and judges it (the sandbox package, the pytest runner). Each run gets fresh places (the run model), so nothing
of an earlier run can leak into a later one: re-reviews of one base — the bench's several agents per task, every push
to a pull request — reuse the base runs, with their outcomes and side-effect records (each tagged with its test, so
attribution works on a reused run as on a fresh one). Only runs that gave test results are stored: a timeout, a
crash or a sandbox that never started the command is never replayed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from cascade.execution.envs import Environment
from cascade.execution.runner import PytestRun
from cascade.store import StoreKey

_PRODUCER_ROOTS = ("sandbox", "execution/runner.py", "execution/outcomes.py", "execution/channel_order.py")


class BaseRunKey(StoreKey):
    kind: Literal["stage2-base-run"] = "stage2-base-run"
    repository: str
    base_commit: str
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


def base_run_key(
    repository: str,
    base_commit: str,
    env: Environment,
    sandbox: str,
    limits: Mapping[str, float],
    tree_name: str,
    targets: list[str],
    place: dict[str, str],
    coverage: bool,
) -> BaseRunKey:
    return BaseRunKey(
        repository=repository,
        base_commit=base_commit,
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
    if run.run_error or not run.tests or run.coverage is not None:
        return None
    if any(e.kind == "other" and "never started" in e.detail for e in run.result.side_effects):
        return None
    return StoredRun(run=run)
