"""Options every command spells the same way (``--config FILE``, ``-q/--quiet``), so a flag learnt on one
command works on the others."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

FILE = click.Path(dir_okay=False, path_type=str)  # a directory given as a file is bad input (exit 3), named
PATH = click.Path(path_type=str)


def config_option(
    help: str = "YAML config (see configs/default.yaml; `cascade config` prints it).",
) -> Callable[[F], F]:
    return click.option("--config", "config_file", default=None, type=FILE, metavar="FILE", help=help)


def quiet_option(help: str = "No progress on stderr.") -> Callable[[F], F]:
    return click.option("--quiet", "-q", is_flag=True, help=help)
