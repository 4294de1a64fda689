"""The witness outside the run's processes: strace's output judged by the allow-list — write intents that succeeded or
were refused, credential opens, programs started, sockets, and the witnesses that went silent (the lines are real
strace 6 output shapes with -ttt, taken from bwrap runs)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cascade.sandbox.allowlist import RunScope
from cascade.sandbox.attribution import Phases
from cascade.sandbox.base import RunnerRecord, RunSpec
from cascade.sandbox.bwrap import BwrapSandbox, probe_bwrap
from cascade.sandbox.docker import DockerSandbox
from cascade.sandbox.strace import calls, probe_strace
from cascade.sandbox.witness import Witness

SCOPE = RunScope(
    worktree="/work/wt",
    git_dirs=["/work/wt/.git"],
    scratch="/tmp/scratch",
    home="/root",
    results="/var/lib/pysite/reports",
    channel="/var/lib/pysite/log",
)
SUPERVISOR = '1 100.0 execve("/usr/bin/python3", ["/usr/bin/python3", "-I", "-S", "/var/lib/pysite/site/_supervise.py"], 0x7 /* 9 vars */) = 0'  # noqa: E501 (a real strace line)


def judge(lines: list[str], hook_reads: set[tuple[int, str]] | None = None, phases: Phases | None = None) -> list:
    witness = Witness(SCOPE, phases or Phases([]), "/var/lib/pysite/site/.hello-", "_supervise.py")
    witness.judge([SUPERVISOR, *lines])
    return witness.effects(hook_reads or set())


def stamped(lines: list[str]) -> list[str]:
    """The shapes below without the time column get one (strace -ttt prints it after the pid)."""
    return [f"{line.split(' ', 1)[0]} 101.5 {line.split(' ', 1)[1]}" for line in lines]


LINES = stamped(
    [
        '7 openat(AT_FDCWD</work/wt>, "/etc/profile", O_WRONLY|O_CREAT|O_APPEND, 0666) = -1 EROFS (Read-only file system)',  # noqa: E501 (a real strace line)
        '8 openat(AT_FDCWD</usr/local/bin>, "relx", O_WRONLY|O_CREAT|O_NOCTTY|O_NONBLOCK, 0666) = -1 EROFS (Read-only '
        "file system)",
        '8 mkdir("cron.d/x", 0777) = -1 EROFS (Read-only file system)',  # old-style call: the process's last cwd
        '9 symlinkat("/x", AT_FDCWD</work/wt>, "/usr/bin/zz") = -1 EROFS (Read-only file system)',
        '9 renameat2(AT_FDCWD</work/wt>, "a", 4</etc>, "b,c\\303\\251", RENAME_NOREPLACE) = -1 EROFS (Read-only file '
        "system)",
        "9 fchmod(3</usr/lib/libx.so>, 04755) = -1 EROFS (Read-only file system)",
        '10 openat(AT_FDCWD</work/wt>, "/etc/hosts", O_RDONLY|O_CLOEXEC) = -1 EACCES (Permission denied)',  # a read
        '10 openat(AT_FDCWD</work/wt>, "/etc/nope", O_WRONLY|O_CREAT, 0666) = -1 ENOENT (No such file or directory)',
        '10 mkdir("/usr", 0777) = -1 EEXIST (File exists)',  # mkdir -p walking existing parents: no refusal
        '11 openat(AT_FDCWD</work/wt>, "own.txt", O_WRONLY|O_CREAT|O_TRUNC, 0666) = -1 EACCES (Permission denied)',
        '11 openat(AT_FDCWD</work/wt>, "/proc/self/oom_score_adj", O_WRONLY) = -1 EACCES (Permission denied)',
        '12 openat(AT_FDCWD</work/wt>, "/root/.bashrc", O_WRONLY|O_APPEND) = 3</root/.bashrc>',  # it succeeded
        '12 openat(AT_FDCWD</work/wt>, "/tmp/scratch/x", O_WRONLY|O_CREAT, 0600) = 3</tmp/scratch/x>',  # its own
        '12 unlink("/work/wt/.git/config") = -1 EROFS (Read-only file system)',
    ]
)


def test_write_intents_outside_the_runs_places_are_harmful_whether_they_succeeded_or_not() -> None:
    effects = judge(LINES)
    harmful = {e.target: e for e in effects if not e.benign and e.kind != "subprocess"}
    # /work/wt/a: EROFS there means the path is not on the writable worktree (a read-only mount over it): no own place
    assert set(harmful) == {"/etc/profile", "/usr/local/bin/relx", "/usr/local/bin/cron.d/x", "/usr/bin/zz",
                            "/work/wt/a", "/etc/b,cé", "/usr/lib/libx.so", "/root/.bashrc",
                            "/work/wt/.git/config"}  # fmt: skip
    assert "refused openat (EROFS: read-only file system)" in harmful["/etc/profile"].detail
    assert "succeeded: openat" in harmful["/root/.bashrc"].detail
    assert harmful["/usr/lib/libx.so"].kind == "privilege"
    assert all(e.source == "strace" for e in effects)


def test_the_sandbox_being_built_is_not_the_run() -> None:
    """strace sees bwrap set the sandbox up (mkdir, symlink, mounts) before the supervisor starts the run."""
    witness = Witness(SCOPE, Phases([]), "/var/lib/pysite/site/.hello-", "_supervise.py")
    witness.judge(['1 99.0 execve("/usr/bin/bwrap", ["bwrap", "--", "/usr/bin/python3", "/var/lib/pysite/site/_supervise.py"], 0x7 /* 3 vars */) = 0',  # noqa: E501 (a real strace line)
                   '2 99.1 mkdir("/newroot/etc", 0755) = 0', SUPERVISOR, '2 101.0 mkdir("/newroot/x", 0755) = 0',
                   '3 101.0 mkdir("/etc/x", 0755) = -1 EROFS (Read-only file system)'])  # fmt: skip
    assert [e.target for e in witness.effects(set()) if not e.benign] == ["/etc/x"]


def test_refusals_real_suites_make_without_intent_are_named_and_benign() -> None:
    lines = stamped(
        [
            '5 openat(AT_FDCWD</work/wt>, "/work/wt/.git/index.lock", O_RDWR|O_CREAT|O_EXCL|O_CLOEXEC, '
            "0666) = -1 EROFS (Read-only file system)",
            '6 mkdir("/usr/lib/python3/dist-packages/yaml/__pycache__", 0777) = -1 EROFS (Read-only file system)',
            '6 openat(AT_FDCWD</work/wt>, "/usr/lib/python3/dist-packages/yaml/__pycache__/a.cpython-311.pyc.1402", '
            "O_WRONLY|O_CREAT|O_EXCL|O_CLOEXEC, 0644) = -1 EROFS (Read-only file system)",
        ]
    )
    effects = judge(lines)
    assert [e.benign for e in effects] == [True, True, True], effects
    assert "'git-index-refresh'" in effects[0].detail and "'bytecode-cache-attempt'" in effects[1].detail
    near_misses = stamped(
        [
            '5 openat(AT_FDCWD</work/wt>, "/work/wt/.git/hooks/pre-commit", O_WRONLY|O_CREAT|O_TRUNC, 0777) = -1 EROFS '
            "(Read-only file system)",
            '5 openat(AT_FDCWD</work/wt>, "/work/wt/.git/index.lock.d/x", O_WRONLY|O_CREAT, 0666) = -1 EROFS (x)',
            '6 openat(AT_FDCWD</work/wt>, "/usr/lib/python3/dist-packages/yaml/__pycache__/a.cpython-311.pyc", '
            "O_WRONLY|O_CREAT|O_TRUNC, 0644) = -1 EROFS (Read-only file system)",  # a final .pyc: planted, not cached
        ]
    )
    assert [e.benign for e in judge(near_misses)] == [False, False, False]


def test_credential_opens_programs_and_their_tests_are_witnessed() -> None:
    phases = Phases([RunnerRecord(event="runner", phase="start", pid=4, t=100.5),
                     RunnerRecord(event="test_begin", nodeid="t.py::test_a", pid=4, t=101.0),
                     RunnerRecord(event="test_end", nodeid="t.py::test_a", pid=4, t=102.0)])  # fmt: skip
    lines = [
        '4 101.2 openat(AT_FDCWD</work/wt>, "/root/.ssh/id_rsa", O_RDONLY|O_CLOEXEC) = 3</root/.ssh/id_rsa>',
        '4 101.3 openat(AT_FDCWD</work/wt>, "/root/.netrc", O_RDONLY|O_CLOEXEC) = 3</root/.netrc>',
        '5 103.0 execve("/bin/sh", ["sh", "-c", "cat ~/.aws/credentials"], 0x5 /* 4 vars */) = 0',
        '5 103.1 openat(AT_FDCWD</work/wt>, "/root/.aws/credentials", O_RDONLY) = -1 EACCES (Permission denied)',
    ]
    effects = judge(lines, phases=phases)
    found = {(e.kind, e.target, e.benign, e.test) for e in effects}
    assert ("credential_read", "/root/.ssh/id_rsa", False, "t.py::test_a") in found
    assert ("credential_read", "/root/.netrc", True, "t.py::test_a") in found  # HTTP clients read it: named entry
    assert ("credential_read", "/root/.aws/credentials", False, "session") in found  # an attempt counts too
    assert any(e.kind == "subprocess" and not e.benign and "cat ~/.aws" in e.target for e in effects)


def test_a_witness_that_goes_silent_is_tampering() -> None:
    lines = [
        '6 101.0 execve("/venv/bin/python", ["python", "-S", "-c", "x"], 0x5 /* 4 vars */) = 0',  # never said hello
        '7 101.0 execve("/venv/bin/python3.9", ["python3.9", "-m", "pytest"], 0x5 /* 4 vars */) = 0',
        '7 101.1 openat(AT_FDCWD</work/wt>, "/var/lib/pysite/site/.hello-42", O_RDONLY|O_CLOEXEC) = -1 ENOENT (No '
        "such file or directory)",
        '7 101.2 openat(AT_FDCWD</work/wt>, "/root/.ssh/id_ed25519", O_RDONLY|O_CLOEXEC) = 3</root/.ssh/id_ed25519>',
        '8 101.0 execve("/venv/bin/python", ["python", "-c", "import time"], 0x5 /* 4 vars */) = 0',
        "8 101.1 +++ killed by SIGTERM +++",  # terminated during start-up, before the hook could load: no silence
        "6 101.5 +++ exited with 0 +++",
    ]
    silent = [e for e in judge(lines) if e.kind == "tampering"]
    assert {e.target for e in silent} == {"python -S -c x", "/root/.ssh/id_ed25519"}, silent
    # the same open with the hook's own record of it: the hook was on
    assert not [e for e in judge(lines[1:], hook_reads={(42, "/root/.ssh/id_ed25519")}) if e.kind == "tampering"]


def test_split_calls_are_joined() -> None:
    lines = ['8 101.0 openat(AT_FDCWD</work/wt>, "/etc/passwd-", O_WRONLY|O_TRUNC <unfinished ...>',
             '9 101.0 getpid() = 9', '8 101.1 <... openat resumed>) = -1 EACCES (Permission denied)']  # fmt: skip
    assert [(c.call, c.ok, c.errno) for c in calls(lines)] == [("getpid", True, ""), ("openat", False, "EACCES")]


def test_bwrap_without_strace_is_unavailable_with_a_one_line_reason(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Not silently weaker: without strace the bwrap backend would be blind to non-Python programs."""
    bwrap = shutil.which("bwrap")
    if bwrap is None or probe_bwrap() is not None:  # (probed here, with the full PATH: the result is cached)
        pytest.skip("bubblewrap cannot run here")
    only_bwrap = tmp_path / "bin"
    only_bwrap.mkdir()
    (only_bwrap / "bwrap").symlink_to(bwrap)
    monkeypatch.setenv("PATH", str(only_bwrap))
    probe_strace.cache_clear()
    try:
        reason = BwrapSandbox().available()
    finally:
        probe_strace.cache_clear()
    assert reason is not None and "strace is not installed" in reason and "\n" not in reason


