"""Paired comparison of two arms on the traces both ran: McNemar's exact test on commonly-decided traces, a
sign-flip permutation test of the risk difference, and each side's metrics (`cascade bench compare`)."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from cascade.bench.metrics import Budget, MetricSet, budget_of, metric_set, rounded, sorted_rows
from cascade.bench.rows import DEFAULT_RESAMPLES, DEFAULT_SEED, TraceRow
from cascade.errors import BadInput
from cascade.models import Decision

EXACT_PERMUTATION_MAX = 16  # up to 2**16 sign patterns are enumerated; beyond, seeded Monte Carlo
PERMUTATION_RESAMPLES = 20000


def mcnemar_exact_p(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value from the discordant counts b and c (binomial, p = 1/2)."""
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(b, c) + 1)) / 2**n
    return min(1.0, 2 * tail)


def paired_permutation_p(diffs: list[float], seed: int = DEFAULT_SEED, resamples: int = PERMUTATION_RESAMPLES) -> float:
    """Two-sided sign-flip permutation test of mean(diffs) = 0 (paired; zeros carry no information).

    Exact over all 2**k sign patterns of the k non-zero differences when k is small, else seeded Monte Carlo
    with the observed pattern counted in (p = (1 + hits) / (1 + resamples)).
    """
    nonzero = np.array([d for d in diffs if d != 0], dtype=float)
    k = nonzero.size
    if k == 0:
        return 1.0
    observed = abs(nonzero.sum()) - 1e-9  # tolerance: float sums of equal magnitude must count as ties
    if k <= EXACT_PERMUTATION_MAX:
        patterns = ((np.arange(2**k)[:, None] >> np.arange(k)) & 1) * 2 - 1
        return float(np.mean(np.abs(patterns @ nonzero) >= observed))
    signs = np.random.default_rng(seed).choice(np.array([-1.0, 1.0]), size=(resamples, k))
    hits = int(np.sum(np.abs(signs @ nonzero) >= observed))
    return (1 + hits) / (1 + resamples)


class RowDifference(BaseModel):
    model_config = ConfigDict(extra="forbid")

    instance_id: str
    model: str
    fields: list[str] = Field(description="The row fields that differ, timings aside")


class RowIdentity(BaseModel):
    """Whether two runs of the same traces gave the same rows (every field but the wall times)."""

    model_config = ConfigDict(extra="forbid")

    identical: int
    different: list[RowDifference]
    only_a: int
    only_b: int


def row_identity(rows_a: list[TraceRow], rows_b: list[TraceRow]) -> RowIdentity:
    """Rows of A and B paired by (instance, model), compared with their wall times zeroed (the arm may differ)."""
    by_a = {(r.instance_id, r.model): r.timeless().model_dump(exclude={"arm"}) for r in rows_a}
    by_b = {(r.instance_id, r.model): r.timeless().model_dump(exclude={"arm"}) for r in rows_b}
    different = [
        RowDifference(instance_id=k[0], model=k[1], fields=sorted(f for f in by_a[k] if by_a[k][f] != by_b[k][f]))
        for k in sorted(by_a.keys() & by_b.keys())
        if by_a[k] != by_b[k]
    ]
    common = len(by_a.keys() & by_b.keys())
    return RowIdentity(
        identical=common - len(different),
        different=different,
        only_a=len(by_a.keys() - by_b.keys()),
        only_b=len(by_b.keys() - by_a.keys()),
    )


class Comparison(BaseModel):
    model_config = ConfigDict(extra="forbid")

    arm_a: str
    arm_b: str
    common_traces: int = Field(description="(instance, model) pairs present in both result sets")
    commonly_decided: int
    a_right_b_wrong: int = Field(description="McNemar discordant count b (on commonly-decided traces)")
    a_wrong_b_right: int = Field(description="McNemar discordant count c")
    both_right: int
    both_wrong: int
    risk_a: float | None
    risk_b: float | None
    risk_difference: float | None = Field(description="risk_a - risk_b on commonly-decided traces")
    permutation_p: float
    mcnemar_p: float
    coverage_a: float | None
    coverage_b: float | None
    coverage_difference: float | None = Field(description="coverage_a - coverage_b on the common traces")
    metrics_a: MetricSet
    metrics_b: MetricSet
    budget_a: Budget
    budget_b: Budget
    rows: RowIdentity


