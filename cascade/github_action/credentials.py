"""Credentials a checkout keeps for later steps, removed before the PR's code runs (docs/architecture.md, "Run
model", and README, "Gate agent pull requests").

``actions/checkout`` persists the job token by default: as an ``http.<url>.extraheader`` in ``.git/config``, or —
in newer versions — in a separate file that ``.git/config`` includes. A sandboxed run never sees the real git
directory (its tree has a credential-free ``.git``), but the gate does not rely on one line of defence: before
Stage 2 runs it removes every such entry from the checkout, and says so in the job summary. If one cannot be removed,
the action stops rather than run PR code next to a live token."""

from __future__ import annotations

import re
from pathlib import Path

from cascade.errors import CascadeError
from cascade.git import run_git

# The config keys that carry a credential or point at a file that may: extra HTTP headers (the job token),
# credential helpers, and included config files (where newer checkouts keep the header).
CREDENTIAL_KEYS = re.compile(r"^(?:http\..*\.extraheader|credential\..*|include\.path|includeif\..*\.path)$", re.I)
URL_WITH_USERINFO = re.compile(r"^(?P<scheme>[a-z][a-z0-9+.-]*://)[^/@\s]+@", re.I)


def persisted_credentials(repo: Path) -> list[tuple[str, str]]:
    """(key, value) of every local config entry that holds or points at a credential, remote URLs with userinfo."""
    done = run_git(repo, "config", "--local", "--get-regexp", ".*")
    found: list[tuple[str, str]] = []
    for line in done.stdout.splitlines():
        key, _, value = line.partition(" ")
        if CREDENTIAL_KEYS.match(key) or (key.startswith("remote.") and key.endswith(".url")
                                          and URL_WITH_USERINFO.match(value)):  # fmt: skip
            found.append((key, value))
    return found


def remove_persisted_credentials(repo: Path) -> list[str]:
    """Remove them; the keys removed (never their values). CascadeError when one is still there afterwards."""
    removed: list[str] = []
    for key, value in persisted_credentials(repo):
        if key.startswith("remote."):
            clean = URL_WITH_USERINFO.sub(lambda m: m["scheme"], value)
            run_git(repo, "config", "--local", key, clean)
        else:
            run_git(repo, "config", "--local", "--unset-all", key)
        removed.append(key)
    left = [key for key, _ in persisted_credentials(repo)]
    if left:
        kept = ", ".join(sorted(set(left)))
        raise CascadeError(f"the checkout keeps credentials the gate could not remove ({kept}): refusing to run the "
                           "PR's code; use actions/checkout with persist-credentials: false")  # fmt: skip
    return sorted(set(removed))


def note_for(removed: list[str]) -> str | None:
    if not removed:
        return None
    return (
        f"removed credentials the checkout kept for later steps ({', '.join(removed)}) before running the PR's "
        "code; set persist-credentials: false on actions/checkout"
    )


__all__ = ["note_for", "persisted_credentials", "remove_persisted_credentials"]
