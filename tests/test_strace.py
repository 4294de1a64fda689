"""strace's output judged by the allow-list: which refused calls are write intents, how paths resolve, and which
refusals real suites make without intent (the lines are real strace 6 output shapes, taken from bwrap runs)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cascade.sandbox.allowlist import RunScope
from cascade.sandbox.base import RunSpec
from cascade.sandbox.bwrap import BwrapSandbox, probe_bwrap
from cascade.sandbox.docker import DockerSandbox
from cascade.sandbox.strace import parse, probe_strace, refused_effects

SCOPE = RunScope(
    worktree="/work/wt",
    git_dirs=["/work/wt/.git", "/work/repo/.git/worktrees/wt", "/work/repo/.git"],
    scratch="/tmp/cascade-scratch",
    home="/root",
)
LINES = [
    '7 openat(AT_FDCWD</work/wt>, "/etc/profile", O_WRONLY|O_CREAT|O_APPEND, 0666) = -1 EROFS (Read-only file system)',
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
]


def test_refused_write_intents_resolve_to_the_paths_the_sandbox_saw() -> None:
    found = [(r.call, r.path, r.errno) for r in parse(LINES)]
    assert found == [
        ("openat", "/etc/profile", "EROFS"),
        ("openat", "/usr/local/bin/relx", "EROFS"),
        ("mkdir", "/usr/local/bin/cron.d/x", "EROFS"),
        ("symlinkat", "/usr/bin/zz", "EROFS"),
        ("renameat2", "/work/wt/a", "EROFS"),
        ("renameat2", "/etc/b,cé", "EROFS"),
        ("fchmod", "/usr/lib/libx.so", "EROFS"),
        ("openat", "/work/wt/own.txt", "EACCES"),
        ("openat", "/proc/self/oom_score_adj", "EACCES"),
    ]


def test_refusals_outside_the_runs_places_are_harmful_with_call_path_and_errno() -> None:
    effects = refused_effects(LINES, SCOPE)
    harmful = {e.target: e for e in effects if not e.benign}
    # /work/wt/a: EROFS there means the path is not on the writable worktree (a read-only mount over it): no own place
    assert set(harmful) == {"/etc/profile", "/usr/local/bin/relx", "/usr/local/bin/cron.d/x", "/usr/bin/zz",
                            "/work/wt/a", "/etc/b,cé", "/usr/lib/libx.so"}  # fmt: skip
    assert "refused openat (EROFS: read-only file system)" in harmful["/etc/profile"].detail
    assert harmful["/usr/lib/libx.so"].kind == "privilege"
    assert all(e.source == "strace" for e in effects)


def test_refusals_real_suites_make_without_intent_are_named_and_benign() -> None:
    lines = [
        '5 openat(AT_FDCWD</work/wt>, "/work/repo/.git/worktrees/wt/index.lock", O_RDWR|O_CREAT|O_EXCL|O_CLOEXEC, '
        "0666) = -1 EROFS (Read-only file system)",
        '6 mkdir("/usr/lib/python3/dist-packages/yaml/__pycache__", 0777) = -1 EROFS (Read-only file system)',
        '6 openat(AT_FDCWD</work/wt>, "/usr/lib/python3/dist-packages/yaml/__pycache__/a.cpython-311.pyc.1402", '
        "O_WRONLY|O_CREAT|O_EXCL|O_CLOEXEC, 0644) = -1 EROFS (Read-only file system)",
    ]
    effects = refused_effects(lines, SCOPE)
    assert [e.benign for e in effects] == [True, True, True], effects
    assert "'git-index-refresh'" in effects[0].detail and "'bytecode-cache-attempt'" in effects[1].detail
    near_misses = [
        '5 openat(AT_FDCWD</work/wt>, "/work/repo/.git/hooks/pre-commit", O_WRONLY|O_CREAT|O_TRUNC, 0777) = -1 EROFS '
        "(Read-only file system)",
        '5 openat(AT_FDCWD</work/wt>, "/work/repo/.git/index.lock.d/x", O_WRONLY|O_CREAT, 0666) = -1 EROFS (x)',
        '6 openat(AT_FDCWD</work/wt>, "/usr/lib/python3/dist-packages/yaml/__pycache__/a.cpython-311.pyc", '
        "O_WRONLY|O_CREAT|O_TRUNC, 0644) = -1 EROFS (Read-only file system)",  # a final .pyc: planted, not cached
    ]
    assert [e.benign for e in refused_effects(near_misses, SCOPE)] == [False, False, False]


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
        "echo planted > /home/sandbox/.cascade-untraced; echo planted > untraced.txt; echo done"
    )
    result = sandbox.run(RunSpec(argv=["sh", "-c", script], worktree=str(tmp_path), timeout_seconds=60))
    assert not (tmp_path / "untraced.txt").exists(), result.stdout
    assert any(e.target == "supervisor" for e in result.harmful_side_effects), result.side_effects


NET_LINES = [
    '5 connect(3<socket:[91]>, {sa_family=AF_UNIX, sun_path="/var/run/docker.sock"}, 23) = -1 ENOENT (No such file or '
    "directory)",
    '5 connect(3<socket:[92]>, {sa_family=AF_INET, sin_port=htons(80), sin_addr=inet_addr("1.1.1.1")}, 16) = -1 '
    "ENETUNREACH (Network is unreachable)",
    "5 connect(3<socket:[93]>, {sa_family=AF_INET6, sin6_port=htons(443), sin6_flowinfo=htonl(0), inet_pton(AF_INET6, "
    '"2606:4700::1111", &sin6_addr), sin6_scope_id=0}, 28) = -1 ENETUNREACH (Network is unreachable)',
    '6 connect(4<socket:[94]>, {sa_family=AF_INET, sin_port=htons(9), sin_addr=inet_addr("127.0.0.1")}, 16) = -1 '
    "ECONNREFUSED (Connection refused)",  # loopback: the run's own private network namespace
    '6 connect(5<socket:[95]>, {sa_family=AF_UNIX, sun_path=@"/tmp/.X11-unix/X0"}, 20) = -1 ECONNREFUSED (Connection '
    "refused)",  # an abstract name: scoped to the run's network namespace
    '6 connect(6<socket:[96]>, {sa_family=AF_UNIX, sun_path="/var/run/nscd/socket"}, 110) = -1 ENOENT (No such file '
    "or directory)",
    '6 connect(7<socket:[97]>, {sa_family=AF_UNIX, sun_path="/work/wt/.s.sock"}, 110) = -1 ECONNREFUSED (Connection '
    "refused)",
    '7 sendto(8<socket:[98]>, "\\x12", 1, MSG_NOSIGNAL, {sa_family=AF_INET, sin_port=htons(53), '
    'sin_addr=inet_addr("10.0.0.2")}, 16) = -1 ENETUNREACH (Network is unreachable)',
]


def test_failed_connects_beyond_loopback_and_own_sockets_are_network_attempts() -> None:
    effects = refused_effects(NET_LINES, SCOPE)
    harmful = {e.target for e in effects if not e.benign}
    assert harmful == {"unix:/var/run/docker.sock", "inet:1.1.1.1:80", "inet:2606:4700::1111:443", "inet:10.0.0.2:53"}
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
        worktree = tmp_path / "wt"
        worktree.mkdir()
        result = sandbox.run(RunSpec(argv=["sh", "-c", script], worktree=str(worktree), timeout_seconds=60))
    finally:
        server.close()
        marker.unlink(missing_ok=True)
    assert "reached" not in result.stdout and "done" in result.stdout
    harmful = {e.target for e in result.harmful_side_effects if e.kind == "network"}
    assert harmful == {f"unix:{marker}", "inet:192.0.2.1:80"}, result.side_effects
