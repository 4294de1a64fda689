"""Errors the CLI turns into one clear line and a documented exit code."""

from __future__ import annotations

from pathlib import Path

EXIT_ACCEPT = 0
EXIT_REJECT = 1
EXIT_UNCERTAIN = 2
EXIT_BAD_INPUT = 3
EXIT_INTERNAL = 4


class CascadeError(Exception):
    """Base of every error the gate raises on purpose."""

    exit_code = EXIT_INTERNAL


class BadInput(CascadeError):
    """The user's input (patch, repository, ref, config, option) cannot be reviewed as given."""

    exit_code = EXIT_BAD_INPUT


class ToolUnavailable(CascadeError):
    """An external tool (pyright, ruff, bwrap, docker, a model) is missing or crashed."""


class IncompleteRepository(CascadeError):
    """The repository lacks objects of the base commit (a partial clone, a mirror without some blobs): no checkout
    can be made, but the stages that need none can still run."""


class RequiredToolUnavailable(CascadeError):
    """A checker the user required (``--require-tools``) could not run: no verdict rather than a weaker one."""

    exit_code = EXIT_BAD_INPUT


def read_input_text(path: str | Path, what: str) -> str:
    """A user-supplied text file; a missing, directory or non-UTF-8 path is bad input named by ``what``."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BadInput(f"{what} file not found: {path}") from None
    except IsADirectoryError:
        raise BadInput(f"{what} path is a directory: {path}") from None
    except UnicodeDecodeError:
        raise BadInput(f"{what} file is not valid UTF-8: {path}") from None
