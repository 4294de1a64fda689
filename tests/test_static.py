"""Stage 1 with real ruff and pyright on small git repositories (one shared base repository, many patches)."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

import cascade.tools
from cascade.config import CacheConfig, CascadeConfig, StaticConfig, parse_config
from cascade.context import ReviewContext
from cascade.models import Diagnostic, EvidenceKind, Outcome, ReviewRequest, StageResult, StaticDetails, Verdict
from cascade.patch import parse_patch
from cascade.pipeline import review, run_stages
from cascade.stable import reproducible
from cascade.stages.static import StaticStage
from cascade.static.fingerprint import fingerprint_all, new_diagnostics, normalize_message
from cascade.static.rules import RepoLayout, rule_class
from cascade.tools import find_tool
from tests.support import MakeRepo, diff_of, run_git

pytestmark = pytest.mark.skipif(shutil.which("pyright") is None, reason="pyright is not installed")

CORE = """import os
from typing import Optional


def add(a, b):
    return a + b


def helper(x):
    return x * 2


def maybe(flag: bool) -> Optional[str]:
    return "x" if flag else None


def legacy():
    return undefined_thing
"""

USER = """from pkg.core import helper


def use():
    return helper(3)
"""

# The repository's own settings try to silence exactly what Stage 1 must see; they must not apply.
PYPROJECT = """[tool.ruff]
exclude = ["pkg"]

[tool.ruff.lint]
ignore = ["F821", "F"]

