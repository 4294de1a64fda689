"""What a new user hits first (README, Set up): silent missing tools, output paths, model flags, progress and help.

Every test runs `python -m cascade` as a user would, on a real git repository holding the demo package."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import shutil
import site
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest

from cascade.models import Verdict
from cascade.report import render
from cascade.tools import find_tool
from tests.bad_inputs import ROOT, make_demo_repo
from tests.llm_server import ScriptedServer, sequence, vote

FIX = str(ROOT / "examples/demo/fix.diff")  # pyright alone rejects it (an import of a name the patch removed)
CLEAN = str(ROOT / "examples/demo/clean.diff")


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_demo_repo(tmp_path_factory.mktemp("newuser") / "demo")


def cascade(
    *args: str, env: dict[str, str] | None = None, python: str = sys.executable
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [python, "-m", "cascade", *args],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=900,
    )


def one_error_line(proc: subprocess.CompletedProcess[str], code: int = 3) -> str:
    assert proc.returncode == code, (proc.returncode, proc.stderr, proc.stdout[:500])
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("cascade: error: "), lines
    assert "Traceback" not in proc.stderr
    return lines[0]


@pytest.fixture(scope="module")
def no_pyright(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, str]]:
    """An interpreter whose scripts directory has ruff but no pyright, on a PATH without either: a machine where
    pyright is not installed."""
    venv = tmp_path_factory.mktemp("nopyright") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    ruff = find_tool("ruff")
    assert ruff is not None
    (venv / "bin" / "ruff").symlink_to(ruff)
    packages = dict.fromkeys([*site.getsitepackages(), sysconfig.get_path("purelib"), sysconfig.get_path("platlib")])
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": os.pathsep.join(packages)}
    return str(venv / "bin" / "python"), env


# -- point 3: a missing tool is never silent; --require-tools --------------------------------------------------------


@pytest.mark.slow
def test_missing_pyright_is_named_in_the_reason_of_every_format(demo: Path, no_pyright: tuple[str, dict]) -> None:
    python, env = no_pyright
    if shutil.which("pyright", path=env["PATH"]):
        pytest.skip("pyright is installed on the bare PATH of this machine")
    proc = cascade("review", FIX, "--repo", str(demo), "--format", "json", env=env, python=python)
    assert proc.returncode == 2, proc.stderr  # the LF verdict is reject: pyright alone sees the broken import
    verdict = Verdict.model_validate_json(proc.stdout)
    expected = "static: pyright unavailable — checked with ruff only"
    assert verdict.limitations == [expected]
    assert expected in verdict.reason
    for fmt in ("text", "markdown"):
        assert expected in " ".join(render(verdict, fmt, color=False).split()), fmt


@pytest.mark.slow
def test_require_tools_turns_a_missing_checker_into_exit_3(demo: Path, no_pyright: tuple[str, dict]) -> None:
    python, env = no_pyright
    line = one_error_line(cascade("review", FIX, "--repo", str(demo), "--require-tools", env=env, python=python))
    assert "pyright" in line and "require" in line
    config = demo.parent / "require.yaml"
    config.write_text("static:\n  require_tools: true\n")
    proc = cascade("review", FIX, "--repo", str(demo), "--config", str(config), env=env, python=python)
    assert "pyright" in one_error_line(proc)
    # with every tool present the flag changes nothing
    assert cascade("review", FIX, "--repo", str(demo), "--require-tools").returncode == 1


def test_the_github_action_requires_its_tools() -> None:
    source = (ROOT / "cascade/github_action/review.py").read_text()
    assert '"--require-tools"' in source


@pytest.mark.slow
def test_a_machine_without_bubblewrap_or_docker_says_so(demo: Path, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"  # git and patch only: no bwrap, no docker
    bin_dir.mkdir()
    for tool in ("git", "patch"):
        found = shutil.which(tool)
        assert found is not None
        (bin_dir / tool).symlink_to(found)
    env = {"PATH": str(bin_dir), "DOCKER_HOST": f"unix://{tmp_path}/no-docker.sock"}
    proc = cascade("review", CLEAN, "--repo", str(demo), "--format", "json", env=env)
    assert proc.returncode == 2, proc.stderr
    verdict = Verdict.model_validate_json(proc.stdout)
    probes = next(s for s in verdict.stages if s.stage == "probes")
    assert "no sandbox available" in probes.reason and "install bubblewrap" in probes.reason
    assert "no sandbox available" in verdict.reason


# -- point 7: output paths are checked before the review ------------------------------------------------------------


@pytest.mark.slow
def test_output_to_a_missing_directory_or_a_directory_is_exit_3_before_the_review(demo: Path, tmp_path: Path) -> None:
    for output, needle in ((tmp_path / "no/such/dir/report.json", "does not exist"), (tmp_path, "directory")):
        started = time.perf_counter()
        line = one_error_line(cascade("review", FIX, "--repo", str(demo), "--output", str(output)))
        assert "--output" in line and needle in line, line
        assert time.perf_counter() - started < 60  # no review ran (pyright alone takes seconds)
    worktrees = subprocess.run(["git", "-C", str(demo), "worktree", "list"], capture_output=True, text=True).stdout
    assert len(worktrees.strip().splitlines()) == 1


# -- point 9: model flags, api_key in a config, unreachable server --------------------------------------------------


@pytest.mark.slow
def test_api_key_in_a_config_points_at_api_key_env(demo: Path, tmp_path: Path) -> None:
    config = tmp_path / "key.yaml"
    config.write_text("llm:\n  model: openai/x\n  api_key: sk-secret-value\n")
    line = one_error_line(cascade("review", CLEAN, "--repo", str(demo), "--config", str(config)))
    assert "llm.api_key_env" in line and "sk-secret-value" not in line


@pytest.mark.slow
def test_model_and_api_base_flags_reach_the_server(demo: Path) -> None:
    server = ScriptedServer(sequence(vote("uncertain"))).start()
    try:
        proc = cascade(
            "review", CLEAN, "--repo", str(demo), "--model", "openai/flagged", "--api-base", server.api_base,
            "--format", "json",
        )  # fmt: skip
    finally:
        server.stop()
    assert proc.returncode == 2, proc.stderr
    assert server.received and {r.model for r in server.received} == {"flagged"}
    assert json.loads(proc.stdout)["policy"]["llm_model"] == "openai/flagged"


@pytest.mark.slow
def test_an_unreachable_server_is_one_line_naming_the_api_base(demo: Path, tmp_path: Path) -> None:
    config = tmp_path / "fast.yaml"
    config.write_text("llm:\n  max_retries: 2\n  retry_backoff_seconds: 0\n")
    dead = "http://127.0.0.1:9/v1"  # the discard port: nothing listens
    proc = cascade(
        "review", CLEAN, "--repo", str(demo), "--model", "openai/x", "--api-base", dead, "--config", str(config),
        "--format", "json",
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    reviewer = next(s for s in json.loads(proc.stdout)["stages"] if s["stage"] == "reviewer")
    assert f"unreachable at {dead}" in reviewer["reason"]
    assert reviewer["reason"].count("onnection") == 1, reviewer["reason"]  # one cause, not three exception texts


@pytest.mark.slow
def test_bench_run_takes_model_flags_and_one_name_for_output_and_quiet() -> None:
    run_help = cascade("bench", "run", "--help").stdout
    for option in ("--model", "--api-base", "--output", "--quiet", "[default: 20240604]"):
        assert option in run_help, option
    assert "--no-progress" not in run_help
    report_help = cascade("bench", "report", "--help").stdout
    assert "--output" in report_help and "--output-dir" not in report_help and "[default: 20240604]" in report_help
    redteam_help = cascade("bench", "redteam", "--help").stdout
    assert "--output" in redteam_help and "--out " not in redteam_help and "--quiet" in redteam_help


# -- point 10: help, progress, a repository without commits ----------------------------------------------------------


def test_review_help_lists_exit_codes_formats_and_path_options() -> None:
    text = cascade("review", "--help").stdout
    for needle in ("0  accept", "1  reject", "2  uncertain", "3  bad input", "4  internal error"):
        assert needle in text, needle
    for fmt in ("text", "json", "markdown", "sarif", "github"):
        assert f"\n    {fmt} " in text, fmt
    for option in ("--repo PATH", "--issue FILE", "--trace FILE", "--config FILE", "--output FILE"):
        assert option in text, option


@pytest.mark.slow
def test_a_repository_without_commits_says_so(tmp_path: Path) -> None:
    repo = tmp_path / "fresh"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    line = one_error_line(cascade("review", CLEAN, "--repo", str(repo)))
    assert "has no commits" in line


def run_on_a_terminal(*args: str) -> tuple[int, str]:
    """Run cascade with stderr on a pseudo-terminal (stdout piped); returns the exit code and what the terminal got."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "cascade", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=slave,
        stdin=subprocess.DEVNULL,
    )
    os.close(slave)
    seen = b""
    while True:
        ready, _, _ = select.select([master], [], [], 1.0)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            seen += chunk
        elif proc.poll() is not None:
            break
    proc.communicate(timeout=900)
    os.close(master)
    return proc.returncode, seen.decode(errors="replace")


