"""Where Stage 2 runs: the configured sandbox backend and the test environment for the base tree."""

from __future__ import annotations

import sys
from pathlib import Path

from cascade.config import CascadeConfig
from cascade.errors import CascadeError
from cascade.execution.envs import Environment, EnvSpec, current_environment, ensure_environment
from cascade.execution.extensions import describe, ensure_extensions, install_products
from cascade.execution.project_env import project_spec
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
    """The cached venv for the base tree (its CI's test dependencies as of its commit, unless the config turns that
    off: then the configured packages), or cascade's own interpreter."""
    cfg = config.env
    if cfg.use_current_interpreter:
        return current_environment()
    if cfg.ci_dependencies or cfg.exclude_newer:  # the project's own CI dependencies, as of the commit
        spec = project_spec(
            base_dir, Path(repo).name, cfg.python, list(cfg.packages), list(cfg.extras),
            cfg.ci_dependencies, cfg.exclude_newer, cfg.install_project,
        )  # fmt: skip
    else:
        spec = EnvSpec(
            repo=Path(repo).name,
            python=cfg.python or sys.executable,
            packages=list(cfg.packages),
            install_project=cfg.install_project,
            extras=list(cfg.extras),
        )
    cache = Path(cfg.cache_dir).expanduser() if cfg.cache_dir else None
    return ensure_environment(spec, project_tree=base_dir, cache_dir=cache, timeout=cfg.setup_timeout_seconds)


def prepare_extensions(
    config: CascadeConfig, env: Environment, base: Path, patched: Path, changed: list[str]
) -> str | None:
    """Compiled extensions into both trees when the config or the environment says the tests need them (astropy;
    a setup.py that declares extensions, on the CI path: what the project's editable install would build)."""
    cfg = config.env
    if not (cfg.build_extensions or env.build_extensions):
        return None
    cache = Path(cfg.cache_dir).expanduser() / "builds" if cfg.cache_dir else None
    build = ensure_extensions(env, base, changed, cache_dir=cache, timeout=max(cfg.setup_timeout_seconds, 1800))
    install_products(build, base, patched)
    return describe(build)
