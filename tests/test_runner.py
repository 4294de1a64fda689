"""The test runner and environments on real pytest runs inside a real sandbox (bwrap where it works)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from cascade.execution.envs import (
    EnvironmentUnavailable,
    EnvSpec,
    current_environment,
    ensure_environment,
    resolve_python,
    write_scm_version_file,
)
from cascade.execution.repo_specs import spec_for_repo
from cascade.execution.runner import run_pytest
from cascade.sandbox.base import Sandbox
from tests.support import MakeRepo, run_git

OUTCOMES = """\
import os
import pytest

def test_passes():
    assert os.environ["TZ"] == "UTC" and os.environ["PYTHONHASHSEED"] == "0"

def test_assertion():
    assert 1 + 1 == 3

def test_did_not_raise():
    with pytest.raises(ValueError):
        int("7")

def test_crash_in_code():
    len(None)

def test_code_exits():
    raise SystemExit(32)

@pytest.fixture
def broken_fixture():
    raise RuntimeError("fixture broke")

def test_fixture_error(broken_fixture):
    pass

def test_missing_dependency():
    import cascade_no_such_module  # noqa: F401

class TestGroup:
    @pytest.mark.parametrize("n", [1, 2])
    def test_param(self, n):
        assert n == 1

@pytest.mark.skip(reason="not here")
def test_skipped():
    pass
"""


def test_every_outcome_class_on_real_failing_tests(make_repo: MakeRepo, sandbox: Sandbox) -> None:
    repo = make_repo({"tests/test_outcomes.py": OUTCOMES})
    run = run_pytest(sandbox, current_environment(), repo, ["tests/test_outcomes.py"], tag="t", timeout_seconds=120)
    assert run.run_error is None, run.log_excerpt()
    got = {t.test_id.split("::", 1)[1]: (t.status, t.failure_class, t.reason) for t in run.tests}
    assert got == {
        "test_passes": ("pass", None, ""),
        "test_assertion": ("behavioural_fail", "assertion", "assertion"),
        "test_did_not_raise": ("behavioural_fail", "assertion", "assertion"),
        "test_crash_in_code": ("behavioural_fail", "crash", "exception raised in code"),
        "test_code_exits": ("behavioural_fail", "assertion", "assertion"),  # the code chose to exit: no crash
        "test_fixture_error": ("setup_error", None, "fixture error"),
        "test_missing_dependency": ("setup_error", None, "missing dependency"),
        "TestGroup::test_param[1]": ("pass", None, ""),
        "TestGroup::test_param[2]": ("behavioural_fail", "assertion", "assertion"),
        "test_skipped": ("skipped", None, ""),
    }
    crash = run.by_id()["tests/test_outcomes.py::test_crash_in_code"]
    assert crash.exception == "TypeError" and "has no len()" in crash.message
    assert "TZ=UTC" in run.command and "PYTHONHASHSEED=0" in run.command
    assert run.result.isolation == sandbox.isolation


FLAKY = """\
import os
import tempfile

import pytest


@pytest.mark.flaky(reruns=2)
def test_passes_on_its_second_attempt():
    mark = os.path.join(tempfile.gettempdir(), "attempted")
    first = not os.path.exists(mark)
    open(mark, "w").close()
    assert not first


@pytest.mark.flaky(reruns=1)
def test_always_fails():
    assert False
