"""Where Stage 2 runs: the configured sandbox backend and the test environment for the base tree."""

from __future__ import annotations

import sys
from pathlib import Path

from cascade.config import CascadeConfig
from cascade.errors import CascadeError
from cascade.execution.envs import Environment, EnvSpec, current_environment, ensure_environment
from cascade.sandbox.base import Sandbox
from cascade.sandbox.select import get_sandbox


def make_sandbox(config: CascadeConfig) -> Sandbox:
    """The configured backend via the sandbox package's selector; CascadeError when none is usable."""
    sandbox = get_sandbox(config.sandbox)
    reason = sandbox.available()
    if reason:
        raise CascadeError(f"sandbox '{sandbox.isolation}' unavailable: {reason}")
    return sandbox


def make_environment(config: CascadeConfig, repo: str, base_dir: Path) -> Environment:
    """The cached venv for (repo, python, deps) built from the base tree, or cascade's own interpreter."""
    cfg = config.env
    if cfg.use_current_interpreter:
        return current_environment()
    spec = EnvSpec(
        repo=Path(repo).name,
        python=cfg.python or sys.executable,
        packages=list(cfg.packages),
        install_project=cfg.install_project,
        extras=list(cfg.extras),
    )
    cache = Path(cfg.cache_dir).expanduser() if cfg.cache_dir else None
    return ensure_environment(spec, project_tree=base_dir, cache_dir=cache, timeout=cfg.setup_timeout_seconds)
