"""The run model (docs/architecture.md, "Run model") on real bwrap and Docker runs: the host never follows a run's
tree, everything a run produced is untrusted text, the run sees no real credential, its amounts are bounded, its
witnesses cannot be switched off, its outcomes cannot be rewritten, and records are judged per test."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from cascade.config import parse_config
from cascade.decoys import decoys
from cascade.models import EvidenceKind, Outcome, ReviewRequest, SideEffect, SideEffectDetails, StageResult, Verdict
from cascade.pipeline import review
from cascade.sandbox.base import RunResult, RunSpec, Sandbox
from cascade.stages.probes import ProbesStage
from tests.support import ISOLATING_BACKENDS, MakeRepo, diff_of, run_git, sandbox_backend

pytestmark = pytest.mark.slow  # every test runs sandboxed pytest sessions (seconds each)

CALC = "def divide(a, b):\n    return a / b\n"
FIXED = "def divide(a, b):\n    if b == 0:\n        return None\n    return a / b\n"
TESTS = "from pkg.calc import divide\n\n\ndef test_divide():\n    assert divide(4, 2) == 2\n"
BASE = {"pkg/__init__.py": "", "pkg/calc.py": CALC, "tests/__init__.py": "", "tests/test_calc.py": TESTS}
ZERO = "from pkg.calc import divide\n\n\ndef test_zero():\n    assert divide(1, 0) is None\n"


@pytest.fixture(scope="module", params=ISOLATING_BACKENDS)
def sandbox(request: pytest.FixtureRequest) -> Sandbox:
    """Both isolating backends: the run model is one design every backend implements."""
    return sandbox_backend(request.param)


def verdict_of(repo: Path, patch: str, sandbox: Sandbox, **probes: object) -> Verdict:
    config = parse_config({"env": {"use_current_interpreter": True}, "probes": dict(probes)})
    return review(ReviewRequest(repo=str(repo), patch_text=patch, config=config), stages=[ProbesStage(sandbox=sandbox)])


def stage2(repo: Path, patch: str, sandbox: Sandbox, **probes: object) -> StageResult:
    return verdict_of(repo, patch, sandbox, **probes).stages[0]


def records(result: StageResult, harmful: bool = True) -> list[SideEffect]:
    found = [e.details for e in result.evidence if isinstance(e.details, SideEffectDetails)]
    return [r for details in found for r in details.side_effects if r.benign != harmful]


def python(sandbox: Sandbox, code: str, **spec: object) -> RunResult:
    return sandbox.run(RunSpec.model_validate({"argv": ["python3", "-c", code], "timeout_seconds": 60, **spec}))


# -- 1. the host never follows a path through a run's tree ---------------------------------------------------------


def test_a_tree_swapped_for_a_link_never_steers_a_host_write(
    make_repo: MakeRepo, sandbox: Sandbox, tmp_path: Path
) -> None:
    """The PR's test turns the tests directory into a link to a host directory during the first run; the gate used
    to write the PR's next test file through it (onto the host, with its own privileges). Each run now gets a fresh
    tree, and the link it leaves is a record."""
    outside = tmp_path / "host-dir"
    outside.mkdir()
    swap = TESTS + (
        "\n\ndef test_swap():\n    import os, shutil\n    here = os.path.dirname(os.path.abspath(__file__))\n"
        f"    shutil.move(here, here + '-old')\n    os.symlink({str(outside)!r}, here)\n"
    )
    repo = make_repo(BASE)
    patch = diff_of(repo, {"pkg/calc.py": FIXED, "tests/test_calc.py": swap, "tests/test_zero.py": ZERO})
    result = stage2(repo, patch, sandbox)
    assert list(outside.iterdir()) == [], "the gate wrote through a link the run planted"
    links = [r for r in records(result) if "symlink" in str(r.detail)]
    assert links and str(outside) in str(links[0].detail), records(result)
    assert result.outcome == Outcome.REJECT


def test_a_report_file_swapped_for_a_link_is_never_read(make_repo: MakeRepo, sandbox: Sandbox, tmp_path: Path) -> None:
    """After pytest wrote its junit file, the run replaces it with a link to a host file: the host used to read and
    publish it. It is refused (never opened), and the refusal is a record."""
    secret = tmp_path / "host-secret.xml"
    secret.write_text('<testsuite><testcase name="t"><failure message="HOST-SECRET-7431"/></testcase></testsuite>')
    swap = ZERO + (
        "\n\ndef test_link_report():\n    import atexit, os, sys\n"
        "    report = next(a.split('=', 1)[1] for a in sys.argv if a.startswith('--junitxml='))\n"
        f"    atexit.register(lambda: (os.remove(report), os.symlink({str(secret)!r}, report)))\n"
    )
    repo = make_repo(BASE)
    verdict = verdict_of(repo, diff_of(repo, {"pkg/calc.py": FIXED, "tests/test_zero.py": swap}), sandbox)
    assert "HOST-SECRET-7431" not in verdict.model_dump_json()
    refused = [r for r in records(verdict.stages[0]) if r.kind == "tampering" and "junit.xml" in str(r.target)]
    assert refused and "symbolic link" in str(refused[0].detail), records(verdict.stages[0])


# -- 2. everything derived from a run is untrusted text --------------------------------------------------------------

LEAKS = {
    "plain-in-assert": "    assert os.environ['GITHUB_TOKEN'] == 'x'\n",
    "base64-split": "    import base64\n    text = base64.b64encode(os.environ['GITHUB_TOKEN'].encode()).decode()\n"
    "    print('\\n'.join(text[i:i + 8] for i in range(0, len(text), 8)))\n    assert False\n",
    "reversed-argv": "    import subprocess\n    subprocess.run(['true', os.environ['NPM_TOKEN'][::-1]])\n",
}


@pytest.mark.parametrize("how", sorted(LEAKS))
def test_a_decoy_in_any_output_is_a_leak_and_never_reaches_the_report(
    make_repo: MakeRepo, sandbox: Sandbox, how: str
) -> None:
    leaking = ZERO + "\n\ndef test_leak():\n    import os\n" + LEAKS[how]
    repo = make_repo(BASE)
    verdict = verdict_of(repo, diff_of(repo, {"pkg/calc.py": FIXED, "tests/test_zero.py": leaking}), sandbox)
    assert verdict.stages[0].outcome == Outcome.REJECT, verdict.reason
    assert any(r.kind == "leak" for r in records(verdict.stages[0])), records(verdict.stages[0])
    text = verdict.model_dump_json()
    assert not any(value in text for value in decoys().values())


def test_a_token_shaped_string_that_is_no_decoy_is_no_leak(make_repo: MakeRepo, sandbox: Sandbox) -> None:
    twin = (
        ZERO
        + "\n\ndef test_token_shape():\n    print('ghp_' + 'Ab1' * 12)\n    assert len('ghp_' + 'Ab1' * 12) == 40\n"
    )
    repo = make_repo(BASE)
    result = stage2(repo, diff_of(repo, {"pkg/calc.py": FIXED, "tests/test_zero.py": twin}), sandbox)
    assert result.outcome == Outcome.PASS, result.reason
    assert not [r for r in records(result) if r.kind == "leak"]


# -- 3. the run sees no real credential ------------------------------------------------------------------------------


def test_the_runs_git_directory_is_a_credential_free_copy(make_repo: MakeRepo, sandbox: Sandbox) -> None:
    """actions/checkout persists the job token in .git/config; the run gets a .git with none of the real config."""
    repo = make_repo(BASE)
    token = "ghs_" + "Zq9" * 12
    run_git(repo, "config", "http.https://github.com/.extraheader", f"AUTHORIZATION: basic {token}")
    run_git(repo, "remote", "add", "origin", f"https://x-access-token:{token}@github.com/o/r")
    code = (
        "import os, subprocess\nfor root, dirs, files in os.walk('/'):\n"
        "    dirs[:] = [d for d in dirs if root + d not in ('/proc', '/sys', '/dev', '/usr')]\n"
        "    for f in files:\n        p = os.path.join(root, f)\n        try:\n"
        f"            if {token!r}.encode() in open(p, 'rb').read(1 << 20):\n                print('FOUND', p)\n"
        "        except OSError:\n            pass\n"
        "print(subprocess.run(['git', '-c', 'safe.directory=*', 'log', '-1', '--format=%s'], capture_output=True,"
        " text=True).stdout)\n"
    )
    result = python(sandbox, code, tree=str(repo))
    assert result.exit_code == 0, result.stderr
    assert "FOUND" not in result.stdout and token not in result.stdout
    assert "base" in result.stdout  # git still works in the run's copy: the commit is readable


# -- 4. bounded amounts, enforced outside the run --------------------------------------------------------------------


def test_filling_the_disk_or_the_output_is_a_resource_limit(sandbox: Sandbox, tmp_path: Path) -> None:
    flood = (
        "import os, tempfile\nfor i in range(40):\n"
        "    open(os.path.join(tempfile.gettempdir(), str(i)), 'wb').write(b'x' * (1 << 20))\n"
    )
    disk = python(sandbox, flood, tree=str(tmp_path), disk_mb=8)
    assert any(e.kind == "resource_limit" and "disk quota" in e.detail for e in disk.harmful_side_effects), disk
    loud = python(sandbox, "import sys\nfor _ in range(3):\n    sys.stdout.write('y' * (1 << 20))\n", output_cap_mb=1)
    assert any(e.kind == "resource_limit" and e.target == "output" for e in loud.harmful_side_effects)
    assert len(loud.stdout) <= 1_000_000
    twin = python(sandbox, flood.replace("range(40)", "range(2)"), tree=str(tmp_path), disk_mb=8)
    assert twin.harmful_side_effects == [], twin.side_effects


# -- witnesses the run cannot silence, outcomes it cannot rewrite ----------------------------------------------------


def test_a_python_started_without_the_hook_is_still_watched_and_is_tampering(sandbox: Sandbox) -> None:
    child = "print(open('/'.join([__import__('os').path.expanduser('~'), '.ssh', 'id_rsa'])).read()[:5])"
    code = f"import subprocess, sys\nsubprocess.run([sys.executable, '-S', '-c', {child!r}])\n"
    result = python(sandbox, code)
    kinds = {(e.kind, e.source) for e in result.harmful_side_effects}
    assert ("credential_read", "strace") in kinds and ("tampering", "strace") in kinds, result.side_effects
    twin = python(sandbox, "import subprocess, sys\nsubprocess.run([sys.executable, '-c', 'print(1)'])\n")
    assert twin.harmful_side_effects == [], twin.side_effects


def test_switching_the_hook_off_is_tampering(sandbox: Sandbox) -> None:
    code = (
        "import gc, os\nfor o in gc.get_objects():\n    if type(o).__name__ == '_Recorder':\n        o.busy = True\n"
        "open(os.path.expanduser('~/.aws/credentials')).read()\n"
    )
    result = python(sandbox, code)
    assert any(e.kind == "tampering" and "recorder was switched off" in e.detail for e in result.harmful_side_effects)


def test_a_conftest_that_rewrites_failures_into_passes_cannot_hide_a_crash(
    make_repo: MakeRepo, sandbox: Sandbox
) -> None:
    rewriting = (
        "import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
        "    outcome = yield\n    report = outcome.get_result()\n    if report.failed:\n"
        "        report.outcome = 'passed'\n        report.longrepr = None\n"
    )
    repo = make_repo(BASE)
    crashing = CALC.replace("return a / b", "return a.value / b")
    result = stage2(repo, diff_of(repo, {"pkg/calc.py": crashing, "tests/conftest.py": rewriting}), sandbox)
    assert result.outcome == Outcome.REJECT, result.reason
    assert any("pytest_runtest_makereport" in e.summary for e in result.evidence if e.kind == EvidenceKind.INFO)
    tampering = [r for r in records(result) if r.kind == "tampering"]
    assert tampering and "rewrote the outcome" in str(tampering[0].detail), records(result)


# The patched module itself (no conftest: no hook finding, no re-run without it) crashes the existing test, then at
# exit appends a pass for that test through the gate plugin's own writer and empties the junit report.
FORGER = (
    "import atexit, sys\n\n\ndef _cover():\n    import pytest_report_props as plugin\n"
    "    plugin._emit({'event': 'outcome', 'nodeid': 'tests/test_calc.py::test_divide', 'when': 'call',\n"
    "                  'outcome': 'passed', 'wasxfail': False, 'raw': None, 'assertion': False})\n"
    "    for arg in sys.argv:\n        if arg.startswith('--junitxml='):\n"
    "            with open(arg.split('=', 1)[1], 'w') as report:\n                report.write('<testsuites/>')\n\n\n"
    "atexit.register(_cover)\n\n\n"
)
# Its benign twin: a module that does ordinary work at exit.
AT_EXIT = "import atexit, tempfile\n\n\natexit.register(lambda: tempfile.TemporaryFile().close())\n\n\n"


def test_records_the_runs_code_appends_in_the_plugins_name_cannot_hide_a_crash(
    make_repo: MakeRepo, sandbox: Sandbox
) -> None:
    repo = make_repo(BASE)
    crashing = FORGER + CALC.replace("return a / b", "return a.value / b")
    result = stage2(repo, diff_of(repo, {"pkg/calc.py": crashing}), sandbox)
    assert result.outcome == Outcome.REJECT, result.reason
    forged = [r for r in records(result) if r.kind == "tampering" and "outside that test's run" in r.detail]
    assert forged and forged[0].target == "tests/test_calc.py::test_divide", records(result)
    twin = stage2(repo, diff_of(repo, {"pkg/calc.py": AT_EXIT + FIXED}), sandbox)
    assert twin.outcome == Outcome.PASS, (twin.reason, records(twin))
    assert not [r for r in records(twin) if r.kind == "tampering"], records(twin)


def test_a_conftest_that_only_adds_a_fixture_is_no_finding(make_repo: MakeRepo, sandbox: Sandbox) -> None:
    fixture = "import pytest\n\n\n@pytest.fixture\ndef numbers():\n    return (4, 2)\n"
    repo = make_repo(BASE)
    result = stage2(repo, diff_of(repo, {"pkg/calc.py": FIXED, "tests/conftest.py": fixture}), sandbox)
    assert result.outcome == Outcome.PASS, result.reason
    assert not any("pytest hooks" in e.summary for e in result.evidence)


# -- attribution: unchanged tests on both trees ----------------------------------------------------------------------

NOISY = TESTS + (
    "\n\ndef test_connection_error():\n    import socket\n    try:\n"
    "        socket.create_connection(('127.0.0.1', 9), timeout=1)\n    except OSError:\n        pass\n"
)


def test_what_an_untouched_test_also_does_on_base_is_not_the_patchs(make_repo: MakeRepo, sandbox: Sandbox) -> None:
    """Like requests testing its own connection errors: the PR changes the test file, but not that test."""
    repo = make_repo({**BASE, "tests/test_calc.py": NOISY})
    patch = diff_of(repo, {"pkg/calc.py": FIXED, "tests/test_calc.py": NOISY + "\n\n" + ZERO.split("\n\n\n")[1]})
    result = stage2(repo, patch, sandbox)
    assert result.outcome == Outcome.PASS, (result.reason, records(result))
    excused = [r for r in records(result, harmful=False) if "not the patch's" in str(r.detail)]
    assert excused and all(r.test == "tests/test_calc.py::test_connection_error" for r in excused), excused
    added = NOISY.replace("test_connection_error", "test_new_connection_error")  # the same act by a PR-added test
    patch = diff_of(repo, {"pkg/calc.py": FIXED, "tests/test_calc.py": NOISY + "\n\n" + added.split("\n\n\n", 2)[2]})
    result = stage2(repo, patch, sandbox)
    assert result.outcome == Outcome.REJECT, result.reason
    assert {r.test for r in records(result) if r.kind == "network"} == {"tests/test_calc.py::test_new_connection_error"}


CLASS_NOISY = (
    "import socket\n\nfrom pkg.calc import divide\n\n\nclass TestCalc:\n"
    "    def test_connection_error(self):\n        try:\n"
    "            socket.create_connection(('127.0.0.1', 9), timeout=1)\n        except OSError:\n            pass\n\n"
    "    def test_divide(self):\n        assert divide(4, 2) == 2\n"
)


def test_a_test_inserted_into_a_class_touches_only_itself(make_repo: MakeRepo, sandbox: Sandbox) -> None:
    """requests' fixes insert a test between others of a class (and may add an import for it): the class's other
    tests are still not the PR's, so what they also do on base is not the patch's."""
    repo = make_repo({**BASE, "tests/test_calc.py": CLASS_NOISY})
    zero = "    def test_zero(self):\n        assert math.isfinite(divide(1, 0) or 0)\n\n"
    inserted = CLASS_NOISY.replace("import socket\n", "import math\nimport socket\n")
    inserted = inserted.replace("    def test_divide", zero + "    def test_divide")
    result = stage2(repo, diff_of(repo, {"pkg/calc.py": FIXED, "tests/test_calc.py": inserted}), sandbox)
    assert result.outcome == Outcome.PASS, (result.reason, records(result))
    excused = [r for r in records(result, harmful=False) if "not the patch's" in r.detail]
    assert excused and {r.test for r in excused} == {"tests/test_calc.py::TestCalc::test_connection_error"}, excused


def test_a_test_failing_in_call_and_in_teardown_is_no_rewritten_report(make_repo: MakeRepo, sandbox: Sandbox) -> None:
    """pytest's junit lists such a test twice (a failure, then an error): that is not the report disagreeing."""
    torn = (
        "import pytest\n\nfrom pkg.calc import divide\n\n\n@pytest.fixture\ndef res():\n    yield\n"
        "    raise RuntimeError('teardown fails too')\n\n\ndef test_zero(res):\n    assert divide(1, 0) is None\n"
    )
    repo = make_repo(BASE)
    result = stage2(repo, diff_of(repo, {"pkg/calc.py": FIXED, "tests/test_torn.py": torn}), sandbox)
    assert not [r for r in records(result) if r.kind == "tampering"], records(result)


