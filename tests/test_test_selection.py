"""Regression selection (docs/architecture.md, Test selection): import graph, one in-repo hop, test names; and Stage 2
running it under its time budget, on a real repository with real pytest runs."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from cascade.config import parse_config
from cascade.execution.test_selection import (
    SelectedTests,
    changed_functions,
    chunked,
    named_after,
    named_after_package,
    regression_plan,
    select_tests,
)
from cascade.imports import imported_modules
from cascade.models import EvidenceKind, Outcome, RegressionDetails, ReviewRequest
from cascade.patch import parse_patch
from cascade.paths import pytest_file_patterns
from cascade.pipeline import review
from cascade.sandbox.base import Sandbox
from cascade.stages.probes import ProbesStage
from tests.support import MakeRepo, diff_of

CORE = "def scale(x):\n    return 2 * x\n\n\ndef unrelated():\n    return 1\n"
USER = "from .core import scale\n\n\ndef area(w, h):\n    return scale(w) * h\n"
FILES = {
    "pkg/__init__.py": "",
    "pkg/core.py": CORE,
    "pkg/user.py": USER,
    "tests/test_core.py": "from pkg.core import scale\n\n\ndef test_core():\n    assert scale(1) == 2\n",
    "tests/test_direct.py": "from pkg import core\n\n\ndef test_direct():\n    assert core.scale(2) == 4\n",
    "tests/test_hop.py": "from pkg.user import area\n\n\ndef test_area():\n    assert area(1, 3) == 6\n",
    "tests/test_misc.py": (
        "def test_scale_by_name():\n    from pkg.user import scale\n    assert scale(3) == 6\n\n\n"
        "def test_other():\n    assert True\n"
    ),
    "tests/test_far.py": "import os\n\n\ndef test_far():\n    assert os.sep\n",
}


def tracked(repo: Path) -> list[str]:
    return subprocess.run(["git", "ls-files", "*.py"], cwd=repo, capture_output=True, text=True).stdout.split()


def test_selection_order_name_import_test_name_hop(make_repo: MakeRepo) -> None:
    repo = make_repo(FILES)
    got = select_tests(repo, tracked(repo), ["pkg/core.py"], {"scale"})
    assert got == [
        SelectedTests(target="tests/test_core.py", reason="name"),
        SelectedTests(target="tests/test_direct.py", reason="import"),
        SelectedTests(target="tests/test_misc.py::test_scale_by_name", reason="test_name"),
        SelectedTests(target="tests/test_hop.py", reason="import_hop"),
        SelectedTests(target="tests/test_misc.py", reason="import_hop"),  # its other tests too
    ]


def test_test_files_named_with_a_prefix_or_the_projects_own_pattern() -> None:
    assert named_after("tests/test_ext_viewcode.py", {"viewcode"})  # sphinx: test_<package>_<module>
    assert named_after("tests/checkers/unittest_misc.py", {"misc"})  # pylint: unittest_<module>
    assert named_after("pkg/core_test.py", {"core"})
    assert not named_after("tests/test_oldcore.py", {"core"})
    assert not named_after("tests/test_core_extra.py", {"core"})


def test_test_files_named_after_the_package_where_its_tests_live() -> None:
    assert named_after_package("tests/test_requests.py", {"requests.models"})  # top-level package, tests/ beside it
    assert named_after_package("tests/config/test_config.py", {"pylint.config.init"})  # mirrored tests tree
    assert named_after_package("sympy/physics/vector/tests/test_vector.py", {"sympy.physics.vector.point"})
    assert not named_after_package("sympy/unify/tests/test_sympy.py", {"sympy.printing.ccode"})
    assert not named_after_package("sympy/physics/quantum/tests/test_printing.py", {"sympy.printing.ccode"})
    assert not named_after_package("tests/test_models.py", {"requests.models"})  # the module itself: not a package


def test_regression_selection_reads_the_projects_python_files_and_package_names(make_repo: MakeRepo) -> None:
    files = {
        "setup.cfg": "[tool:pytest]\npython_files = *test_*.py\n",
        "shop/__init__.py": "from .models import value\n",
        "shop/models.py": "def value():\n    return 1\n",
        "tests/unittest_models.py": "def test_value():\n    assert True\n",
        "tests/test_shop.py": "import shop\n\n\ndef test_shop():\n    assert shop.value() == 1\n",
        "tests/test_other.py": "def test_other():\n    assert True\n",
    }
    repo = make_repo(files)
    assert pytest_file_patterns(repo) == ["*test_*.py"]
    patch = parse_patch(diff_of(repo, {"shop/models.py": "def value():\n    return 2 - 1\n"}))
    assert regression_plan(patch, repo, repo).nearby == ["tests/unittest_models.py", "tests/test_shop.py"]


def test_pyproject_python_files_wins_over_defaults(make_repo: MakeRepo) -> None:
    repo = make_repo({"pyproject.toml": '[tool.pytest.ini_options]\npython_files = ["check_*.py"]\n', "a.py": ""})
    assert pytest_file_patterns(repo) == ["check_*.py"]
    assert pytest_file_patterns(make_repo({"a.py": ""})) == []


def test_relative_imports_resolve_against_the_package() -> None:
    assert imported_modules("from .core import scale\nfrom .. import top\n", "pkg/sub/user.py") == {
        "pkg.sub.core", "pkg.sub.core.scale", "pkg", "pkg.top",
    }  # fmt: skip
    assert imported_modules("from . import core\n", "pkg/sub/__init__.py") == {"pkg.sub", "pkg.sub.core"}
    assert "a.b" in imported_modules("import a.b as c, os\n", "x.py")
    assert imported_modules('"""Example:\n\nfrom pkg import core\n"""\nimport os\n', "t.py") == {"os"}  # code only


def test_the_nearby_pick_is_the_first_chunk_and_reads_relative_imports(make_repo: MakeRepo) -> None:
    """A test package importing the changed module relatively is an importer for the nearby pick too (it once read
    absolute imports only, while the wider selection read relative ones); an import in a docstring is none."""
    files = {
        **FILES,
        "pkg/tests/__init__.py": "",
        "pkg/tests/test_relative.py": "from ..core import scale\n\n\ndef test_r():\n    assert scale(1) == 2\n",
        "tests/test_doc.py": '"""Try it:\n\nfrom pkg.core import scale\n"""\n\n\ndef test_d():\n    assert True\n',
    }
    repo = make_repo(files)
    patch = parse_patch(diff_of(repo, {"pkg/core.py": CORE.replace("2 * x", "x * 2")}))
    plan = regression_plan(patch, repo, repo, max_files=3)
    assert plan.nearby == ["tests/test_core.py", "pkg/tests/test_relative.py", "tests/test_direct.py"]
    whole = select_tests(repo, tracked(repo), ["pkg/core.py"], {"scale"})
    assert [s.target for s in whole[:3]] == plan.nearby and plan.wider == whole[3:]
    assert "tests/test_doc.py" not in {s.target for s in whole}


def test_changed_functions_and_chunks() -> None:
    assert changed_functions(CORE, {2}) == {"scale"}
    sel = [SelectedTests(target=f"t{i}.py", reason="import") for i in range(5)]
    sel += [SelectedTests(target="t.py::test_a", reason="test_name")]
    assert chunked(sel, files_per_chunk=4) == [["t0.py", "t1.py", "t2.py", "t3.py"], ["t4.py"], ["t.py::test_a"]]


@pytest.mark.slow
def test_stage_finds_a_crash_only_a_one_hop_test_sees(make_repo: MakeRepo, sandbox: Sandbox) -> None:
    """The nearby files pass; the hop importer's test crashes on the patch → reject, attributed to the wider chunk."""
    files = dict(FILES)
    files["tests/test_core.py"] = "def test_core():\n    assert True\n"
    files["tests/test_direct.py"] = "from pkg import core\n\n\ndef test_direct():\n    assert core.unrelated() == 1\n"
    repo = make_repo(files)
    patch = diff_of(repo, {"pkg/core.py": CORE.replace("return 2 * x", "return 2 * x.value")})
    for exhaustive, expected in ((False, 1), (True, 2)):  # the default stops at the first rejecting chunk
        config = parse_config(
            {"env": {"use_current_interpreter": True}, "probes": {"sources": [], "exhaustive": exhaustive}}
        )
        request = ReviewRequest(repo=str(repo), patch_text=patch, config=config)
        result = review(request, stages=[ProbesStage(sandbox=sandbox)]).stages[0]
        assert result.outcome == Outcome.REJECT, result.reason
        regressions = [e for e in result.evidence if e.kind == EvidenceKind.REGRESSION]
        assert len(regressions) == expected
    assert {e.details.test_id for e in regressions} == {"tests/test_misc.py::test_scale_by_name",
                                                           "tests/test_hop.py::test_area"}  # fmt: skip
    assert all(e.details.chunk > 0 and e.details.verdict == "reject" for e in regressions)
    assert {e.details.selected_by for e in regressions} == {"test_name", "import_hop"}


@pytest.mark.slow
def test_budget_cuts_the_wider_selection_and_says_so(make_repo: MakeRepo, sandbox: Sandbox) -> None:
    repo = make_repo(FILES)
    patch = diff_of(repo, {"pkg/core.py": CORE.replace("return 2 * x", "return 2 * x.value")})
    config = parse_config(
        {"env": {"use_current_interpreter": True}, "probes": {"sources": [], "regression_budget_seconds": 1}}
    )
    request = ReviewRequest(repo=str(repo), patch_text=patch, config=config)
    result = review(request, stages=[ProbesStage(sandbox=sandbox)]).stages[0]
    assert result.outcome == Outcome.REJECT  # the nearby files (always run) already catch this one
    assert any("budget of 1 s spent" in e.summary for e in result.evidence) or all(
        e.details.chunk == 0 for e in result.evidence if isinstance(e.details, RegressionDetails)
    )
