"""The allow-list itself: every named entry allows exactly its own prefix (and the directories that hold it), never
the directory around it; the run's own places exclude the git directory. Runs in a sandbox are in test_oracle.py."""

from __future__ import annotations

import pytest

from cascade.sandbox.allowlist import (
    MPLCONFIGDIR_IN_SANDBOX,
    NAMED_ENTRIES,
    NamedEntry,
    RunScope,
    bytecode_attempt,
    named_entry,
    own_place,
    place_of,
)
from cascade.sandbox.records import AuditLog, audit_effects

SCOPE = RunScope(
    worktree="/tmp/cascade-x/patched",
    git_dirs=["/tmp/cascade-x/patched/.git", "/srv/repo/.git/worktrees/patched", "/srv/repo/.git"],
    scratch="/tmp/cascade-scratch",
    tmp="/tmp",
    home="/root",
    read_only=["/var/cache/venv"],
)


def test_every_named_entry_says_why_and_is_a_narrow_prefix() -> None:
    assert len({e.name for e in NAMED_ENTRIES}) == len(NAMED_ENTRIES)
    for entry in NAMED_ENTRIES:
        assert len(entry.why) > 30, entry.name
        gate_named = entry.prefix == MPLCONFIGDIR_IN_SANDBOX.removeprefix("/tmp/")  # a directory the gate names
        assert "/" in entry.prefix or entry.prefix.startswith(".") or gate_named, entry
        assert entry.prefix not in (".cache", ".config", ".local", ""), entry


@pytest.mark.parametrize("entry", NAMED_ENTRIES, ids=lambda e: e.name)
def test_each_entry_allows_its_prefix_and_not_its_neighbours(entry: NamedEntry) -> None:
    root = SCOPE.home if entry.root == "home" else SCOPE.tmp
    base = f"{root}/{entry.prefix}"
    assert named_entry(f"{base}/some/file", SCOPE) == entry
    assert named_entry(base, SCOPE) == entry
    assert named_entry(f"{base}-evil/file", SCOPE) is None  # a sibling with the same prefix is not the entry
    parent = base.rsplit("/", 1)[0]
    assert named_entry(f"{parent}/unrelated", SCOPE) is None
    if parent != root:  # the directory holding an entry may be made, not written into
        assert named_entry(parent, SCOPE, "mkdir") is not None
        assert named_entry(parent, SCOPE, "write") is None


def test_home_caches_are_not_a_blanket_exemption() -> None:
    for path in ("/root/.cache/pip/x", "/root/.cache/textkit", "/root/.config/autostart/x.desktop", "/root/.bashrc"):
        assert named_entry(path, SCOPE) is None, path


def test_own_places_are_the_worktree_and_scratch_but_not_the_git_directory() -> None:
    assert own_place("/tmp/cascade-x/patched/pkg/mod.py", SCOPE)
    assert own_place("/tmp/cascade-x/patched/.gitignore", SCOPE)
    assert own_place("/tmp/cascade-scratch/pytest-of-root/x", SCOPE)
    assert not own_place("/tmp/cascade-x/patched/.git", SCOPE)
    assert not own_place("/srv/repo/.git/hooks/pre-commit", SCOPE)
    assert not own_place("/tmp/cascade-x/base/conftest.py", SCOPE)  # the sibling tree
    assert not own_place("/tmp/cascade-scratch-evil/x", SCOPE)
    assert "git directory" in place_of("/srv/repo/.git/config", SCOPE)
    assert "scratch directory" in place_of("/tmp/x", SCOPE)
    assert "environment" in place_of("/var/cache/venv/lib/site.pth", SCOPE)


def test_bytecode_attempts_are_allowed_only_in_the_read_only_environment() -> None:
    pyc = "/var/cache/venv/lib/python3.9/site-packages/__pycache__/six.cpython-39.pyc.140211"
    assert bytecode_attempt("write", pyc, SCOPE, True)
    assert bytecode_attempt("mkdir", "/var/cache/venv/lib/python3.9/site-packages/__pycache__", SCOPE, True)
    assert not bytecode_attempt("write", "/var/cache/venv/lib/python3.9/site-packages/evil.pth", SCOPE, True)
    assert not bytecode_attempt("write", "/usr/lib/python3/__pycache__/os.cpython-311.pyc", SCOPE, True)
    assert not bytecode_attempt("delete", pyc, SCOPE, True)
    assert not bytecode_attempt("write", pyc.rsplit(".", 1)[0], SCOPE, True)  # a final .pyc is planted, not cached
    # With bytecode caching off (the gate sets PYTHONDONTWRITEBYTECODE) the import system never tries: it is the test.
    assert not bytecode_attempt("mkdir", "/var/cache/venv/lib/python3.9/site-packages/__pycache__", SCOPE, False)


def test_audit_records_are_all_judged_harmful_first_even_after_a_flood() -> None:
    start = [{"event": "run_start"}, {"event": "run_end"}]
    flood = [{"event": "write", "path": f"/root/.cache/matplotlib/f{i}"} for i in range(3000)]
    records = start + flood + [{"event": "write", "path": "/root/.bashrc"}]
    effects = audit_effects(AuditLog(records=records), SCOPE)
    assert not effects[0].benign and effects[0].target == "/root/.bashrc"
    assert sum(not e.benign for e in effects) == 1


def log(*events: str, **state: object) -> AuditLog:
    return AuditLog.model_validate({"records": [{"event": event} for event in events], **state})


def test_an_audit_log_without_its_start_or_end_record_is_harmful() -> None:
    # An empty append-only channel: the command never ran (the supervisor logs its start first): inconclusive.
    for empty in (None, log()):
        assert [(e.target, e.benign) for e in audit_effects(empty, SCOPE)] == [("audit log", True)]
    assert [(e.target, e.benign) for e in audit_effects(log("run_end"), SCOPE)] == [("audit log", False)]
    assert [e.kind for e in audit_effects(log("run_start"), SCOPE)] == ["resource_limit"]
    assert audit_effects(log("run_start"), SCOPE, timed_out=True) == []
    assert audit_effects(log("run_start", "run_end"), SCOPE) == []


@pytest.mark.parametrize(
    ("forged", "words"),
    [
        (log("run_start", "run_start", "run_end"), "2 start records"),  # a fresh start to pass for a clean log
        (log("run_start", "run_end", "run_end"), "2 end records"),
        (log("write", "run_start", "run_end"), "lost its start record"),  # a record before the supervisor's start
        (log("run_start", "run_end", bad_lines=['{"event": "run_sta']), "not audit records"),
        (log("run_start", "run_end", dropped_bytes=10), "flooded"),
        (log("run_start", "run_end", complete=False), "held the audit channel open"),
    ],
)
def test_forged_or_garbled_audit_channel_content_is_tampering(forged: AuditLog, words: str) -> None:
    effects = audit_effects(forged, SCOPE)
    assert [(e.target, e.benign) for e in effects] == [("audit log", False)], effects
    assert words in effects[0].detail