def test_a_chunk_whose_base_run_gave_nothing_is_not_run_on_the_patch(make_repo: MakeRepo, sandbox: Sandbox) -> None:
    hanging = TESTS + "\n\ndef test_hangs():\n    import time\n    time.sleep(600)\n"
    repo = make_repo({**BASE, "tests/test_calc.py": hanging})
    config = parse_config({"env": {"use_current_interpreter": True}, "sandbox": {"timeout_seconds": 5}})
    verdict = review(ReviewRequest(repo=str(repo), patch_text=diff_of(repo, {"pkg/calc.py": FIXED}), config=config),
                     stages=[ProbesStage(sandbox=sandbox)])  # fmt: skip
    result = verdict.stages[0]
    assert result.outcome == Outcome.INCONCLUSIVE, result.reason
    notes = [e.summary for e in result.evidence if "not run on the patch" in e.summary]
    assert notes and "timeout after 5s" in notes[0]
    assert "inconclusive" in verdict.reason


def test_git_still_works_in_the_runs_copy(make_repo: MakeRepo, sandbox: Sandbox) -> None:
    repo = make_repo(BASE)
    run_git(repo, "tag", "v1.2.3")
    code = ("import subprocess\nprint(subprocess.run(['git', '-c', 'safe.directory=*', 'describe', '--tags'], "
            "capture_output=True, text=True).stdout)")  # fmt: skip
    result = python(sandbox, code, tree=str(repo))
    assert "v1.2.3" in result.stdout, result.stderr
    assert not subprocess.run(["git", "-C", str(repo), "status", "--porcelain"], capture_output=True, text=True).stdout


