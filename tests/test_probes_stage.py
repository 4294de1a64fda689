"""Stage 2 on real repositories, real pytest runs and a real sandbox (bwrap where it works)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cascade.config import CascadeConfig, parse_config
from cascade.execution.envs import current_environment
from cascade.models import EvidenceKind, Outcome, ReviewRequest, StageResult, Trace
from cascade.pipeline import review
from cascade.probesources.trace import mine_scripts, script_as_pytest
from cascade.sandbox.base import Sandbox
from cascade.stages.probes import ProbesStage
from cascade.traces import trace_from_data
from tests.support import MakeRepo, diff_of

CALC = '''\
def divide(a, b):
    """Divide; the issue: dividing by zero should give None."""
    return a / b


def label(x):
    return "old"
'''

CALC_TESTS = """\
from pkg.calc import divide, label


def test_divide():
    assert divide(4, 2) == 2


def test_label():
    assert label(1) == "old"
"""

BASE_FILES = {"pkg/__init__.py": "", "pkg/calc.py": CALC, "tests/test_calc.py": CALC_TESTS}

FIXED_CALC = CALC.replace("    return a / b", "    if b == 0:\n        return None\n    return a / b")
ZERO_TEST = "from pkg.calc import divide\n\n\ndef test_zero():\n    assert divide(1, 0) is None\n"


def run_stage(repo: Path, patch: str, sandbox: Sandbox, trace: Trace | None = None, **probes: object) -> StageResult:
    config = parse_config({"env": {"use_current_interpreter": True}, "probes": dict(probes)})
    request = ReviewRequest(repo=str(repo), patch_text=patch, trace=trace, config=config)
    verdict = review(request, stages=[ProbesStage(sandbox=sandbox)])
    return verdict.stages[0]


def kinds(result: StageResult, kind: EvidenceKind) -> list[str]:
    return [e.summary for e in result.evidence if e.kind == kind]


def test_crash_class_regression_rejects(make_repo: MakeRepo, sandbox: Sandbox) -> None:
    repo = make_repo(BASE_FILES)
    patch = diff_of(repo, {"pkg/calc.py": CALC.replace("return a / b", "return a.value / b")})
    result = run_stage(repo, patch, sandbox)
    assert result.outcome == Outcome.REJECT, result.reason
    regression = next(e for e in result.evidence if e.kind == EvidenceKind.REGRESSION)
    assert regression.grounded and regression.details.failure_class == "crash"
    assert regression.details.test_id == "tests/test_calc.py::test_divide"
    assert regression.details.exception == "AttributeError"
    assert "has no attribute 'value'" in regression.details.log_excerpt
    assert any("pytest" in c for c in regression.commands)


@pytest.mark.slow
def test_assertion_class_regression_is_evidence_only(make_repo: MakeRepo, sandbox: Sandbox) -> None:
    repo = make_repo(BASE_FILES)
    patch = diff_of(repo, {"pkg/calc.py": CALC.replace('return "old"', 'return "new"')})
    result = run_stage(repo, patch, sandbox)
    assert result.outcome == Outcome.PASS, result.reason
    regression = next(e for e in result.evidence if e.kind == EvidenceKind.REGRESSION)
    assert regression.grounded and regression.details.failure_class == "assertion"
    assert regression.details.test_id == "tests/test_calc.py::test_label"
    assert "'new' == 'old'" in regression.details.expected_vs_got


@pytest.mark.slow
def test_pr_test_failing_on_base_and_passing_on_patch_is_evidence_not_accept(
    make_repo: MakeRepo, sandbox: Sandbox
) -> None:
    repo = make_repo(BASE_FILES)
    patch = diff_of(repo, {"pkg/calc.py": FIXED_CALC, "tests/test_zero.py": ZERO_TEST})
    result = run_stage(repo, patch, sandbox, regression=False, probe_pass="accept")  # even under accept
    assert result.outcome == Outcome.PASS, result.reason
    probe = next(e for e in result.evidence if e.kind == EvidenceKind.PROBE)
    assert probe.details.test_id == "tests/test_zero.py::test_zero"
    assert probe.details.base.status == "behavioural_fail"
    assert probe.details.patched.status == "pass"
    assert probe.details.executed_changed_lines == {"pkg/calc.py": [3, 4]}


@pytest.mark.slow
def test_the_projects_own_coverage_settings_do_not_hide_which_lines_ran(make_repo: MakeRepo, sandbox: Sandbox) -> None:
    """pytest's own pyproject asks coverage for parallel data files (and flask's for ``source``): the gate's coverage
    of a probe run must still find its data and the changed lines it executed."""
    settings = '[tool.coverage.run]\nparallel = true\nsource = ["tests"]\n'
    repo = make_repo({**BASE_FILES, "pyproject.toml": settings})
    patch = diff_of(repo, {"pkg/calc.py": FIXED_CALC, "tests/test_zero.py": ZERO_TEST})
    result = run_stage(repo, patch, sandbox, regression=False)
    probe = next((e for e in result.evidence if e.kind == EvidenceKind.PROBE), None)
    assert probe is not None, kinds(result, EvidenceKind.INFO)
    assert probe.details.executed_changed_lines == {"pkg/calc.py": [3, 4]}


@pytest.mark.slow
def test_pr_test_still_failing_on_the_patch_rejects(make_repo: MakeRepo, sandbox: Sandbox) -> None:
    repo = make_repo(BASE_FILES)
    wrong_fix = CALC.replace("    return a / b", "    if b == 0:\n        return 0\n    return a / b")
    patch = diff_of(repo, {"pkg/calc.py": wrong_fix, "tests/test_zero.py": ZERO_TEST})
    result = run_stage(repo, patch, sandbox, regression=False)
    assert result.outcome == Outcome.REJECT, result.reason
    probe = next(e for e in result.evidence if e.kind == EvidenceKind.PROBE)
    assert probe.grounded and probe.details.patched.status == "behavioural_fail"
    assert "assert 0 is None" in probe.details.patched.excerpt


@pytest.mark.slow
def test_probe_failing_everywhere_without_touching_the_change_is_discarded(
    make_repo: MakeRepo, sandbox: Sandbox
) -> None:
    repo = make_repo(BASE_FILES)
    unrelated = "from pkg.calc import label\n\n\ndef test_unrelated():\n    assert label(2) == 'something else'\n"
    patch = diff_of(repo, {"pkg/calc.py": FIXED_CALC, "tests/test_other.py": unrelated})
    result = run_stage(repo, patch, sandbox, regression=False)
    assert result.outcome == Outcome.PASS, result.reason
    assert not kinds(result, EvidenceKind.PROBE)
    discarded = [s for s in kinds(result, EvidenceKind.INFO) if "discarded" in s and "test_unrelated" in s]
    assert discarded and discarded[0].endswith("(there: behavioural_fail)")


# An installed dependency newer than the project (flask 2.0 with Werkzeug 2.3): it deprecates what the project
# calls, and the project's pytest settings turn warnings into errors. Written outside the tree, where installed
# packages live, by the run itself.
OLD_DEP_CONFTEST = """\
import os, sys, tempfile

