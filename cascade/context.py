"""What a stage sees: the request, the parsed patch, the trees, and the results of earlier stages."""

from __future__ import annotations

from dataclasses import dataclass, field

from cascade.config import CascadeConfig
from cascade.models import Patch, ReviewRequest, StageResult
from cascade.store import ResultStore
from cascade.workspace import Workspace


@dataclass
class ReviewContext:
    request: ReviewRequest
    patch: Patch
    workspace: Workspace | None = None  # None when the repository is unavailable (benchmark rows)
    results: list[StageResult] = field(default_factory=list)
    repo_problem: str | None = None  # why no checkout could be made of an existing repository (incomplete)
    store: ResultStore | None = None  # results reused across reviews (cascade/store.py); None = reuse is off

    @property
    def config(self) -> CascadeConfig:
        return self.request.config

    def unavailable_reason(self) -> str | None:
        """Why stages that need a checkout cannot run, or None when they can."""
        if self.workspace is None:
            if self.repo_problem:  # the verdict's reason and incomplete_repo give the whole cause once
                return "no checkout: the repository is incomplete (objects of the base commit are missing)"
            return "repository unavailable: no checkout to analyse"
        return None
