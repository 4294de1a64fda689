"""Metrics as the paper defines them, with seeded 95% bootstrap CIs over traces.

catch = P(reject | defect), miss = P(accept | defect), over-rejection = P(reject | acceptable),
coverage = P(decided), risk = P(wrong | decided) where wrong = reject of an acceptable or accept of a defect.
Abstentions (uncertain, and every row that is not ``ok``) stay in the class denominators. Empty patches count as
defects in the headline numbers and have their own row in the per-class breakdown.
"""

from __future__ import annotations

import zlib
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from statistics import median

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, Field

from cascade.bench.rows import DEFAULT_RESAMPLES, DEFAULT_SEED, ArmBudget, TraceRow
from cascade.models import Decision

METRICS_SCHEMA_VERSION = "1.1"  # 1.1: agreement
CONFIDENCE = 0.95
METRIC_NAMES = ("catch", "miss", "over_rejection", "coverage", "risk", "agreement")

Bools = NDArray[np.bool_]


class Estimate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    value: float | None = Field(description="None when the denominator is 0")
    low: float | None = None
    high: float | None = None
    numerator: int
    denominator: int


class MetricSet(BaseModel):
    model_config = ConfigDict(extra="forbid")

    traces: int
    defects: int
    acceptable: int
    decided: int
    accepted: int
    rejected: int
    abstained: int
    not_ok: int = Field(description="Rows that are bad input, timed out or crashed (counted as abstentions)")
    catch: Estimate
    miss: Estimate
    over_rejection: Estimate
    coverage: Estimate
    risk: Estimate
    agreement: Estimate = Field(description="P(right decision): reject a defect or accept an acceptable patch")


class StageMetrics(BaseModel):
    model_config = ConfigDict(extra="forbid")

    stage: str
    alone: MetricSet = Field(description="Only the decisions this stage made")
    cumulative: MetricSet = Field(description="The cascade stopped after this stage")


class Budget(BaseModel):
    model_config = ConfigDict(extra="forbid")

    traces: int
    seconds_total: float
    seconds_mean: float
    seconds_median: float
    seconds_p95: float
    llm_calls_total: int
    llm_calls_mean: float
    tokens_total: int
    tokens_mean: float
    stage_seconds_mean: dict[str, float]
    declared: ArmBudget | None = Field(description="The arm's per-trace caps as its rows record them")


class ArmMetrics(BaseModel):
    model_config = ConfigDict(extra="forbid")

    arm: str
    stages: list[str]
    overall: MetricSet
    by_label: dict[str, MetricSet]
    by_stage: list[StageMetrics]
    by_repo: dict[str, MetricSet]
    repo_availability: dict[str, str] = Field(description="Per repo: available, unavailable or partial")
    by_availability: dict[str, MetricSet]
    by_model: dict[str, MetricSet]
    statuses: dict[str, int]
    deciding_stages: dict[str, int]
    budget: Budget


