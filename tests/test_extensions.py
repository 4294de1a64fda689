"""Compiled extensions built once in the tree and reused, with a real C compiler and a real
Stage 2 run: the project's test imports a C module that exists only after ``setup.py build_ext --inplace``."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cascade.config import parse_config
from cascade.execution.envs import EnvironmentUnavailable, current_environment
from cascade.execution.extensions import build_key, ensure_extensions, install_products
from cascade.models import Outcome, ReviewRequest
from cascade.pipeline import review
from cascade.sandbox.base import Sandbox
from cascade.stages.probes import ProbesStage
from tests.support import MakeRepo, diff_of

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")

FAST_C = """\
#include <Python.h>
static PyObject *twice(PyObject *self, PyObject *arg) {
    long x = PyLong_AsLong(arg);
    return PyLong_FromLong(2 * x);
}
static PyMethodDef methods[] = {{"twice", twice, METH_O, ""}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fast", NULL, -1, methods};
PyMODINIT_FUNC PyInit__fast(void) { return PyModule_Create(&module); }
"""
SETUP = (
    "from setuptools import Extension, setup\n"
    'setup(name="pkg", ext_modules=[Extension("pkg._fast", ["pkg/_fast.c"])])\n'
)
API = "from pkg._fast import twice\n\n\ndef quad(x):\n    return twice(twice(x))\n"
FILES = {
    "setup.py": SETUP,
    "pkg/__init__.py": "",
    "pkg/_fast.c": FAST_C,
    "pkg/api.py": API,
    "tests/test_api.py": "from pkg.api import quad\n\n\ndef test_quad():\n    assert quad(1) == 4\n",
}


def test_build_once_then_reuse_and_copy_the_products(make_repo: MakeRepo, tmp_path: Path) -> None:
    repo = make_repo(FILES)
    env = current_environment()
    first = ensure_extensions(env, repo, ["pkg/api.py"], cache_dir=tmp_path / "builds")
    assert any(p.startswith("pkg/_fast") and p.endswith(".so") for p in first.products), first.products
    again = ensure_extensions(env, repo, ["pkg/api.py"], cache_dir=tmp_path / "builds")
    assert again == first  # the cached build: same key, nothing rebuilt
    assert build_key(repo, env) == first.key
    assert install_products(first, repo) == len(first.products)
    assert install_products(first, repo) == 0  # present already: left alone


def test_patch_changing_extension_sources_is_no_environment(make_repo: MakeRepo, tmp_path: Path) -> None:
    repo = make_repo(FILES)
    with pytest.raises(EnvironmentUnavailable, match="changes compiled-extension sources"):
        ensure_extensions(current_environment(), repo, ["pkg/_fast.c"], cache_dir=tmp_path / "builds")


@pytest.mark.slow
def test_stage2_runs_tests_that_need_the_built_extension(make_repo: MakeRepo, tmp_path: Path, sandbox: Sandbox) -> None:
    repo = make_repo(FILES)
    patch = diff_of(repo, {"pkg/api.py": API.replace("twice(twice(x))", "twice(twice(x)).bit_length")})
    config = parse_config(
        {
            "env": {"use_current_interpreter": True, "build_extensions": True, "cache_dir": str(tmp_path)},
            "probes": {"sources": []},
        }
    )
    request = ReviewRequest(repo=str(repo), patch_text=patch, config=config)
    result = review(request, stages=[ProbesStage(sandbox=sandbox)]).stages[0]
    assert any("compiled extensions: build" in e.summary for e in result.evidence), [e.summary for e in result.evidence]
    # quad now returns a method: the nearby test fails with an assertion on the patch (it passed on base, so the
    # extension was importable in both sandboxed runs)
    assert result.outcome == Outcome.PASS, result.reason
    regression = next(e for e in result.evidence if e.kind.value == "regression")
    assert regression.details.test_id == "tests/test_api.py::test_quad"
    assert regression.details.failure_class == "assertion"


def test_failing_build_reports_the_compiler_error_and_is_remembered(make_repo: MakeRepo, tmp_path: Path) -> None:
    repo = make_repo({**FILES, "pkg/_fast.c": FAST_C.replace("(2 * x);", "(2 * x")})
    env = current_environment()
    with pytest.raises(EnvironmentUnavailable, match="compiled extensions failed") as first:
        ensure_extensions(env, repo, ["pkg/api.py"], cache_dir=tmp_path / "builds")
    assert "error" in str(first.value).lower()
    with pytest.raises(EnvironmentUnavailable) as again:
        ensure_extensions(env, repo, ["pkg/api.py"], cache_dir=tmp_path / "builds")
    assert str(again.value) == str(first.value)
