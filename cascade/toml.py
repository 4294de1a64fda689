"""TOML reading on every supported Python: the standard library's tomllib from 3.11, its backport tomli on 3.10."""

from __future__ import annotations

import sys

if sys.version_info >= (3, 11):
    from tomllib import TOMLDecodeError, loads
else:  # tomli is a dependency on 3.10 only (pyproject.toml)
    from tomli import TOMLDecodeError, loads

__all__ = ["TOMLDecodeError", "loads"]
