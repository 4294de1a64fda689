"""The Action removes the credentials actions/checkout persists before the PR's code runs (real git config)."""

from __future__ import annotations

from pathlib import Path

from cascade.github_action.credentials import note_for, persisted_credentials, remove_persisted_credentials
from tests.support import MakeRepo, run_git

TOKEN = "ghs_" + "Qw7" * 12


def test_persisted_tokens_are_removed_and_named_never_shown(make_repo: MakeRepo, tmp_path: Path) -> None:
    repo = make_repo({"a.py": "X = 1\n"})
    included = tmp_path / "credentials.config"
    included.write_text(f'[http "https://github.com/"]\n\textraheader = AUTHORIZATION: basic {TOKEN}\n')
    run_git(repo, "config", "http.https://github.com/.extraheader", f"AUTHORIZATION: basic {TOKEN}")
    run_git(repo, "config", f"includeIf.gitdir:{repo}/.git.path", str(included))
    run_git(repo, "config", "credential.helper", "store")
    run_git(repo, "remote", "add", "origin", f"https://x-access-token:{TOKEN}@github.com/o/r.git")
    run_git(repo, "config", "core.autocrlf", "false")  # an ordinary setting stays
    assert len(persisted_credentials(repo)) == 4
    removed = remove_persisted_credentials(repo)
    config = (repo / ".git" / "config").read_text()
    assert TOKEN not in config and "credentials.config" not in config
    assert run_git(repo, "remote", "get-url", "origin").strip() == "https://github.com/o/r.git"
    assert "autocrlf = false" in config
    note = note_for(removed)
    assert note is not None and TOKEN not in note and "persist-credentials: false" in note
    assert persisted_credentials(repo) == [] and note_for(remove_persisted_credentials(repo)) is None
