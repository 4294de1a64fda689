from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cascade.config import CascadeConfig, load_config, parse_config
from cascade.errors import BadInput
from cascade.models import Decision, ReviewRequest, Verdict
from cascade.pipeline import review
from cascade.probesources import PROBE_SOURCES, default_probe_sources
from cascade.sandbox.select import BACKENDS, Backend, get_sandbox, isolating_backends
from cascade.stages import GATE, STAGES, check_names, default_stages, make_stage
from cascade.stages.hygiene import HygieneStage
from cascade.stages.no_change import NoChangeStage
from cascade.stages.static import StaticStage
from tests.support import MakeRepo, diff_of

ROOT = Path(__file__).resolve().parents[1]


def test_shipped_default_yaml_equals_the_built_in_defaults() -> None:
    """configs/default.yaml documents the defaults; regenerate it with `cascade config > configs/default.yaml`."""
    assert load_config(ROOT / "configs/default.yaml") == CascadeConfig()


def test_partial_config_merges_with_defaults(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("reviewer:\n  votes: 3\n")
    config = load_config(path)
    assert config.reviewer.votes == 3
    assert config.reviewer.temperature == CascadeConfig().reviewer.temperature


def test_invalid_value_names_the_key(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("reviewer:\n  votes: many\n")
    proc = subprocess.run([sys.executable, "-m", "cascade", "config", "--config", str(path)], capture_output=True)
    assert proc.returncode == 3
    assert "reviewer.votes" in proc.stderr.decode()


def test_old_section_names_are_read_with_a_one_line_notice(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "old.yaml"
    path.write_text("stage1:\n  enabled: false\nstage2:\n  probe_pass: accept\nsafety:\n  trace_scan: evidence\n")
    config = load_config(path)
    assert (config.static.enabled, config.probes.probe_pass, config.trace_scan.mode) == (False, "accept", "evidence")
    notices = capsys.readouterr().err.splitlines()
    assert len(notices) == 3 and all("is deprecated; use" in line for line in notices)
    assert any("'stage1'" in line and "'static'" in line for line in notices)
    assert any("'safety.trace_scan'" in line and "'trace_scan.mode'" in line for line in notices)


def test_old_and_new_name_of_one_section_together_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "both.yaml"
    path.write_text("stage1:\n  enabled: false\nstatic:\n  enabled: true\n")
    with pytest.raises(BadInput, match="both 'stage1'"):
        load_config(path)


def test_every_stage_is_registered_by_its_own_name_and_config_section() -> None:
    config = CascadeConfig()
    assert [s.name for s in default_stages(config)] == list(GATE)
    for name in GATE:
        assert make_stage(name).name == name
        assert name in CascadeConfig.model_fields, f"config section named after stage {name}"
    assert {make_stage(name).name for name in STAGES} == set(STAGES)
    with pytest.raises(BadInput, match="unknown stage 'stage1'"):
        make_stage("stage1")


def test_config_names_come_from_the_registries(monkeypatch: pytest.MonkeyPatch) -> None:
    """A backend or probe source registered in one place is accepted by the config; anything else is bad input."""
    with pytest.raises(BadInput, match=r"'sandbox.backend': 'fake' is not one of auto, bwrap, docker, none$"):
        check_names(parse_config({"sandbox": {"backend": "fake"}}))
    with pytest.raises(BadInput, match=r"'probes.sources': 'extra' is not one of generated, issue, trace, pr_tests$"):
        check_names(parse_config({"probes": {"sources": ["trace", "extra"]}}))
    monkeypatch.setitem(BACKENDS, "fake", Backend(BACKENDS["none"].make, isolating=False, host_interpreter=True))
    monkeypatch.setitem(PROBE_SOURCES, "extra", PROBE_SOURCES["trace"])
    config = parse_config({"sandbox": {"backend": "fake"}, "probes": {"sources": ["trace", "extra"]}})
    check_names(config)
    assert [type(s).__name__ for s in default_probe_sources(config)] == ["TraceProbeSource", "TraceProbeSource"]
    assert get_sandbox(config.sandbox).isolation == "none" and isolating_backends() == ["bwrap", "docker"]


# -- extend_* keys: add to a rule list without copying its defaults ---------------------------------------------


def test_extend_keys_add_to_the_defaults_and_cascade_config_prints_the_merged_lists(tmp_path: Path) -> None:
    path = tmp_path / "extend.yaml"
    path.write_text(
        "static:\n  extend_ruff_select: [T20]\n  extend_reject_rules: ['ruff:T201:added-library-line']\n"
        "hygiene:\n  extend_artifact_files: {'*.log': log file}\n  extend_artifact_dirs: {'.venv': virtualenv}\n"
        "no_change:\n  extend_test_globs: ['checks/**']\n  extend_docs_globs: ['*.adoc']\n"
    )
    config, defaults = load_config(path), CascadeConfig()
    assert config.static.reject_rules == [*defaults.static.reject_rules, "ruff:T201:added-library-line"]
    assert config.static.ruff_select == [*defaults.static.ruff_select, "T20"]
    assert config.hygiene.artifact_files == {**defaults.hygiene.artifact_files, "*.log": "log file"}
    assert config.hygiene.artifact_dirs == {**defaults.hygiene.artifact_dirs, ".venv": "virtualenv"}
    assert config.no_change.test_globs == [*defaults.no_change.test_globs, "checks/**"]
    assert config.no_change.docs_globs == [*defaults.no_change.docs_globs, "*.adoc"]
    printed = subprocess.run(
        [sys.executable, "-m", "cascade", "config", "--config", str(path)], capture_output=True, text=True, cwd=ROOT
    )
    assert printed.returncode == 0, printed.stderr
    again = tmp_path / "printed.yaml"
    again.write_text(printed.stdout)
    assert load_config(again) == config, "what `cascade config` prints is what the stages use, and reads back the same"
    assert "extend_reject_rules: []" in printed.stdout


def test_an_extension_adds_to_a_replaced_list_and_repeats_nothing(tmp_path: Path) -> None:
    path = tmp_path / "both.yaml"
    path.write_text("static:\n  reject_rules: ['ruff:F821']\n  extend_reject_rules: ['ruff:T201', 'ruff:F821']\n")
    assert load_config(path).static.reject_rules == ["ruff:F821", "ruff:T201"]


def test_a_wrong_extension_type_names_the_key(tmp_path: Path) -> None:
    path = tmp_path / "wrong.yaml"
    path.write_text("static:\n  extend_reject_rules: ruff:T100\n")
    with pytest.raises(BadInput, match=r"static\.extend_reject_rules"):
        load_config(path)


@pytest.mark.slow
def test_extend_reject_rules_adds_a_rule_with_the_defaults_kept(make_repo: MakeRepo, tmp_path: Path) -> None:
    """A real review: print() left in library code rejects only when two extend_* keys add it; the default rules
    still reject their own (an undefined name, a debugger call: ruff T100 is a default since it was measured)."""
    repo = make_repo({"pkg/__init__.py": "", "pkg/mod.py": "def f(x):\n    return x + 1\n"})
    printed = diff_of(repo, {"pkg/mod.py": "def f(x):\n    print(x)\n    return x + 1\n"})
    debugged = diff_of(repo, {"pkg/mod.py": "def f(x):\n    breakpoint()\n    return x + 1\n"})
    undefined = diff_of(repo, {"pkg/mod.py": "def f(x):\n    return y + 1\n"})
    rule = "ruff:T201:added-library-line"
    extended = parse_config({"static": {"extend_ruff_select": ["T20"], "extend_reject_rules": [rule]}})
    stages = [NoChangeStage(), StaticStage()]

    def decided(patch: str, config: CascadeConfig) -> tuple[Decision, str]:
        verdict = review(ReviewRequest(repo=str(repo), patch_text=patch, config=config), stages=stages)
        return verdict.decision, verdict.reason

    decision, reason = decided(printed, extended)
    assert decision == Decision.REJECT and rule in reason, reason
    assert decided(printed, CascadeConfig())[0] != Decision.REJECT
    for patch, cls in ((undefined, "ruff:F821:added-line"), (debugged, "ruff:T100")):
        decision, reason = decided(patch, extended)
        assert decision == Decision.REJECT and cls in reason, reason


def test_extend_artifact_files_rejects_a_new_kind_of_file_with_the_defaults_kept(make_repo: MakeRepo) -> None:
    repo = make_repo({"pkg/__init__.py": "", "pkg/mod.py": "X = 1\n"})
    log = diff_of(repo, {"pkg/mod.py": "X = 2\n", "run.log": "started\n"})
    pyc = diff_of(repo, {"pkg/mod.py": "X = 2\n", "pkg/mod.pyc": "not really bytecode\n"})
    extended = parse_config({"hygiene": {"extend_artifact_files": {"*.log": "log file"}}})

    def decided(patch: str, config: CascadeConfig) -> Verdict:
        return review(ReviewRequest(repo=str(repo), patch_text=patch, config=config), stages=[HygieneStage()])

    verdict = decided(log, extended)
    assert (verdict.decision, verdict.deciding_stage) == (Decision.REJECT, "hygiene")
    assert "run.log (log file (*.log))" in verdict.reason
    assert decided(pyc, extended).decision == Decision.REJECT
    assert decided(log, CascadeConfig()).decision != Decision.REJECT


# -- YAML and file errors: one line, exit 3, where the problem is ---------------------------------------------


BROKEN_YAML = "static:\n  reject_rules: [a, b\n  enabled: true\n"


@pytest.mark.parametrize("command", [["config"], ["review", "x.diff"], ["bench", "redteam", "--kind", "benign"]])
def test_a_yaml_error_names_its_line_and_column_for_every_command(tmp_path: Path, command: list[str]) -> None:
    (tmp_path / "broken.yaml").write_text(BROKEN_YAML)
    (tmp_path / "x.diff").write_text("--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-a\n+b\n")
    proc = cascade_in(tmp_path, *command, "--config", "broken.yaml")
    assert proc.returncode == 3, proc.stderr
    assert re.fullmatch(r"cascade: error: broken\.yaml:3:\d+: not valid YAML: .+\n", proc.stderr), proc.stderr


@pytest.mark.parametrize("command", [["config"], ["review", "x.diff"], ["bench", "redteam", "--kind", "benign"]])
@pytest.mark.parametrize("bad", ["directory", "file/inside-a-file.yaml"])
def test_an_unreadable_config_path_is_bad_input_for_every_command(tmp_path: Path, command: list[str], bad: str) -> None:
    (tmp_path / "directory").mkdir()
    (tmp_path / "file").write_text("a file, not a directory\n")
    (tmp_path / "x.diff").write_text("--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-a\n+b\n")
    proc = cascade_in(tmp_path, *command, "--config", bad)
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("cascade: error: ") and bad in proc.stderr


def cascade_in(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "cascade", *args]
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
