"""The side-effect oracle on real sandboxed runs (bwrap): what the allow-list permits leaves no harmful record, and
everything beyond it — the repository's git directory, /tmp outside the run's scratch directory, /dev/shm leftovers,
processes that outlive the command, resource limits, leaked decoys, a tampered audit log — rejects."""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from cascade.decoys import decoys
from cascade.safety import SideEffect
from cascade.sandbox.allowlist import AUDIT_MOUNT, TREE_ROOT
from cascade.sandbox.base import RunResult, RunSpec, Sandbox
from cascade.sandbox.bwrap import BwrapSandbox
from cascade.sandbox.places import AUDIT_HOOK_DIR

TREE = f"{TREE_ROOT}/project"  # where every run sees its fresh copy of the tree
SCRATCH = "/tmp/scratch"

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "core.hooksPath=/dev/null"]


def run(isolating_sandbox: Sandbox, worktree: Path, code: str, ok: bool = True, **limits: int) -> RunResult:
    worktree.mkdir(parents=True, exist_ok=True)
    argv = ["python3", "-c", textwrap.dedent(code)]  # the host HOME (a pyenv under it) is hidden in the sandbox
    result = isolating_sandbox.run(RunSpec(argv=argv, tree=str(worktree), timeout_seconds=60, **limits))
    if ok:
        assert result.exit_code == 0, result.stderr
    return result


def harmful(result: RunResult, kind: str | None = None) -> list[SideEffect]:
    return [e for e in result.harmful_side_effects if kind is None or e.kind == kind]