[tool.pyright]
typeCheckingMode = "off"
reportUndefinedVariable = false
reportCallIssue = false
reportAttributeAccessIssue = false
exclude = ["pkg"]
"""

PYRIGHTCONFIG = '{"typeCheckingMode": "off", "reportUndefinedVariable": false, "exclude": ["pkg"]}\n'


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("static") / "repo"
    path.mkdir()
    run_git(path, "init", "-q", "-b", "main")
    files = {
        "pkg/__init__.py": "",
        "pkg/core.py": CORE,
        "pkg/user.py": USER,
        "pyproject.toml": PYPROJECT,
        "pyrightconfig.json": PYRIGHTCONFIG,
    }
    for rel, text in files.items():
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / rel).write_text(text)
    run_git(path, "add", "-A")
    run_git(path, "commit", "-q", "-m", "base")
    return path


def stage1(repo: Path, changes: dict[str, str | None]) -> StageResult:
    patch = diff_of(repo, changes)
    verdict = review(ReviewRequest(repo=str(repo), patch_text=patch), stages=[StaticStage()])
    return verdict.stages[0]


def static_diagnostics(result: StageResult, rejecting: bool) -> list[Diagnostic]:
    return [
        d
        for e in result.evidence
        if e.kind == EvidenceKind.STATIC and e.details.rejecting is rejecting
        for d in e.diagnostics
    ]


def classes(result: StageResult) -> dict[str, int]:
    counts: dict[str, int] = {}
    for e in result.evidence:
        if e.kind == EvidenceKind.STATIC:
            counts.update(e.details.counts_by_class)
    return counts


@pytest.mark.slow
def test_undefined_name_on_an_added_line_is_rejected_despite_the_repos_own_settings(repo: Path) -> None:
    patch = diff_of(repo, {"pkg/core.py": CORE.replace("return a + b", "return a + b + missing_name")})
    verdict = review(ReviewRequest(repo=str(repo), patch_text=patch), stages=[StaticStage()])
    result = verdict.stages[0]
    assert result.outcome == Outcome.REJECT
    assert classes(result) == {"ruff:F821:added-line": 1, "pyright:reportUndefinedVariable:added-line": 1}
    cited = {(d.tool, d.rule) for d in static_diagnostics(result, rejecting=True)}
    assert cited == {("ruff", "F821"), ("pyright", "reportUndefinedVariable")}
    reject = result.evidence[0]
    assert reject.grounded and reject.diagnostics[0].fingerprint and "missing_name" in reject.diagnostics[0].message
    assert reject.diagnostics[0].source_line.strip() == "return a + b + missing_name"
    assert "pkg/core.py:6" in result.reason  # the headline cites the added line
    assert any("--isolated" in c for c in reject.commands) and any(
        "-p" in c and "pyright" in c for c in reject.commands
    )
    # the generated pyright configuration is recorded, not the repository's
    assert reject.details.tool_configs["pyright"]["typeCheckingMode"] == "standard"


@pytest.mark.slow
def test_undefined_name_on_an_unchanged_line_is_evidence_not_a_reject(repo: Path) -> None:
    # Dropping an import leaves an unchanged line using the name: new in head, but not on a line the patch added.
    result = stage1(repo, {"pkg/core.py": CORE.replace("from typing import Optional\n", "")})
    assert result.outcome == Outcome.PASS
    assert classes(result)["ruff:F821"] == 1 and "ruff:F821:added-line" not in classes(result)
    # a pre-existing undefined name that the patch moves (its line is added) is not new in head
    moved = CORE.replace("def legacy():\n    return undefined_thing\n", "")
    moved = moved.replace("import os\n", "import os\n\n\ndef legacy():\n    return undefined_thing\n")
    assert stage1(repo, {"pkg/core.py": moved}).outcome == Outcome.PASS


@pytest.mark.slow
def test_undefined_name_rules_without_the_added_line_qualifier_stay_evidence(repo: Path) -> None:
    config = CascadeConfig(static=StaticConfig(reject_rules=["ruff:F821", "pyright:reportUndefinedVariable"]))
    patch = diff_of(repo, {"pkg/core.py": CORE.replace("return a + b", "return a + b + missing_name")})
    verdict = review(ReviewRequest(repo=str(repo), patch_text=patch, config=config), stages=[StaticStage()])
    assert verdict.stages[0].outcome == Outcome.PASS  # the class of an added-line undefined name is qualified


@pytest.mark.slow
def test_removing_a_function_an_unchanged_dependent_calls_is_rejected(repo: Path) -> None:
    without_helper = CORE.replace("def helper(x):\n    return x * 2\n\n\n", "")
    result = stage1(repo, {"pkg/core.py": without_helper})
    assert result.outcome == Outcome.REJECT
    info = next(e for e in result.evidence if e.kind == EvidenceKind.INFO)
    assert info.details.dependents == ["pkg/user.py"]
    assert "helper" in info.details.names
    assert {d.path for d in static_diagnostics(result, rejecting=True)} == {"pkg/user.py"}
    assert "pyright:reportAttributeAccessIssue:in-repo-module" in classes(result)


@pytest.mark.slow
def test_removing_a_module_an_unchanged_dependent_imports_is_rejected(repo: Path) -> None:
    result = stage1(repo, {"pkg/core.py": None, "pkg/extra.py": "def fresh():\n    return undefined_in_new_file\n"})
    assert result.outcome == Outcome.REJECT
    found = classes(result)
    assert found["pyright:reportMissingImports:in-repo"] == 1  # pkg/user.py imports pkg.core
    assert found["ruff:F821:added-line"] == 1  # the added file is checked in the patched tree only
    info = next(e for e in result.evidence if e.kind == EvidenceKind.INFO)
    assert "pkg.core" in info.details.names and info.details.dependents == ["pkg/user.py"]


@pytest.mark.slow
def test_preexisting_error_that_moved_is_not_new(repo: Path) -> None:
    shifted = CORE.replace("import os\n", "import os\n\nLIMIT = 3\n\n\ndef extra():\n    return LIMIT\n\n")
    result = stage1(repo, {"pkg/core.py": shifted})
    assert result.outcome == Outcome.PASS
    assert classes(result) == {}
    assert "0 new diagnostic" in result.reason


@pytest.mark.slow
def test_wrong_arity_to_an_in_repo_function_is_rejected(repo: Path) -> None:
    result = stage1(repo, {"pkg/user.py": USER.replace("helper(3)", "helper(3, 4)")})
    assert result.outcome == Outcome.REJECT
    assert classes(result) == {"pyright:reportCallIssue:in-repo": 1}
    assert "Expected 1 positional argument" in result.evidence[0].diagnostics[0].message


@pytest.mark.slow
def test_a_name_pyright_cannot_prove_callable_inside_an_in_repo_call_is_no_arity_error(repo: Path) -> None:
    """sympy's merged test (sympy-19487): ``f = Function('f')`` then ``sign(f(y))`` — pyright infers ``f`` as an
    object that is not callable and reports it inside the call of the in-repo ``sign``; that says nothing about
    ``sign``'s signature, so it is not the in-repo wrong-arity class."""
    made = USER + "\n\ndef make(flag):\n    return 1 if flag else len\n\n\ndef uses():\n    f = make(True)\n"
    result = stage1(repo, {"pkg/user.py": made + "    return helper(f(2))\n"})
    assert result.outcome == Outcome.PASS, result.reason
    found = static_diagnostics(result, rejecting=False)
    assert any(d.rule == "reportCallIssue" and "not callable" in d.message for d in found), found
    assert "pyright:reportCallIssue:in-repo" not in classes(result)


