"""Every bad input ends in one clear line on stderr and exit 3 — never a traceback (README, Review a patch)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.bad_inputs import cases, run
from tests.support import MakeRepo, diff_of, run_git

BASE = {"pkg/__init__.py": "", "pkg/mod.py": "def f(x):\n    return x + 1\n"}


def cascade(*args: str, cwd: Path, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "cascade", *args], cwd=cwd, input=stdin, capture_output=True, timeout=120
    )


def assert_bad_input(proc: subprocess.CompletedProcess[bytes], *needles: str) -> None:
    err = proc.stderr.decode()
    assert proc.returncode == 3, (proc.returncode, err, proc.stdout.decode())
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("cascade: error: ")
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.fixture
def repo(make_repo: MakeRepo) -> Path:
    return make_repo(BASE)


@pytest.fixture
def good_patch(repo: Path) -> str:
    return diff_of(repo, {"pkg/mod.py": BASE["pkg/mod.py"].replace("x + 1", "x + 2")})


def write(tmp_path: Path, name: str, data: bytes | str) -> Path:
    path = tmp_path / name
    if isinstance(data, str):
        data = data.encode()
    path.write_bytes(data)
    return path


def test_empty_file(repo: Path, tmp_path: Path) -> None:
    assert_bad_input(cascade("review", str(write(tmp_path, "e.diff", "")), "--repo", str(repo), cwd=tmp_path), "empty")


def test_raw_binary_bytes(repo: Path, tmp_path: Path) -> None:
    proc = cascade(
        "review", str(write(tmp_path, "b.diff", b"\x89PNG\r\n\x1a\n\0\0\0")), "--repo", str(repo), cwd=tmp_path
    )
    assert_bad_input(proc, "binary")


def test_malformed_diff(repo: Path, tmp_path: Path) -> None:
    text = "--- a/pkg/mod.py\n+++ b/pkg/mod.py\n@@ -1,2 +1,2 @@\n-def f(x):\n"  # hunk shorter than its header
    proc = cascade("review", str(write(tmp_path, "m.diff", text)), "--repo", str(repo), cwd=tmp_path)
    assert_bad_input(proc, "malformed")


def test_not_a_diff_at_all(repo: Path, tmp_path: Path) -> None:
    proc = cascade("review", str(write(tmp_path, "n.diff", "hello, world\n")), "--repo", str(repo), cwd=tmp_path)
    assert_bad_input(proc, "malformed")


def test_patch_for_a_missing_file(repo: Path, tmp_path: Path, good_patch: str) -> None:
    text = good_patch.replace("pkg/mod.py", "pkg/gone.py")
    proc = cascade("review", str(write(tmp_path, "g.diff", text)), "--repo", str(repo), cwd=tmp_path)
    assert_bad_input(proc, "pkg/gone.py", "does not exist")


def test_patch_that_does_not_apply(repo: Path, tmp_path: Path, good_patch: str) -> None:
    text = good_patch.replace("-    return x + 1", "-    return x * 7")
    proc = cascade("review", str(write(tmp_path, "x.diff", text)), "--repo", str(repo), cwd=tmp_path)
    assert_bad_input(proc, "does not apply")
    assert not list(repo.glob("**/*.rej")) and not list(repo.glob("**/*.orig"))


def test_not_a_git_repository(tmp_path: Path, good_patch: str) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    proc = cascade("review", str(write(tmp_path, "p.diff", good_patch)), "--repo", str(plain), cwd=tmp_path)
    assert_bad_input(proc, "not a git repository")


def test_unknown_base_ref(repo: Path, tmp_path: Path, good_patch: str) -> None:
    patch = str(write(tmp_path, "p.diff", good_patch))
    proc = cascade("review", patch, "--repo", str(repo), "--base", "no-such-branch", cwd=tmp_path)
    assert_bad_input(proc, "unknown base ref", "no-such-branch")


def test_patch_over_the_size_cap(repo: Path, tmp_path: Path, good_patch: str) -> None:
    config = write(tmp_path, "c.yaml", "limits:\n  max_patch_bytes: 50\n")
    patch = str(write(tmp_path, "p.diff", good_patch))
    proc = cascade("review", patch, "--repo", str(repo), "--config", str(config), cwd=tmp_path)
    assert_bad_input(proc, "cap", "max_patch_bytes")


def test_non_utf8_bytes(repo: Path, tmp_path: Path, good_patch: str) -> None:
    data = good_patch.replace("x + 2", "x + 2  # caf\udce9", 1).encode("utf-8", "surrogateescape")
    proc = cascade("review", str(write(tmp_path, "u.diff", data)), "--repo", str(repo), cwd=tmp_path)
    assert_bad_input(proc, "UTF-8")


def test_unknown_config_key(repo: Path, tmp_path: Path, good_patch: str) -> None:
    config = write(tmp_path, "c.yaml", "static:\n  reject_rule: []\n")
    patch = str(write(tmp_path, "p.diff", good_patch))
    proc = cascade("review", patch, "--repo", str(repo), "--config", str(config), cwd=tmp_path)
    assert_bad_input(proc, "unknown config key", "static.reject_rule")


def test_missing_patch_file_and_usage_errors(repo: Path, tmp_path: Path) -> None:
    assert_bad_input(cascade("review", "nope.diff", "--repo", str(repo), cwd=tmp_path), "not found")
    assert_bad_input(cascade("review", "--no-such-option", cwd=tmp_path), "no-such-option")
    assert_bad_input(cascade("review", "--repo", str(repo), cwd=tmp_path), "no patch given")


@pytest.mark.slow
def test_user_checkout_and_index_are_untouched(repo: Path, tmp_path: Path, good_patch: str) -> None:
    (repo / "pkg/mod.py").write_text("def f(x):\n    return x + 1  # local edit\n")
    status_before = subprocess.run(["git", "-C", str(repo), "status", "--porcelain"], capture_output=True).stdout
    patch = str(write(tmp_path, "p.diff", good_patch))
    proc = cascade("review", patch, "--repo", str(repo), "--format", "json", cwd=tmp_path)
    assert proc.returncode in (0, 1, 2), proc.stderr.decode()
    status_after = subprocess.run(["git", "-C", str(repo), "status", "--porcelain"], capture_output=True).stdout
    assert status_before == status_after
    assert "local edit" in (repo / "pkg/mod.py").read_text()
    worktrees = subprocess.run(["git", "-C", str(repo), "worktree", "list"], capture_output=True, text=True).stdout
    assert len(worktrees.strip().splitlines()) == 1


@pytest.mark.slow
def test_stdin_and_git_range(repo: Path, tmp_path: Path, good_patch: str) -> None:
    proc = cascade("review", "-", "--repo", str(repo), "--format", "json", cwd=tmp_path, stdin=good_patch.encode())
    assert proc.returncode in (0, 1, 2), proc.stderr.decode()
    (repo / "pkg/mod.py").write_text(BASE["pkg/mod.py"].replace("x + 1", "x + 3"))
    run_git(repo, "commit", "-qam", "head")
    proc = cascade("review", "--git", "HEAD~1..HEAD", "--repo", str(repo), "--format", "json", cwd=tmp_path)
    assert proc.returncode in (0, 1, 2), proc.stderr.decode()
    assert b'"no_change"' in proc.stdout
    assert_bad_input(cascade("review", "--git", "HEAD..HEAD", "--repo", str(repo), cwd=tmp_path), "no changes")


@pytest.mark.parametrize(
    ("inside", "outside", "says"),
    [("pkg/mod.py", "../outside.py", "goes up with '..'"), ("pkg/mod.py", "pkg/../../outside.py", "goes up with '..'")],
)
@pytest.mark.parametrize("git_header", [True, False])
def test_a_patch_path_outside_the_repository_is_named_so(
    repo: Path, tmp_path: Path, good_patch: str, inside: str, outside: str, says: str, git_header: bool
) -> None:
    text = good_patch.replace(f"a/{inside}", f"a/{outside}").replace(f"b/{inside}", f"b/{outside}")
    if not git_header:
        diff_lines = ("---", "+++", "@@", " ", "-", "+")
        text = "".join(ln for ln in text.splitlines(keepends=True) if ln.startswith(diff_lines))
    assert text != good_patch and outside in text
    proc = cascade("review", str(write(tmp_path, "out.diff", text)), "--repo", str(repo), cwd=tmp_path)
    assert_bad_input(proc, "leaves the repository", says)


def test_an_absolute_patch_path_is_named_as_leaving_the_repository(repo: Path, tmp_path: Path) -> None:
    text = "--- /etc/hosts\n+++ /etc/hosts\n@@ -1 +1 @@\n-a\n+b\n"
    proc = cascade("review", str(write(tmp_path, "abs.diff", text)), "--repo", str(repo), cwd=tmp_path)
    assert_bad_input(proc, "'/etc/hosts' leaves the repository", "is absolute")


def test_every_commands_file_errors_exit_3(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a directory\n")
    (tmp_path / "dir").mkdir()
    cases = [
        ["bench", "run", "--tasks", "file/tasks.jsonl", "--gold", "--output", "out"],
        ["bench", "run", "--tasks", "dir", "--gold", "--output", "out"],
        ["bench", "report", "dir"],
        ["bench", "report", "file/results.jsonl"],
        ["bench", "compare", "file", "file", "--output", "missing/compare.md"],
        ["review", "file/x.diff"],
        ["review", "--repo", "file", "file"],
        ["config", "--config", "file/c.yaml"],
    ]
    for args in cases:
        assert_bad_input(cascade(*args, cwd=tmp_path))


def test_the_same_options_mean_the_same_on_every_command(tmp_path: Path) -> None:
    """-q/--quiet and --config FILE on every command that has progress or a config; -h everywhere."""
    with_config = [["review"], ["config"], ["bench", "run"], ["bench", "redteam"]]
    with_quiet = [["review"], ["bench", "run"], ["bench", "redteam"]]
    for command in [*with_config, ["bench", "report"], ["bench", "compare"]]:
        helped = cascade(*command, "-h", cwd=tmp_path)
        assert helped.returncode == 0, (command, helped.stderr.decode())
        text = helped.stdout.decode()
        if command in with_config:
            assert re.search(r"--config FILE\b", text), (command, text)
        if command in with_quiet:
            assert "-q, --quiet" in text, (command, text)


# The matrix's cases without a CRLF twin (tests/test_crlf.py runs the others) and the exit each must give; the
# "no pyright anywhere" case depends on what else the machine lacks, so only its contract is checked.
MATRIX_EXITS = {
    "raw binary bytes": 3,
    "missing patch file": 3,
    "tools next to interpreter, PATH without them": 1,
    "missing tool (no pyright anywhere)": None,
    "output to a missing dir": 3,
    "output to a dir": 3,
    "unknown config key": 3,
    "invalid YAML config": 3,
    "llm.api_key in config": 3,
    "unreachable api_base": 2,
}


@pytest.mark.slow
def test_every_case_of_the_bad_input_matrix_without_a_crlf_twin_ends_in_its_exit_and_one_clear_line(
    tmp_path: Path,
) -> None:
    singles = [case for case in cases(tmp_path) if not case.crlf_twin]
    assert sorted(case.name for case in singles) == sorted(MATRIX_EXITS)
    for case in singles:
        raw = case.patch.encode() if isinstance(case.patch, str) else case.patch
        _, code, first, _, _ = run(case, tmp_path, raw, case.name)
        assert first.startswith("cascade"), (case.name, first)  # a verdict or "cascade: error: …", no traceback
        expected = MATRIX_EXITS[case.name]
        assert code == expected if expected is not None else code in (0, 1, 2, 3), (case.name, code, first)
        assert (code == 3) == first.startswith("cascade: error: "), (case.name, first)
