"""Every non-empty patch of the dev data as one typed item: the gold rows of Lite and Verified, the three agents'
predictions (labelled by their harness results) and the officially resolved submissions of other agents (all
acceptable). The scans (`cascade bench scan`) and the static-soundness measurements read patches from here."""

from __future__ import annotations

import hashlib
from collections import Counter
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict

from cascade.bench.data import DEV_AGENTS, DevData
from cascade.bench.repos import RepoResolver

SOURCES = ("coder", "moatless-gpt4o", "moatless-claude35", "gold", "resolved-submission")


class PatchItem(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    instance: str
    source: str  # gold | resolved-submission | one of DEV_AGENTS
    model: str
    label: str  # acceptable | defect
    repo: str
    base_commit: str
    patch: str

    @property
    def key(self) -> str:
        return f"{self.source}:{self.model}:{self.instance}:{hashlib.sha256(self.patch.encode()).hexdigest()[:12]}"


class PatchRow(BaseModel):
    """What every row about one patch starts with (the scans' row models derive from it)."""

    model_config = ConfigDict(extra="forbid")

    key: str
    instance: str
    source: str
    model: str
    label: str
    repo: str

    @classmethod
    def of(cls: type[R], item: PatchItem, **fields: Any) -> R:
        """A row for ``item``; ``fields`` set the rest (or another ``key``)."""
        ident = {"key": item.key, "instance": item.instance, "source": item.source, "model": item.model,
                 "label": item.label, "repo": item.repo}  # fmt: skip
        return cls(**{**ident, **fields})


R = TypeVar("R", bound=PatchRow)


def patch_items(
    dev: DevData, resolver: RepoResolver | None = None, unfetchable: Counter[str] | None = None
) -> list[PatchItem]:
    """Every non-empty patch, de-duplicated per source and model. With a ``resolver``, only patches of repositories it
    finds (the others are counted per source in ``unfetchable``)."""
    tasks = {**dev.tasks("verified"), **dev.tasks("lite")}
    items: dict[str, PatchItem] = {}

    def add(instance: str, source: str, model: str, label: str, patch: str) -> None:
        task = tasks.get(instance)
        if task is None or not patch.strip():
            return
        if resolver is not None and resolver.resolve(task.repo).path is None:
            if unfetchable is not None:
                unfetchable[source] += 1
            return
        item = PatchItem(instance=instance, source=source, model=model, label=label, repo=task.repo,
                         base_commit=task.base_commit, patch=patch)  # fmt: skip
        items.setdefault(item.key, item)

    for split in ("lite", "verified"):
        for row in dev.tasks(split).values():
            add(row.instance_id, "gold", "gold", "acceptable", row.patch)
    for source in DEV_AGENTS:
        resolved = dev.agent_resolved(source)
        for pred in dev.agent_predictions(source):
            label = "acceptable" if pred.instance_id in resolved else "defect"
            add(pred.instance_id, source, source, label, pred.model_patch or "")
    for split in ("lite", "verified"):
        for pred in dev.resolved_submissions(split):
            add(pred.instance_id, "resolved-submission", pred.model_name_or_path, "acceptable", pred.model_patch or "")
    return list(items.values())
