"""The benchmark's currency: one case to replay, one job for a worker, one JSONL row per (instance, model, arm)."""

from __future__ import annotations

from enum import Enum

from pydantic import BaseModel, ConfigDict, Field

from cascade.config import CascadeConfig
from cascade.models import Decision, OfficialTests, Outcome

ROW_SCHEMA_VERSION = "1.0"
DEFAULT_SEED = 20240604  # bootstrap and permutation seed of every metric (cascade/bench/metrics.py)
DEFAULT_RESAMPLES = 2000


class LabelClass(str, Enum):
    """Execution label of a prediction: the harness resolved it, did not, or the patch changes nothing."""

    ACCEPTABLE = "acceptable"
    DEFECT = "defect"
    EMPTY = "empty"

    @property
    def is_defect(self) -> bool:
        """An empty patch resolves nothing, so for catch/miss it counts as a defect (its own class in breakdowns)."""
        return self is not LabelClass.ACCEPTABLE


class TraceStatus(str, Enum):
    OK = "ok"
    BAD_INPUT = "bad_input"  # the patch cannot be reviewed as given (does not apply, malformed): no decision
    TIMEOUT = "timeout"
    INCOMPLETE_REPO = "incomplete_repo"  # the mirror lacks objects of the base commit; no-checkout stages only
    ERROR = "error"  # the trace crashed; the run went on


class ArmBudget(BaseModel):
    """What an arm may spend per trace (caps, not measurements); 0 LLM calls means a purely mechanical arm."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    llm_calls: int = 0
    tokens: int = 0
    dollars: float = 0.0
    note: str = ""


class BenchCase(BaseModel):
    """One prediction to replay, joined with its task row and label."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    instance_id: str
    model: str
    repo: str = Field(description="owner/name as in the task row")
    base_commit: str
    patch_text: str
    issue_text: str | None = None
    label: LabelClass
    trace_path: str | None = Field(default=None, description="Trajectory file of this prediction, when one was given")
    official_tests: OfficialTests | None = Field(
        default=None, description="The task row's test_patch and test lists (read only by the official-tests arm)"
    )
    version: str | None = Field(default=None, description="The task's version (selects its test environment)")


class TraceJob(BaseModel):
    """Everything a worker process needs for one trace (the arm object travels beside it)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    case: BenchCase
    arm: str
    repo_path: str | None = Field(description="Local git repository, or None when unavailable")
    repo_note: str = Field(default="", description="Why the repository is unavailable, or where it came from")
    config: CascadeConfig = Field(default_factory=CascadeConfig)
    timeout_seconds: float = Field(default=600, gt=0)
    reports_dir: str | None = Field(default=None, description="Where to write the trace's full verdict (JSON)")


class StageRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

    stage: str
    outcome: Outcome
    seconds: float = 0.0
    llm_calls: int = 0
    tokens: int = 0


class TraceCost(BaseModel):
    model_config = ConfigDict(extra="forbid")

    seconds: float = Field(default=0.0, description="Wall time of the whole trace, checkout included")
    llm_calls: int = 0
    tokens: int = 0


class TraceRow(BaseModel):
    """One line of the results JSONL; metrics are recomputed from these rows alone."""

    model_config = ConfigDict(extra="forbid")

    schema_version: str = ROW_SCHEMA_VERSION
    instance_id: str
    model: str
    arm: str
    arm_stages: list[str] = Field(default_factory=list, description="The arm's stage order, cheapest first")
    arm_budget: ArmBudget = Field(default_factory=ArmBudget)
    repo: str
    label: LabelClass
    status: TraceStatus = TraceStatus.OK
    decision: Decision = Field(description="uncertain (an abstention) whenever status is not ok")
    deciding_stage: str | None = None
    evidence: str = Field(default="", description="Short summary: each stage's outcome and the deciding reason")
    stages: list[StageRecord] = Field(default_factory=list)
    cost: TraceCost = Field(default_factory=TraceCost)
    repo_available: bool
    repo_note: str = ""
    trace_loaded: bool = False
    error: str | None = None

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.instance_id, self.model, self.arm)

    def timeless(self) -> TraceRow:
        """The row with its wall times zeroed: two runs of the same trace must agree on everything else."""
        return self.model_copy(
            update={
                "cost": self.cost.model_copy(update={"seconds": 0.0}),
                "stages": [s.model_copy(update={"seconds": 0.0}) for s in self.stages],
            }
        )
