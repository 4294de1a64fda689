"""The trees a review reads and runs in: the base commit and the patched tree (docs/architecture.md, Checkouts)."""

from cascade.workspace.apply import apply_patch
from cascade.workspace.checkout import Workspace
from cascade.workspace.pristine import PristineCheckouts
from cascade.workspace.repository import has_commits, missing_object_line, resolve_commit, resolve_repo

__all__ = [
    "PristineCheckouts",
    "Workspace",
    "apply_patch",
    "has_commits",
    "missing_object_line",
    "resolve_commit",
    "resolve_repo",
]