@pytest.mark.slow
def test_progress_shows_stages_on_a_terminal_only(demo: Path) -> None:
    code, terminal = run_on_a_terminal("review", FIX, "--repo", str(demo))
    assert code == 1
    assert "running stage" in terminal and "static" in terminal, terminal[-2000:]
    code, terminal = run_on_a_terminal("review", FIX, "--repo", str(demo), "--quiet")
    assert code == 1 and "running stage" not in terminal
    piped = cascade("review", FIX, "--repo", str(demo))
    assert piped.returncode == 1 and piped.stderr == ""


# -- an installed cascade finds its own data -------------------------------------------------------------------------


@pytest.mark.slow
def test_an_installed_wheel_carries_the_red_team_corpus_and_the_prompt_templates(tmp_path: Path) -> None:
    """The wheel, installed into a fresh venv (its dependencies reached through PYTHONPATH, never the checkout):
    `cascade bench redteam` and the prompt loader read the copies inside the installed package."""
    source = tmp_path / "source"  # pip builds in the tree it is given: a copy keeps build/ out of the checkout
    ignored = shutil.ignore_patterns(".git", ".nox", "build", "*.egg-info", "__pycache__", ".*_cache", "results")
    shutil.copytree(ROOT, source, symlinks=True, ignore=ignored)
    wheels = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(source)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    wheel = next(wheels.glob("cascade_gate-*.whl"))
    install = ["-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q", "--no-deps", str(wheel)]
    subprocess.run([sys.executable, *install], check=True, capture_output=True, timeout=600)
    packages = dict.fromkeys([sysconfig.get_path("purelib"), sysconfig.get_path("platlib")])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(packages)}
    where = tmp_path / "elsewhere"  # not the checkout: nothing is found relative to the working directory
    where.mkdir()
    command = [str(venv / "bin" / "cascade"), "bench", "redteam", "--help"]
    helped = subprocess.run(command, cwd=where, env=env, capture_output=True, text=True)
    assert helped.returncode == 0, helped.stderr
    unwrapped = "".join(line.strip() for line in helped.stdout.splitlines())  # click breaks long paths anywhere
    installed = rf"\[default: {re.escape(str(venv))}/lib/\S+/cascade/redteam/data\]"  # the corpus: the installed copy
    assert re.search(installed, unwrapped), helped.stdout
    code = (
        "import cascade; from cascade.llm.prompts import load_template; from cascade.redteam.corpus import "
        "DEFAULT_CORPUS, load_corpus, make_target_repo; import sys, tempfile, pathlib; "
        "print(cascade.__file__); print(DEFAULT_CORPUS.resolve()); print(len(load_corpus())); "
        "print(load_template('reviewer.v1').name, load_template('probe_generator.v1').name); "
        "print(sorted(p.name for p in make_target_repo(pathlib.Path(tempfile.mkdtemp()) / 'repo').iterdir()))"
    )
    python = str(venv / "bin" / "python")
    proc = subprocess.run([python, "-c", code], cwd=where, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    package, corpus, cases, templates, target = proc.stdout.splitlines()
    assert package.startswith(f"{venv}/lib/") and corpus.startswith(f"{venv}/lib/")
    assert int(cases) >= 98 and templates == "reviewer.v1 probe_generator.v1"
    assert target == str(sorted([".git", "README.md", "pyproject.toml", "tests", "textkit"]))


def test_the_pythons_claimed_are_the_pythons_tested() -> None:
    """requires-python, the classifiers and the nox sessions CI runs (noxfile.py) name the same versions."""
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    claimed = re.findall(r'"Programming Language :: Python :: (3\.\d+)"', pyproject)
    floor = re.search(r'^requires-python = ">=(3\.\d+)"$', pyproject, re.M)
    tested = re.search(r"^PYTHONS = (\[.*?\])", (ROOT / "noxfile.py").read_text(encoding="utf-8"), re.M)
    assert floor and tested and claimed
    assert claimed == json.loads(tested[1]) and claimed[0] == floor[1]
    assert "3.11" in claimed  # .ci/run's full suite runs on 3.11