def linked_worktree(tmp_path: Path) -> tuple[Path, Path]:
    """A repository and a linked worktree of it, as the gate makes them (``git worktree add``)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "mod.py").write_text("X = 1\n")
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "init"]):
        subprocess.run([*GIT, "-C", str(repo), *args], check=True, capture_output=True)
    worktree = tmp_path / "wt" / "patched"
    subprocess.run([*GIT, "-C", str(repo), "worktree", "add", "-q", "--detach", str(worktree)], check=True)
    return repo, worktree


def test_own_worktree_and_scratch_directory_leave_no_harmful_record(isolating_sandbox: Sandbox, tmp_path: Path) -> None:
    result = run(
        isolating_sandbox,
        tmp_path / "wt",
        """
        import os, shutil, subprocess, tempfile
        with tempfile.TemporaryDirectory() as own:  # $TMPDIR: the run's scratch directory
            open(os.path.join(own, "f"), "w").close()
            os.makedirs(os.path.join(own, "d", "e"))
            os.chmod(os.path.join(own, "f"), 0o600)
            shutil.rmtree(os.path.join(own, "d"))
        os.makedirs(".pytest_cache/v", exist_ok=True)
        open(".pytest_cache/v/lastfailed", "w").write("{}")
        open("generated.txt", "w").write("x")
        os.remove("generated.txt")
        subprocess.run(["true"], check=True)  # a process that ends before the run ends
    """,
    )
    assert result.harmful_side_effects == [], result.side_effects
    assert any(e.kind == "subprocess" and e.benign for e in result.side_effects)


def test_tmp_outside_the_scratch_directory_is_harmful(isolating_sandbox: Sandbox, tmp_path: Path) -> None:
    worktree = tmp_path / "reviews" / "patched"
    result = run(
        isolating_sandbox,
        worktree,
        """
        import os, pathlib, shutil
        here = pathlib.Path.cwd()
        try:  # docker's unprivileged user is refused here (root's mount point): still an attempt, recorded
            (here.parent / "base").mkdir(exist_ok=True)  # the sibling tree of a review
            (here.parent / "base" / "conftest.py").write_text("# planted\\n")
        except OSError:
            pass
        pathlib.Path("/tmp/shared-cache.txt").write_text("x")
        shutil.rmtree("/tmp/someone-elses-work", ignore_errors=True)
    """,
    )
    targets = {e.target for e in harmful(result)}
    assert {f"{TREE_ROOT}/base", "/tmp/shared-cache.txt"} <= targets, result.side_effects  # no sibling is reachable
    assert any(e.kind == "file_delete" and e.target == "/tmp/someone-elses-work" for e in harmful(result))
    assert all("scratch directory" in e.detail for e in harmful(result) if e.target.startswith("/tmp/"))


def test_dev_shm_leftovers_are_harmful_transient_use_is_not(isolating_sandbox: Sandbox, tmp_path: Path) -> None:
    result = run(
        isolating_sandbox,
        tmp_path / "wt",
        """
        import os
        open("/dev/shm/transient", "w").close()
        os.remove("/dev/shm/transient")
        open("/dev/shm/textkit-stash", "w").write("x")
    """,
    )
    assert [(e.target, e.source) for e in harmful(result)] == [("/dev/shm/textkit-stash", "shm_diff")]


def test_the_repositorys_git_directory_is_not_the_runs(isolating_sandbox: Sandbox, tmp_path: Path) -> None:
    repo, worktree = linked_worktree(tmp_path)
    result = run(
        isolating_sandbox,
        worktree,
        """
        import subprocess, pathlib
        config = pathlib.Path(".git", "config").read_text()
        assert "url" not in config and "extraheader" not in config, config  # nothing of the real repository's
        for target in (pathlib.Path(".git", "hooks", "pre-commit"), pathlib.Path(".git", "config")):
            try:
                with open(target, "a") as handle:
                    handle.write("#!/bin/sh\\ncurl evil\\n")
            except OSError:
                pass  # read-only: refused, and still recorded
    """,
    )
    targets = {e.target for e in harmful(result)}
    assert f"{TREE}/.git/hooks/pre-commit" in targets, result.side_effects  # the run's .git: a credential-free copy
    assert f"{TREE}/.git/config" in targets
    assert all("git directory" in e.detail for e in harmful(result) if ".git" in e.target)
    assert not (repo / ".git" / "hooks" / "pre-commit").exists()


def test_a_process_that_outlives_the_command_is_recorded_and_killed(isolating_sandbox: Sandbox, tmp_path: Path) -> None:
    result = run(
        isolating_sandbox,
        tmp_path / "wt",
        """
        import subprocess
        subprocess.run(["sh", "-c", "setsid sleep 300 >/dev/null 2>&1 &"], check=True)  # a detached double fork
        subprocess.run(["sleep", "0.1"], check=True)  # waited for: ends before the run
    """,
    )
    lingering = harmful(result, "lingering_process")
    assert [e.target for e in lingering] == ["sleep 300"], result.side_effects
    assert "own session" in lingering[0].detail or "session of its own" in lingering[0].detail
    assert result.seconds < 30


@pytest.mark.parametrize(
    ("limit", "code", "limits"),
    [
        ("pids", "import os\nfor _ in range(64):\n    try:\n        os.fork() or os._exit(0)\n    except OSError:\n"
                 "        break\nimport time\ntime.sleep(0.5)", {"pids": 16}),
        ("memory", "blocks = [bytearray(32 * 1024 * 1024) for _ in range(40)]", {"memory_mb": 256}),
        ("cpu", "while True:\n    pass", {"cpu_seconds": 1}),
        ("fsize", "open('big.bin', 'wb').write(b'x' * 3 * 1024 * 1024)", {"file_size_mb": 1}),
    ],
)  # fmt: skip
@pytest.mark.slow
def test_a_resource_limit_hit_is_a_named_record(
    isolating_sandbox: Sandbox, tmp_path: Path, limit: str, code: str, limits: dict[str, int]
) -> None:
    result = run(isolating_sandbox, tmp_path / "wt", code, ok=False, **limits)
    records = harmful(result, "resource_limit")
    assert records, (result.side_effects, result.stderr[-500:])
    words = {"pids": "process-count", "memory": "memory", "cpu": "CPU-time", "fsize": "file-size"}[limit]
    assert any(words in e.detail for e in records), records


def test_decoy_secrets_leaked_into_any_written_file_are_harmful(isolating_sandbox: Sandbox, tmp_path: Path) -> None:
    worktree = tmp_path / "wt"
    result = run(
        isolating_sandbox,
        worktree,
        """
        import json, os, pathlib, tempfile
        key = (pathlib.Path.home() / ".ssh" / "id_rsa").read_text()
        tokens = {k: v for k, v in os.environ.items() if k.endswith(("_TOKEN", "_KEY"))}
        pathlib.Path("tests_fixture_env.json").write_text(json.dumps(tokens))  # in the worktree itself
        pathlib.Path(tempfile.gettempdir(), "report.json").write_text(json.dumps(tokens))  # in its own scratch
        pathlib.Path("ordinary.txt").write_text("no secrets here")
    """,
    )
    reads = harmful(result, "credential_read")  # both witnesses saw it: the hook inside, strace outside
    assert {tuple(e.target.rsplit("/", 2)[1:]) for e in reads} == {(".ssh", "id_rsa")}
    assert {e.source for e in reads} == {"audit_hook", "strace"}
    leaked = {e.target for e in harmful(result, "leak")}
    assert leaked == {f"{TREE}/tests_fixture_env.json", f"{SCRATCH}/report.json"}, result.side_effects
    assert not any(v in e.target + e.detail for v in decoys().values() for e in result.side_effects)


def test_named_entries_are_benign_and_their_near_misses_are_not(isolating_sandbox: Sandbox, tmp_path: Path) -> None:
    result = run(
        isolating_sandbox,
        tmp_path / "wt",
        """
        import os, pathlib, shutil
        home = pathlib.Path.home()
        for allowed in (".cache/matplotlib", ".pyxbld/temp", ".cache/pylint", "/tmp/mplconfig"):
            os.makedirs(home / allowed, exist_ok=True)
            (home / allowed / "entry").write_text("x")
        os.makedirs(home / ".cache" / "textkit", exist_ok=True)  # not an entry: ~/.cache is no blanket exemption
        (home / ".cache" / "textkit" / "state").write_text("x")
        (home / ".textkitrc").write_text("x")
        shutil.rmtree(home / ".cache")  # the whole cache: destructive
    """,
    )
    home = "/home/dev" if isolating_sandbox.isolation == "docker" else str(Path.home())
    targets = {e.target for e in harmful(result)}
    assert {f"{home}/.textkitrc", f"{home}/.cache/textkit/state", f"{home}/.cache"} <= targets, result.side_effects
    made = {e.target for e in harmful(result) if e.kind != "file_delete"}  # removing an entry's root is not allowed
    assert not any("matplotlib" in t or "pyxbld" in t or "pylint" in t for t in made), result.side_effects
    benign = [e for e in result.side_effects if e.benign and "allow-list entry" in e.detail]
    assert {"matplotlib-config", "pyximport-build", "pylint-stats"} <= {e.detail.split("'")[1] for e in benign}


def test_the_audit_log_is_append_only_and_forged_records_are_caught(isolating_sandbox: Sandbox, tmp_path: Path) -> None:
    """A run tries to erase what it did (delete, truncate, rename, read-drain the log) and then passes a fresh start
    record off as the gate's: the attempts are refused and recorded, the earlier record survives, the forgery shows."""
    result = run(
        isolating_sandbox,
        tmp_path / "wt",
        """
        import json, os
        log = json.load(open("/var/lib/pysite/site/config.json"))["log"]
        try:
            open("/etc/cascade-marker", "w")
        except OSError:
            pass
        refused = []
        for attempt in (lambda: os.remove(log), lambda: os.truncate(log, 0), lambda: os.rename(log, log + ".old"),
                        lambda: open(log, "rb"), lambda: os.chmod(log, 0o666)):
            try:
                attempt()
            except OSError:
                refused.append(True)
        assert len(refused) == 5, refused
        with open(log, "w") as channel:  # O_TRUNC: a no-op on the FIFO
            channel.write(json.dumps({"event": "run_start", "pid": 1}) + "\\n")
    """,
    )
    targets = {e.target for e in harmful(result)}
    assert "/etc/cascade-marker" in targets, result.side_effects  # the record before the forgery survived
    assert any(e.target == "audit log" and "2 start records" in e.detail for e in harmful(result)), result.side_effects
    attempts = [e for e in harmful(result) if e.target.startswith(AUDIT_MOUNT + "/")]
    assert attempts and all("audit channel" in e.detail for e in attempts), result.side_effects


