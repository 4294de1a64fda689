"""Applying the patch to the patched tree: ``git apply``, then its text part, then ``patch --fuzz``."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from cascade.errors import BadInput
from cascade.git import run_git
from cascade.workspace.links import make_tree_private


def _git_apply(tree: Path, data: str) -> subprocess.CompletedProcess[str]:
    return run_git(tree, "apply", "--whitespace=nowarn", "-", input=data)


def apply_patch(tree: Path, patch_text: str, text_part: str = "") -> str:
    """Apply with ``git apply``; fall back to ``patch --fuzz``. Returns the method that worked.

    ``text_part`` is the patch without its binary files (see ``Patch.text_part``): when the whole patch does not
    apply because a binary file's data is missing ("Binary files … differ"), the text part is applied alone.
    The caller has made the files the patch names private (cascade/workspace/links.py); ``patch`` may read the
    diff differently, so before it runs no file of the tree shares its inode."""
    data = patch_text if patch_text.endswith("\n") else patch_text + "\n"
    proc = _git_apply(tree, data)
    if proc.returncode == 0:
        return "git-apply"
    git_error = proc.stderr.strip().splitlines()[:1]
    if text_part:
        data = text_part if text_part.endswith("\n") else text_part + "\n"
        if _git_apply(tree, data).returncode == 0:
            return "git-apply-text-part"
    if shutil.which("patch") is None:
        raise BadInput(f"patch does not apply: {' '.join(git_error)}")
    make_tree_private(tree)
    proc = subprocess.run(
        ["patch", "-p1", "--fuzz=3", "--batch", "--forward", "--no-backup-if-mismatch", "-r", "-", "-d", str(tree)],
        input=data,
        capture_output=True,
        text=True,
    )
    if proc.returncode == 0:
        return "patch-fuzz"
    run_git(tree, "checkout", "--", ".")
    run_git(tree, "clean", "-fdq")
    raise BadInput(f"patch does not apply: {' '.join(git_error) or proc.stdout.strip().splitlines()[-1:]}")
