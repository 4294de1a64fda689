"""Compiled extensions built in the tree (astropy): once per environment and extension sources.

Stage 2 runs a repository from its source tree, and some projects cannot be imported from source until their C/Cython
extensions are compiled in place (``setup.py build_ext --inplace``, what ``pip install -e`` does). The build is slow
(minutes), so it runs once per (environment, extension sources) in a cache directory — the key hashes the venv and
git's blob ids of every file the build reads (C, Cython, headers, setup files) — and its products (the files the
build adds to the tree: shared objects, generated modules) are copied into both trees of each review.

The build runs the base tree's own ``setup.py``: the project's code at the base commit, which the environment builder
already trusts (it installs the base tree's declared dependencies). A patch that changes extension sources would need
its own build of untrusted code; Stage 2 then says so instead of testing stale binaries.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import shutil
import subprocess
import tarfile
import tempfile
import time
from pathlib import Path, PurePosixPath

from pydantic import BaseModel, ConfigDict, Field

from cascade.execution.envs import DEFAULT_CACHE, Environment, EnvironmentUnavailable, _describe_version, _locked
from cascade.git import run_git

EXTENSION_SOURCES = (
    "*.c", "*.h", "*.cc", "*.cpp", "*.hpp", "*.pyx", "*.pxd", "*.pxi", "*.f", "*.f90",
    "setup.py", "setup.cfg", "pyproject.toml", "setup_package.py",
)  # fmt: skip
_MANIFEST = "cascade-build.json"
_SKIP_DIRS = {"build", "__pycache__", ".git", ".eggs"}


class ExtensionBuild(BaseModel):
    """A finished build: where it is and which files it added to the tree (relative paths)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    key: str
    tree: str = Field(description="The built copy of the tree, inside the cache.")
    products: list[str]
    seconds: float


class BuildFailed(EnvironmentUnavailable):
    """The build ran and failed (not a timeout): remembered, so later reviews report it without rebuilding."""


_DECLARES = ("Extension(", "ext_modules", "cythonize(", "get_extensions(")


def declares_extensions(tree: Path) -> bool:
    """The tree's setup.py builds compiled extensions (what ``setup.py build_ext --inplace`` can build)."""
    setup = tree / "setup.py"
    return setup.is_file() and any(marker in setup.read_text(errors="replace") for marker in _DECLARES)


def is_extension_source(path: str) -> bool:
    name = PurePosixPath(path).name
    return any(fnmatch.fnmatch(name, pattern) for pattern in EXTENSION_SOURCES)


def _git(tree: Path, *args: str) -> str:
    proc = run_git(tree, *args, timeout=300)
    if proc.returncode != 0:
        raise EnvironmentUnavailable(f"git {args[0]} failed in {tree}: {proc.stderr.strip()[:200]}")
    return proc.stdout


def build_key(tree: Path, env: Environment) -> str:
    """Hash of the environment and of the blob ids of the tree's tracked extension sources."""
    listing = [line for line in _git(tree, "ls-files", "-s").splitlines() if is_extension_source(line.split("\t")[-1])]
    digest = hashlib.sha256("\n".join([env.venv_dir or env.python, env.python_version, *listing]).encode())
    return digest.hexdigest()[:20]


def ensure_extensions(
    env: Environment, base: Path, changed: list[str], cache_dir: Path | None = None, timeout: float = 3600
) -> ExtensionBuild:
    """The cached build for the base tree's extension sources (built on first use); EnvironmentUnavailable when the
    patch changes those sources or the build fails."""
    touched = sorted(p for p in changed if is_extension_source(p) and PurePosixPath(p).name != "pyproject.toml")
    if touched:
        raise EnvironmentUnavailable(
            f"the patch changes compiled-extension sources ({', '.join(touched[:3])}); rebuilding them is not supported"
        )
    key = build_key(base, env)
    root = (cache_dir or DEFAULT_CACHE.parent / "builds") / key
    with _locked(root.with_suffix(".lock")):
        manifest, failed = root / _MANIFEST, root.with_suffix(".failed")
        if failed.is_file():  # a build that failed (not timed out) fails the same way again: say so at once
            raise EnvironmentUnavailable(failed.read_text(encoding="utf-8"))
        if not manifest.is_file():
            try:
                _build(env, base, root, timeout)
            except BuildFailed as exc:
                failed.write_text(str(exc), encoding="utf-8")
                raise
        return ExtensionBuild.model_validate_json(manifest.read_text(encoding="utf-8"))


def _build(env: Environment, base: Path, root: Path, timeout: float) -> None:
    shutil.rmtree(root, ignore_errors=True)
    tree = root / "tree"
    tree.mkdir(parents=True)
    with tempfile.TemporaryFile() as archive:
        subprocess.run(["git", "archive", "HEAD"], cwd=base, stdout=archive, check=True, timeout=600)
        archive.seek(0)
        with tarfile.open(fileobj=archive) as tar:
            tar.extractall(tree, filter="data")
    before = _files(tree)
    build_env = {**os.environ, "SETUPTOOLS_SCM_PRETEND_VERSION": _describe_version(base).split("+")[0]}
    command = [env.python, "setup.py", "build_ext", "--inplace", "-j", str(os.cpu_count() or 1)]
    started = time.perf_counter()
    try:
        proc = subprocess.run(command, cwd=tree, capture_output=True, text=True, timeout=timeout, env=build_env)
    except subprocess.TimeoutExpired:
        raise EnvironmentUnavailable(f"building the compiled extensions timed out after {timeout:.0f}s") from None
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines() or ["no output"]
        first = next((line for line in lines if "error" in line.lower()), lines[-1])
        raise BuildFailed(f"building the compiled extensions failed ({command[0]}): {first.strip()[:300]}")
    products = sorted(_files(tree) - before)
    build = ExtensionBuild(
        key=root.name, tree=str(tree), products=products, seconds=round(time.perf_counter() - started, 1)
    )
    (root / _MANIFEST).write_text(build.model_dump_json(indent=1), encoding="utf-8")


def _files(tree: Path) -> set[str]:
    found: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(tree):
        dirnames[:] = [d for d in dirnames if d not in _SKIP_DIRS]
        rel = Path(dirpath).relative_to(tree)
        found.update(str(rel / f) if str(rel) != "." else f for f in filenames if not f.endswith(".o"))
    return found


def install_products(build: ExtensionBuild, *trees: Path) -> int:
    """Copy the build's products into each tree where absent; returns how many files were copied."""
    copied = 0
    source = Path(build.tree)
    for tree in trees:
        for rel in build.products:
            target = tree / rel
            if not target.exists() and target.parent.is_dir():
                shutil.copy2(source / rel, target)
                copied += 1
    return copied


def describe(build: ExtensionBuild) -> str:
    shared = sum(p.endswith((".so", ".pyd")) for p in build.products)
    return f"compiled extensions: build {build.key} ({shared} shared object(s), built in {build.seconds:.0f} s once)"
