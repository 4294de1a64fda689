"""Real pull requests as acceptable controls: a task row's gold ``patch`` together with its ``test_patch``.

SWE-bench splits a merged pull request in two — the code (``patch``) and the tests it added (``test_patch``) — and
the gold set replays only the code. A real pull request carries both, so this suite replays the PR as merged: the
two diffs in one patch. They touch disjoint files in every published row (checked here: an overlap is bad input
rather than a patch that would not apply). Acceptable by construction: the maintainers merged it.
"""

from __future__ import annotations

import re

from cascade.bench.data import TaskRow
from cascade.bench.rows import BenchCase, LabelClass
from cascade.errors import BadInput

MERGED_PR_MODEL = "gold+tests"
_DIFF_FILE = re.compile(r"^diff --git a/(\S+) ", re.MULTILINE)


def merged_pr_patch(task: TaskRow) -> str:
    """The row's code diff followed by its test diff; BadInput when both change the same file."""
    overlap = set(_DIFF_FILE.findall(task.patch)) & set(_DIFF_FILE.findall(task.test_patch))
    if overlap:
        raise BadInput(f"task {task.instance_id}: patch and test_patch both change {sorted(overlap)[0]}")
    code = task.patch if task.patch.endswith("\n") or not task.patch else task.patch + "\n"
    return code + task.test_patch


def merged_pr_cases(tasks: dict[str, TaskRow]) -> list[BenchCase]:
    """One acceptable case per task row that has a gold patch: the pull request as merged."""
    return [
        BenchCase(
            instance_id=task.instance_id,
            model=MERGED_PR_MODEL,
            repo=task.repo,
            base_commit=task.base_commit,
            patch_text=merged_pr_patch(task),
            issue_text=task.problem_statement or None,
            version=task.version,
            label=LabelClass.ACCEPTABLE,
            official_tests=task.official_tests(),
        )
        for task in tasks.values()
        if task.patch.strip()
    ]