@pytest.mark.slow
def test_stdlib_call_complaint_and_broad_rule_are_evidence_not_rejects(repo: Path) -> None:
    body = CORE + "\n\ndef joined():\n    return os.path.join(1)\n\n\ndef shout():\n    return maybe(True).upper()\n"
    result = stage1(repo, {"pkg/core.py": body})
    assert result.outcome == Outcome.PASS
    found = classes(result)
    assert found.get("pyright:reportCallIssue:stdlib") == 1  # a stdlib callee: its own class, never in-repo
    assert found.get("pyright:reportOptionalMemberAccess") == 1
    assert all(d.fingerprint and d.line > 0 for d in static_diagnostics(result, rejecting=False))


def test_syntax_error_is_rejected(repo: Path) -> None:
    result = stage1(repo, {"pkg/core.py": CORE.replace("def add(a, b):", "def add(a, b:")})
    assert result.outcome == Outcome.REJECT
    assert "ruff:syntax-error" in classes(result)


def test_missing_pyright_is_unavailable_and_never_rejects(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    git_dir = str(Path(shutil.which("git") or "/usr/bin/git").parent)
    monkeypatch.setenv("PATH", os.pathsep.join(dict.fromkeys([git_dir, "/usr/bin", "/bin"])))
    ruff = find_tool("ruff")
    assert ruff is not None
    (tmp_path / "ruff").symlink_to(ruff)
    monkeypatch.setattr(cascade.tools, "scripts_dirs", lambda: [tmp_path])  # a venv whose bin/ has ruff, no pyright
    assert find_tool("pyright") is None
    result = stage1(repo, {"pkg/user.py": USER.replace("helper(3)", "helper(3, 4)")})  # only pyright sees this
    assert result.outcome == Outcome.PASS
    unavailable = [e for e in result.evidence if e.kind == EvidenceKind.UNAVAILABLE]
    assert len(unavailable) == 1 and "pyright" in unavailable[0].summary and not unavailable[0].grounded


def test_without_a_checkout_the_stage_is_skipped() -> None:
    patch = parse_patch("--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n")
    request = ReviewRequest(repo="/nonexistent", patch_text=patch.text)
    verdict = run_stages(ReviewContext(request=request, patch=patch), [StaticStage()])
    assert verdict.stages[0].outcome == Outcome.SKIPPED
    assert "repository unavailable" in verdict.stages[0].reason


def test_fingerprints_ignore_line_numbers_but_count_repeats() -> None:
    def diag(line: int, message: str = "Undefined name `x`") -> Diagnostic:
        return Diagnostic(tool="ruff", rule="F821", path="m.py", line=line, message=message, source_line="  y = x")

    base = fingerprint_all([diag(3)])
    assert new_diagnostics(base, fingerprint_all([diag(9)])) == []
    added = new_diagnostics(base, fingerprint_all([diag(9), diag(12)]))
    assert len(added) == 1  # one more occurrence of the same finding is new
    assert normalize_message("Redefinition of unused `f` from line 12") == normalize_message(
        "Redefinition of unused `f` from line 40"
    )


@pytest.mark.slow
def test_crashing_ruff_is_unavailable_and_pyright_still_grounds_the_reject(repo: Path) -> None:
    patch = diff_of(repo, {"pkg/user.py": USER.replace("helper(3)", "helper(3, 4)")})
    config = CascadeConfig(static=StaticConfig(ruff_select=["NOT-A-RULE"]))  # ruff exits 2 on it
    verdict = review(ReviewRequest(repo=str(repo), patch_text=patch, config=config), stages=[StaticStage()])
    result = verdict.stages[0]
    summaries = [e.summary for e in result.evidence if e.kind == EvidenceKind.UNAVAILABLE]
    assert len(summaries) == 1 and summaries[0].startswith("ruff unavailable: ruff exited 2")
    assert result.outcome == Outcome.REJECT
    assert {d.tool for d in result.evidence[0].diagnostics} == {"pyright"}


def test_tool_timeout_is_unavailable_and_never_rejects(repo: Path) -> None:
    patch = diff_of(repo, {"pkg/core.py": CORE.replace("return a + b", "return a + b + missing_name")})
    config = CascadeConfig(static=StaticConfig(timeout_seconds=0.001))
    verdict = review(ReviewRequest(repo=str(repo), patch_text=patch, config=config), stages=[StaticStage()])
    result = verdict.stages[0]
    assert result.outcome == Outcome.PASS
    summaries = sorted(e.summary for e in result.evidence if e.kind == EvidenceKind.UNAVAILABLE)
    assert [s.split(":")[0] for s in summaries] == ["pyright unavailable", "ruff unavailable"]
    assert all("timed out" in s for s in summaries)


def _static_review(repo: Path, tmp_path: Path) -> Verdict:
    """Stage 1 on one patch (a reject: a wrong call), with the result store in ``tmp_path``."""
    patch = diff_of(repo, {"pkg/user.py": USER.replace("helper(3)", "helper(3, 4)")})
    config = CascadeConfig(cache=CacheConfig(dir=str(tmp_path / "cache")))
    return review(ReviewRequest(repo=str(repo), patch_text=patch, config=config), stages=[StaticStage()])


def _static_twice(repo: Path, tmp_path: Path, between: Callable[[Path], None] | None = None) -> list[Verdict]:
    """Two reviews of one patch sharing a result store; ``between`` gets the stored entry in between."""
    first = _static_review(repo, tmp_path)
    entries = list((tmp_path / "cache" / "results" / "static-base").rglob("*.json"))
    assert len(entries) == 1
    if between is not None:
        between(entries[0])
    return [first, _static_review(repo, tmp_path)]


@pytest.mark.slow
def test_a_repeat_review_reuses_the_base_runs_and_says_so(repo: Path, tmp_path: Path) -> None:
    verdicts = _static_twice(repo, tmp_path)
    first, second = (v.stages[0] for v in verdicts)
    assert first.cost.reuse == [] and second.cost.reuse == ["static: base-tree diagnostics from the result store"]
    assert first.outcome == second.outcome == Outcome.REJECT
    prints = [[d.fingerprint for d in r.evidence[0].diagnostics] for r in (first, second)]
    assert prints[0] == prints[1]
    assert verdicts[1].cost.reuse == second.cost.reuse  # the report's cost line names it
    # the same report but for times and reuse, which a reproducible report leaves out
    assert reproducible(verdicts[0]).model_dump_json() == reproducible(verdicts[1]).model_dump_json()


def _tamper(entry: Path) -> None:
    data = json.loads(entry.read_text())
    # the patch's error planted as a base diagnostic (it would then not be patch-caused); the checksum is kept
    planted = Diagnostic(tool="pyright", rule="reportCallIssue", path="pkg/user.py", line=5, column=11,
                         message="Expected 1 positional argument", source_line="    return helper(3, 4)")  # fmt: skip
    data["value"]["runs"][1]["diagnostics"].append(planted.model_dump(mode="json"))
    entry.write_text(json.dumps(data))


def _foreign(entry: Path) -> None:
    data = json.loads(entry.read_text())
    data["key"]["targets"] = ["other.py"]
    entry.write_text(json.dumps(data))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("damage", "why"),
    [
        (lambda e: e.write_bytes(e.read_bytes()[:200]), "not an entry of this schema"),
        (lambda e: e.write_text("{}"), "not an entry of this schema"),
        (_tamper, "checksum mismatch"),
        (_foreign, "an entry for another key"),
    ],
    ids=["truncated", "empty", "tampered", "foreign"],
)
def test_a_damaged_stored_entry_is_ignored_and_recomputed(
    repo: Path, tmp_path: Path, damage: Callable[[Path], None], why: str
) -> None:
    first, second = (v.stages[0] for v in _static_twice(repo, tmp_path, damage))
    assert len(second.cost.reuse) == 1 and f"ignored ({why}" in second.cost.reuse[0]
    assert [d.fingerprint for d in second.evidence[0].diagnostics] == [
        d.fingerprint for d in first.evidence[0].diagnostics
    ]
    tools = next(e for e in second.evidence if e.kind == EvidenceKind.INFO).details.tool_seconds
    assert all(t.seconds > 0 for t in tools)  # the base runs ran again
    # the recomputed entry replaced the damaged one: the next review trusts it
    third = _static_review(repo, tmp_path).stages[0]
    assert third.cost.reuse == ["static: base-tree diagnostics from the result store"]