where = os.path.join(tempfile.gettempdir(), "site-packages")
os.makedirs(os.path.join(where, "olddep"), exist_ok=True)
with open(os.path.join(where, "olddep", "__init__.py"), "w") as f:
    f.write("import warnings\\n\\ndef parse(u):\\n    warnings.warn('parse is deprecated', DeprecationWarning)\\n"
            "    return u\\n")
sys.path.insert(0, where)
"""


@pytest.mark.slow
def test_a_dependencys_warning_raised_as_an_error_on_both_trees_is_no_reject(
    make_repo: MakeRepo, sandbox: Sandbox
) -> None:
    """The PR's test fails on both trees inside an installed package, with a warning the project's settings make an
    error: that says which versions were installed, not that the patch misses the fix."""
    repo = make_repo(
        {**BASE_FILES, "tests/conftest.py": OLD_DEP_CONFTEST, "pytest.ini": "[pytest]\nfilterwarnings = error\n"}
    )
    zero = "import olddep\nfrom pkg.calc import divide\n\n\n"
    zero += "def test_zero():\n    assert divide(olddep.parse(1), 0) is None\n"
    result = run_stage(repo, diff_of(repo, {"pkg/calc.py": FIXED_CALC, "tests/test_zero.py": zero}), sandbox,
                       regression=False)  # fmt: skip
    assert result.outcome == Outcome.INCONCLUSIVE, result.reason
    assert "installed version, not the code" in result.reason


BROKEN_DEP_CONFTEST = OLD_DEP_CONFTEST.replace("olddep", "brokendep").replace(
    "warnings.warn('parse is deprecated', DeprecationWarning)", "return {}.layers"
)


@pytest.mark.slow
def test_a_failure_inside_an_installed_package_the_same_on_both_trees_is_no_reject(
    make_repo: MakeRepo, sandbox: Sandbox
) -> None:
    """xarray 0.16's PR tests under the harness table's dask 2022: an AttributeError inside dask, identical with and
    without the fix. The installed versions decide that test, not the patch."""
    repo = make_repo({**BASE_FILES, "tests/conftest.py": BROKEN_DEP_CONFTEST})
    zero = "import brokendep\nfrom pkg.calc import divide\n\n\n"
    zero += "def test_zero():\n    assert divide(4, 2) == 2\n    brokendep.parse(1)\n"
    result = run_stage(repo, diff_of(repo, {"pkg/calc.py": FIXED_CALC, "tests/test_zero.py": zero}), sandbox,
                       regression=False)  # fmt: skip
    assert result.outcome != Outcome.REJECT, result.reason
    notes = [s for s in kinds(result, EvidenceKind.INFO) if "inside an installed package" in s]
    assert notes and "brokendep/__init__.py" in notes[0], kinds(result, EvidenceKind.INFO)


@pytest.mark.slow
def test_probe_with_setup_error_on_base_is_not_kept(make_repo: MakeRepo, sandbox: Sandbox) -> None:
    repo = make_repo(BASE_FILES)
    broken = "import cascade_missing_dep\n\n\ndef test_zero():\n    assert False\n"
    patch = diff_of(repo, {"pkg/calc.py": FIXED_CALC, "tests/test_zero.py": broken})
    result = run_stage(repo, patch, sandbox, regression=False)
    # Nothing got to judge the code: inconclusive, with the first cause — never a pass that ran nothing.
    assert result.outcome == Outcome.INCONCLUSIVE, result.reason
    assert result.reason == "no test could run: missing dependency in tests/test_zero.py"
    assert any("not kept: setup error on base (missing dependency)" in s for s in kinds(result, EvidenceKind.INFO))


def swe_agent_trace(script_lines: list[str]) -> Trace:
    """A hand-written SWE-agent trajectory: create, a refused edit, a real edit, a run."""
    body = "\n".join(script_lines)
    steps = [
        {"action": "create reproduce.py\n", "observation": "[File: /demo__demo/reproduce.py (1 lines total)]\n1:\n"},
        {
            "action": "edit 1:1\nthis is not python(\nend_of_edit\n",
            "observation": "Your proposed edit has introduced new syntax error(s). ...",
        },
        {
            "action": f"edit 1:1\nprint('draft')\n{body}\nend_of_edit\n",
            "observation": f"[File: /demo__demo/reproduce.py ({len(script_lines) + 1} lines total)]\n",
        },
        {"action": "edit 1:1\nimport sys\nend_of_edit\n", "observation": ""},
        {"action": "python reproduce.py\n", "observation": "Traceback ... ZeroDivisionError"},
        {"action": "open pkg/calc.py\n", "observation": ""},
        {"action": "edit 3:3\n    return a / b if b else None\nend_of_edit\n", "observation": ""},
    ]
    return trace_from_data({"trajectory": steps}, source="hand-written.traj")


def test_traj_edit_replay_gives_the_final_script() -> None:
    trace = swe_agent_trace(["from pkg.calc import divide", "assert divide(1, 0) is None"])
    scripts = mine_scripts(trace)
    assert [s.path for s in scripts] == ["reproduce.py"]
    assert scripts[0].content == "import sys\nfrom pkg.calc import divide\nassert divide(1, 0) is None\n"
    assert scripts[0].runs == 1 and scripts[0].consistent
    wrapper = script_as_pytest(scripts[0])
    compile(wrapper, "wrapper.py", "exec")
    assert "def test_agent_script" in wrapper


@pytest.mark.slow
def test_trace_probe_rejects_a_patch_that_does_not_fix_the_reproduction(make_repo: MakeRepo, sandbox: Sandbox) -> None:
    repo = make_repo(BASE_FILES)
    wrong_fix = CALC.replace("    return a / b", "    if b == 0:\n        return 0\n    return a / b")
    patch = diff_of(repo, {"pkg/calc.py": wrong_fix})
    trace = swe_agent_trace(["from pkg.calc import divide", "assert divide(1, 0) is None"])
    result = run_stage(repo, patch, sandbox, trace=trace, sources=["trace"], regression=False)
    assert result.outcome == Outcome.REJECT, result.reason
    probe = next(e for e in result.evidence if e.kind == EvidenceKind.PROBE)
    assert probe.details.origin == "trace"
    assert probe.details.base.message.startswith("ZeroDivisionError")


@pytest.mark.slow
def test_trace_probe_passing_on_the_fix_never_accepts(make_repo: MakeRepo, sandbox: Sandbox) -> None:
    repo = make_repo(BASE_FILES)
    patch = diff_of(repo, {"pkg/calc.py": FIXED_CALC})
    trace = swe_agent_trace(["from pkg.calc import divide", "assert divide(1, 0) is None"])
    result = run_stage(repo, patch, sandbox, trace=trace, sources=["trace"], regression=False, probe_pass="accept")
    assert result.outcome == Outcome.PASS, result.reason
    assert any("passes on the patch" in s for s in kinds(result, EvidenceKind.PROBE))


@pytest.mark.slow
def test_a_claude_code_session_yields_the_same_mined_probe(make_repo: MakeRepo, sandbox: Sandbox) -> None:
    repo = make_repo(BASE_FILES)
    wrong_fix = CALC.replace("    return a / b", "    if b == 0:\n        return 0\n    return a / b")
    patch = diff_of(repo, {"pkg/calc.py": wrong_fix})
    script = "from pkg.calc import divide\nassert divide(1, 0) is None\n"
    calls = [
        {"type": "tool_use", "id": "w", "name": "Write", "input": {"file_path": "/src/demo/r.py", "content": script}},
        {"type": "tool_use", "id": "r", "name": "Bash", "input": {"command": "cd /src/demo && python r.py"}},
    ]
    session = [{"type": "assistant", "cwd": "/src/demo", "message": {"role": "assistant", "content": calls}}]
    result = run_stage(repo, patch, sandbox, trace=trace_from_data(session), sources=["trace"], regression=False)
    assert result.outcome == Outcome.REJECT, result.reason
    probe = next(e for e in result.evidence if e.kind == EvidenceKind.PROBE)
    assert probe.details.origin == "trace" and probe.details.base.message.startswith("ZeroDivisionError")


@pytest.mark.slow
def test_side_effect_outside_the_worktree_rejects(make_repo: MakeRepo, sandbox: Sandbox) -> None:
    repo = make_repo(BASE_FILES)
    sneaky = (
        "import os\nfrom pkg.calc import divide\n\n\ndef test_zero():\n"
        "    with open(os.path.expanduser('~/.bashrc'), 'a') as f:\n        f.write('echo pwned\\n')\n"
        "    assert divide(1, 0) is None\n"
    )
    patch = diff_of(repo, {"pkg/calc.py": FIXED_CALC, "tests/test_zero.py": sneaky})
    bashrc = Path.home() / ".bashrc"
    before = bashrc.read_bytes() if bashrc.exists() else None
    result = run_stage(repo, patch, sandbox, regression=False)
    assert (bashrc.read_bytes() if bashrc.exists() else None) == before
    assert result.outcome == Outcome.REJECT, result.reason
    records = next(e for e in result.evidence if e.kind == EvidenceKind.SIDE_EFFECT).details.side_effects
    assert any(".bashrc" in r.target for r in records), records


def test_no_environment_is_skipped_never_decided(make_repo: MakeRepo, sandbox: Sandbox) -> None:
    repo = make_repo(BASE_FILES)
    patch = diff_of(repo, {"pkg/calc.py": FIXED_CALC})
    config = CascadeConfig.model_validate({"env": {"python": "/nonexistent/python3"}})
    request = ReviewRequest(repo=str(repo), patch_text=patch, config=config)
    result = review(request, stages=[ProbesStage(sandbox=sandbox)]).stages[0]
    assert result.outcome == Outcome.SKIPPED
    assert "no execution environment" in result.reason and "/nonexistent/python3" in result.reason


def test_current_interpreter_environment_runs_the_trees_code(make_repo: MakeRepo) -> None:
    env = current_environment()
    repo = make_repo(BASE_FILES)
    assert env.pythonpath(repo) == [str(repo)]
    assert env.run_env(repo)["TZ"] == "UTC"


@pytest.mark.slow
def test_only_tests_the_pr_touched_are_its_probes(make_repo: MakeRepo, sandbox: Sandbox) -> None:
    already_failing = CALC_TESTS + "\n\ndef test_old_failure():\n    assert divide(1, 1) == 2\n"
    repo = make_repo({**BASE_FILES, "tests/test_calc.py": already_failing})
    pr_version = already_failing + "\n\n" + ZERO_TEST.split("\n\n\n", 1)[1]
    patch = diff_of(repo, {"pkg/calc.py": FIXED_CALC, "tests/test_calc.py": pr_version})
    result = run_stage(repo, patch, sandbox, regression=False)
    assert result.outcome == Outcome.PASS, result.reason  # test_old_failure fails on both trees: not the PR's probe
    probes = [e.details.test_id for e in result.evidence if e.kind == EvidenceKind.PROBE]
    assert probes == ["tests/test_calc.py::test_zero"]


@pytest.mark.slow
def test_side_effects_the_projects_tests_have_on_base_too_are_not_the_patchs(
    make_repo: MakeRepo, sandbox: Sandbox
) -> None:
    """Like astropy making ~/.astropy on import: the base run does it as well, so it says nothing about the patch."""
    noisy = "import os\nos.makedirs(os.path.expanduser('~/.pkgconfig-dir'), exist_ok=True)\n"
    files = {**BASE_FILES, "pkg/__init__.py": noisy}
    repo = make_repo(files)
    harmless = diff_of(repo, {"pkg/calc.py": CALC.replace('return "old"', 'return "old"  # same')})
    result = run_stage(repo, harmless, sandbox, sources=[])
    assert result.outcome == Outcome.PASS, result.reason
    writing = CALC.replace(
        "    return a / b", "    open(os.path.expanduser('~/.calc-state'), 'w').close()\n    return a / b"
    )
    bad = run_stage(repo, diff_of(repo, {"pkg/calc.py": "import os\n" + writing}), sandbox, sources=[])
    assert bad.outcome == Outcome.REJECT, bad.reason
    effects = next(e for e in bad.evidence if e.kind == EvidenceKind.SIDE_EFFECT).details.side_effects
    assert {e.target.rsplit("/", 1)[-1] for e in effects if not e.benign} == {".calc-state"}
    excused = [e for e in effects if e.benign and e.target.endswith(".pkgconfig-dir")]
    assert excused and all("not the patch's" in e.detail for e in excused)  # kept, with the test that made it
