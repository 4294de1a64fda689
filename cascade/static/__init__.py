"""Building blocks of Stage 1 (docs/architecture.md, Stages): targets, tool runs, fingerprints and rule classes.

- ``dependents``: which files to analyse — changed Python files plus unchanged in-repo files that reference the
  names a patch removed or whose signature it changed.
- ``ruff`` / ``pyright``: run each tool once per tree over all targets, with settings fixed by cascade so a
  repository's own configuration can neither hide nor invent a finding.
- ``fingerprint``: line-number-free identities of diagnostics, compared as multisets (patched − base).
- ``rules``: the rule class of a diagnostic, including the "in-repo" qualifiers the allow-list relies on.
"""