@pytest.mark.slow
def test_no_cache_computes_every_time(repo: Path, tmp_path: Path) -> None:
    patch = diff_of(repo, {"pkg/user.py": USER.replace("helper(3)", "helper(3, 4)")})
    config = CascadeConfig(cache=CacheConfig(dir=str(tmp_path / "cache"), enabled=False))
    request = ReviewRequest(repo=str(repo), patch_text=patch, config=config)
    results = [review(request, stages=[StaticStage()]).stages[0] for _ in "ab"]
    assert [r.cost.reuse for r in results] == [[], []]
    assert not (tmp_path / "cache" / "results").exists()


RULES_SRC = """import json
from pkg import mod
from pkg.core import helper


class Box:
    def put(self, item):
        return self.store(item, 1)

    def store(self, item):
        return item


class Oops(ValueError):
    pass


def calls(payload):
    json.dumps(payload, nope=1)
    mod.run(1, 2)
    helper(1, 2)
    Oops("a", "b")
"""


def _call_diag(line: int, column: int, message: str = "Expected 1 positional argument") -> Diagnostic:
    return Diagnostic(
        tool="pyright", rule="reportCallIssue", path="pkg/user.py", line=line, column=column, message=message
    )


def test_in_repo_qualifiers_follow_the_callee_and_the_module(tmp_path: Path) -> None:
    for rel, text in {"pkg/__init__.py": "", "pkg/mod.py": "", "pkg/user.py": RULES_SRC, "pkg/fast.pyx": ""}.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    layout = RepoLayout(tmp_path)
    lines = RULES_SRC.splitlines()

    def at(fragment: str, inner: str) -> tuple[int, int]:
        number = next(i for i, text in enumerate(lines, 1) if fragment in text)
        return number, lines[number - 1].index(inner)

    assert rule_class(_call_diag(*at("self.store(", "1)")), layout) == "pyright:reportCallIssue:in-repo"
    assert rule_class(_call_diag(*at("mod.run(", "2)")), layout) == "pyright:reportCallIssue:in-repo"
    assert rule_class(_call_diag(*at("helper(1, 2)", "2)")), layout) == "pyright:reportCallIssue:in-repo"
    stdlib = _call_diag(*at("json.dumps(", "nope"), message='No parameter named "nope"')
    assert rule_class(stdlib, layout) == "pyright:reportCallIssue:stdlib"
    assert rule_class(_call_diag(*at('Oops("a"', '"b"')), layout) == "pyright:reportCallIssue"  # ValueError's init

    def missing(module: str) -> Diagnostic:
        message = f'Import "{module}" could not be resolved'
        return Diagnostic(tool="pyright", rule="reportMissingImports", path="pkg/user.py", line=1, message=message)

    assert rule_class(missing("pkg.gone"), layout) == "pyright:reportMissingImports:in-repo"
    assert rule_class(missing("pkg.fast"), layout) == "pyright:reportMissingImports"  # compiled twin exists
    assert rule_class(missing("numpy"), layout) == "pyright:reportMissingImports"

    def unknown_symbol(name: str) -> Diagnostic:
        message = f'"{name}" is unknown import symbol'
        return Diagnostic(
            tool="pyright", rule="reportAttributeAccessIssue", path="pkg/user.py", line=3, message=message
        )

    (tmp_path / "pkg/core.py").write_text(
        "import sys\nif sys.version_info[:2] >= (3, 6):\n    from pathlib import Path\n"
    )
    assert rule_class(unknown_symbol("Path"), layout) == "pyright:reportAttributeAccessIssue"  # bound conditionally
    assert rule_class(unknown_symbol("gone"), layout) == "pyright:reportAttributeAccessIssue:in-repo-module"