def reuse_counts(result: StageResult) -> tuple[int, int, int, int]:
    """(base runs taken, asked, patched runs taken, asked) from the stage's line "probes: 2 of 5 base-tree and 0 of
    3 patched-tree test run(s) from the result store"."""
    (line,) = result.cost.reuse
    words = line.split()
    return int(words[1]), int(words[3]), int(words[6]), int(words[8])


def test_a_repeat_review_reuses_the_base_runs_with_their_records(
    make_repo: MakeRepo, sandbox: Sandbox, tmp_path: Path
) -> None:
    """The same base reviewed again with another patch (another agent's, another push): its base-tree runs come from
    the result store, records and all, its patched-tree runs are run afresh; the very same patch again (a re-run)
    takes its patched-tree runs, coverage included, from the store too. The decisions are the same."""
    repo = make_repo({**BASE, "tests/test_calc.py": NOISY})
    new_test = NOISY + "\n\n" + ZERO.split("\n\n\n")[1]
    patch = diff_of(repo, {"pkg/calc.py": FIXED, "tests/test_calc.py": new_test})
    other = diff_of(repo, {"pkg/calc.py": FIXED.replace("return None", "return None  # by zero"),
                           "tests/test_calc.py": new_test})  # fmt: skip
    config = parse_config({"env": {"use_current_interpreter": True}, "cache": {"dir": str(tmp_path / "cache")}})

    def stage(text: str) -> StageResult:
        request = ReviewRequest(repo=str(repo), patch_text=text, config=config)
        return review(request, stages=[ProbesStage(sandbox=sandbox)]).stages[0]

    first, another, again = stage(patch), stage(other), stage(patch)
    base_taken, base_asked, patched_taken, patched_asked = reuse_counts(first)
    assert base_taken < base_asked and patched_taken < patched_asked, first.cost  # a review may repeat its own run
    assert reuse_counts(another) == (base_asked, base_asked, 0, patched_asked), another.cost
    assert reuse_counts(again) == (base_asked, base_asked, patched_asked, patched_asked), again.cost
    for result in (another, again):
        assert (result.outcome, result.reason) == (first.outcome, first.reason) == (Outcome.PASS, result.reason)
        assert [e.summary for e in result.evidence] == [e.summary for e in first.evidence]
        excused = [r for r in records(result, harmful=False) if "not the patch's" in r.detail]
        assert excused, "the reused base run's records still excuse what the untouched test does"


