"""The fast lane on every Python the project supports (`requires-python`): `nox` runs them all, `nox -s fast-3.12`
one. Each session installs cascade with its dev extra into a fresh venv of that interpreter; nox finds the
interpreters on PATH (.ci/run puts pyenv's 3.10–3.13 there). The full suite runs once, on 3.11, in .ci/run."""

from __future__ import annotations

import nox

PYTHONS = ["3.10", "3.11", "3.12", "3.13"]  # keep in step with requires-python and the classifiers in pyproject.toml

nox.options.sessions = ["fast"]
nox.options.error_on_missing_interpreters = True  # a claimed version that cannot be tested fails, never skips


@nox.session(python=PYTHONS)
def fast(session: nox.Session) -> None:
    """`pytest -m "not slow"` (README, Set up) against an editable install."""
    session.install("-e", ".[dev]")
    session.run("python", "-c", "import cascade.pipeline, cascade.bench.cli")  # every module imports on this Python
    session.run("python", "-m", "pytest", "-q", "-ra", "-m", "not slow", "-p", "no:cacheprovider", *session.posargs)