class BenchMetrics(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: str = METRICS_SCHEMA_VERSION
    seed: int
    resamples: int
    confidence: float = CONFIDENCE
    rows: int
    arms: dict[str, ArmMetrics]


# --- point estimates and bootstrap -------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcomes:
    """Per-trace booleans; the last axis is the trace axis (a bootstrap stacks resamples in front)."""

    defect: Bools
    accept: Bools
    reject: Bools

    @classmethod
    def of(cls, rows: list[TraceRow], decided_by: Callable[[TraceRow], bool] | None = None) -> Outcomes:
        keep = [decided_by(r) if decided_by else True for r in rows]
        return cls(
            defect=np.array([r.label.is_defect for r in rows], dtype=bool),
            accept=np.array([k and r.decision == Decision.ACCEPT for r, k in zip(rows, keep, strict=True)], dtype=bool),
            reject=np.array([k and r.decision == Decision.REJECT for r, k in zip(rows, keep, strict=True)], dtype=bool),
        )

    def take(self, index: NDArray[np.int64]) -> Outcomes:
        return Outcomes(self.defect[index], self.accept[index], self.reject[index])

    def counts(self) -> dict[str, tuple[NDArray[np.int64], NDArray[np.int64]]]:
        """(numerator, denominator) of each metric along the trace axis."""
        defect, accept, reject = self.defect, self.accept, self.reject
        acceptable, decided = ~defect, accept | reject
        wrong = (reject & acceptable) | (accept & defect)
        n = np.full(defect.shape[:-1], defect.shape[-1], dtype=np.int64)
        return {
            "catch": ((reject & defect).sum(-1), defect.sum(-1)),
            "miss": ((accept & defect).sum(-1), defect.sum(-1)),
            "over_rejection": ((reject & acceptable).sum(-1), acceptable.sum(-1)),
            "coverage": (decided.sum(-1), n),
            "risk": (wrong.sum(-1), decided.sum(-1)),
            "agreement": (((reject & defect) | (accept & acceptable)).sum(-1), n),
        }


def _ratio(num: NDArray[np.int64], den: NDArray[np.int64]) -> NDArray[np.float64]:
    out = np.full(num.shape, np.nan)
    np.divide(num, den, out=out, where=den > 0)
    return out


def rounded(x: float) -> float:
    return round(float(x), 4)


def group_rng(seed: int, group: str) -> np.random.Generator:
    """One generator per group, so a group's CI does not depend on which other groups exist."""
    return np.random.default_rng([seed, zlib.crc32(group.encode("utf-8"))])


def estimates(outcomes: Outcomes, rng: np.random.Generator, resamples: int) -> dict[str, Estimate]:
    """Point estimate and percentile bootstrap CI (resampling traces with replacement) of each metric."""
    point = outcomes.counts()
    n = outcomes.defect.shape[-1]
    boot = outcomes.take(rng.integers(0, n, size=(resamples, n))).counts() if n and resamples else None
    tail = (1 - CONFIDENCE) / 2 * 100
    out: dict[str, Estimate] = {}
    for name in METRIC_NAMES:
        num, den = int(point[name][0]), int(point[name][1])
        est = Estimate(value=rounded(num / den) if den else None, numerator=num, denominator=den)
        if boot is not None and den:
            values = _ratio(*boot[name])
            values = values[~np.isnan(values)]
            if values.size:
                low, high = np.percentile(values, [tail, 100 - tail])
                est = est.model_copy(update={"low": rounded(low), "high": rounded(high)})
        out[name] = est
    return out


def metric_set(
    rows: list[TraceRow],
    seed: int,
    group: str,
    resamples: int,
    decided_by: Callable[[TraceRow], bool] | None = None,
) -> MetricSet:
    outcomes = Outcomes.of(rows, decided_by)
    accepted, rejected = int(outcomes.accept.sum()), int(outcomes.reject.sum())
    defects = int(outcomes.defect.sum())
    return MetricSet(
        traces=len(rows),
        defects=defects,
        acceptable=len(rows) - defects,
        decided=accepted + rejected,
        accepted=accepted,
        rejected=rejected,
        abstained=len(rows) - accepted - rejected,
        not_ok=sum(r.status.value != "ok" for r in rows),
        **estimates(outcomes, group_rng(seed, group), resamples),
    )


# --- grouping ----------------------------------------------------------------------------------------------


def sorted_rows(rows: Iterable[TraceRow]) -> list[TraceRow]:
    """Deduplicate by (instance, model, arm), last row wins, in a fixed order (bootstrap draws depend on it)."""
    unique = {r.key: r for r in rows}
    return [unique[k] for k in sorted(unique, key=lambda k: (k[2], k[1], k[0]))]


def _grouped(rows: list[TraceRow], key: Callable[[TraceRow], str]) -> dict[str, list[TraceRow]]:
    groups: dict[str, list[TraceRow]] = {}
    for r in rows:
        groups.setdefault(key(r), []).append(r)
    return dict(sorted(groups.items()))


def stage_order(rows: list[TraceRow]) -> list[str]:
    order: list[str] = []
    for r in rows:
        for name in r.arm_stages or [s.stage for s in r.stages]:
            if name not in order:
                order.append(name)
    return order


def _stage_metrics(
    rows: list[TraceRow], stages: list[str], seed: int, prefix: str, resamples: int
) -> list[StageMetrics]:
    out: list[StageMetrics] = []
    for i, stage in enumerate(stages):
        upto = set(stages[: i + 1])
        out.append(
            StageMetrics(
                stage=stage,
                alone=metric_set(
                    rows, seed, f"{prefix}/stage/{stage}", resamples, lambda r, s=stage: r.deciding_stage == s
                ),
                cumulative=metric_set(
                    rows, seed, f"{prefix}/upto/{stage}", resamples, lambda r, u=upto: r.deciding_stage in u
                ),
            )
        )
    return out


def _availability(rows: list[TraceRow]) -> str:
    flags = {r.repo_available for r in rows}
    return "partial" if len(flags) > 1 else ("available" if flags == {True} else "unavailable")


def _percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else 0.0


def budget_of(rows: list[TraceRow]) -> Budget:
    seconds = [r.cost.seconds for r in rows]
    stage_seconds: dict[str, list[float]] = {}
    for r in rows:
        for s in r.stages:
            stage_seconds.setdefault(s.stage, []).append(s.seconds)
    n = max(len(rows), 1)
    return Budget(
        traces=len(rows),
        seconds_total=rounded(sum(seconds)),
        seconds_mean=rounded(sum(seconds) / n),
        seconds_median=rounded(median(seconds)) if seconds else 0.0,
        seconds_p95=rounded(_percentile(seconds, 95)),
        llm_calls_total=sum(r.cost.llm_calls for r in rows),
        llm_calls_mean=rounded(sum(r.cost.llm_calls for r in rows) / n),
        tokens_total=sum(r.cost.tokens for r in rows),
        tokens_mean=rounded(sum(r.cost.tokens for r in rows) / n),
        stage_seconds_mean={k: rounded(sum(v) / len(v)) for k, v in stage_seconds.items()},
        declared=rows[0].arm_budget if rows else None,
    )


def arm_metrics(arm: str, rows: list[TraceRow], seed: int, resamples: int) -> ArmMetrics:
    stages = stage_order(rows)
    by_repo = _grouped(rows, lambda r: r.repo)
    availability = _grouped(rows, lambda r: "repo available" if r.repo_available else "repo unavailable")
    return ArmMetrics(
        arm=arm,
        stages=stages,
        overall=metric_set(rows, seed, f"{arm}/overall", resamples),
        by_label={
            k: metric_set(v, seed, f"{arm}/label/{k}", resamples)
            for k, v in _grouped(rows, lambda r: r.label.value).items()
        },
        by_stage=_stage_metrics(rows, stages, seed, arm, resamples),
        by_repo={k: metric_set(v, seed, f"{arm}/repo/{k}", resamples) for k, v in by_repo.items()},
        repo_availability={k: _availability(v) for k, v in by_repo.items()},
        by_availability={k: metric_set(v, seed, f"{arm}/avail/{k}", resamples) for k, v in availability.items()},
        by_model={
            k: metric_set(v, seed, f"{arm}/model/{k}", resamples) for k, v in _grouped(rows, lambda r: r.model).items()
        },
        statuses=dict(sorted(Counter(r.status.value for r in rows).items())),
        deciding_stages=dict(sorted(Counter(r.deciding_stage or "(none)" for r in rows).items())),
        budget=budget_of(rows),
    )


def compute_metrics(
    rows: Iterable[TraceRow], seed: int = DEFAULT_SEED, resamples: int = DEFAULT_RESAMPLES
) -> BenchMetrics:
    ordered = sorted_rows(rows)
    arms = _grouped(ordered, lambda r: r.arm)
    return BenchMetrics(
        seed=seed,
        resamples=resamples,
        rows=len(ordered),
        arms={arm: arm_metrics(arm, arm_rows, seed, resamples) for arm, arm_rows in arms.items()},
    )
