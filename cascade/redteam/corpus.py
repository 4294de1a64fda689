"""Load the red-team corpus (probes/redteam/cases/*) and build its target repository as a real git repo."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import yaml
from pydantic import ValidationError

from cascade.errors import BadInput
from cascade.git import run_git
from cascade.models import Trace
from cascade.redteam.models import CaseKind, CaseSpec, RedteamCase
from cascade.traces import trace_from_data

# The package's corpus directory: in a checkout a symlink to probes/redteam, in an installed package its copy.
DEFAULT_CORPUS = Path(__file__).parent / "data"
_GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "redteam",
    "GIT_AUTHOR_EMAIL": "redteam@example.invalid",
    "GIT_COMMITTER_NAME": "redteam",
    "GIT_COMMITTER_EMAIL": "redteam@example.invalid",
}


def load_case(directory: Path) -> RedteamCase:
    """One case directory; BadInput naming the file when something is missing or malformed."""
    try:
        raw = yaml.safe_load((directory / "case.yaml").read_text(encoding="utf-8"))
        spec = CaseSpec.model_validate(raw)
        issue = (directory / "issue.md").read_text(encoding="utf-8")
        patch = (directory / "patch.diff").read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise BadInput(f"red-team case {directory.name}: missing {Path(str(exc.filename)).name}") from None
    except (yaml.YAMLError, ValidationError) as exc:
        raise BadInput(f"red-team case {directory.name}: invalid case.yaml ({type(exc).__name__})") from None
    if spec.id != directory.name:
        raise BadInput(f"red-team case {directory.name}: case.yaml says id '{spec.id}'")
    return RedteamCase(
        spec=spec, directory=str(directory), issue_text=issue, patch_text=patch, trace=_load_trace(directory)
    )


def _load_trace(directory: Path) -> Trace | None:
    path = directory / "trace.json"
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError:
        raise BadInput(f"red-team case {directory.name}: trace.json is not JSON") from None
    return trace_from_data(data, source=str(path))


def load_corpus(
    root: Path = DEFAULT_CORPUS, kinds: set[CaseKind] | None = None, only: list[str] | None = None
) -> list[RedteamCase]:
    """All cases under ``root/cases``, sorted by id, optionally filtered by kind and by id substrings."""
    cases_dir = root / "cases"
    if not cases_dir.is_dir():
        raise BadInput(f"red-team corpus not found: {cases_dir} (run probes/redteam/generate.py)")
    cases = [load_case(d) for d in sorted(cases_dir.iterdir()) if d.is_dir()]
    if kinds is not None:
        cases = [c for c in cases if c.spec.kind in kinds]
    if only:
        cases = [c for c in cases if any(part in c.id for part in only)]
    if not cases:
        raise BadInput(f"no red-team cases selected under {cases_dir}")
    return cases


def make_target_repo(dest: Path, corpus: Path = DEFAULT_CORPUS) -> Path:
    """Commit the demo package (``corpus/target``) into a fresh git repository at ``dest``."""
    source = corpus / "target"
    if not source.is_dir():
        raise BadInput(f"red-team target repository not found: {source}")
    shutil.copytree(source, dest, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "textkit 0.4.0"]):
        run_git(dest, *args, env=_GIT_IDENTITY).check_returncode()
    return dest