"""


def test_a_rerun_plugins_repeated_reports_are_not_forged_records(make_repo: MakeRepo, sandbox: Sandbox) -> None:
    """pytest-rerunfailures reports each failed attempt as ``rerun`` and the test's phases again: the plugin's records
    keep their shape (`execution/channel_order.py`), and the last attempt decides."""
    # the gate's own environment runs with plugin autoload off: the project names the plugin, as one may
    repo = make_repo({"tests/test_flaky.py": FLAKY, "pytest.ini": "[pytest]\naddopts = -p pytest_rerunfailures\n"})
    run = run_pytest(sandbox, current_environment(), repo, ["tests/test_flaky.py"], tag="r", timeout_seconds=120)
    assert run.run_error is None, run.log_excerpt()
    assert sum(r.outcome == "rerun" for r in run.result.reports) == 2, run.result.reports
    assert not [e for e in run.result.side_effects if e.kind == "tampering"], run.result.side_effects
    got = {t.test_id.split("::", 1)[1]: t.status for t in run.tests}
    assert got == {"test_passes_on_its_second_attempt": "pass", "test_always_fails": "behavioural_fail"}


def test_a_projects_xdist_workers_are_switched_off_so_the_runner_sees_every_test(
    make_repo: MakeRepo, sandbox: Sandbox
) -> None:
    """A project that runs its tests with ``-n 2``: under xdist the tests ran in worker processes, so their begin, end
    and outcome records came from processes other than the runner (tampering, and no test to attribute a record to).
    The gate's plugin keeps them in the runner's process."""
    tests = "import os\n\n\ndef test_a():\n    assert os.getpid()\n\n\ndef test_b():\n    assert False\n"
    repo = make_repo({"tests/test_two.py": tests, "pytest.ini": "[pytest]\naddopts = -p xdist -n 2\n"})
    run = run_pytest(sandbox, current_environment(), repo, ["tests/test_two.py"], tag="x", timeout_seconds=120)
    assert run.run_error is None, run.log_excerpt()
    assert {t.test_id.split("::")[1]: t.status for t in run.tests} == {"test_a": "pass", "test_b": "behavioural_fail"}
    assert not [e for e in run.result.side_effects if e.kind == "tampering"], run.result.side_effects
    runner = {r.pid for r in run.result.reports if r.event == "runner"}
    assert len(runner) == 1 and {r.pid for r in run.result.reports if r.event == "test_begin"} == runner


def test_collection_errors_are_setup_errors(make_repo: MakeRepo, sandbox: Sandbox) -> None:
    repo = make_repo(
        {
            "test_probe_import.py": "from os import no_such_name\n\ndef test_x():\n    assert False\n",
            "test_probe_missing.py": "import cascade_absent_dependency\n\ndef test_y():\n    assert False\n",
            "test_fine.py": "def test_z():\n    assert True\n",
        }
    )
    targets = ["test_probe_import.py", "test_probe_missing.py", "test_fine.py"]
    run = run_pytest(sandbox, current_environment(), repo, targets, tag="c", timeout_seconds=120)
    got = {t.test_id: (t.status, t.reason) for t in run.tests}
    assert got["test_probe_import.py"] == ("setup_error", "collection error")
    assert got["test_probe_missing.py"] == ("setup_error", "missing dependency")
    assert got["test_fine.py::test_z"] == ("pass", "")  # the other files still ran


def test_timeout_kills_the_run_and_is_a_setup_error(make_repo: MakeRepo, sandbox: Sandbox) -> None:
    repo = make_repo({"test_slow.py": "import time\n\ndef test_forever():\n    time.sleep(600)\n"})
    started = time.monotonic()
    run = run_pytest(sandbox, current_environment(), repo, ["test_slow.py"], tag="s", timeout_seconds=3)
    assert time.monotonic() - started < 60
    assert run.run_error is not None and run.run_error.startswith("timeout")
    assert run.tests == []


def test_coverage_records_executed_lines(make_repo: MakeRepo, sandbox: Sandbox) -> None:
    from cascade.execution.runner import executed_lines

    repo = make_repo(
        {
            "mod.py": "def f(x):\n    if x:\n        return 1\n    return 2\n",
            "test_mod.py": "from mod import f\n\ndef test_f():\n    assert f(True) == 1\n",
        }
    )
    run = run_pytest(
        sandbox, current_environment(), repo, ["test_mod.py"], tag="v", timeout_seconds=120,
        coverage_include=["mod.py"],
    )  # fmt: skip
    assert executed_lines(run, "mod.py") == {1, 2, 3}


@pytest.fixture(scope="session")
def env_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One venv cache per test session, so the uv build happens once."""
    return tmp_path_factory.mktemp("envs")


