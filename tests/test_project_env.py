"""Environments for a repository at any commit: its CI's test dependencies and pins, resolved as of the commit."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest
from packaging.version import Version

from cascade.bench.rows import BenchCase, LabelClass
from cascade.bench.worker import config_for_case
from cascade.config import CascadeConfig, parse_config
from cascade.execution.ci_sources import read_ci_dependencies
from cascade.execution.envs import EnvironmentUnavailable, write_scm_version_file
from cascade.execution.project_env import choose_python, project_spec, requires_python
from cascade.models import Outcome, ReviewRequest
from cascade.pipeline import review
from cascade.stages.probes import ProbesStage
from cascade.stages.probes.environment import make_environment
from tests.support import MakeRepo, diff_of, run_git

PYPROJECT = '[project]\nname = "demo"\nversion = "1.0"\nrequires-python = ">=3.8"\n'
SETUP = "from setuptools import setup\nsetup(name='demo', version='1.0', py_modules=['demo'])\n"


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return tmp_path


# --- reading what the CI installs (no code runs) ------------------------------------------------------------


def test_tox_deps_follow_requirement_files_factors_and_the_project_itself(tmp_path: Path) -> None:
    tox = ("[tox]\nenvlist = py311\n\n[testenv]\ndeps =\n    -r{toxinidir}/requirements-dev.txt\n    !pypy: attrs\n"
           "    examples/tutorial[test]\n"
           "    pypy: only-on-pypy\n    coverage: only-with-coverage\n    py311,py312: mock\nextras =\n    socks\n"
           "    alldeps: everything\ncommands = pytest\n")  # fmt: skip
    dev = "-e .[security]\npytest>=7  # the runner\n-c constraints.txt\n--index-url https://example.invalid\n"
    tree = _tree(tmp_path, {"tox.ini": tox, "requirements-dev.txt": dev, "constraints.txt": "iniconfig==2.0.0\n",
                            "pyproject.toml": PYPROJECT, "examples/tutorial/setup.py": SETUP})  # fmt: skip
    deps = read_ci_dependencies(tree, "3.11")
    assert deps.requirements == ["pytest>=7", "attrs", "mock"]
    assert deps.extras == ["security", "socks"] and deps.constraints == ["iniconfig==2.0.0"]
    assert deps.used == ["tox.ini [testenv]", "requirements-dev.txt", "constraints.txt (constraints)"]
    assert deps.skipped == [
        "requirements-dev.txt: --index-url https://example.invalid (pip option)",
        "tox.ini [testenv]: examples/tutorial[test] (a local path other than the project)",
    ]


def test_dependency_groups_with_includes_and_self_references(tmp_path: Path) -> None:
    pyproject = PYPROJECT + (
        '[project.optional-dependencies]\ndev = ["hypothesis"]\n\n'
        '[dependency-groups]\nbase = ["pytest>=8"]\ntests = [{include-group = "base"}, "demo[dev]", "greenlet"]\n\n'
        '[tool.tox.env_run_base]\ndependency_groups = ["tests"]\n'
    )
    deps = read_ci_dependencies(_tree(tmp_path, {"pyproject.toml": pyproject}), "3.11")
    assert deps.requirements == ["pytest>=8", "greenlet"] and deps.extras == ["dev"]
    assert deps.used == ["pyproject.toml [tool.tox.env_run_base]", "pyproject.toml [dependency-groups] tests"]


def test_nox_pipfile_setup_py_extras_and_requirement_files_in_that_order(tmp_path: Path) -> None:
    nox = ('import nox\n\n@nox.session\ndef tests(session):\n    session.install("-r", "requirements/tests.txt")\n'
           '    session.install("-e", ".[test]")\n    session.run("pytest")\n\n'
           '@nox.session\ndef docs(session):\n    session.install("sphinx")\n')  # fmt: skip
    nox_tree = _tree(tmp_path / "nox", {"noxfile.py": nox, "requirements/tests.txt": "pytest==7.1.2\n",
                                        "setup.py": SETUP})  # fmt: skip
    deps = read_ci_dependencies(nox_tree, "3.11")
    assert (deps.requirements, deps.extras) == (["pytest==7.1.2"], ["test"])
    assert deps.used == ["noxfile.py tests", "requirements/tests.txt"]

    pipfile = ('[packages]\n"demo" = {path = ".", editable = true, extras = ["socks"]}\n\n'
               '[dev-packages]\npytest = ">=2.8.0,<=3.10.1"\npytest-httpbin = "*"\n')  # fmt: skip
    lock = {"default": {"idna": {"version": "==2.8"}}, "develop": {"pytest": {"version": "==3.10.1"}}}
    pip_tree = _tree(tmp_path / "pipenv", {"Pipfile": pipfile, "Pipfile.lock": json.dumps(lock), "setup.py": SETUP})
    deps = read_ci_dependencies(pip_tree, "3.7")
    assert deps.requirements == ["pytest>=2.8.0,<=3.10.1", "pytest-httpbin"] and deps.extras == ["socks"]
    assert deps.constraints == ["idna==2.8", "pytest==3.10.1"]

    extras = (
        "from setuptools import setup\nEXTRAS = {'testing': ['pytest'], 'docs': []}\nsetup(extras_require=EXTRAS)\n"
    )
    deps = read_ci_dependencies(_tree(tmp_path / "setup", {"setup.py": extras}), "3.11")
    assert deps.extras == ["testing"] and deps.used == ["setup.py extra [testing]"]

    plain = _tree(tmp_path / "plain", {"requirements_test.txt": "-r requirements.txt\nhypothesis\n",
                                       "requirements.txt": "numpy\n"})  # fmt: skip
    deps = read_ci_dependencies(plain, "3.11")
    assert deps.requirements == ["numpy", "hypothesis"] and deps.used == ["requirements_test.txt", "requirements.txt"]


def test_uv_lock_pins_become_constraints(tmp_path: Path) -> None:
    pyproject = PYPROJECT + '\n[dependency-groups]\ntest = ["iniconfig"]\n'
    tree = _tree(tmp_path, {"pyproject.toml": pyproject})
    subprocess.run(["uv", "lock", "--quiet", "--exclude-newer", "2021-06-01T00:00:00Z"], cwd=tree, check=True,
                   capture_output=True, timeout=300)  # fmt: skip
    deps = read_ci_dependencies(tree, "3.11")
    assert "iniconfig==1.1.1" in deps.constraints and deps.requirements == ["iniconfig"]
    assert deps.used[-1].startswith("uv.lock (") and deps.used[0] == "pyproject.toml [dependency-groups] test"


# --- the Python and the date ----------------------------------------------------------------------------------


def test_python_of_the_commits_era_that_the_project_allows() -> None:
    installed = ["3.7", "3.8", "3.9", "3.10", "3.11", "3.12", "3.13"]
    at = lambda text: datetime.fromisoformat(text)  # noqa: E731
    assert choose_python(">=3.10", at("2026-06-01T00:00:00+00:00"), "3.11", installed) == "3.11"  # cascade's own
    assert choose_python(">=3.12", at("2025-11-30T00:00:00+00:00"), "3.11", installed) == "3.13"
    assert choose_python(None, at("2021-12-01T00:00:00+00:00"), "3.11", installed) == "3.9"
    assert choose_python(">=3.12", at("2023-01-01T00:00:00+00:00"), "3.11", installed) == "3.12"  # none of the era
    assert choose_python("<3.6", None, "3.11", installed) is None


def test_requires_python_from_pyproject_or_setup(tmp_path: Path) -> None:
    assert requires_python(_tree(tmp_path / "a", {"pyproject.toml": PYPROJECT})) == ">=3.8"
    setup = "setup(name='x', python_requires='>=3.6, <4')\n"
    assert requires_python(_tree(tmp_path / "b", {"setup.py": setup})) == ">=3.6, <4"


@pytest.mark.parametrize(
    ("tag", "commits", "prefix"), [("9.2.0.dev0", 2, "9.2.0.dev2+g"), ("v1.2.0", 1, "1.2.1.dev1+g")]
)
def test_scm_version_file_follows_setuptools_scm_and_is_pep440(
    make_repo: MakeRepo, tag: str, commits: int, prefix: str
) -> None:
    repo = make_repo({"pyproject.toml": '[tool.setuptools_scm]\nwrite_to = "src/pkg/_version.py"\n',
                      "src/pkg/__init__.py": ""})  # fmt: skip
    run_git(repo, "tag", tag)
    for n in range(commits):
        run_git(repo, "commit", "-q", "--allow-empty", "-m", f"c{n}")
    written = write_scm_version_file(repo)
    assert written == repo / "src/pkg/_version.py"
    scope: dict[str, object] = {}
    exec(written.read_text(), scope)  # the file this test just generated
    assert str(scope["version"]).startswith(prefix) and Version(str(scope["version"]))


# --- resolving and building, with real uv --------------------------------------------------------------------


def _dated_repo(make_repo: MakeRepo, files: dict[str, str], when: str) -> Path:
    repo = make_repo({"demo.py": "X = 1\n"})
    for rel, text in files.items():
        (repo / rel).write_text(text)
    run_git(repo, "add", "-A")
    env = {**os.environ, "GIT_COMMITTER_DATE": when, "GIT_AUTHOR_DATE": when}
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@e.invalid", "commit", "-q", "-m",
                    "dated"], check=True, env=env)  # fmt: skip
    return repo


def _config(tmp_path: Path, **env: object) -> CascadeConfig:
    return parse_config({"env": {"cache_dir": str(tmp_path / "envs"), **env}})


@pytest.mark.slow
def test_an_old_commit_gets_its_ci_dependencies_as_of_its_date(make_repo: MakeRepo, tmp_path: Path) -> None:
    repo = _dated_repo(make_repo, {"setup.py": SETUP, "requirements-dev.txt": "six\n"}, "2021-06-01T12:00:00Z")
    env = make_environment(_config(tmp_path), "acme/demo", repo)
    assert env.python_version.startswith("3.8.")  # the newest installed Python released a year before the commit
    assert "requirements-dev.txt" in env.description and "as of 2021-06-01T12:00:00Z" in env.description
    script = "import importlib.metadata as m; print(*(m.version(p) for p in ('six', 'pytest', 'demo')))"
    out = subprocess.run([env.python, "-c", script], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["1.16.0", "6.2.4", "1.0"]  # six from the CI's file and pytest as of the date; the project too
    assert env.venv_dir and any(Path(env.venv_dir).glob("lib/python*/site-packages/__pycache__/six.*.pyc"))
    again = make_environment(_config(tmp_path), "acme/demo", repo)
    assert again.venv_dir == env.venv_dir  # cached by what it resolved to


@pytest.mark.slow
def test_without_ci_dependencies_or_date_the_configured_packages_decide(make_repo: MakeRepo, tmp_path: Path) -> None:
    repo = _dated_repo(make_repo, {"setup.py": SETUP, "requirements-dev.txt": "six\n"}, "2021-06-01T12:00:00Z")
    env = make_environment(_config(tmp_path, ci_dependencies=False, exclude_newer=None), "acme/demo", repo)
    assert env.python_version.startswith(f"{sys.version_info[0]}.{sys.version_info[1]}.")
    found = subprocess.run([env.python, "-c", "import six"], capture_output=True)
    assert found.returncode != 0  # not installed: the CI's file was not read


@pytest.mark.slow
def test_pins_the_index_no_longer_serves_are_dropped_and_said(make_repo: MakeRepo, tmp_path: Path) -> None:
    dev = "iniconfig\ncascade-no-such-package-xyz\n-c constraints.txt\n"
    files = {"setup.py": SETUP, "requirements-dev.txt": dev, "constraints.txt": "iniconfig==0.0.42\n"}
    repo = _dated_repo(make_repo, files, "2024-06-01T12:00:00Z")
    env = make_environment(_config(tmp_path), "acme/demo", repo)
    assert "dropped the pin of iniconfig" in env.description
    assert "dropped cascade-no-such-package-xyz (not on PyPI)" in env.description


@pytest.mark.slow
def test_an_unresolvable_dependency_skips_stage_2_with_the_resolvers_reason(
    make_repo: MakeRepo, tmp_path: Path
) -> None:
    files = {"setup.py": SETUP, "requirements-dev.txt": "iniconfig==1.1.1\niniconfig>=2\n"}
    repo = _dated_repo(make_repo, files, "2024-06-01T12:00:00Z")
    with pytest.raises(EnvironmentUnavailable) as caught:
        make_environment(_config(tmp_path), "acme/demo", repo)
    reason = str(caught.value)
    assert "\n" not in reason and "iniconfig" in reason and "unsatisfiable" in reason
    patch = "--- a/demo.py\n+++ b/demo.py\n@@ -1 +1 @@\n-X = 1\n+X = 2\n"
    request = ReviewRequest(repo=str(repo), patch_text=patch, config=_config(tmp_path))
    stage = review(request, stages=[ProbesStage()]).stages[0]
    assert stage.outcome is Outcome.SKIPPED and "unsatisfiable" in (stage.reason or "")


def test_swebench_rows_keep_the_harness_table_and_skip_the_ci_path() -> None:
    row = BenchCase(instance_id="psf__requests-1", model="m", repo="psf/requests", base_commit="0" * 40,
                    patch_text="", label=LabelClass.ACCEPTABLE, version="2.0")  # fmt: skip
    env = config_for_case(CascadeConfig(), row).env
    assert env.python == "3.9" and not env.ci_dependencies and env.exclude_newer is None


@pytest.mark.slow
def test_project_spec_names_its_sources_and_the_commit_date(make_repo: MakeRepo) -> None:
    repo = _dated_repo(make_repo, {"pyproject.toml": PYPROJECT}, "2024-02-03T04:05:06+02:00")
    spec = project_spec(repo, "demo")
    assert spec.exclude_newer == datetime(2024, 2, 3, 2, 5, 6, tzinfo=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert spec.sources == ["the project's declared dependencies only (its CI states no test dependencies)"]


@pytest.mark.slow
def test_a_tree_that_is_no_package_still_gets_its_test_dependencies(make_repo: MakeRepo, tmp_path: Path) -> None:
    repo = _dated_repo(make_repo, {"requirements-dev.txt": "six\n", "pyproject.toml": "[tool.ruff]\n"},
                       "2024-06-01T12:00:00Z")  # fmt: skip
    env = make_environment(_config(tmp_path), "acme/scripts", repo)
    assert subprocess.run([env.python, "-c", "import six, pytest"], capture_output=True).returncode == 0


FAST_C = """\
#include <Python.h>
static PyObject *twice(PyObject *self, PyObject *arg) { return PyLong_FromLong(2 * PyLong_AsLong(arg)); }
static PyMethodDef methods[] = {{"twice", twice, METH_O, ""}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fast", NULL, -1, methods};
PyMODINIT_FUNC PyInit__fast(void) { return PyModule_Create(&module); }
"""


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")
def test_a_project_that_declares_extensions_gets_them_built_in_the_tree(make_repo: MakeRepo, tmp_path: Path) -> None:
    setup = "from setuptools import Extension, setup\n" + (
        'setup(name="pkg", ext_modules=[Extension("pkg._fast", ["pkg/_fast.c"])])\n'
    )
    api = "from pkg._fast import twice\n\n\ndef quad(x):\n    return twice(twice(x))\n"
    test = "from pkg.api import quad\n\n\ndef test_quad():\n    assert quad(1) == 4\n"
    repo = make_repo({"setup.py": setup, "pkg/__init__.py": "", "pkg/_fast.c": FAST_C, "pkg/api.py": api,
                      "tests/test_api.py": test})  # fmt: skip
    patch = diff_of(repo, {"pkg/api.py": api + "\n\ndef half(x):\n    return x // 2\n"})
    config = parse_config({"env": {"cache_dir": str(tmp_path / "envs")}, "probes": {"sources": []}})
    stage = review(ReviewRequest(repo=str(repo), patch_text=patch, config=config), stages=[ProbesStage()]).stages[0]
    summaries = [e.summary for e in stage.evidence]
    assert any("compiled extensions: build" in s for s in summaries), summaries
    assert any("1 nearby test(s) passing on base still pass" in s for s in summaries), summaries  # it imported _fast
