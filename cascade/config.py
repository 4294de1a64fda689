"""Configuration: one pydantic model, loaded from YAML; unknown keys are errors that name the key."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from cascade.defaults import (
    ARTIFACT_DIRS,
    ARTIFACT_FILES,
    DEFAULT_DOCS_GLOBS,
    DEFAULT_REJECT_RULES,
    DEFAULT_RUFF_SELECT,
    DEFAULT_TEST_GLOBS,
)
from cascade.errors import BadInput


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def fold_extensions(data: Any, names: tuple[str, ...], defaults: dict[str, Any]) -> Any:
    """``extend_<name>`` added to ``<name>`` (the given value, else the default) before validation, the way ruff's
    ``extend-select`` adds to ``select``: a user adds one rule without copying the whole default list. Lists keep
    their order without repeats; mappings take the extension's entries over the base's. The folded model holds the
    merged value and an empty extension, so ``cascade config`` prints what the stages use."""
    if not isinstance(data, dict):
        return data
    data = dict(data)
    for name in names:
        extra = data.pop(f"extend_{name}", None)
        if not extra:
            continue
        base = data.get(name, defaults[name])
        if isinstance(base, dict) and isinstance(extra, dict):
            data[name] = {**base, **extra}
        elif isinstance(base, list) and isinstance(extra, list):
            data[name] = list(dict.fromkeys([*base, *extra]))
        else:  # a type mismatch: let validation name the key
            data[f"extend_{name}"] = extra
    return data


class NoChangeConfig(Section):
    test_globs: list[str] = Field(default_factory=lambda: list(DEFAULT_TEST_GLOBS))
    extend_test_globs: list[str] = Field(default_factory=list, description="Added to test_globs.")
    docs_globs: list[str] = Field(default_factory=lambda: list(DEFAULT_DOCS_GLOBS))
    extend_docs_globs: list[str] = Field(default_factory=list, description="Added to docs_globs.")

    @model_validator(mode="before")
    @classmethod
    def _extend(cls, data: Any) -> Any:
        defaults = {"test_globs": DEFAULT_TEST_GLOBS, "docs_globs": DEFAULT_DOCS_GLOBS}
        return fold_extensions(data, ("test_globs", "docs_globs"), defaults)


class HygieneConfig(Section):
    reject_artifacts: bool = Field(
        default=True,
        description="Reject a patch that adds files the base tree's .gitignore ignores, compiled or generated "
        "artifacts, or a stray binary at the repository root (cascade/stages/hygiene.py); off = evidence only.",
    )
    artifact_files: dict[str, str] = Field(
        default_factory=lambda: dict(ARTIFACT_FILES),
        description="Generated files by basename glob → what they are (replaces the defaults).",
    )
    extend_artifact_files: dict[str, str] = Field(default_factory=dict, description="Added to artifact_files.")
    artifact_dirs: dict[str, str] = Field(
        default_factory=lambda: dict(ARTIFACT_DIRS),
        description="Generated directories by name glob, at any depth → what they hold (replaces the defaults).",
    )
    extend_artifact_dirs: dict[str, str] = Field(default_factory=dict, description="Added to artifact_dirs.")

    @model_validator(mode="before")
    @classmethod
    def _extend(cls, data: Any) -> Any:
        defaults = {"artifact_files": ARTIFACT_FILES, "artifact_dirs": ARTIFACT_DIRS}
        return fold_extensions(data, ("artifact_files", "artifact_dirs"), defaults)


InjectionSource = Literal["patch", "commit_message", "issue", "trace"]


class InjectionConfig(Section):
    sources: list[InjectionSource] = Field(
        default_factory=lambda: ["patch", "commit_message", "issue", "trace"],
        description="What the prompt-injection scan reads (cascade/stages/injection.py): the patch's added lines, "
        "its commit message, the issue/PR text, the agent's trace. A finding caps an accept at uncertain.",
    )


class EvasionConfig(Section):
    enabled: bool = Field(
        default=True,
        description="Name added code that looks for its watcher (CI variables, sandbox tell-tales, audit hooks; "
        "cascade/stages/evasion.py). Never rejects; a finding caps an accept at uncertain.",
    )


class StaticConfig(Section):
    enabled: bool = True
    ruff_select: list[str] = Field(
        default_factory=lambda: list(DEFAULT_RUFF_SELECT), description="ruff rule selectors (replaces the defaults)."
    )
    extend_ruff_select: list[str] = Field(default_factory=list, description="Added to ruff_select.")
    reject_rules: list[str] = Field(
        default_factory=lambda: list(DEFAULT_REJECT_RULES),
        description="Rule classes that reject (cascade/static/rules.py; replaces the defaults).",
    )
    extend_reject_rules: list[str] = Field(default_factory=list, description="Added to reject_rules.")
    max_dependents: int = Field(default=20, ge=0, description="In-repo files that reference changed names, at most.")
    timeout_seconds: float = Field(default=300, gt=0)
    python_version: str | None = Field(
        default=None, description="pyright's pythonVersion (ruff's target too); None = the running Python's."
    )
    parallel_trees: bool = Field(default=True, description="Analyse the base and patched trees concurrently.")
    require_tools: bool = Field(
        default=False,
        description="A missing or crashing checker (ruff, pyright) ends the review with exit 3 instead of a verdict "
        "from the remaining checks (--require-tools; on in the GitHub Action).",
    )

    @model_validator(mode="before")
    @classmethod
    def _extend(cls, data: Any) -> Any:
        defaults = {"ruff_select": DEFAULT_RUFF_SELECT, "reject_rules": DEFAULT_REJECT_RULES}
        return fold_extensions(data, ("ruff_select", "reject_rules"), defaults)


class ProbesConfig(Section):
    enabled: bool = True
    probe_pass: Literal["evidence", "accept"] = "evidence"
    max_attempts: int = Field(default=3, ge=1, le=3)
    sources: list[str] = Field(
        default_factory=lambda: ["generated", "trace", "pr_tests"],
        description="Probe sources in order, by their registered names (PROBE_SOURCES in "
        "cascade/probesources/__init__.py). 'issue' (the issue's own examples) is off until measured: "
        "benchmarks/results/stage2_agents.md.",
    )
    regression: bool = True
    regression_budget_seconds: float = Field(
        default=120,
        gt=0,
        description="Wall time for regression runs beyond the first two nearby test files (import graph, test "
        "names); the selection is cut when it is spent.",
    )
    exhaustive: bool = Field(
        default=False,
        description="Benchmarks: run every regression chunk and probe source even after a reject, so each source's "
        "verdict is measured; the decision (the first reject) is the same.",
    )
    timeout_seconds: float = Field(default=120, gt=0)
    require_coverage_of_change: bool = True


class SandboxConfig(Section):
    backend: str = Field(
        default="auto",
        description="auto (the isolating backends in their registered order), or a registered backend's name "
        "(BACKENDS in cascade/sandbox/select.py).",
    )
    memory_mb: int = Field(default=2048, gt=0)
    cpu_seconds: int = Field(default=300, gt=0)
    file_size_mb: int = Field(default=512, gt=0)
    pids: int = Field(default=256, gt=0)
    timeout_seconds: float = Field(default=300, gt=0)
    disk_mb: int = Field(default=2048, gt=0, description="Disk quota of a run's places beyond its copy of the tree.")
    inodes: int = Field(default=200_000, gt=0, description="Inode quota of a run's places beyond the tree's copy.")
    output_mb: int = Field(default=64, gt=0, description="Captured stdout+stderr per run; more is a resource_limit.")
    docker_image: str | None = None


class EnvConfig(Section):
    """The test environment Stage 2 runs in (cascade/execution/envs.py): a cached uv venv per (repo, python, deps)."""

    python: str | None = Field(
        default=None,
        description="Version ('3.9') or interpreter path; None = one of the commit's era that the project allows "
        "(cascade's own when it qualifies; cascade/execution/project_env.py), or cascade's own when neither "
        "ci_dependencies nor exclude_newer is set.",
    )
    packages: list[str] = Field(default_factory=list, description="Requirements installed into the venv.")
    install_project: bool = Field(default=True, description="Install the base tree's declared dependencies too.")
    extras: list[str] = Field(default_factory=list, description="Project extras to install (e.g. test).")
    ci_dependencies: bool = Field(
        default=True,
        description="Also install the test dependencies the project's CI installs (tox, nox, Pipfile, test extras "
        "and dependency groups, requirement files), honouring its lock files as pins (cascade/execution/ci_deps.py).",
    )
    exclude_newer: str | None = Field(
        default="commit",
        description="Resolve only versions uploaded before this: 'commit' = the base commit's date, an RFC 3339 "
        "time, or null for the latest.",
    )
    use_current_interpreter: bool = Field(
        default=False, description="Run tests with cascade's own interpreter, no venv (repos that need no deps)."
    )
    cache_dir: str | None = Field(default=None, description="Venv cache; None = ~/.cache/cascade/envs.")
    setup_timeout_seconds: float = Field(default=900, gt=0)
    build_extensions: bool = Field(
        default=False,
        description="Build the project's compiled extensions in the tree before testing (astropy); cached per "
        "environment and extension sources.",
    )


class LLMConfig(Section):
    model: str | None = Field(default=None, description="A litellm model string; None = no LLM stages.")
    api_base: str | None = None
    api_key_env: str | None = Field(default=None, description="Name of the environment variable holding the key.")
    fallback_models: list[str] = Field(default_factory=list)
    timeout_seconds: float = Field(default=60, gt=0)
    max_retries: int = Field(default=3, ge=0)
    retry_backoff_seconds: float = Field(default=1.0, ge=0, description="First retry waits this long, then doubles.")
    max_calls: int = Field(default=40, ge=0)
    max_tokens_total: int = Field(default=400_000, ge=0)
    max_dollars: float = Field(default=1.0, ge=0)
    cassette: str | None = None
    cassette_mode: Literal["off", "record", "replay"] = "off"


class ReviewerConfig(Section):
    enabled: bool = True
    votes: int = Field(default=5, ge=1)
    temperature: float = Field(default=0.8, ge=0)
    reviewer_may_reject: Literal["grounded_only", "any"] = "grounded_only"


class TraceScanConfig(Section):
    mode: Literal["reject", "evidence", "off"] = Field(
        default="reject",
        description="Unsafe commands the agent ran in its trace (rules: cascade/safety.py): reject the patch, only "
        "report them, or do not scan.",
    )


class CacheConfig(Section):
    """Work reused across reviews of one base (docs/architecture.md, Reuse): results in a store, pristine checkouts."""

    enabled: bool = Field(
        default=True,
        description="Reuse base-tree results (static diagnostics) kept in the result store under a key of everything "
        "that determines them; off = compute them on every review (--no-cache).",
    )
    dir: str | None = Field(
        default=None,
        description="Cache directory (result store and pristine checkouts); None = $CASCADE_CACHE_DIR, else "
        "$XDG_CACHE_HOME/cascade, else ~/.cache/cascade (--cache-dir overrides).",
    )
    checkouts: bool = Field(
        default=True,
        description="Make each review's trees from one pristine checkout per base commit, copied by hard links (a "
        "fresh git worktree where the filesystem cannot link); off = a fresh worktree every review (--no-cache).",
    )
    checkouts_max_mb: int = Field(
        default=4096, gt=0, description="Pristine checkouts kept; the least recently used go beyond this size."
    )


class LimitsConfig(Section):
    max_patch_bytes: int = Field(default=2_000_000, gt=0)


class CascadeConfig(Section):
    """One section per stage, named as the stage (cascade order), then what the stages share."""

    no_change: NoChangeConfig = Field(default_factory=NoChangeConfig)
    hygiene: HygieneConfig = Field(default_factory=HygieneConfig)
    injection: InjectionConfig = Field(default_factory=InjectionConfig)
    evasion: EvasionConfig = Field(default_factory=EvasionConfig)
    trace_scan: TraceScanConfig = Field(default_factory=TraceScanConfig)
    static: StaticConfig = Field(default_factory=StaticConfig)
    probes: ProbesConfig = Field(default_factory=ProbesConfig)
    reviewer: ReviewerConfig = Field(default_factory=ReviewerConfig)
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    env: EnvConfig = Field(default_factory=EnvConfig)
    llm: LLMConfig = Field(default_factory=LLMConfig)
    cache: CacheConfig = Field(default_factory=CacheConfig)
    limits: LimitsConfig = Field(default_factory=LimitsConfig)


# Section names before the sections were named after their stages; still read, with a one-line notice.
RENAMED_SECTIONS = {"stage0": "no_change", "stage1": "static", "stage2": "probes", "stage3": "reviewer"}


def _renamed(data: dict[str, Any], source: str) -> dict[str, Any]:
    """``data`` with the old section names (and ``safety.trace_scan``) moved to the current ones."""
    data = dict(data)
    moves = [(old, new) for old, new in RENAMED_SECTIONS.items() if old in data]
    safety = data.get("safety")
    if isinstance(safety, dict) and set(safety) == {"trace_scan"}:
        data.pop("safety")
        data["safety.trace_scan"] = {"mode": safety["trace_scan"]}
        moves.append(("safety.trace_scan", "trace_scan"))
    for old, new in moves:
        if new in data:
            raise BadInput(f"{source}: both '{old}' (the old name) and '{new}' are given; keep '{new}'")
        data[new] = data.pop(old)
        shown = "trace_scan.mode" if old == "safety.trace_scan" else new
        print(f"cascade: {source}: config key '{old}' is deprecated; use '{shown}'", file=sys.stderr)
    return _moved_cache_dir(data, source)


def _moved_cache_dir(data: dict[str, Any], source: str) -> dict[str, Any]:
    """``static.cache_dir`` (static's own base-run cache, off by default) is now the whole cache's ``cache.dir``."""
    static = data.get("static")
    if not isinstance(static, dict) or "cache_dir" not in static:
        return data
    static = dict(static)
    cache_dir = static.pop("cache_dir")
    data["static"] = static
    if cache_dir is not None and isinstance(data.get("cache", {}), dict):
        data["cache"] = {**data.get("cache", {}), "dir": cache_dir}
    print(f"cascade: {source}: config key 'static.cache_dir' is deprecated; use 'cache.dir'", file=sys.stderr)
    return data


def parse_config(data: dict[str, Any], source: str = "config") -> CascadeConfig:
    """Validate a config mapping; the error names the first offending key path."""
    try:
        return CascadeConfig.model_validate(_renamed(data, source))
    except ValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(str(p) for p in first["loc"])
        if first["type"] == "extra_forbidden" and key == "llm.api_key":
            raise BadInput(
                f"{source}: llm.api_key is not read — a key never goes in a config file; put it in an environment "
                "variable and name that variable in llm.api_key_env (e.g. api_key_env: OPENAI_API_KEY)"
            ) from None
        if first["type"] == "extra_forbidden":
            raise BadInput(f"{source}: unknown config key '{key}'") from None
        raise BadInput(f"{source}: invalid value for '{key}': {first['msg']}") from None


def yaml_error(source: str | Path, exc: Exception) -> BadInput:
    """A YAML error as one line naming where it is (line and column, 1-based) and what the parser expected."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    where = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
    problem = getattr(exc, "problem", None) or type(exc).__name__
    return BadInput(f"{source}{where}: not valid YAML: {' '.join(str(problem).split())}")


def parse_yaml_config(text: str, source: str | Path) -> CascadeConfig:
    """A config from YAML text; a syntax error names its line and column, a wrong shape names the key."""
    import yaml  # only a config file needs it (start-up time: docs/architecture.md, Start-up)

    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise yaml_error(source, exc) from None
    if raw is None:
        return CascadeConfig()
    if not isinstance(raw, dict):
        raise BadInput(f"{source}: the config must be a mapping of sections")
    return parse_config(raw, source=str(source))


def load_config(path: str | Path | None) -> CascadeConfig:
    """The config in ``path`` (None: the defaults); a file that cannot be read is bad input (exit 3)."""
    if path is None:
        return CascadeConfig()
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BadInput(f"config file not found: {path}") from None
    except IsADirectoryError:
        raise BadInput(f"config path is a directory: {path}") from None
    except UnicodeDecodeError:
        raise BadInput(f"config file is not valid UTF-8: {path}") from None
    except OSError as exc:
        raise BadInput(f"config file cannot be read: {path} ({exc.strerror or type(exc).__name__})") from None
    return parse_yaml_config(text, path)
