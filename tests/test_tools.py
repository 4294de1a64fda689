"""pyright, ruff and uv are found next to the running interpreter when PATH lacks them (README, Set up)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cascade.tools import find_tool, scripts_dirs
from tests.bad_inputs import ROOT, make_demo_repo

BARE_PATH = "/usr/bin:/bin"  # git, patch and bwrap; not the interpreter's scripts directory


def test_find_tool_prefers_the_interpreters_scripts_directory() -> None:
    for name in ("pyright", "ruff", "uv"):
        found = find_tool(name)
        assert found is not None, name
        if any((d / name).is_file() for d in scripts_dirs()):
            assert Path(found).parent in scripts_dirs(), found
    assert find_tool("no-such-tool-cascade") is None


@pytest.mark.slow
def test_review_without_the_venv_on_path_uses_its_tools(tmp_path: Path) -> None:
    if shutil.which("pyright", path=BARE_PATH) or shutil.which("uv", path=BARE_PATH):
        pytest.skip("pyright or uv is on the bare PATH of this machine: nothing to show")
    repo = make_demo_repo(tmp_path / "demo")
    env = {**os.environ, "PATH": BARE_PATH}

    def review(patch: str) -> tuple[int, dict[str, object]]:
        argv = [sys.executable, "-m", "cascade", "review", str(ROOT / "examples/demo" / patch), "--repo", str(repo)]
        proc = subprocess.run(
            [*argv, "--format", "json"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert proc.returncode in (0, 1, 2), proc.stderr
        return proc.returncode, json.loads(proc.stdout)

    code, report = review("fix.diff")  # the README demo: pyright's finding rejects it
    assert code == 1 and report["deciding_stage"] == "static", report["reason"]
    assert "pyright" in str(report["reason"])
    code, report = review("clean.diff")  # Stage 2 builds its environment with uv
    text = json.dumps(report)
    assert "uv is not installed" not in text
    probes = next(s for s in report["stages"] if s["stage"] == "probes")  # type: ignore[index]
    # the demo has no test near its change and no probe source applies: Stage 2 ran (its environment built) and says
    # that nothing could judge the code, never "pass" (docs/architecture.md, Run model, point 7)
    assert probes["outcome"] == "inconclusive", probes["reason"]
    assert "no existing test near the change" in str(probes["reason"]), probes["reason"]
