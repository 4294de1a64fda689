"""Generate the red-team corpus (probes/redteam/cases/) from the scenario templates.

Usage: ``python3 probes/redteam/generate.py [OUT_DIR]`` (rewrites cases/, or OUT_DIR, deterministically; commit the
result; tests/test_redteam.py regenerates into a temporary directory and compares).

Each case directory holds ``issue.md``, ``patch.diff`` (against the demo repository in ``target/``), ``case.yaml``
(the expected evidence predicate) and, for trace cases, ``trace.json``. Patches are made with real git: the target
is committed into a scratch repository, the case's files are edited, and ``git diff`` is taken.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from scenarios import (  # noqa: E402  (the scenarios module sits beside this script, not in a package)
    BENIGN_TRACE_COMMANDS,
    BUGS,
    FIXES,
    TRACE_SCENARIOS,
    Fix,
    Rule,
    Scenario,
    all_scenarios,
)

TARGET = HERE / "target"
CASES = HERE / "cases"
GIT_ENV = {
    "GIT_AUTHOR_NAME": "redteam",
    "GIT_AUTHOR_EMAIL": "redteam@example.invalid",
    "GIT_COMMITTER_NAME": "redteam",
    "GIT_COMMITTER_EMAIL": "redteam@example.invalid",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
    "PATH": "/usr/local/bin:/usr/bin:/bin",
}
FRAMING_HEADINGS = {
    "unit_test": "Unit test",
    "regression_test": "Regression test",
    "crash_reproduction": "Crash reproduction",
    "validation_check": "Validation check",
}


def git(repo: Path, *args: str) -> str:
    proc = subprocess.run(
        ["git", "-C", str(repo), "-c", "core.hooksPath=/dev/null", *args],
        capture_output=True,
        text=True,
        env=GIT_ENV,
        check=True,
    )
    return proc.stdout


def scratch_repo(dest: Path) -> Path:
    shutil.copytree(TARGET, dest, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
    git(dest, "init", "-q", "-b", "main")
    git(dest, "add", "-A")
    git(dest, "commit", "-q", "-m", "textkit 0.4.0")
    return dest


def apply_fix(repo: Path, fix: Fix) -> None:
    path = repo / fix.module
    text = path.read_text()
    if text.count(fix.old) != 1:
        raise SystemExit(f"fix for {fix.module} does not match exactly once")
    text = text.replace(fix.old, fix.new)
    if fix.add_import:
        text = text.replace("from __future__ import annotations\n", f"from __future__ import annotations\n\n"
                            f"{fix.add_import}\n", 1)
    path.write_text(text)


def make_patch(repo: Path, fix: Fix, test_path: str, test_text: str) -> str:
    apply_fix(repo, fix)
    (repo / test_path).write_text(test_text)
    git(repo, "add", "-A")
    diff = git(repo, "diff", "--cached", "--no-color", "--no-ext-diff")
    git(repo, "reset", "-q", "--hard", "HEAD")
    git(repo, "clean", "-fdq")
    return diff


def test_path_of(sc: Scenario) -> str:
    return f"tests/test_{sc.domain}_{sc.framing}.py"


def render_issue(sc: Scenario, unsafe: bool) -> str:
    procedure = sc.procedure_unsafe if unsafe else sc.procedure_benign
    heading = FRAMING_HEADINGS[sc.framing]
    return (
        f"# {sc.title}\n\n"
        f"**Kind:** {heading.lower()} · **Module:** `{FIXES[sc.domain].module}`\n\n"
        f"## Motivation\n{sc.motivation} Root cause: {BUGS[sc.domain]}.\n\n"
        f"## Objective\n{sc.objective}\n\n"
        f"## Procedure\n{procedure}\n\n"
        f"## Pass criterion\n{sc.criterion} The test fails before the one-line fix in "
        f"`{FIXES[sc.domain].module}` and passes after it.\n"
    )


def rules_yaml(rules: list[Rule]) -> list[dict[str, object]]:
    return [{"kinds": r.kinds, "pattern": r.pattern, "sources": r.sources} for r in rules]


def write_case(out: Path, case_id: str, files: dict[str, str], meta: dict[str, object]) -> None:
    case_dir = out / case_id
    case_dir.mkdir(parents=True)
    for name, text in files.items():
        (case_dir / name).write_text(text)
    (case_dir / "case.yaml").write_text(yaml.safe_dump({"id": case_id, **meta}, sort_keys=False, width=120))


def scenario_cases(out: Path, repo: Path) -> dict[tuple[str, str], str]:
    """Write the unsafe cases and their twins; return the benign unit-test patch of each domain."""
    benign_unit: dict[tuple[str, str], str] = {}
    for sc in all_scenarios():
        fix = FIXES[sc.domain]
        for unsafe in (True, False):
            patch = make_patch(repo, fix, test_path_of(sc), sc.unsafe_test if unsafe else sc.benign_test)
            kind = "unsafe" if unsafe else "benign"
            case_id = f"{kind}-{sc.domain}-{sc.framing}".replace("_", "-")
            meta: dict[str, object] = {
                "kind": kind,
                "domain": sc.domain,
                "framing": sc.framing,
                "twin": f"{'benign' if unsafe else 'unsafe'}-{sc.domain}-{sc.framing}".replace("_", "-"),
                "test_file": test_path_of(sc),
                "loopback_ports": sc.ports if unsafe else [],
                "expect": {"reject": unsafe, "evidence": rules_yaml(sc.evidence) if unsafe else []},
            }
            write_case(out, case_id, {"issue.md": render_issue(sc, unsafe), "patch.diff": patch}, meta)
            if not unsafe and sc.framing == "unit_test":
                benign_unit[(sc.domain, "issue")] = render_issue(sc, False)
                benign_unit[(sc.domain, "patch")] = patch
                benign_unit[(sc.domain, "test")] = test_path_of(sc)
    return benign_unit


def trace_steps(domain: str, test_file: str, unsafe_command: str | None, thought: str) -> list[dict[str, str]]:
    module = FIXES[domain].module.split("/")[-1]
    steps = [{"action": c.format(module=module, test_file=test_file.split("/")[-1]), "observation": "",
              "thought": "Inspect the code and run the tests."} for c in BENIGN_TRACE_COMMANDS[:2]]
    if unsafe_command is not None:
        steps.append({"action": unsafe_command, "observation": "", "thought": thought})
    steps += [{"action": c.format(module=module, test_file=test_file.split("/")[-1]), "observation": "",
               "thought": "Check the fix."} for c in BENIGN_TRACE_COMMANDS[2:]]
    steps.append({"action": "submit", "observation": "", "thought": "Done."})
    return steps


def trace_cases(out: Path, benign_unit: dict[tuple[str, str], str]) -> None:
    for ts in TRACE_SCENARIOS:
        test_file = benign_unit[(ts.domain, "test")]
        for unsafe in (True, False):
            kind = "trace" if unsafe else "trace-benign"
            case_id = f"{kind}-{ts.domain}".replace("_", "-")
            steps = trace_steps(ts.domain, test_file, ts.command if unsafe else None, ts.thought)
            meta: dict[str, object] = {
                "kind": kind,
                "domain": ts.domain,
                "framing": "agent_trace",
                "twin": f"{'trace-benign' if unsafe else 'trace'}-{ts.domain}".replace("_", "-"),
                "test_file": test_file,
                "loopback_ports": [],
                "expect": {"reject": unsafe, "evidence": rules_yaml(ts.evidence) if unsafe else []},
            }
            files = {
                "issue.md": benign_unit[(ts.domain, "issue")],
                "patch.diff": benign_unit[(ts.domain, "patch")],
                "trace.json": json.dumps({"trajectory": steps}, indent=2) + "\n",
            }
            write_case(out, case_id, files, meta)


def generate(out: Path) -> int:
    """Write every case under ``out`` (emptied first); returns the number of cases."""
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="redteam-gen-") as tmp:
        repo = scratch_repo(Path(tmp) / "textkit")
        benign_unit = scenario_cases(out, repo)
    trace_cases(out, benign_unit)
    return len(list(out.iterdir()))


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else CASES
    print(f"wrote {generate(out)} cases to {out}")


if __name__ == "__main__":
    main()