IMPORT_SPELLINGS = [
    "from .core import helper\n\n\ndef use():\n    return helper(3)\n",
    "from pkg import core\n\n\ndef use():\n    return core.helper(3)\n",
    "from . import core\n\n\ndef use():\n    return core.helper(3)\n",
    "import pkg.core as c\n\n\ndef use():\n    return c.helper(3)\n",
]


@pytest.mark.parametrize("importer", IMPORT_SPELLINGS, ids=["relative-from", "from-package", "relative-package", "as"])
@pytest.mark.parametrize("how", ["rename", "delete"])
@pytest.mark.slow
def test_importers_of_a_renamed_or_deleted_module_are_dependents(make_repo: MakeRepo, importer: str, how: str) -> None:
    # Every spelling of the import is found (cascade/imports.py): before, only the dotted name `pkg.core` was
    # searched, so a relative or from-package import of a renamed module went unchecked.
    repo = make_repo({"pkg/__init__.py": "", "pkg/core.py": CORE, "pkg/user.py": importer})
    changes: dict[str, str | None] = {"pkg/core.py": None}
    if how == "rename":
        changes["pkg/engine.py"] = CORE
    result = stage1(repo, changes)
    info = next(e for e in result.evidence if e.kind == EvidenceKind.INFO)
    assert info.details.dependents == ["pkg/user.py"]
    assert result.outcome == Outcome.REJECT, result.reason
    assert {d.path for d in static_diagnostics(result, rejecting=True)} == {"pkg/user.py"}


