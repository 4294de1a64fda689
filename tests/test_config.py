from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from cascade.config import CascadeConfig, load_config

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
