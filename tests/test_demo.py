"""The README's offline demo, run exactly as written from the root of a fresh clone of this repository."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cascade.context import ReviewContext
from cascade.models import Patch, ReviewRequest
from cascade.stages.static import StaticStage
from tests.support import run_git

ROOT = Path(__file__).resolve().parents[1]
# Copied over the clone so the demo runs the code under test, committed or not.
SYNCED = ("cascade", "examples", "pyproject.toml")
DEMO_COMMAND = ["review", "examples/demo/fix.diff", "--issue", "examples/demo/issue.md"]


def stage1_is_placeholder() -> bool:
    """True while Stage 1 is still the stub that skips with "not yet built"."""
    ctx = ReviewContext(request=ReviewRequest(repo=str(ROOT), patch_text=""), patch=Patch(text="", files=[]))
    try:
        return StaticStage().run(ctx).reason == "not yet built"
    except Exception:  # a real stage may refuse an empty context; it is then not the stub
        return False


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A clone of this repository with the working tree's package and examples committed on top."""
    if not (ROOT / ".git").exists():
        pytest.skip("the demo test needs this repository's git history")
    path = tmp_path_factory.mktemp("demo") / "cascade"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(path)], check=True, capture_output=True)
    for name in SYNCED:
        source, target = ROOT / name, path / name
        if source.is_dir():
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(source, target)
    run_git(path, "add", "-A")
    if run_git(path, "status", "--porcelain").strip():
        run_git(path, "commit", "-q", "-m", "working tree under test")
    return path


def cascade(clone: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # `python -m` puts the working directory first on sys.path, so this runs the clone's (synced) package.
    return subprocess.run(
        [sys.executable, "-m", "cascade", *args], cwd=clone, capture_output=True, text=True, timeout=600
    )


@pytest.mark.slow
@pytest.mark.xfail(stage1_is_placeholder(), reason="Stage 1 is still the placeholder", strict=False)
def test_readme_demo_rejects_the_broken_fix_with_a_static_diagnostic(clone: Path) -> None:
    proc = cascade(clone, *DEMO_COMMAND, "--format", "json")
    assert proc.returncode == 1, proc.stderr
    verdict = json.loads(proc.stdout)
    assert verdict["decision"] == "reject"
    assert verdict["deciding_stage"] == "static"
    static = next(s for s in verdict["stages"] if s["stage"] == "static")
    diagnostics = [d for e in static["evidence"] for d in e["diagnostics"]]
    assert any(d["path"] == "examples/demo/calc/report.py" and "stdev" in d["message"] for d in diagnostics)
    assert all(e["grounded"] for e in static["evidence"] if e["diagnostics"])


@pytest.mark.slow
def test_clean_fix_is_uncertain_without_a_model(clone: Path) -> None:
    proc = cascade(clone, "review", "examples/demo/clean.diff", "--issue", "examples/demo/issue.md", "--format", "json")
    assert proc.returncode == 2, proc.stderr
    verdict = json.loads(proc.stdout)
    assert verdict["decision"] == "uncertain"
    assert verdict["deciding_stage"] is None
    static = next(s for s in verdict["stages"] if s["stage"] == "static")
    assert static["outcome"] == "pass"  # ruff and pyright ran and found no patch-caused error in a reject class
    assert run_git(clone, "status", "--porcelain") == ""  # the user's checkout is untouched