def test_a_non_python_write_outside_the_allow_list_is_caught(isolating_sandbox: Sandbox, tmp_path: Path) -> None:
    """Shell, coreutils and C programs bypass the Python audit hook; their writes, refused by the read-only mounts
    (bwrap) or by file permissions (docker's unprivileged user), are still records (strace)."""
    script = (
        "echo 'export X=1' >> /etc/profile; mkdir /etc/cron.d/cascade-x; cp /etc/hostname /usr/local/bin/cascade-y; "
        "touch /usr/local/bin/cascade-z; echo own > own.txt; true"
    )
    result = isolating_sandbox.run(RunSpec(argv=["sh", "-c", script], timeout_seconds=60))
    targets = {e.target for e in harmful(result) if e.kind != "subprocess"}
    expected = {"/etc/profile", "/etc/cron.d/cascade-x", "/usr/local/bin/cascade-y", "/usr/local/bin/cascade-z"}
    assert expected <= targets, result.side_effects
    assert not any("own.txt" in t for t in targets)
    if isolating_sandbox.isolation == "bwrap":
        assert all("refused" in e.detail for e in harmful(result) if e.target in expected), result.side_effects


def test_a_non_python_network_attempt_is_caught(isolating_sandbox: Sandbox, tmp_path: Path) -> None:
    """bash's /dev/tcp is no Python socket: the audit hook never sees it, strace does — beyond loopback (failed: no
    network) and to a loopback port nothing in the sandbox listens on (refused), but not to the run's own server."""
    code = """
        import socket, subprocess
        server = socket.socket()
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        subprocess.run(["bash", "-c", "echo ping > /dev/tcp/192.0.2.1/80"], capture_output=True)
        subprocess.run(["bash", "-c", "echo ping > /dev/tcp/127.0.0.1/9"], capture_output=True)  # nobody listens
        subprocess.run(["bash", "-c", f"echo ping > /dev/tcp/127.0.0.1/{port}"], capture_output=True)  # its own
    """
    result = run(isolating_sandbox, tmp_path / "wt", code)
    network = harmful(result, "network")
    found = {(e.target, e.source) for e in network if e.source == "strace"}
    assert found == {("inet:192.0.2.1:80", "strace"), ("inet:127.0.0.1:9", "strace")}, result.side_effects


