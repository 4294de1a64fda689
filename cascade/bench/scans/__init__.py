"""Scans: measurements that run one stage's own functions on every patch, issue text or trajectory of the dev data,
without a review, or time the sandbox itself — `cascade bench scan NAME` (docs/architecture.md, The benchmark).
Each scan is one module here and one line in `registry()`; it yields typed rows (written to ``rows.jsonl``) and
renders its summary from those rows alone, so every number of ``summary.md`` recomputes from the JSONL
(``cascade bench scan NAME --from-rows``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel

from cascade.bench.data import DevData
from cascade.bench.repos import RepoResolver


@dataclass(frozen=True)
class ScanInputs:
    dev: DevData
    repos: RepoResolver
    scratch: Path  # a directory of this scan's own, removed after it
    jobs: int = 1  # worker processes a scan may use (`in_order`)
    limit: int = 0  # a long scan runs only its first N things when set (0: all)
    reps: int = 7  # a timing scan's rounds (after one warm-up round)


A = TypeVar("A")
B = TypeVar("B")


def in_order(work: Callable[[A], B], items: Iterable[A], jobs: int) -> Iterator[B]:
    """``work`` over ``items`` in ``jobs`` processes (``work`` a module-level function), results in the items' order;
    Ctrl-C or a signal to the driver stops the workers' items too (cascade/bench/pool.py)."""
    if jobs <= 1:
        yield from map(work, items)
        return
    from cascade.bench.pool import ordered

    yield from ordered(work, items, jobs)


R = TypeVar("R", bound=BaseModel)


class Scan(Protocol[R]):
    name: str
    title: str  # the summary's heading
    needs_data: bool  # it reads the dev data (`--data-dir`); the timing scans need only the sandboxes
    row: type[R]  # what a row is: ``--from-rows`` validates ``rows.jsonl`` against it

    def rows(self, inputs: ScanInputs) -> Iterator[R]:
        """One typed row per thing scanned (a patch, a text, a trace), in a stable order."""
        ...

    def summary(self, rows: list[R]) -> list[str]:
        """The summary's Markdown lines after its heading and command, computed from ``rows`` alone."""
        ...


def registry() -> dict[str, Scan[Any]]:
    """Every scan by name (imported here, not at start-up: `cascade --help` stays fast)."""
    from cascade.bench.scans.checkouts import CheckoutsScan
    from cascade.bench.scans.fidelity import FidelityFilesScan, FidelityScan
    from cascade.bench.scans.hygiene import HygieneScan
    from cascade.bench.scans.injection import InjectionScan
    from cascade.bench.scans.overhead import SandboxOverheadScan, StraceOverheadScan
    from cascade.bench.scans.ray_startup import RayStartupScan
    from cascade.bench.scans.static_soundness import StaticSoundnessScan
    from cascade.bench.scans.trace_formats import TraceFormatsScan
    from cascade.bench.scans.undefined_names import UndefinedNamesScan

    scans: list[Scan[Any]] = [InjectionScan(), HygieneScan(), TraceFormatsScan(), UndefinedNamesScan(),
                              StaticSoundnessScan(), SandboxOverheadScan(), StraceOverheadScan(),
                              CheckoutsScan(), RayStartupScan(), FidelityScan(), FidelityFilesScan()]  # fmt: skip
    return {scan.name: scan for scan in scans}
