from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cascade.config import CascadeConfig, load_config, parse_config
from cascade.errors import BadInput
from cascade.probesources import PROBE_SOURCES, default_probe_sources
from cascade.sandbox.select import BACKENDS, Backend, get_sandbox, isolating_backends
from cascade.stages import GATE, STAGES, check_names, default_stages, make_stage

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
