"""A run's places: everything one sandboxed run may write, made fresh for it and thrown away after it
(docs/architecture.md, "Run model").

Per run the host makes, in a new directory of its own:

* ``tree/`` — a fresh copy of the pristine tree the caller names (``RunSpec.tree``, a checkout no run ever gets),
  plus the files placed for this run (a PR's test file, a probe), plus a credential-free ``.git``: HEAD, index, tags
  and an alternates line to the repository's object store, which the sandbox shows read-only. No config, no remote,
  no credential helper of the real repository can reach the run;
* ``home/`` (with the decoy credentials), ``tmp/`` (with the scratch directory that is ``$TMPDIR``), ``shm/``;
* ``results/`` — where the test runner writes its report files, the only files the host reads back
  (`safefs.read_capped`);
* ``hook/`` — the audit hook, the supervisor, the pytest plugin and their configuration (read-only in the sandbox);
* ``audit/`` — the append-only channel's FIFOs (`channel.py`; read-only in the sandbox).

All of them live on one tmpfs with a byte and inode quota when the gate may mount one (as root); otherwise they are
plain directories and the result says the run had no disk quota. Host-only files (the drained channel, strace's
output) stay outside that tmpfs, so a run filling its quota cannot starve the witnesses."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import glob
import json
import os
import shutil
import tempfile
import threading
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from cascade.decoys import decoys
from cascade.git import run_git
from cascade.sandbox import safefs
from cascade.sandbox.allowlist import SCRATCH_NAME, relative_to
from cascade.sandbox.base import RunSpec
from cascade.sandbox.channel import Channel

AUDIT_HOOK_DIR = Path(__file__).resolve().parent / "audit_hook"
HOOK_FILES = ("sitecustomize.py", "_supervise.py", "pytest_report_props.py")
AUDIT_FILE = "events"  # the channel's FIFO in the audit directory
TRACE_FIFO = "trace"  # strace's channel, where strace runs inside the sandbox (docker)
HOST_AUDIT_FILE = "audit-host.jsonl"
MIB = 1024 * 1024
QUOTA_POLL_SECONDS = 0.025  # statvfs is one cheap call: fast enough to see a quota filled and emptied at once
QUOTA_MARGIN = 0.03  # within 3% of the quota counts as reaching it (a fill is seen while its files are removed)
MS_NOSUID, MS_NODEV, MNT_DETACH = 2, 4, 2


def system_sitecustomize() -> list[str]:
    """The system interpreters' own sitecustomize files (Debian's /etc/python3.X/sitecustomize.py): both backends
    mount the audit hook over them, so a system Python started with a clean environment or ``-I`` runs it too."""
    return sorted(p for p in glob.glob("/etc/python3*/sitecustomize.py") if os.path.isfile(p))


class Layout(BaseModel):
    """Where the run sees each of its places (and the gate's read-only ones)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tree: str
    home: str
    tmp: str
    results: str
    hook: str
    audit: str
    objects: str  # the repository's object store, read-only (the tree's .git points here)

    @property
    def scratch(self) -> str:
        return f"{self.tmp.rstrip('/')}/{SCRATCH_NAME}"


class GitSkeleton(BaseModel):
    """What a run's credential-free ``.git`` holds: files relative to it, and the object store it borrows."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    files: dict[str, bytes]
    objects: str  # host path of the repository's object store


@functools.lru_cache(maxsize=16)
def git_skeleton(tree: str) -> GitSkeleton | None:
    """HEAD, index and tags of the checkout at ``tree`` (None when it is no git checkout). Cached: the pristine trees
    a review runs on never change while it lasts."""
    head = run_git(Path(tree), "rev-parse", "HEAD")
    common = run_git(Path(tree), "rev-parse", "--path-format=absolute", "--git-common-dir")
    index = run_git(Path(tree), "rev-parse", "--path-format=absolute", "--git-path", "index")
    if head.returncode or common.returncode or index.returncode:
        return None
    tags = run_git(Path(tree), "for-each-ref", "--format=%(objectname) %(refname)", "refs/tags").stdout
    files = {
        "HEAD": head.stdout.strip().encode() + b"\n",
        "config": b"[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n",
        "packed-refs": b"# pack-refs with: peeled sorted\n" + tags.encode(),
        "description": b"",
    }
    index_path = Path(index.stdout.strip())
    if index_path.is_file():
        files["index"] = index_path.read_bytes()
    return GitSkeleton(files=files, objects=str(Path(common.stdout.strip()) / "objects"))


class RunPlaces:
    """One run's places on the host. ``layout`` says where the sandbox shows them; None = at their host paths."""

    def __init__(self, spec: RunSpec, layout: Layout | None = None, mounts: list[str] | None = None) -> None:
        """``mounts``: host paths the backend will show at the same path inside (a venv may lie under the HOME or
        /tmp path, whose mount points must exist before the snapshot, or they would count as the run's doing)."""
        self.spec = spec
        self.host_root = Path(tempfile.mkdtemp(prefix="cascade-run-"))
        self.root = self.host_root / "places"
        self.root.mkdir()
        self.notes: list[str] = []
        self.skeleton = git_skeleton(spec.tree) if spec.tree else None
        self.quota = self._mount_quota()
        self.tree, self.home, self.tmp = self.root / "tree", self.root / "home", self.root / "tmp"
        self.shm, self.results, self.hook, self.audit = (self.root / n for n in ("shm", "results", "hook", "audit"))
        for path in (self.tree, self.home, self.tmp, self.shm, self.results, self.hook, self.audit, self.scratch_dir):
            path.mkdir(exist_ok=True)
        self.layout = layout or self.host_layout()
        self._fill_tree()
        self._precreate(mounts or [])
        for path in (self.home, self.tmp, self.shm, self.scratch_dir, self.results):
            path.chmod(0o1777)  # any uid: the docker backend runs as an unprivileged user
        self._plant_decoys()
        self._write_hook()
        self.audit.chmod(0o755)  # mounted read-only: it only holds the channel FIFOs
        self.channel = Channel(self.audit / AUDIT_FILE, self.host_root / HOST_AUDIT_FILE)
        self.channels = [self.channel]
        self.trace: Path | None = None
        self.roots = {"home": self.home, "tmp": self.tmp, "shm": self.shm, "worktree": self.tree}
        self.before = {name: safefs.snapshot(path) for name, path in self.roots.items()}
        self._watch = QuotaWatch(self.root) if self.quota else None

    @property
    def scratch_dir(self) -> Path:
        return self.tmp / SCRATCH_NAME

    @property
    def audit_log(self) -> Path:
        return self.host_root / HOST_AUDIT_FILE

    def host_layout(self) -> Layout:
        objects = self.skeleton.objects if self.skeleton else ""
        return Layout(tree=str(self.tree), home=str(self.home), tmp=str(self.tmp), results=str(self.results),
                      hook=str(self.hook), audit=str(self.audit), objects=objects)  # fmt: skip

    # -- preparing -----------------------------------------------------------------------------------------------

    def _mount_quota(self) -> bool:
        """A tmpfs with the run's byte and inode quota (tree size included) over ``root``, when we may mount."""
        tree_bytes, tree_files = tree_size(Path(self.spec.tree)) if self.spec.tree else (0, 0)
        size = tree_bytes + self.spec.disk_mb * MIB
        inodes = tree_files + self.spec.inodes
        options = f"size={size},nr_inodes={inodes},mode=0755".encode()
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.mount(b"tmpfs", str(self.root).encode(), b"tmpfs", MS_NOSUID | MS_NODEV, options) == 0:
            return True
        why = os.strerror(ctypes.get_errno())
        self.notes.append(f"no disk quota for the run's places: the gate cannot mount a tmpfs ({why}; needs root)")
        return False

    def _fill_tree(self) -> None:
        if self.spec.tree:
            source = Path(self.spec.tree)
            shutil.copytree(source, self.tree, symlinks=True, dirs_exist_ok=True,
                            ignore=lambda d, names: [".git"] if Path(d) == source else [])  # fmt: skip
        if self.skeleton is not None:
            git = self.tree / ".git"
            git.mkdir()
            for name in ("objects/info", "refs/heads", "refs/tags"):
                (git / name).mkdir(parents=True)
            for name, data in self.skeleton.files.items():
                (git / name).write_bytes(data)
            (git / "objects/info/alternates").write_text(self.layout.objects + "\n")
        for relative, content in self.spec.place.items():
            safefs.write_entry(self.tree, relative, content.encode("utf-8"))

    def _precreate(self, mounts: list[str]) -> None:
        for mount in mounts:
            for private, visible in ((self.tmp, self.layout.tmp), (self.home, self.layout.home)):
                relative = relative_to(mount, visible)
                if relative:
                    (private / relative).mkdir(parents=True, exist_ok=True)

    def _plant_decoys(self) -> None:
        for relative, content in decoys().home_files().items():
            path = self.home / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content)
            path.chmod(0o644)  # readable by the docker backend's unprivileged user, like a careless real key

    def _write_hook(self) -> None:
        for name in HOOK_FILES:
            shutil.copyfile(AUDIT_HOOK_DIR / name, self.hook / name)
        config = {
            "log": f"{self.layout.audit}/{AUDIT_FILE}",
            "allow": [self.layout.tree, self.layout.scratch, self.layout.results],
            "deny": [f"{self.layout.tree}/.git"],
            "quiet": [self.layout.audit],  # its FIFOs are opened for writing to make records
            "scratch": self.layout.scratch,
            "hello": f"{self.layout.hook}/.hello-",
        }
        (self.hook / "config.json").write_text(json.dumps(config))
        for path in [self.hook, *self.hook.iterdir()]:
            path.chmod(0o755 if path.is_dir() else 0o644)

    def open_trace_channel(self) -> str:
        """For strace running inside the sandbox: a second append-only channel; its FIFO's path as the run sees it."""
        channel = Channel(self.audit / TRACE_FIFO, self.host_root / "strace.txt")
        self.channels.append(channel)
        self.trace = channel.sink
        return f"{self.layout.audit}/{TRACE_FIFO}"

    def lend_to(self, uid: int, gid: int) -> None:
        """Hand the fresh tree and what HOME holds to the sandbox's user (docker's unprivileged one), as a real user's
        home is theirs (a test may make ``~/.config/x`` beside the decoys' ``~/.config/gh``); all is thrown away after
        the run. Called before the run starts: nothing here was written by the run."""
        for top in (self.tree, self.home):
            for dirpath, dirnames, filenames in os.walk(top):
                for name in [*dirnames, *filenames]:
                    with contextlib.suppress(OSError):
                        os.lchown(os.path.join(dirpath, name), uid, gid)
        os.lchown(self.tree, uid, gid)

    # -- after the run -------------------------------------------------------------------------------------------

    def quota_hit(self) -> str | None:
        """Why the run reached its disk or inode quota, if it did (the watch keeps the lowest free space seen)."""
        if self._watch is None:
            return None
        self._watch.stop()
        return self._watch.exhausted()

    def close_channels(self) -> None:
        for channel in self.channels:
            channel.close()

    def cleanup(self) -> None:
        self.close_channels()
        if self._watch is not None:
            self._watch.stop()
        if self.quota:  # the tmpfs goes with everything on it; detach even if a lazy reference is left
            libc = ctypes.CDLL(None, use_errno=True)
            libc.umount2(str(self.root).encode(), MNT_DETACH)
        safefs.remove_tree(self.host_root)


