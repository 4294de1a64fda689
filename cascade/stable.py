"""Reports free of run-specific values: temporary paths always, wall-clock times on request.

*Paths.* Every review checks out the base and patched trees into fresh temporary worktrees, and tools write
scratch files under fresh temporary directories. A report that named them would differ on every run and point at
directories that no longer exist. So each stage's result is rewritten once, when the pipeline records it
(`stable_result`): the worktrees become ``<base>`` and ``<patched>``, other cascade temporary directories become
a named placeholder (`PLACEHOLDERS` says what each stands for, and the reports print that legend), and the
commands stay re-runnable with the placeholder replaced by a checkout.

*Machine paths.* The same holds for where things live on the reviewing machine: the repository (``<repo>``),
the Python environment cascade runs in (``<env>``, a venv or pyenv prefix; a system prefix such as ``/usr`` is
kept), the tools it found (``<pyright>``, ``<ruff>``, ``<uv>``), the cache of test environments (``<test-envs>``)
and the home directory (``<home>``). A placeholder replaces a path only as a whole path component, never a prefix
of a longer name.

*Times.* Wall-clock fields (every ``seconds``, and pytest's "… in 0.42s" inside log excerpts) are kept in a normal
report. `reproducible` zeroes them and marks the verdict ``reproducible: true``, so two runs of the same review
(a cassette recording and its replay) give byte-identical reports; the CLI applies it for ``--reproducible`` and
for every run with an LLM cassette.
"""

from __future__ import annotations

import re
import sys
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any

from cascade.models import Cost, StageResult, Verdict

BASE = "<base>"
PATCHED = "<patched>"
WORKTREES = "<worktrees>"
PYRIGHT_CONFIG_DIR = "<pyright-config-dir>"
SANDBOX_RUN_DIR = "<sandbox-run-dir>"
TEMP_DIR = "<temp-dir>"
REPO = "<repo>"
ENV = "<env>"
HOME = "<home>"
TEST_ENVS = "<test-envs>"
TOOLS = ("pyright", "ruff", "uv")  # executables cascade finds beside its interpreter or on PATH (cascade/tools.py)
SYSTEM_PREFIXES = {"/", "/usr", "/usr/local", "/opt"}  # standard places a report may name: nothing personal there
PLACEHOLDERS = {
    BASE: "a checkout of the base commit (`git worktree add --detach DIR BASE`)",
    PATCHED: "the same checkout with the patch applied (`git apply`)",
    WORKTREES: "the temporary directory holding both checkouts",
    PYRIGHT_CONFIG_DIR: "a directory holding pyrightconfig.json with the settings in details.tool_configs.pyright",
    SANDBOX_RUN_DIR: "the sandbox's private HOME and /tmp for one run (discarded after it)",
    TEMP_DIR: "another temporary directory of this run",
    REPO: "the repository reviewed (--repo)",
    TEST_ENVS: "cascade's cache of test environments (env.cache_dir; default ~/.cache/cascade/envs), one venv each",
    **{f"<{tool}>": f"the {tool} executable (beside cascade's Python, else `{tool}` on PATH)" for tool in TOOLS},
    ENV: "the Python environment cascade ran in (its sys.prefix)",
    HOME: "the home directory of the user cascade ran as",
}
# tempfile.mkdtemp names: cascade's own prefixes, then 8 random characters
_TEMP_PREFIXES = {"cascade-pyright-": PYRIGHT_CONFIG_DIR, "cascade-run-": SANDBOX_RUN_DIR}
_MKDTEMP_SUFFIX = r"[A-Za-z0-9_]{8}"
# pytest's closing line "2 failed in 0.04s" (and "in 61.20s (0:01:01)" past a minute)
DURATION = re.compile(r"\bin \d+(?:\.\d+)?s\b(?: \(\d+:\d\d:\d\d\))?")
DURATION_PLACEHOLDER = "in <t>s"


def run_placeholders(base_dir: Path | str, patched_dir: Path | str) -> dict[str, str]:
    """This run's worktree paths (as given and resolved, since tools report resolved paths) → placeholders."""
    mapping: dict[str, str] = {}
    for path, token in ((base_dir, BASE), (patched_dir, PATCHED), (Path(base_dir).parent, WORKTREES)):
        mapping[str(path)] = token
        mapping[str(Path(path).resolve())] = token
    return mapping


def _add_path(mapping: dict[str, str], path: Path | str, token: str) -> None:
    for form in (str(path), str(Path(path).resolve())):
        if form.rstrip("/") and form not in SYSTEM_PREFIXES:
            mapping.setdefault(form.rstrip("/"), token)


