"""Reports that travel and say what they reviewed: no path of the reviewing machine in any format (cascade in a venv
under /tmp, its tools, the test environments, the repository), the base and head commits and the patch's sha256,
limitations for a fuzz-applied patch and a dirty checkout, a cost that is the review's wall time, and a progress
line that never names a stage that has ended."""

from __future__ import annotations

import hashlib
import json
import os
import pty
import re
import select
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path

import pytest

from cascade.config import parse_config
from cascade.models import WORKING_TREE, ReviewRequest, Verdict
from cascade.pipeline import review
from cascade.report import FORMATS, render
from cascade.stable import stable_text
from cascade.tools import find_tool
from tests.support import MakeRepo, diff_of, run_git

ROOT = Path(__file__).resolve().parents[1]
CALC = "def divide(a, b):\n    return a / b\n"
CALC_TEST = "from pkg.calc import divide\n\n\ndef test_divide():\n    assert divide(4, 2) == 2\n"
DEMO_FILES = {"pkg/__init__.py": "", "pkg/calc.py": CALC, "pkg/report.py": "X = 1\n", "tests/test_calc.py": CALC_TEST}
NUMBERS = "".join(f"line_{i} = {i}\n" for i in range(1, 21))


def cascade(python: str, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([python, "-m", "cascade", *args], cwd=cwd, env=env, capture_output=True, text=True)


@pytest.fixture(scope="module")
def tmp_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv under the temporary directory holding cascade's tools, as `pip install cascade-gate` there makes one:
    its own bin/ has pyright, ruff and uv (here: links to the installed ones), packages come from the system."""
    where = tmp_path_factory.mktemp("venv") / "venv"
    venv.create(where, system_site_packages=True, with_pip=False, symlinks=True)
    for tool in ("pyright", "ruff", "uv"):
        found = find_tool(tool)
        assert found, f"{tool} is a dependency of cascade"
        (where / "bin" / tool).symlink_to(found)
    return where


@pytest.mark.slow
def test_no_machine_path_in_any_format_with_cascade_in_a_venv_under_tmp(
    tmp_venv: Path, make_repo: MakeRepo, tmp_path: Path
) -> None:
    """A static reject (pyright's command) and a Stage 2 reject (the test environment's interpreter) in every
    format: the reports name placeholders, never the venv, the repository, the worktrees or the home directory."""
    repo = make_repo(DEMO_FILES)
    patches = {
        "static": diff_of(repo, {"pkg/report.py": "from pkg.calc import mean\n"}),
        "probes": diff_of(repo, {"pkg/calc.py": CALC.replace("a / b", "a.value / b")}),
    }
    machine = [tempfile.gettempdir() + "/", str(Path.home()) + "/", str(tmp_venv), str(repo)]
    python = str(tmp_venv / "bin" / "python")
    for name, patch in patches.items():
        (tmp_path / f"{name}.diff").write_text(patch)
        shown: dict[str, str] = {}
        for fmt in ("json", "markdown"):  # the full report and the PR comment, each from the command line
            done = cascade(python, repo, "review", str(tmp_path / f"{name}.diff"), "-q", "--format", fmt)
            assert done.returncode == 1, (name, fmt, done.stderr)
            shown[fmt], shown[f"{fmt} stderr"] = done.stdout, done.stderr
        report = Verdict.model_validate_json(shown["json"])
        shown |= {fmt: render(report, fmt) for fmt in FORMATS if fmt not in shown}
        for fmt, text in shown.items():
            leaked = [path for path in machine if path in text]
            assert leaked == [], (name, fmt, leaked, text[:3000])
        assert report.deciding_stage == name
        commands = " ".join(c for s in report.stages for e in s.evidence for c in e.commands)
        assert ("<pyright>" if name == "static" else "<test-envs>/") in commands, commands


def test_reports_name_the_base_the_head_and_the_patch_digest(make_repo: MakeRepo, tmp_path: Path) -> None:
    repo = make_repo({"pkg/__init__.py": "", "pkg/mod.py": "X = 1\n"})
    base = run_git(repo, "rev-parse", "HEAD").strip()
    patch = diff_of(repo, {"pkg/mod.py": "X = 2\n"})
    (tmp_path / "p.diff").write_text(patch)
    digest = hashlib.sha256(patch.encode()).hexdigest()
    config = tmp_path / "c.yaml"
    config.write_text("static:\n  enabled: false\nprobes:\n  enabled: false\n")
    run = cascade(sys.executable, repo, "review", str(tmp_path / "p.diff"), "--config", str(config), "--format", "json")
    report = json.loads(run.stdout)
    assert (report["base_commit"], report["head"], report["patch_sha256"]) == (base, WORKING_TREE, digest)
    markdown = cascade(sys.executable, repo, "review", str(tmp_path / "p.diff"), "--config", str(config),
                       "--format", "markdown").stdout  # fmt: skip
    footer = markdown.rstrip().splitlines()[-1]
    assert footer == f"<sub>Reviewed: base {base}, head working tree, patch sha256 {digest}</sub>", footer
    text = cascade(sys.executable, repo, "review", str(tmp_path / "p.diff"), "--config", str(config)).stdout
    assert f"patch sha256 {digest}" in " ".join(text.split())

    (repo / "pkg/mod.py").write_text("X = 3\n")
    run_git(repo, "commit", "-qam", "head")
    head = run_git(repo, "rev-parse", "HEAD").strip()
    ranged = json.loads(
        cascade(
            sys.executable, repo, "review", "--git", f"{base}..HEAD", "--config", str(config), "--format", "json"
        ).stdout
    )
    assert (ranged["base_commit"], ranged["head"]) == (base, head)
    assert ranged["patch_sha256"] == hashlib.sha256(run_git(repo, "diff", base, head).encode()).hexdigest()


def rules_only(repo: Path, patch: str) -> Verdict:
    config = parse_config({"static": {"enabled": False}, "probes": {"enabled": False}})
    return review(ReviewRequest(repo=str(repo), patch_text=patch, config=config))


def test_a_fuzz_applied_patch_is_a_limitation(make_repo: MakeRepo) -> None:
    repo = make_repo({"pkg/__init__.py": "", "pkg/numbers.py": NUMBERS})
    patch = diff_of(repo, {"pkg/numbers.py": NUMBERS.replace("line_10 = 10", "line_10 = 100")})
    # the base moved on under the patch: a context line changed, so git apply refuses and patch --fuzz places it
    (repo / "pkg/numbers.py").write_text(NUMBERS.replace("line_8 = 8", "line_8 = 8  # moved"))
    run_git(repo, "commit", "-qam", "context changed")
    verdict = rules_only(repo, patch)
    assert verdict.apply_method == "patch-fuzz"
    (note,) = [n for n in verdict.limitations if n.startswith("setup: ")]
    assert "applied only with fuzz" in note and note in verdict.reason


def test_uncommitted_changes_of_the_repository_are_a_limitation(make_repo: MakeRepo) -> None:
    repo = make_repo({"pkg/__init__.py": "", "pkg/mod.py": "X = 1\n", "pkg/other.py": "Y = 1\n"})
    patch = diff_of(repo, {"pkg/mod.py": "X = 2\n"})
    assert not any(n.startswith("setup: ") for n in rules_only(repo, patch).limitations)
    (repo / "pkg/other.py").write_text("Y = 2  # not committed\n")
    verdict = rules_only(repo, patch)
    head = run_git(repo, "rev-parse", "HEAD").strip()
    expected = "setup: the repository has uncommitted changes in 1 file(s); "
    expected += f"the patch was applied to commit {head[:12]}"
    assert any(n.startswith(expected) for n in verdict.limitations), verdict.limitations
    assert expected.removeprefix("setup: ") in verdict.reason


@pytest.mark.slow
def test_cost_is_the_reviews_wall_time_with_setup_and_cleanup_listed(make_repo: MakeRepo) -> None:
    repo = make_repo(DEMO_FILES)
    patch = diff_of(repo, {"pkg/calc.py": CALC.replace("a / b", "a.value / b")})
    events: list[str] = []
    config = parse_config({"env": {"use_current_interpreter": True}})
    started = time.perf_counter()
    verdict = review(ReviewRequest(repo=str(repo), patch_text=patch, config=config), on_progress=events.append)
    wall = time.perf_counter() - started
    assert abs(verdict.cost.seconds - wall) <= 0.02 * wall + 0.05, (verdict.cost.seconds, wall)
    phases = {p.name: p.seconds for p in verdict.phases}
    assert set(phases) == {"setup", "cleanup"} and all(s > 0 for s in phases.values())
    accounted = sum(phases.values()) + sum(s.cost.seconds for s in verdict.stages)
    assert accounted <= verdict.cost.seconds and accounted >= 0.95 * verdict.cost.seconds
    ran = [s.stage for s in verdict.stages]
    assert events == ["preparing the trees", *[f"running stage {s}" for s in ran], "removing the trees"]


@pytest.mark.slow
def test_the_progress_line_on_a_terminal_ends_with_the_stage(make_repo: MakeRepo, tmp_path: Path) -> None:
    """On a real terminal (a pty): the status names each stage while it runs and, after the last one, what
    happens then — never the ended stage while the trees are removed."""
    repo = make_repo({"pkg/__init__.py": "", "pkg/mod.py": "X = 1\n"})
    (tmp_path / "p.diff").write_text(diff_of(repo, {"pkg/mod.py": "X = 2\n"}))
    config = tmp_path / "c.yaml"
    config.write_text("probes:\n  enabled: false\n")
    argv = [sys.executable, "-m", "cascade", "review", str(tmp_path / "p.diff"), "--config", str(config)]
    shown = run_on_a_terminal(argv, repo, tmp_path / "report.txt")
    statuses = [s for s in re.findall(r"cascade: ([a-z_ ]+?)(?=\s*(?:\x1b|\r|\n|$))", shown) if s]
    ordered = list(dict.fromkeys(statuses))
    assert ordered[-1] == "removing the trees", ordered
    assert "running stage static" in ordered and ordered.index("running stage static") < len(ordered) - 1


def run_on_a_terminal(argv: list[str], cwd: Path, output: Path) -> str:
    """Run with stderr on a pty (stdout to a file) and return what the terminal received, ANSI codes included."""
    leader, follower = pty.openpty()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TERM": "xterm", "COLUMNS": "120"}
    env.pop("NO_COLOR", None)
    with output.open("w") as out:
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=out, stderr=follower, stdin=subprocess.DEVNULL)
    os.close(follower)
    received = b""
    while True:
        ready, _, _ = select.select([leader], [], [], 1.0)
        if ready:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the pty closed: the process ended
                break
            if not chunk:
                break
            received += chunk
        elif proc.poll() is not None:
            break
    proc.wait(timeout=300)
    os.close(leader)
    return received.decode(errors="replace")


def test_a_machine_path_is_replaced_only_as_a_whole_path() -> None:
    mapping = {"/home/u/proj": "<repo>", "/home/u": "<home>"}
    assert stable_text("in /home/u/proj. See /home/u/proj/x.py", mapping) == "in <repo>. See <repo>/x.py"
    # the repository's path is no prefix of a longer name; the home directory still is one of these paths
    assert stable_text("/home/u/proj.git /home/u/projects /home/u2", mapping) == (
        "<home>/proj.git <home>/projects /home/u2"
    )