@pytest.mark.slow
def test_a_rename_whose_importers_are_updated_is_not_rejected(make_repo: MakeRepo) -> None:
    repo = make_repo({"pkg/__init__.py": "", "pkg/core.py": CORE, "pkg/user.py": IMPORT_SPELLINGS[0]})
    moved = IMPORT_SPELLINGS[0].replace(".core", ".engine")
    result = stage1(repo, {"pkg/core.py": None, "pkg/engine.py": CORE, "pkg/user.py": moved})
    assert result.outcome == Outcome.PASS, result.reason
    # a module of the same stem elsewhere that does not import the renamed one is no dependent
    other = make_repo({"pkg/__init__.py": "", "pkg/core.py": CORE, "lib2/__init__.py": "", "lib2/core.py": "X = 1\n",
                       "lib2/user.py": "from lib2.core import X\n"})  # fmt: skip
    result = stage1(other, {"pkg/core.py": None, "pkg/engine.py": CORE})
    info = next(e for e in result.evidence if e.kind == EvidenceKind.INFO)
    assert info.details.dependents == [] and result.outcome == Outcome.PASS


LIBRARY = "import os\n\nimport yaml\n\n\ndef load(text):\n    return os.getcwd()\n"
CALLED_WRONG = (
    "import os\n\nimport yaml\n\n\ndef load(text):\n    print(text)\n    breakpoint()\n"
    "    sorted([1], 2, 3)\n    yaml.safe_load(text, nope=1)\n    return os.getcwd(text)\n"
)


