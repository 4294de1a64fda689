"""Errors the CLI turns into one clear line and a documented exit code."""

from __future__ import annotations

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
