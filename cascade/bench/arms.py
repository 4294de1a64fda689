"""Benchmark arms: a named way of reviewing a patch — its stage list for a config and the budget it may spend.

Adding an arm is one class and one ``register_arm(...)`` line::

    class PatchOnlyReviewerArm:
        name = "patch-only-reviewer"
        description = "Stage 3 reviewer on the patch and issue alone"

        def stages(self, config: CascadeConfig) -> list[Stage]:
            return [make_stage("no_change"), make_stage("reviewer", evidence="none")]

        def budget(self, config: CascadeConfig) -> ArmBudget:
            return ArmBudget(llm_calls=config.reviewer.votes, tokens=config.llm.max_tokens_total)

    register_arm(PatchOnlyReviewerArm())

Arm objects are pickled into the worker processes, so an arm class must live at a module's top level.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from cascade.bench.official_tests import OfficialTestsStage
from cascade.bench.rows import ArmBudget, BenchCase
from cascade.config import CascadeConfig
from cascade.errors import BadInput
from cascade.stages import Stage, default_stages, make_stage, make_stages


@runtime_checkable
class Arm(Protocol):
    @property
    def name(self) -> str:
        """Stable identifier written into every result row (e.g. ``rules-only``)."""
        ...

    @property
    def description(self) -> str: ...

    def stages(self, config: CascadeConfig) -> list[Stage]:
        """The stages this arm runs, cheapest first."""
        ...

    def budget(self, config: CascadeConfig) -> ArmBudget:
        """The per-trace caps this arm runs under, reported beside the measured cost."""
        ...


class RulesOnlyArm:
    """Stage 0 (no code change, patch hygiene) + Stage 1 (patch-caused static errors): mechanical, no model."""

    name = "rules-only"
    description = "Stage 0 no-change + patch hygiene + Stage 1 patch-caused static errors; no LLM"

    def stages(self, config: CascadeConfig) -> list[Stage]:
        return make_stages("no_change", "hygiene", "static")

    def budget(self, config: CascadeConfig) -> ArmBudget:
        return ArmBudget(note="mechanical: no LLM calls")


@runtime_checkable
class TailoredArm(Arm, Protocol):
    """An arm whose stages depend on the case (the official-tests arm grades with each case's own tests)."""

    def stages_for_case(self, config: CascadeConfig, case: BenchCase) -> list[Stage]: ...


ARMS: dict[str, Arm] = {}


def register_arm(arm: Arm) -> Arm:
    """Make an arm selectable with ``--arm NAME``; a second arm with the same name replaces the first."""
    ARMS[arm.name] = arm
    return arm


def get_arm(name: str) -> Arm:
    try:
        return ARMS[name]
    except KeyError:
        raise BadInput(f"unknown arm {name!r}; known arms: {', '.join(sorted(ARMS))}") from None


register_arm(RulesOnlyArm())


# -- LLM arms. Each caps its LLM spend with the config's llm.max_* budget and says so. -------------------


def _llm_budget(config: CascadeConfig, calls: int, note: str) -> ArmBudget:
    llm = config.llm
    return ArmBudget(
        llm_calls=min(llm.max_calls, calls),
        tokens=llm.max_tokens_total,
        dollars=llm.max_dollars,
        note=f"{note}; model {llm.model or '(none: the reviewer is skipped)'}",
    )


class PatchOnlyReviewerArm:
    """The LLM-judge baseline: k votes on the issue and the patch alone; no evidence, may reject on its own."""

    name = "patch-only-reviewer"
    description = "Stage 3 reviewer on issue + patch only (no evidence packet), reviewer_may_reject=any"

    def stages(self, config: CascadeConfig) -> list[Stage]:
        return [make_stage("injection"), make_stage("reviewer", evidence="none", may_reject="any")]

    def budget(self, config: CascadeConfig) -> ArmBudget:
        votes = config.reviewer.votes
        return _llm_budget(config, votes, f"{votes} votes at T={config.reviewer.temperature}, patch + issue only")


class StructuredReviewerArm:
    """Stages 0-1, then the reviewer on the structured, grounded evidence packet (no execution)."""

    name = "structured-reviewer"
    description = "Stage 0 + Stage 1, then the Stage 3 reviewer on the grounded evidence packet; no execution"

    def stages(self, config: CascadeConfig) -> list[Stage]:
        return make_stages("no_change", "hygiene", "injection", "static", "reviewer")

    def budget(self, config: CascadeConfig) -> ArmBudget:
        votes = config.reviewer.votes
        return _llm_budget(config, votes, f"{votes} votes at T={config.reviewer.temperature}, evidence of stages 0-1")


class FullCascadeArm:
    """Every stage the config enables: no-change, static, probes (LLM generator included) and the reviewer."""

    name = "full-cascade"
    description = "The full cascade as `cascade review` runs it (stages 0-3 per the config)"

    def stages(self, config: CascadeConfig) -> list[Stage]:
        return default_stages(config)

    def budget(self, config: CascadeConfig) -> ArmBudget:
        rounds = min(3, config.probes.max_attempts) if "generated" in config.probes.sources else 0
        calls = config.reviewer.votes + rounds
        note = f"{rounds} probe-generator round(s) + {config.reviewer.votes} votes"
        return _llm_budget(config, calls, note)


register_arm(PatchOnlyReviewerArm())
register_arm(StructuredReviewerArm())
register_arm(FullCascadeArm())


class OfficialTestsArm:
    """The upper-bound diagnostic: each task's own FAIL_TO_PASS and PASS_TO_PASS tests, graded as the SWE-bench
    harness grades (resolved → accept). Its agreement with the official labels measures the environments."""

    name = "official-tests"
    description = "The task row's test_patch, FAIL_TO_PASS and PASS_TO_PASS run in the sandbox; resolved = accept"

    def stages(self, config: CascadeConfig) -> list[Stage]:
        return [OfficialTestsStage()]

    def stages_for_case(self, config: CascadeConfig, case: BenchCase) -> list[Stage]:
        """The grader of this case's own tests (a task row's test_patch and test lists)."""
        return [OfficialTestsStage(tests=case.official_tests)]

    def budget(self, config: CascadeConfig) -> ArmBudget:
        return ArmBudget(note=f"mechanical: one sandboxed pytest run, {config.sandbox.timeout_seconds:g}s cap")


register_arm(OfficialTestsArm())