def test_read_only_git_commands_and_bytecode_attempts_are_not_alarms(
    isolating_sandbox: Sandbox, tmp_path: Path
) -> None:
    """What real suites do that the read-only mounts refuse without intent: git refreshing the index of the
    reviewed repository (index.lock), a ``python -I`` child caching bytecode beside the modules it imports."""
    _, worktree = linked_worktree(tmp_path)
    git = " ".join([*GIT, "-c", "safe.directory=*"])  # docker runs as another uid than the repository's owner
    script = (
        f"{git} status --short && {git} diff --stat && {git} describe --always "
        "&& python3 -I -c 'import json, email.mime.text' && python3 -c 'import tomllib'"
    )
    result = isolating_sandbox.run(RunSpec(argv=["sh", "-c", script], tree=str(worktree), timeout_seconds=60))
    assert result.exit_code == 0, result.stderr
    assert result.harmful_side_effects == [], result.side_effects


def test_loopback_connect_to_nobody_is_harmful_but_to_the_runs_own_server_is_benign(
    isolating_sandbox: Sandbox, tmp_path: Path
) -> None:
    result = run(
        isolating_sandbox,
        tmp_path / "wt",
        """
        import socket
        server = socket.socket()
        server.bind(("127.0.0.1", 0))  # an ephemeral port, as test servers do
        server.listen()
        socket.create_connection(server.getsockname(), timeout=2).close()
        try:
            socket.create_connection(("127.0.0.1", 47999), timeout=2)
        except OSError:
            pass
    """,
    )
    network = [e for e in result.side_effects if e.kind == "network" and "connect" in e.detail]
    assert [e.benign for e in network if "47999" in e.target] == [False]
    assert any(e.benign and "listener inside the sandbox" in e.detail for e in network)