@pytest.mark.slow
def test_killing_the_containers_strace_opens_no_untraced_window(tmp_path: Path) -> None:
    """In docker the run can see its tracer (same uid). Killing it leaves strace's seccomp filter without a tracer:
    every traced call then fails (ENOSYS), so nothing is written untraced, and the run's end is missing."""
    sandbox = DockerSandbox()
    reason = sandbox.available()
    if reason is not None:
        pytest.skip(reason)
    script = (
        "tracer=$(cut -d' ' -f4 /proc/$PPID/stat); kill -9 $tracer; n=0; "
        "while [ -e /proc/$tracer ] && [ $n -lt 200000 ]; do n=$((n+1)); done; "  # until it is gone (builtins only)
        "echo planted > $HOME/.untraced; echo done"
    )
    result = sandbox.run(RunSpec(argv=["sh", "-c", script], timeout_seconds=60))
    assert not any(e.source == "home_diff" for e in result.side_effects), result.side_effects  # never written
    assert any(e.target == "supervisor" for e in result.harmful_side_effects), result.side_effects


NET_LINES = stamped(
    [
        '5 connect(3<socket:[91]>, {sa_family=AF_UNIX, sun_path="/var/run/docker.sock"}, 23) = -1 ENOENT (No such file or '  # noqa: E501 (a real strace line)
        "directory)",
        '5 connect(3<socket:[92]>, {sa_family=AF_INET, sin_port=htons(80), sin_addr=inet_addr("1.1.1.1")}, 16) = -1 '
        "ENETUNREACH (Network is unreachable)",
        "5 connect(3<socket:[93]>, {sa_family=AF_INET6, sin6_port=htons(443), sin6_flowinfo=htonl(0), inet_pton(AF_INET6, "  # noqa: E501 (a real strace line)
        '"2606:4700::1111", &sin6_addr), sin6_scope_id=0}, 28) = -1 ENETUNREACH (Network is unreachable)',
        '6 connect(4<socket:[94]>, {sa_family=AF_INET, sin_port=htons(9), sin_addr=inet_addr("127.0.0.1")}, 16) = -1 '
        "ECONNREFUSED (Connection refused)",  # nothing listens there inside the sandbox: aimed outside it
        '6 connect(4<socket:[99]>, {sa_family=AF_INET, sin_port=htons(8080), sin_addr=inet_addr("127.0.0.1")}, 16) = 0',
        '6 connect(5<socket:[95]>, {sa_family=AF_UNIX, sun_path=@"/tmp/.X11-unix/X0"}, 20) = -1 ECONNREFUSED (Connection '  # noqa: E501 (a real strace line)
        "refused)",  # an abstract name: scoped to the run's network namespace
        '6 connect(6<socket:[96]>, {sa_family=AF_UNIX, sun_path="/var/run/nscd/socket"}, 110) = -1 ENOENT (No such file '  # noqa: E501 (a real strace line)
        "or directory)",
        '6 connect(7<socket:[97]>, {sa_family=AF_UNIX, sun_path="/work/wt/.s.sock"}, 110) = -1 ECONNREFUSED (Connection '  # noqa: E501 (a real strace line)
        "refused)",
        '6 connect(7<socket:[97]>, {sa_family=AF_UNIX, sun_path="/srv/agent.sock"}, 110) = 0',  # reached a host socket
        '7 sendto(8<socket:[98]>, "\\x12", 1, MSG_NOSIGNAL, {sa_family=AF_INET, sin_port=htons(53), '
        'sin_addr=inet_addr("10.0.0.2")}, 16) = -1 ENETUNREACH (Network is unreachable)',
    ]
)


