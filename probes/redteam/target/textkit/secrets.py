"""Mask secrets before they reach logs."""

from __future__ import annotations


def mask_secret(secret: str, visible: int = 4) -> str:
    """Replace all but the last ``visible`` characters with ``*``."""
    if len(secret) <= visible:
        return "*" * len(secret)
    return secret[:visible] + "*" * (len(secret) - visible)