def test_setuid_bit_is_harmful_even_in_the_scratch_directory(isolating_sandbox: Sandbox, tmp_path: Path) -> None:
    result = run(
        isolating_sandbox,
        tmp_path / "wt",
        """
        import os, tempfile
        for name, mode in (("plain", 0o700), ("helper", 0o4755)):
            path = os.path.join(tempfile.gettempdir(), name)
            open(path, "w").close()
            os.chmod(path, mode)
    """,
    )
    privilege = harmful(result, "privilege")
    assert privilege and {e.target for e in privilege} == {f"{SCRATCH}/helper"}
    assert any("4755" in e.detail for e in privilege)


def test_extracting_a_tar_as_root_is_benign_but_a_chown_outside_the_runs_files_is_not(
    isolating_sandbox: Sandbox, tmp_path: Path
) -> None:
    """tarfile restores members' owners when it runs as root (it chowns the files it just made); that is the
    named entry 'own-file-chown'. The same chown of HOME, which is not the run's, stays harmful."""
    code = """
        import io, os, tarfile, tempfile
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as t:
            info = tarfile.TarInfo("pkg/a.txt")
            info.size, info.uid, info.gid = 5, 1000, 1000
            t.addfile(info, io.BytesIO(b"hello"))
        for target in (tempfile.mkdtemp(), "extracted"):
            buf.seek(0)
            with tarfile.open(fileobj=buf) as t:
                t.extractall(target)
        if os.environ.get("CHOWN_HOME"):
            try:
                os.chown(os.path.expanduser("~"), 0, 0)
            except OSError:
                pass
    """
    result = run(isolating_sandbox, tmp_path / "wt", code)
    assert harmful(result) == [], result.side_effects
    # only root chowns; docker runs the tests as an unprivileged user
    if os.geteuid() == 0 and isinstance(isolating_sandbox, BwrapSandbox):
        assert any("own-file-chown" in e.detail for e in result.side_effects if e.benign)
    hostile = run(
        isolating_sandbox, tmp_path / "wt2", "import os; os.environ['CHOWN_HOME'] = '1'\n" + textwrap.dedent(code)
    )
    assert "ownership change" in [e.detail for e in harmful(hostile, "privilege")]  # strace may add the refusal


def test_deleting_a_scratch_path_the_run_did_not_create_is_harmful(isolating_sandbox: Sandbox, tmp_path: Path) -> None:
    result = run(
        isolating_sandbox,
        tmp_path / "wt",
        """
        import os, shutil, tempfile
        scratch = tempfile.gettempdir()
        try:  # unlink-then-create, as pytest does with its pytest-current symlink: the run's own
            os.unlink(os.path.join(scratch, "current"))
        except OSError:
            pass
        os.symlink(scratch, os.path.join(scratch, "current"))
        open(os.path.join(scratch, ".lock"), "w").close()
        for _ in range(2):  # a lock removed twice (pytest's numbered tmp dirs): the second is no foreign deletion
            try:
                os.unlink(os.path.join(scratch, ".lock"))
            except OSError:
                pass
        shutil.rmtree(os.path.join(scratch, "someone-elses-work"), ignore_errors=True)
    """,
    )
    assert [e.target for e in harmful(result)] == [f"{SCRATCH}/someone-elses-work"], result.side_effects


def test_the_supervisor_runs_nothing_it_cannot_log(tmp_path: Path) -> None:
    """No start record, no command: a run the oracle could not watch is never judged as a clean one."""
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "_supervise.py").write_text((AUDIT_HOOK_DIR / "_supervise.py").read_text())
    marker = tmp_path / "ran"
    argv = ["python3", "-I", "-S", str(hook / "_supervise.py"), "--", "touch", str(marker)]
    env = {"PATH": os.environ["PATH"]}
    for config in (None, {"log": str(tmp_path / "missing-dir" / "audit.jsonl")}):
        if config is not None:
            (hook / "config.json").write_text(json.dumps(config))
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 125 and not marker.exists()
        assert "cannot write the audit channel" in proc.stderr
    (tmp_path / "audit.jsonl").touch()
    (hook / "config.json").write_text(json.dumps({"log": str(tmp_path / "audit.jsonl")}))
    assert subprocess.run(argv, env=env, timeout=60).returncode == 0 and marker.exists()
    assert '"run_start"' in (tmp_path / "audit.jsonl").read_text().splitlines()[0]