@pytest.mark.slow
def test_uv_venv_is_built_once_and_cached(env_cache: Path, make_repo: MakeRepo, sandbox: Sandbox) -> None:
    import sys

    spec = EnvSpec(repo="demo/demo", python=sys.executable, packages=["iniconfig"])
    first = ensure_environment(spec, cache_dir=env_cache)
    started = time.monotonic()
    second = ensure_environment(spec, cache_dir=env_cache)
    assert second == first and time.monotonic() - started < 5
    assert first.venv_dir is not None and Path(first.python).is_file()
    repo = make_repo({"test_env.py": "import iniconfig, coverage\n\ndef test_ok():\n    assert iniconfig\n"})
    run = run_pytest(sandbox, first, repo, ["test_env.py"], tag="e", timeout_seconds=120)
    assert [t.status for t in run.tests] == ["pass"], run.log_excerpt()


def test_unknown_python_is_a_clear_unavailability() -> None:
    with pytest.raises(EnvironmentUnavailable, match=r"no Python 2\.1 interpreter"):
        resolve_python("2.1")
    with pytest.raises(EnvironmentUnavailable, match="not found"):
        resolve_python("/nonexistent/python3")


def test_uninstallable_dependencies_make_the_environment_unavailable(env_cache: Path) -> None:
    import sys

    spec = EnvSpec(repo="demo/broken", python=sys.executable, packages=["cascade-no-such-package-xyz==0.0.1"])
    with pytest.raises(EnvironmentUnavailable, match="uv pip install failed"):
        ensure_environment(spec, cache_dir=env_cache)


def test_task_versions_get_the_harness_pins_and_others_the_repository_default() -> None:
    flask_2_0 = spec_for_repo("pallets/flask", "2.0")
    assert flask_2_0 is not None and flask_2_0.python == "3.9" and "Jinja2==3.0.1" in flask_2_0.packages
    flask_other = spec_for_repo("pallets/flask", "2.3")
    assert flask_other is not None and flask_other.python == "3.11"
    sphinx_3 = spec_for_repo("sphinx-doc/sphinx", "3.5")
    assert sphinx_3 is not None and "Jinja2<3.0" in sphinx_3.packages and sphinx_3.extras == ["test"]
    astropy = spec_for_repo("astropy/astropy", "4.3")
    assert astropy is not None and astropy.build_extensions and not astropy.unsupported
    old_astropy = spec_for_repo("astropy/astropy", "1.3")
    assert old_astropy is not None and old_astropy.unsupported
    assert spec_for_repo("no/such-repo", "1.0") is None


def test_setuptools_scm_version_file_is_written_from_git_describe(make_repo: MakeRepo, sandbox: Sandbox) -> None:
    setup = 'from setuptools import setup\nsetup(use_scm_version={"write_to": "src/pkg/_version.py"})\n'
    test = "from pkg._version import version\n\ndef test_version():\n    assert version.startswith('1.2.1.dev1+g')\n"
    repo = make_repo({"setup.py": setup, "src/pkg/__init__.py": "", "test_v.py": test})
    run_git(repo, "tag", "1.2.0")
    run_git(repo, "commit", "-q", "--allow-empty", "-m", "next")
    run = run_pytest(sandbox, current_environment(), repo, ["test_v.py"], tag="v", timeout_seconds=120)
    assert [t.status for t in run.tests] == ["pass"], run.log_excerpt()
    assert write_scm_version_file(repo) is None  # present now: left alone


def test_a_test_that_needs_the_network_is_a_setup_error(make_repo: MakeRepo, sandbox: Sandbox) -> None:
    """The sandbox has no network: failing to reach a host says nothing about the code (requests' tests)."""
    test = (
        "import socket\n\n"
        "def test_remote():\n"
        "    socket.create_connection(('httpbin.org', 80), timeout=5)\n\n"
        "def test_local_crash():\n"
        "    raise ConnectionResetError('not a network test: a crash of the code')\n"
    )
    repo = make_repo({"test_net.py": test})
    run = run_pytest(sandbox, current_environment(), repo, ["test_net.py"], tag="t", timeout_seconds=120)
    got = {t.test_id.split("::", 1)[1]: (t.status, t.reason) for t in run.tests}
    assert got["test_remote"] == ("setup_error", "needs the network (sandbox has none)"), run.log_excerpt()
    assert got["test_local_crash"][0] == "behavioural_fail"