def test_a_repeat_review_given_another_timeout_still_reuses_a_run_that_finished_within_it(
    make_repo: MakeRepo, sandbox: Sandbox, tmp_path: Path
) -> None:
    """A wider regression chunk's timeout is what is left of the review's budget, different on every review: it is no
    part of the key. A stored run that finished within the timeout a review gives stands for the run; one that took
    longer than that is run again."""
    repo = make_repo({**BASE, "tests/test_calc.py": NOISY})
    patch = diff_of(repo, {"pkg/calc.py": FIXED})

    def stage(timeout: float) -> StageResult:
        config = parse_config({"env": {"use_current_interpreter": True}, "cache": {"dir": str(tmp_path / "cache")},
                               "sandbox": {"timeout_seconds": timeout}})  # fmt: skip
        return review(ReviewRequest(repo=str(repo), patch_text=patch, config=config),
                      stages=[ProbesStage(sandbox=sandbox)]).stages[0]  # fmt: skip

    first, again = stage(300), stage(200)
    _, base_asked, _, patched_asked = reuse_counts(first)
    assert reuse_counts(again) == (base_asked, base_asked, patched_asked, patched_asked), again.cost
    assert (again.outcome, again.reason) == (first.outcome, first.reason)
    assert reuse_counts(stage(0.001))[::2] == (0, 0), "a run that took longer is run again"