def tree_size(tree: Path) -> tuple[int, int]:
    """Bytes and entries of a pristine tree (the quota is on top of its copy)."""
    total, count = 0, 0
    for dirpath, dirnames, filenames in os.walk(tree):
        if dirpath == str(tree) and ".git" in dirnames:
            dirnames.remove(".git")
        count += len(dirnames) + len(filenames)
        for name in filenames:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, name)).st_size
    return total + 4096 * count, count + 64


class QuotaWatch:
    """Polls the run's tmpfs for its lowest free bytes and inodes: a run that filled its quota and then deleted the
    files still hit it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.low_bytes = self.low_inodes = None
        self.total_bytes = self.total_inodes = 0
        self._stop = threading.Event()
        self._sample()
        self._thread = threading.Thread(target=self._poll, name="cascade-quota", daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        with contextlib.suppress(OSError):
            vfs = os.statvfs(self.root)
            free_bytes, free_inodes = vfs.f_bavail * vfs.f_frsize, vfs.f_favail
            self.total_bytes, self.total_inodes = vfs.f_blocks * vfs.f_frsize, vfs.f_files
            self.low_bytes = free_bytes if self.low_bytes is None else min(self.low_bytes, free_bytes)
            self.low_inodes = free_inodes if self.low_inodes is None else min(self.low_inodes, free_inodes)

    def _poll(self) -> None:
        while not self._stop.wait(QUOTA_POLL_SECONDS):
            self._sample()

    def stop(self) -> None:
        if not self._stop.is_set():
            self._stop.set()
            self._thread.join()
            self._sample()

    def exhausted(self) -> str | None:
        if self.low_bytes is not None and self.low_bytes < max(MIB, QUOTA_MARGIN * self.total_bytes):
            return f"the run's places reached their disk quota ({self.total_bytes // MIB} MiB)"
        if self.low_inodes is not None and self.low_inodes < max(16, QUOTA_MARGIN * self.total_inodes):
            return f"the run's places reached their inode quota ({self.total_inodes} entries)"
        return None
