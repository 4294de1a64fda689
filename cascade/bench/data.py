"""Read SWE-bench inputs exactly as published and join them into labelled cases.

- task rows: JSONL in the Hugging Face schema (``instance_id, repo, base_commit, problem_statement, patch, …``);
- predictions: JSONL (or a JSON list / mapping) of ``instance_id, model_name_or_path, model_patch``;
- harness results: JSON with ``resolved`` (or ``resolved_ids``, the newer harness report) — a prediction whose
  instance is not resolved is a defect; no results file means every prediction is acceptable (e.g. the
  officially-resolved submissions, or the gold patches replayed as a prediction set of their own);
- an empty or whitespace-only patch is the ``empty`` class whatever the results say;
- trajectories: a directory of ``<instance_id>.<ext>`` files in any format `cascade/traces/` reads (SWE-agent
  ``.traj``, moatless ``.json``, …), read in the worker by ``load_trace``.
"""

from __future__ import annotations

import glob
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cascade.bench.rows import BenchCase, LabelClass
from cascade.errors import BadInput, read_input_text
from cascade.models import OfficialTests

GOLD_MODEL = "gold"
M = TypeVar("M", bound=BaseModel)


class TaskRow(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    instance_id: str
    repo: str
    base_commit: str
    problem_statement: str = ""
    patch: str = ""
    version: str | None = None
    test_patch: str = ""
    FAIL_TO_PASS: str | list[str] = Field(default="[]", description="JSON-encoded list, as published (or a list).")
    PASS_TO_PASS: str | list[str] = Field(default="[]", description="JSON-encoded list, as published (or a list).")

    def official_tests(self) -> OfficialTests | None:
        """The row's test fields, when it has them (SWE-bench Lite rows do; Verified rows here do not)."""
        fail_to_pass = _test_list(self.FAIL_TO_PASS, self.instance_id, "FAIL_TO_PASS")
        if not self.test_patch.strip() or not fail_to_pass:
            return None
        return OfficialTests(
            repo=self.repo,
            version=self.version,
            test_patch=self.test_patch,
            fail_to_pass=fail_to_pass,
            pass_to_pass=_test_list(self.PASS_TO_PASS, self.instance_id, "PASS_TO_PASS"),
        )


def _test_list(value: str | list[str], instance_id: str, field: str) -> list[str]:
    if isinstance(value, list):
        return value
    try:
        parsed: Any = json.loads(value or "[]")
    except json.JSONDecodeError:
        raise BadInput(f"task {instance_id}: {field} is not a JSON list") from None
    if not isinstance(parsed, list) or not all(isinstance(t, str) for t in parsed):
        raise BadInput(f"task {instance_id}: {field} is not a JSON list of test names")
    return parsed


class Prediction(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    instance_id: str
    model_name_or_path: str
    model_patch: str | None = None


def _json_records(path: Path, what: str) -> list[Any]:
    """Records of a JSONL file, or of a JSON list, or the values of a JSON mapping keyed by instance."""
    text = read_input_text(path, what)
    try:
        whole: Any = json.loads(text)
    except json.JSONDecodeError:
        whole = None
    if isinstance(whole, list):
        return whole
    if isinstance(whole, dict):
        values = list(whole.values())
        return values if all(isinstance(v, dict) for v in values) else [whole]
    records: list[Any] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            raise BadInput(f"{path}:{number}: not valid JSON") from None
    return records


def _validated(model: type[M], records: Iterable[Any], path: Path) -> list[M]:
    out: list[M] = []
    for number, record in enumerate(records, start=1):
        try:
            out.append(model.model_validate(record))
        except ValidationError as exc:
            field = ".".join(str(p) for p in exc.errors()[0]["loc"]) or "record"
            raise BadInput(f"{path}: record {number}: bad or missing '{field}'") from None
    return out


def load_tasks(path: str | Path) -> dict[str, TaskRow]:
    rows = _validated(TaskRow, _json_records(Path(path), "tasks"), Path(path))
    return {row.instance_id: row for row in rows}


def load_predictions(path: str | Path) -> list[Prediction]:
    return _validated(Prediction, _json_records(Path(path), "predictions"), Path(path))


def load_resolved(path: str | Path) -> set[str]:
    """Resolved instance ids of a harness results JSON."""
    text = read_input_text(path, "results")
    try:
        data: Any = json.loads(text)
    except json.JSONDecodeError:
        raise BadInput(f"results file is not JSON: {path}") from None
    resolved = data.get("resolved", data.get("resolved_ids")) if isinstance(data, dict) else None
    if not isinstance(resolved, list) or not all(isinstance(i, str) for i in resolved):
        raise BadInput(f"{path}: expected a JSON object with a 'resolved' list of instance ids")
    return set(resolved)


def gold_predictions(tasks: dict[str, TaskRow]) -> list[Prediction]:
    """The task rows' reference patches as a prediction set of their own (all acceptable)."""
    return [
        Prediction(instance_id=t.instance_id, model_name_or_path=GOLD_MODEL, model_patch=t.patch)
        for t in tasks.values()
    ]


def label_of(patch: str, instance_id: str, resolved: set[str] | None) -> LabelClass:
    if not patch.strip():
        return LabelClass.EMPTY
    if resolved is None or instance_id in resolved:
        return LabelClass.ACCEPTABLE
    return LabelClass.DEFECT


class CaseSet(BaseModel):
    """The joined cases, and the predictions that had no task row (reported, never silently dropped)."""

    model_config = ConfigDict(frozen=True)

    cases: list[BenchCase]
    without_task: list[str]


def build_cases(
    tasks: dict[str, TaskRow],
    predictions: list[Prediction],
    resolved: set[str] | None,
    trajs_dir: str | Path | None = None,
) -> CaseSet:
    trajs = Path(trajs_dir) if trajs_dir else None
    if trajs is not None and not trajs.is_dir():
        raise BadInput(f"trajectory directory not found: {trajs}")
    cases: list[BenchCase] = []
    without_task: list[str] = []
    for pred in predictions:
        task = tasks.get(pred.instance_id)
        if task is None:
            without_task.append(pred.instance_id)
            continue
        patch = pred.model_patch or ""
        traj = trace_file(trajs, pred.instance_id) if trajs else None
        cases.append(
            BenchCase(
                instance_id=pred.instance_id,
                model=pred.model_name_or_path,
                repo=task.repo,
                base_commit=task.base_commit,
                patch_text=patch,
                issue_text=task.problem_statement or None,
                version=task.version,
                label=label_of(patch, pred.instance_id, resolved),
                trace_path=str(traj) if traj is not None else None,
                official_tests=task.official_tests(),
            )
        )
    return CaseSet(cases=cases, without_task=without_task)


def trace_file(directory: Path, instance_id: str) -> Path | None:
    """The trajectory of one instance: ``<instance_id>.<any extension>`` (``.traj``, ``.json``, ``.jsonl``); its
    format is read from its content."""
    names = sorted(p for p in directory.glob(f"{glob.escape(instance_id)}.*") if p.is_file())
    return names[0] if names else None


DATA_ENV = "CASCADE_SWEBENCH_DIR"  # the SWE-bench data directory (README, "Benchmark against SWE-bench labels")
DEV_AGENTS = {  # agent → its folder in the dev data: all_preds.jsonl, results.json, trajs/
    "coder": "coder-lite",
    "moatless-gpt4o": "moatless-gpt4o-lite",
    "moatless-claude35": "moatless-claude35-lite",
}


class DevData:
    """The SWE-bench dev data as published (its README): the one place that knows its file names. Everything outside
    `cascade/bench` reads it through here (tests/test_architecture.py checks that)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def tasks_file(self, split: str = "lite") -> Path:
        return self.root / f"{split}.tasks.jsonl"

    def has(self, split: str = "lite") -> bool:
        return self.tasks_file(split).is_file()

    def tasks(self, split: str = "lite") -> dict[str, TaskRow]:
        return load_tasks(self.tasks_file(split))

    def predictions_file(self, agent: str) -> Path:
        return self.root / DEV_AGENTS[agent] / "all_preds.jsonl"

    def results_file(self, agent: str) -> Path:
        return self.root / DEV_AGENTS[agent] / "results.json"

    def agent_trajs(self, agent: str) -> Path:
        return self.root / DEV_AGENTS[agent] / "trajs"

    def submissions_file(self, split: str = "lite") -> Path:
        return self.root / "resolved-submissions" / f"{split}.preds.jsonl"

    def agent_predictions(self, agent: str) -> list[Prediction]:
        return load_predictions(self.predictions_file(agent))

    def agent_resolved(self, agent: str) -> set[str]:
        return load_resolved(self.results_file(agent))

    def run_arguments(self, agent: str, split: str = "lite") -> list[str]:
        """The `cascade bench run` arguments that replay an agent's prediction set with its labels and traces."""
        return ["--tasks", str(self.tasks_file(split)), "--predictions", str(self.predictions_file(agent)),
                "--results", str(self.results_file(agent)), "--trajs", str(self.agent_trajs(agent))]  # fmt: skip

    def resolved_submissions(self, split: str = "lite") -> list[Prediction]:
        """Patches of other agents the official harness marked resolved (all acceptable)."""
        return load_predictions(self.submissions_file(split))


def stratified(cases: list[BenchCase], limit: int) -> list[BenchCase]:
    """At most ``limit`` cases, every label class present while the limit allows (one each, largest classes first)
    and the remaining slots shared in proportion to the classes' sizes (highest averages); the first cases of each
    class, in their original order. A small ``--limit`` then still measures both catch and over-rejection."""
    if limit >= len(cases):
        return list(cases)
    classes: dict[LabelClass, list[int]] = {}
    for index, case in enumerate(cases):
        classes.setdefault(case.label, []).append(index)
    quota = dict.fromkeys(classes, 0)
    for label in sorted(classes, key=lambda k: -len(classes[k]))[:limit]:
        quota[label] = 1
    for _ in range(limit - sum(quota.values())):
        open_classes = [k for k in classes if quota[k] < len(classes[k])]
        quota[max(open_classes, key=lambda k: len(classes[k]) / (quota[k] + 1))] += 1
    return [cases[i] for i in sorted(i for label, found in classes.items() for i in found[: quota[label]])]
