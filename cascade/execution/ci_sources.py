"""Where a project's CI states its test dependencies: tox, nox, pipenv, package metadata, requirement files, locks.

The order and rules are described in ``cascade.execution.ci_deps``; this module reads each format into a ``Reader``.
"""

from __future__ import annotations

import ast
import configparser
import contextlib
import json
import re
import subprocess
from pathlib import Path
from typing import Any

from cascade import toml
from cascade.execution.ci_deps import REQUIREMENT_FILES, TEST_NAMES, CiDependencies, Reader
from cascade.tools import find_tool


def _lines(value: str | list[str] | None, commas: bool = False) -> list[str]:
    """A tox setting's entries: a TOML list, or one per line (and, for names, comma-separated)."""
    if value is None:
        return []
    if isinstance(value, list):
        return [str(v) for v in value]
    lines = value.splitlines()
    return [part.strip() for line in lines for part in (line.split(",") if commas else [line]) if part.strip()]


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        return toml.loads(path.read_text(errors="replace")) if path.is_file() else {}
    except toml.TOMLDecodeError:
        return {}


def _ini(text: str) -> configparser.RawConfigParser:
    parser = configparser.RawConfigParser(strict=False)
    with contextlib.suppress(configparser.Error):
        parser.read_string(text)
    return parser


def _tox_env(tree: Path, pyproject: dict[str, Any]) -> tuple[dict[str, str | list[str]], str] | None:
    """The base test env's settings and where they were found."""
    for name in ("tox.ini", "setup.cfg"):
        path = tree / name
        parser = _ini(path.read_text(errors="replace")) if path.is_file() else None
        if parser is not None and parser.has_section("testenv"):
            return dict(parser.items("testenv")), f"{name} [testenv]"
    tox = pyproject.get("tool", {}).get("tox", {})
    if isinstance(tox.get("env_run_base"), dict):
        return tox["env_run_base"], "pyproject.toml [tool.tox.env_run_base]"
    legacy = _ini(tox.get("legacy_tox_ini", "")) if isinstance(tox.get("legacy_tox_ini"), str) else None
    if legacy is not None and legacy.has_section("testenv"):
        return dict(legacy.items("testenv")), "pyproject.toml legacy_tox_ini [testenv]"
    return None


def _from_tox(reader: Reader, pyproject: dict[str, Any]) -> bool:
    found = _tox_env(reader.tree, pyproject)
    if found is None:
        return False
    env, where = found
    deps, extras = _lines(env.get("deps")), _lines(env.get("extras"), commas=True)
    groups = _lines(env.get("dependency_groups"), commas=True)
    if not (deps or extras or groups):
        return False
    reader.deps.used.append(where)
    reader.tox_deps(deps, where)
    reader.deps.extras.extend(reader.for_this_env(extras))
    for group in reader.for_this_env(groups):
        _group(reader, pyproject, group)
    return True


def _group(reader: Reader, pyproject: dict[str, Any], name: str, depth: int = 0) -> bool:
    """PEP 735 dependency group ``name`` (with its include-group entries)."""
    groups = pyproject.get("dependency-groups", {})
    entries = groups.get(name) if isinstance(groups, dict) else None
    if not isinstance(entries, list) or depth > 10:
        return False
    if depth == 0:
        reader.deps.used.append(f"pyproject.toml [dependency-groups] {name}")
    for entry in entries:
        if isinstance(entry, str):
            reader.requirement(entry, f"dependency group {name}")
        elif isinstance(entry, dict) and isinstance(entry.get("include-group"), str):
            _group(reader, pyproject, entry["include-group"], depth + 1)
    return True


def _from_nox(reader: Reader) -> bool:
    path = reader.tree / "noxfile.py"
    try:
        module = ast.parse(path.read_text(errors="replace")) if path.is_file() else None
    except SyntaxError:
        module = None
    sessions = [n for n in ast.walk(module) if isinstance(n, ast.FunctionDef) and "test" in n.name] if module else []
    args: list[str] = []
    for call in (n for s in sessions for n in ast.walk(s) if isinstance(n, ast.Call)):
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr == "install":
            args.extend(a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str))
    if not args:
        return False
    reader.deps.used.append("noxfile.py " + ", ".join(s.name for s in sessions))
    pending: str | None = None
    for arg in args:
        if pending is not None:
            reader.requirements_file(reader.tree / arg, pending == "-c")
            pending = None
        elif arg in ("-r", "-c", "--requirement", "--constraint"):
            pending = "-c" if arg in ("-c", "--constraint") else "-r"
        elif arg not in ("-e", "--editable", "-U", "--upgrade") and not arg.startswith("--"):
            reader.requirement(arg, "noxfile.py")
    return True