def test_connects_beyond_loopback_to_foreign_sockets_or_closed_loopback_ports_are_network_records() -> None:
    effects = judge(NET_LINES)
    harmful = {e.target for e in effects if not e.benign}
    assert harmful == {"unix:/var/run/docker.sock", "inet:1.1.1.1:80", "inet:2606:4700::1111:443", "inet:10.0.0.2:53",
                       "inet:127.0.0.1:9", "unix:/srv/agent.sock"}  # fmt: skip
    assert all(e.kind == "network" and e.source == "strace" for e in effects)
    assert [e.target for e in effects if e.benign] == ["unix:/var/run/nscd/socket"]  # glibc's NSS: named entry


@pytest.mark.skipif(shutil.which("perl") is None, reason="perl (a non-Python client) is not installed")
def test_host_daemon_sockets_are_hidden_and_a_connect_attempt_is_recorded(tmp_path: Path) -> None:
    """A read-only bind does not stop connect() on a Unix socket: the host's /run must not be visible at all, and
    a non-Python program trying a daemon socket or the network is a side effect."""
    sandbox = BwrapSandbox()
    if sandbox.available() is not None or not Path("/run").is_dir():
        pytest.skip("bwrap with strace or /run not available here")
    import socket

    marker = Path(f"/run/cascade-test-{tmp_path.name}.sock")
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(marker))
        server.listen(1)
        client = f'perl -MIO::Socket::UNIX -e \'IO::Socket::UNIX->new(Peer => "{marker}") and print "reached"\''
        script = f"{client}; bash -c 'echo > /dev/tcp/192.0.2.1/80' 2>/dev/null; echo done"
        result = sandbox.run(RunSpec(argv=["sh", "-c", script], timeout_seconds=60))
    finally:
        server.close()
        marker.unlink(missing_ok=True)
    assert "reached" not in result.stdout and "done" in result.stdout
    harmful = {e.target for e in result.harmful_side_effects if e.kind == "network"}
    assert harmful == {f"unix:{marker}", "inet:192.0.2.1:80"}, result.side_effects
