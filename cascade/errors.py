"""Errors the CLI turns into one clear line and a documented exit code."""

from __future__ import annotations

import os
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
    except OSError as exc:  # not a directory on the way, no permission, an I/O error
        raise BadInput(f"{what} file cannot be read: {path} ({exc.strerror or type(exc).__name__})") from None


def check_output_path(output: str) -> None:
    """Refuse an unwritable --output before the review runs, so a finished review's verdict is never lost."""
    path = Path(output)
    if path.is_dir():
        raise BadInput(f"--output {output} is a directory: give a file path")
    parent = path.parent
    if not parent.is_dir():
        raise BadInput(f"--output {output}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise BadInput(f"--output {output} is not writable")