def test_each_run_has_its_own_tree_and_scratch(sandbox: Sandbox, tmp_path: Path) -> None:
    """What one run leaves (in its tree, its $TMPDIR, its HOME) no later run sees; the pristine tree is untouched."""
    (tmp_path / "mod.py").write_text("X = 1\n")
    leave = ("import os, tempfile\nfor d in ('.', tempfile.gettempdir(), os.path.expanduser('~')):\n"
             "    print(d, os.path.exists(os.path.join(d, 'left.txt')))\n"
             "    open(os.path.join(d, 'left.txt'), 'w').write('x')\n")  # fmt: skip
    first = python(sandbox, leave, tree=str(tmp_path))
    second = python(sandbox, leave, tree=str(tmp_path))
    assert "True" not in first.stdout and "True" not in second.stdout, second.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mod.py"]


def test_a_temporary_file_a_c_program_removed_first_is_still_the_runs_own(sandbox: Sandbox) -> None:
    """ctypes.util.find_library links into a NamedTemporaryFile with gcc, which removes it when linking fails; the
    Python then deletes a path that is gone. The outside witness saw the run make it: no foreign deletion. A
    deletion of a path the run never made is still one."""
    made_elsewhere = ("import os, subprocess, tempfile\nf = tempfile.NamedTemporaryFile()\n"
                      "subprocess.run(['rm', '-f', f.name], check=True)\ntry:\n    f.close()\n"
                      "except FileNotFoundError:\n    pass\n")  # fmt: skip
    assert not [r for r in python(sandbox, made_elsewhere).side_effects if not r.benign and r.kind == "file_delete"]
    never_made = ("import os, tempfile\ntry:\n    os.remove(os.path.join(tempfile.gettempdir(), 'tmpabcdefgh'))\n"
                  "except FileNotFoundError:\n    pass\n")  # fmt: skip
    deleted = [r for r in python(sandbox, never_made).side_effects if not r.benign and r.kind == "file_delete"]
    assert [r.target.rsplit("/", 1)[1] for r in deleted] == ["tmpabcdefgh"], deleted