def _wrong(r: TraceRow) -> bool:
    return (r.decision == Decision.REJECT) != r.label.is_defect


def _decided(r: TraceRow) -> bool:
    return r.decision != Decision.UNCERTAIN


def only_arm(rows: list[TraceRow], arm: str | None, what: str, option: str) -> tuple[str, list[TraceRow]]:
    """The rows of one arm of a results file; the arm may be left out when the file holds only one."""
    arms = sorted({r.arm for r in rows})
    if arm is None:
        if len(arms) != 1:
            raise BadInput(f"{what} holds arms {', '.join(arms) or '(none)'}: choose one with {option}")
        arm = arms[0]
    chosen = [r for r in sorted_rows(rows) if r.arm == arm]
    if not chosen:
        raise BadInput(f"{what} has no rows of arm {arm!r} (it has: {', '.join(arms) or 'none'})")
    return arm, chosen


def compare(
    rows_a: list[TraceRow],
    rows_b: list[TraceRow],
    arm_a: str,
    arm_b: str,
    seed: int = DEFAULT_SEED,
    resamples: int = DEFAULT_RESAMPLES,
) -> Comparison:
    by_key_a = {(r.instance_id, r.model): r for r in rows_a}
    by_key_b = {(r.instance_id, r.model): r for r in rows_b}
    common = sorted(by_key_a.keys() & by_key_b.keys())
    pairs = [(by_key_a[k], by_key_b[k]) for k in common]
    decided = [(a, b) for a, b in pairs if _decided(a) and _decided(b)]
    cells = Counter((_wrong(a), _wrong(b)) for a, b in decided)
    # one group name for both sides: the same resampled trace indices, so the two CIs are paired
    ma = metric_set([a for a, _ in pairs], seed, "compare", resamples)
    mb = metric_set([b for _, b in pairs], seed, "compare", resamples)
    risk_a = sum(_wrong(a) for a, _ in decided) / len(decided) if decided else None
    risk_b = sum(_wrong(b) for _, b in decided) / len(decided) if decided else None
    cov_a = ma.coverage.numerator / len(pairs) if pairs else None
    cov_b = mb.coverage.numerator / len(pairs) if pairs else None
    return Comparison(
        arm_a=arm_a,
        arm_b=arm_b,
        common_traces=len(pairs),
        commonly_decided=len(decided),
        a_right_b_wrong=cells[(False, True)],
        a_wrong_b_right=cells[(True, False)],
        both_right=cells[(False, False)],
        both_wrong=cells[(True, True)],
        risk_a=rounded(risk_a) if risk_a is not None else None,
        risk_b=rounded(risk_b) if risk_b is not None else None,
        risk_difference=rounded(risk_a - risk_b) if risk_a is not None and risk_b is not None else None,
        permutation_p=rounded(paired_permutation_p([float(_wrong(a)) - float(_wrong(b)) for a, b in decided], seed)),
        mcnemar_p=rounded(mcnemar_exact_p(cells[(False, True)], cells[(True, False)])),
        coverage_a=rounded(cov_a) if cov_a is not None else None,
        coverage_b=rounded(cov_b) if cov_b is not None else None,
        coverage_difference=rounded(cov_a - cov_b) if cov_a is not None and cov_b is not None else None,
        metrics_a=ma,
        metrics_b=mb,
        budget_a=budget_of([a for a, _ in pairs]),
        budget_b=budget_of([b for _, b in pairs]),
        rows=row_identity(rows_a, rows_b),
    )