def _from_pipfile(reader: Reader) -> bool:
    """pipenv: ``[dev-packages]`` of the Pipfile, the project's own entry's extras, Pipfile.lock as pins."""
    pipfile = _read_toml(reader.tree / "Pipfile")
    dev = pipfile.get("dev-packages")
    if not isinstance(dev, dict) or not dev:
        return False
    reader.deps.used.append("Pipfile [dev-packages]")
    for section in (pipfile.get("packages", {}), dev):
        for name, spec in section.items() if isinstance(section, dict) else ():
            if isinstance(spec, dict) and str(spec.get("path", "")).rstrip("/") in (".", "./"):
                reader.deps.extras.extend(str(e) for e in spec.get("extras", []))
            elif section is dev:
                version = spec if isinstance(spec, str) else str(spec.get("version", "*"))
                extras = f"[{','.join(spec['extras'])}]" if isinstance(spec, dict) and spec.get("extras") else ""
                reader.requirement(f"{name}{extras}{'' if version == '*' else version}", "Pipfile")
    _pipfile_lock(reader)
    return True


def _pipfile_lock(reader: Reader) -> None:
    try:
        lock = json.loads((reader.tree / "Pipfile.lock").read_text(errors="replace"))
    except (OSError, ValueError):
        return
    pins = [f"{name}{entry['version']}" for part in ("default", "develop") for name, entry in lock.get(part, {}).items()
            if isinstance(entry, dict) and str(entry.get("version", "")).startswith("==")]  # fmt: skip
    if pins:
        reader.deps.constraints.extend(pins)
        reader.deps.used.append(f"Pipfile.lock ({len(pins)} pins, as constraints)")


def _setup_py_extras(tree: Path) -> dict[str, list[str]]:
    """``extras_require`` of setup.py when it is a literal dict (inline, or a module-level name)."""
    try:
        module = ast.parse((tree / "setup.py").read_text(errors="replace")) if (tree / "setup.py").is_file() else None
    except SyntaxError:
        return {}
    if module is None:
        return {}
    named = {
        t.id: n.value for n in module.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)
    }
    for call in (n for n in ast.walk(module) if isinstance(n, ast.Call)):
        for keyword in call.keywords:
            value = keyword.value
            value = named.get(value.id, value) if isinstance(value, ast.Name) else value
            if keyword.arg == "extras_require" and isinstance(value, ast.Dict):
                return {k.value: [] for k in value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
    return {}


def _from_metadata(reader: Reader, pyproject: dict[str, Any]) -> bool:
    declared = {name: "pyproject.toml" for name in pyproject.get("project", {}).get("optional-dependencies", {})}
    cfg_path = reader.tree / "setup.cfg"
    cfg = _ini(cfg_path.read_text(errors="replace")) if cfg_path.is_file() else None
    if cfg is not None and cfg.has_section("options.extras_require"):
        declared.update({name: "setup.cfg" for name in cfg.options("options.extras_require")})
    declared.update({name: "setup.py" for name in _setup_py_extras(reader.tree)})
    for name in TEST_NAMES:
        if _group(reader, pyproject, name):
            return True
        if name in declared:
            reader.deps.used.append(f"{declared[name]} extra [{name}]")
            reader.deps.extras.append(name)
            return True
    return False


def _from_requirement_files(reader: Reader) -> bool:
    for name in REQUIREMENT_FILES:
        if (reader.tree / name).is_file():
            reader.requirements_file(reader.tree / name)
            return True
    return False


def project_name(tree: Path, pyproject: dict[str, Any]) -> str | None:
    name = pyproject.get("project", {}).get("name")
    if isinstance(name, str):
        return name
    for path, pattern in (
        (tree / "setup.cfg", r"^name\s*=\s*([\w.-]+)"),
        (tree / "setup.py", r"name\s*=\s*['\"]([\w.-]+)['\"]"),
    ):
        match = re.search(pattern, path.read_text(errors="replace"), re.MULTILINE) if path.is_file() else None
        if match:
            return match.group(1)
    return None


def lock_constraints(tree: Path, timeout: float = 120) -> list[str]:
    """Exact pins of ``uv.lock`` (every group and extra) as constraint lines; [] without a lock uv can read."""
    uv = find_tool("uv")
    if uv is None or not (tree / "uv.lock").is_file():
        return []
    command = [uv, "export", "--frozen", "--no-hashes", "--no-emit-project", "--no-header", "--format",
               "requirements-txt", "--all-groups", "--all-extras", "--no-progress"]  # fmt: skip
    try:
        proc = subprocess.run(command, cwd=tree, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return []
    if proc.returncode != 0:
        return []
    return [line.strip() for line in proc.stdout.splitlines() if re.match(r"^[A-Za-z0-9][\w.-]*==", line.strip())]


def read_ci_dependencies(tree: Path, python: str) -> CiDependencies:
    """The test dependencies of the tree's CI for a Python version ('3.11'); empty when it states none."""
    pyproject = _read_toml(tree / "pyproject.toml")
    reader = Reader(tree, project_name(tree, pyproject), python)
    for source in (lambda: _from_tox(reader, pyproject), lambda: _from_nox(reader), lambda: _from_pipfile(reader),
                   lambda: _from_metadata(reader, pyproject), lambda: _from_requirement_files(reader)):  # fmt: skip
        if source():
            break
    pins = lock_constraints(tree)
    if pins:
        reader.deps.constraints.extend(pins)
        reader.deps.used.append(f"uv.lock ({len(pins)} pins, as constraints)")
    deps = reader.deps
    deps.extras = list(dict.fromkeys(deps.extras))
    deps.requirements = list(dict.fromkeys(deps.requirements))
    return deps