def repo_placeholder(repo: Path | str) -> dict[str, str]:
    mapping: dict[str, str] = {}
    _add_path(mapping, repo, REPO)
    return mapping


@lru_cache(maxsize=4)
def machine_placeholders(tools: tuple[tuple[str, str], ...] = (), test_envs: Path | None = None) -> dict[str, str]:
    """Paths of this machine → placeholders: the ``(name, path)`` of each tool found (cascade/tools.py), the test
    environments' cache, cascade's environment, the home directory."""
    mapping: dict[str, str] = {}
    for tool, found in tools:
        _add_path(mapping, found, f"<{tool}>")
    if test_envs is not None:
        _add_path(mapping, test_envs, TEST_ENVS)
    _add_path(mapping, sys.prefix, ENV)
    home = Path.home()
    _add_path(mapping, home, HOME)
    return mapping


@lru_cache(maxsize=64)
def _paths_pattern(paths: tuple[str, ...]) -> re.Pattern[str]:
    """Any of ``paths`` (longest first, so a worktree wins over the directory holding it) as a whole path: not
    followed by a character that would continue its last name (a sentence's full stop ends it)."""
    alternatives = "|".join(re.escape(p) for p in sorted(paths, key=len, reverse=True))
    return re.compile(rf"(?:{alternatives})(?![\w\-]|\.\w)")


@lru_cache(maxsize=1)
def _temp_pattern() -> re.Pattern[str]:
    roots = sorted({tempfile.gettempdir(), str(Path(tempfile.gettempdir()).resolve())}, key=len, reverse=True)
    prefixes = "|".join(re.escape(p) for p in _TEMP_PREFIXES)
    root = "|".join(re.escape(r) for r in roots)
    return re.compile(rf"(?:{root})/({prefixes}){_MKDTEMP_SUFFIX}")


def stable_text(text: str, placeholders: dict[str, str]) -> str:
    """``text`` with this run's worktrees and cascade's temporary directories replaced by placeholders."""
    present = tuple(path for path in placeholders if path in text)
    if present:
        text = _paths_pattern(present).sub(lambda m: placeholders[m.group(0)], text)
    if "cascade-" in text:
        text = _temp_pattern().sub(lambda m: _TEMP_PREFIXES[m.group(1)], text)
    return text


def _map_strings(node: Any, change: Any) -> Any:
    """``node`` (JSON-shaped) with ``change`` applied to every string, dictionary keys included."""
    if isinstance(node, str):
        return change(node)
    if isinstance(node, dict):
        return {change(k) if isinstance(k, str) else k: _map_strings(v, change) for k, v in node.items()}
    if isinstance(node, list):
        return [_map_strings(v, change) for v in node]
    return node


def stable_result(result: StageResult, placeholders: dict[str, str]) -> StageResult:
    """The stage result with run-specific paths replaced everywhere (summaries, commands, details, messages)."""
    data = result.model_dump(mode="json")
    return StageResult.model_validate(_map_strings(data, lambda s: stable_text(s, placeholders)))


def stable_verdict(verdict: Verdict, placeholders: dict[str, str]) -> Verdict:
    """The whole verdict with run- and machine-specific paths replaced (its reason and notes name them too)."""
    data = verdict.model_dump(mode="json")
    return Verdict.model_validate(_map_strings(data, lambda s: stable_text(s, placeholders)))


def without_durations(text: str) -> str:
    return DURATION.sub(DURATION_PLACEHOLDER, text)


def _zero_seconds(node: Any) -> Any:
    """Every number under a key named ``seconds`` set to 0 (configured limits are named ``*_seconds``), and what a
    cost says it reused emptied: a first review and its repeat differ only in time and in what they reused."""
    if isinstance(node, dict):
        return {
            k: 0.0 if k == "seconds" and isinstance(v, (int, float)) else [] if k == "reuse" else _zero_seconds(v)
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [_zero_seconds(v) for v in node]
    return node


def reproducible(verdict: Verdict) -> Verdict:
    """The verdict without wall-clock times: what two runs of the same review cannot agree on."""
    data = _map_strings(_zero_seconds(verdict.model_dump(mode="json")), without_durations)
    data["reproducible"] = True
    return Verdict.model_validate(data)


def seconds_label(verdict: Verdict, cost: Cost) -> str:
    """A stage's or the run's time as reports print it; "–" when the report leaves times out."""
    return "–" if verdict.reproducible else f"{cost.seconds:.2f}"


def placeholders_used(verdict: Verdict) -> dict[str, str]:
    """The placeholders that occur in the report's evidence, with what each stands for (the reports' legend)."""
    text = verdict.model_dump_json(include={"stages"})
    return {token: meaning for token, meaning in PLACEHOLDERS.items() if token in text}
