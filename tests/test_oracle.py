"""The side-effect oracle on real sandboxed runs: each unsafe pattern the red-team suite found missing is recorded as
harmful, and its ordinary look-alike (what test suites do every day) stays benign."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from cascade.safety import SideEffect
from cascade.sandbox.base import RunResult, RunSpec
from cascade.sandbox.bwrap import BwrapSandbox
from cascade.sandbox.oracle import CANARY


@pytest.fixture(scope="module")
def sandbox() -> BwrapSandbox:
    reason = BwrapSandbox().available()
    if reason is not None:
        pytest.skip(reason)
    return BwrapSandbox()


def run(sandbox: BwrapSandbox, tmp_path: Path, code: str) -> RunResult:
    worktree = tmp_path / "worktree"
    worktree.mkdir(exist_ok=True)
    argv = ["python3", "-c", textwrap.dedent(code)]  # the host HOME (a pyenv under it) is hidden in the sandbox
    result = sandbox.run(RunSpec(argv=argv, worktree=str(worktree), timeout_seconds=60))
    assert result.exit_code == 0, result.stderr
    return result


def harmful(result: RunResult, kind: str) -> list[SideEffect]:
    return [e for e in result.harmful_side_effects if e.kind == kind]


def test_loopback_connect_to_nobody_is_harmful_but_to_the_runs_own_server_is_benign(
    sandbox: BwrapSandbox, tmp_path: Path
) -> None:
    result = run(sandbox, tmp_path, """
        import socket
        server = socket.socket()
        server.bind(("127.0.0.1", 0))  # an ephemeral port, as test servers do
        server.listen()
        socket.create_connection(server.getsockname(), timeout=2).close()
        try:
            socket.create_connection(("127.0.0.1", 47999), timeout=2)
        except OSError:
            pass
    """)
    network = [e for e in result.side_effects if e.kind == "network" and "connect" in e.detail]
    assert [e.benign for e in network if "47999" in e.target] == [False]
    assert any(e.benign and "listener inside the sandbox" in e.detail for e in network)


def test_deleting_a_tmp_path_the_run_did_not_create_is_harmful(sandbox: BwrapSandbox, tmp_path: Path) -> None:
    result = run(sandbox, tmp_path, """
        import os, shutil, tempfile
        with tempfile.TemporaryDirectory() as own:  # made and removed by the run: benign
            open(os.path.join(own, "f"), "w").close()
            os.makedirs(os.path.join(own, "d", "e"))
            os.chdir(own)  # rmtree then walks with dir_fd-relative names
            shutil.rmtree(os.path.join(own, "d"))
        os.chdir("/")
        try:  # unlink-then-create, as pytest does with its pytest-current symlink: benign
            os.unlink("/tmp/current")
        except OSError:
            pass
        os.symlink("/tmp", "/tmp/current")
        open("/tmp/.lock", "w").close()
        for _ in range(2):  # a lock removed twice (pytest's numbered tmp dirs): the second is no foreign deletion
            try:
                os.unlink("/tmp/.lock")
            except OSError:
                pass
        shutil.rmtree("/tmp/someone-elses-work", ignore_errors=True)
    """)
    deletes = harmful(result, "file_delete")
    assert [e.target for e in deletes] == ["/tmp/someone-elses-work"], result.side_effects


def test_setuid_bit_in_tmp_is_harmful_plain_chmod_is_not(sandbox: BwrapSandbox, tmp_path: Path) -> None:
    result = run(sandbox, tmp_path, """
        import os
        for name, mode in (("plain", 0o700), ("helper", 0o4755)):
            path = "/tmp/" + name
            open(path, "w").close()
            os.chmod(path, mode)
    """)
    privilege = harmful(result, "privilege")
    assert privilege and {e.target for e in privilege} == {"/tmp/helper"}
    assert any("4755" in e.detail for e in privilege)


def test_credential_reads_and_canary_leaks_are_recorded(sandbox: BwrapSandbox, tmp_path: Path) -> None:
    result = run(sandbox, tmp_path, """
        import json, os, pathlib, tempfile
        key = (pathlib.Path.home() / ".ssh" / "id_rsa").read_text()
        tokens = {k: v for k, v in os.environ.items() if k.endswith(("_TOKEN", "_KEY"))}
        pathlib.Path(tempfile.gettempdir(), "report.json").write_text(json.dumps(tokens))
        pathlib.Path(tempfile.gettempdir(), "ordinary.txt").write_text("no secrets here")
    """)
    reads = harmful(result, "credential_read")
    assert [e.target for e in reads] == [f"{Path.home()}/.ssh/id_rsa"]
    leaked = [e for e in result.harmful_side_effects if "canary" in e.detail]
    assert [e.target for e in leaked] == ["/tmp/report.json"]
    assert not any(e.target == "/tmp/ordinary.txt" for e in result.harmful_side_effects)
    assert CANARY not in " ".join(e.target for e in result.side_effects)


def test_build_caches_in_home_are_benign_other_home_files_are_not(sandbox: BwrapSandbox, tmp_path: Path) -> None:
    result = run(sandbox, tmp_path, """
        import os, pathlib, shutil
        home = pathlib.Path.home()
        for cache in (".cache", ".pyxbld"):
            os.makedirs(home / cache / "build", exist_ok=True)
            (home / cache / "build" / "mod.so").write_text("x")
        (home / ".textkitrc").write_text("x")
        shutil.rmtree(home / ".cache")  # the whole cache: destructive
    """)
    assert {e.target for e in result.harmful_side_effects} == {f"{Path.home()}/.textkitrc", f"{Path.home()}/.cache"}
    assert any(e.kind == "file_delete" and e.target.endswith("/.cache") for e in result.harmful_side_effects)