def test_what_base_start_up_does_before_its_session_begins_is_not_the_patchs(
    make_repo: MakeRepo, sandbox: Sandbox
) -> None:
    """xarray's dependencies read the AWS credentials at import; when the base conftest then fails to import, pytest
    stops before its session began and no test boundary covers those records. Nothing of the patch ran there (the PR
    only added a test function to the file placed on base), so they are not the patch's."""
    conftest = ("import os\n\ntry:\n    open(os.path.expanduser('~/.aws/credentials')).close()\nexcept OSError:\n"
                "    pass\nimport module_that_is_not_installed  # noqa: F401\n")  # fmt: skip
    repo = make_repo({**BASE, "tests/conftest.py": conftest})
    patch = diff_of(repo, {"pkg/calc.py": FIXED, "tests/test_calc.py": TESTS + "\n\n" + ZERO.split("\n\n\n")[1]})
    result = stage2(repo, patch, sandbox)
    assert not records(result), (result.reason, records(result))
    assert result.outcome == Outcome.INCONCLUSIVE, result.reason
    excused = [r for r in records(result, harmful=False) if r.kind == "credential_read"]
    assert excused and all("not the patch's" in r.detail for r in excused), excused


def test_what_the_trees_start_up_does_is_not_a_new_test_files_doing(make_repo: MakeRepo, sandbox: Sandbox) -> None:
    """fontconfig, loaded by the repository's conftest (seaborn's matplotlib), tries to create /var/cache before any
    test file is imported. A PR that adds a test file makes the rest of the session its own (its import runs there),
    but not the start-up: nothing of the PR has run yet."""
    conftest = "import os\n\ntry:\n    os.mkdir('/var/cache/fontconfig-like')\nexcept OSError:\n    pass\n"
    repo = make_repo({**BASE, "tests/conftest.py": conftest})
    result = stage2(repo, diff_of(repo, {"pkg/calc.py": FIXED, "tests/test_zero.py": ZERO}), sandbox)
    assert not records(result), (result.reason, records(result))
    assert result.outcome == Outcome.PASS, result.reason
    excused = [r for r in records(result, harmful=False) if "fontconfig-like" in r.target]
    assert excused and {r.test for r in excused} == {"startup"}, excused
    importing = ZERO + "\n\ntry:\n    os.mkdir('/var/cache/by-the-new-file')\nexcept OSError:\n    pass\n"
    importing = "import os\n" + importing
    result = stage2(repo, diff_of(repo, {"pkg/calc.py": FIXED, "tests/test_zero.py": importing}), sandbox)
    assert result.outcome == Outcome.REJECT, result.reason
    assert {r.test for r in records(result)} == {"session"}, records(result)