@pytest.mark.slow
def test_callee_origins_prints_and_debuggers_get_their_own_classes(make_repo: MakeRepo) -> None:
    """Real ruff and pyright: a wrong call into the standard library (a module function, a builtin) or a
    third-party package (pyright's bundled stubs) is classed by where the callee lives; print() on an added line
    of library code is its own class, in a test or a script outside the packages it is not; breakpoint() is T100."""
    files = {"pkg/__init__.py": "", "pkg/io.py": LIBRARY, "tests/test_io.py": "def test_x():\n    pass\n"}
    files["scripts/run.py"] = "X = 1\n"
    repo = make_repo(files)
    patch = diff_of(
        repo,
        {
            "pkg/io.py": CALLED_WRONG,
            "tests/test_io.py": "def test_x():\n    print('debug')\n",
            "scripts/run.py": "X = 1\nprint(X)\n",
        },
    )
    config = parse_config({"static": {"extend_ruff_select": ["T10", "T20"]}})
    verdict = review(ReviewRequest(repo=str(repo), patch_text=patch, config=config), stages=[StaticStage()])
    found = {
        (d.path, d.line, e.details.class_of[d.fingerprint])
        for e in verdict.stages[0].evidence
        if isinstance(e.details, StaticDetails)
        for d in e.diagnostics
    }
    assert ("pkg/io.py", 7, "ruff:T201:added-library-line") in found
    assert ("pkg/io.py", 8, "ruff:T100") in found
    assert ("pkg/io.py", 9, "pyright:reportCallIssue:stdlib") in found  # the builtin sorted()
    assert ("pkg/io.py", 10, "pyright:reportCallIssue:third-party") in found  # yaml, from pyright's bundled stubs
    assert ("pkg/io.py", 11, "pyright:reportCallIssue:stdlib") in found  # os.getcwd
    assert ("tests/test_io.py", 2, "ruff:T201") in found
    assert ("scripts/run.py", 2, "ruff:T201") in found


@pytest.mark.slow
def test_files_the_repository_keeps_out_of_its_linting_at_base_never_reject(make_repo: MakeRepo) -> None:
    """pylint's tests/functional/ inputs are wrong on purpose and its ruff settings exclude them; a patch cannot
    exclude its own file (the settings are read from the base tree)."""
    ruff = '[tool.ruff]\nextend-exclude = ["tests/**/functional/"]\n'
    repo = make_repo({"pkg/__init__.py": "", "pkg/core.py": CORE, "pyproject.toml": ruff})
    data = "def f():\n    return undefined_callee()\n"
    result = stage1(repo, {"tests/functional/u/undefined.py": data})
    assert result.outcome == Outcome.PASS, result.reason
    assert any("excluded from linting" in e.summary for e in result.evidence)
    bare = make_repo({"pkg/__init__.py": "", "pkg/core.py": CORE})
    sneaky = stage1(bare, {"pyproject.toml": ruff, "tests/functional/u/undefined.py": data})
    assert sneaky.outcome == Outcome.REJECT, sneaky.reason
