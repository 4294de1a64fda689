"""Side-effect oracle: everything a run did or tried beyond the allow-list (`allowlist.py`), as `SideEffect` records
— harmful ones reject, named allow-list hits are kept as benign context — and everything it produced, checked before
any of it leaves the sandbox layer (docs/architecture.md, "Run model").

Its witnesses are places the run cannot rewrite and channels it can only append to:

* snapshot diffs, taken on the host without following links (`safefs.py`), of the run's HOME, /tmp, /dev/shm and
  tree: what it changed outside its own places, setuid/setgid modes, files grown to the size limit, links, FIFOs
  and devices it left pointing out of its places, hard links to files elsewhere, any file holding a decoy secret;
* the audit log appended by every sandboxed Python (`audit_hook/sitecustomize.py`, judged in `records.py`) and the
  supervisor (processes left running, resource limits), through the append-only channel (`channel.py`);
* strace, outside the run's processes (`strace.py`, judged in `witness.py`), including the witnesses that went
  silent;
* the test runner plugin's records: which test ran when (`attribution.py` tags every record with its test).

Everything the run produced — its output, its report files, the runner's messages, the command lines and paths in
the records — is scanned for the decoys (`cascade/leaks.py`): a copy there is a ``leak`` record, and the copy is
redacted before the result goes anywhere."""

from __future__ import annotations

import functools
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from cascade.decoys import decoys
from cascade.leaks import SecretScanner
from cascade.safety import EffectKind, SideEffect
from cascade.sandbox import safefs
from cascade.sandbox.allowlist import (
    SPECIAL_MODE_BITS,
    RunScope,
    inside,
    is_entry_root,
    named_entry,
    own_place,
    place_of,
)
from cascade.sandbox.attribution import Phases
from cascade.sandbox.base import RunnerRecord
from cascade.sandbox.places import RunPlaces
from cascade.sandbox.records import (
    LIMIT_NAMES,
    MAX_EFFECTS_PER_SOURCE,
    audit_effects,
    deduplicate,
    read_audit_log,
    tampering,
)
from cascade.sandbox.safefs import Entry, ReadBack, Snapshot
from cascade.sandbox.witness import Witness, read_witness

MIB = 1024 * 1024
LEAK_SCAN_BYTES = 4 * MIB  # files bigger than this are not read for decoys
LEAK_DETAIL = "it holds a decoy credential: a secret was copied out"
SUPERVISOR = "_supervise.py"
# Link targets in the read-only system: a venv made in the scratch dir links its interpreter there.
SYSTEM_TARGETS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt", "/etc")
Change = Literal["created", "modified", "deleted"]
CHANGE_KINDS: dict[Change, EffectKind] = {"created": "file_create", "modified": "file_write", "deleted": "file_delete"}
SOURCES = {"home": "home_diff", "tmp": "tmp_diff", "shm": "shm_diff", "worktree": "worktree_diff"}


@functools.lru_cache(maxsize=1)
def scanner() -> SecretScanner:
    return SecretScanner(decoys().values())


class Observation(BaseModel):
    """What the oracle made of one run: its records, and the run's own output, checked and redacted."""

    model_config = ConfigDict(extra="forbid")

    effects: list[SideEffect]
    reports: list[RunnerRecord]
    stdout: str
    stderr: str
    results: list[ReadBack]


def diff_snapshots(before: Snapshot, after: Snapshot) -> list[tuple[str, Change]]:
    """Changed entries; a directory only counts when it is new or gone (its mtime moves with any child)."""
    changes: list[tuple[str, Change]] = []
    for path, entry in sorted(after.items()):
        old = before.get(path)
        if old is None:
            changes.append((path, "created"))
        elif entry.kind != "dir" and old != entry:
            changes.append((path, "modified"))
    changes.extend((path, "deleted") for path in sorted(before.keys() - after.keys()))
    return changes


def observe(
    places: RunPlaces,
    scope: RunScope,
    timed_out: bool,
    stdout: str,
    stderr: str,
    results: list[ReadBack],
) -> Observation:
    """Judge one finished run (every process of it is gone): its places, channel, strace output and products."""
    afters = {name: safefs.snapshot(root) for name, root in places.roots.items()}
    scratch = os.path.relpath(places.scratch_dir, places.tmp)
    made = frozenset(f"{scope.scratch}/{p[len(scratch) + 1 :]}" for p in afters["tmp"] if p.startswith(f"{scratch}/"))
    places.close_channels()
    log = read_audit_log(places.audit_log, places.channel.dropped, places.channel.complete)
    phases = Phases(log.reports if log else [])
    hook_reads = {(int(r.get("pid", 0)), str(r.get("path"))) for r in (log.records if log else [])
                  if r.get("event") in ("read", "write")}  # fmt: skip
    witness = Witness(scope, phases, f"{places.layout.hook}/.hello-", SUPERVISOR)
    witnessed = read_witness(places.trace, witness, hook_reads)
    scope = scope.model_copy(update={"scratch_made": made | witness.scratch_made})
    effects = snapshot_effects_all(places, afters, scope, phases)
    effects += audit_effects(log, scope, timed_out, phases)
    effects += witnessed
    effects += [tampering(f"the run flooded or held open its strace channel: {c.dropped} bytes dropped, complete: "
                          f"{c.complete}") for c in places.channels[1:] if c.dropped or not c.complete]  # fmt: skip
    effects += [tampering(f"the report file {r.name} could not be read back: {r.refused}", target=r.name,
                          source="results") for r in results if r.refused]  # fmt: skip
    quota = places.quota_hit()
    if quota:
        effects.append(SideEffect(kind="resource_limit", target="disk quota", source="places", detail=quota))
    return checked(deduplicate(effects), log.reports if log else [], stdout, stderr, results)


def snapshot_effects_all(
    places: RunPlaces, afters: dict[str, Snapshot], scope: RunScope, phases: Phases
) -> list[SideEffect]:
    links = hard_link_counts(afters)
    effects: list[SideEffect] = []
    for name, root in places.roots.items():
        after = afters[name]
        changes = diff_snapshots(places.before[name], after)
        visible = functools.partial(visible_path, places, name)
        effects += snapshot_effects(name, changes, after, root, visible, scope, places.spec.file_size_mb, links,
                                    phases)  # fmt: skip
    return effects


def visible_path(places: RunPlaces, name: str, relative: str) -> str:
    """A snapshot entry's path as the sandboxed process saw it."""
    layout = places.layout
    where = {"home": layout.home, "tmp": layout.tmp, "shm": "/dev/shm", "worktree": layout.tree}[name]
    return f"{where.rstrip('/')}/{relative}"


def hard_link_counts(afters: dict[str, Snapshot]) -> dict[int, int]:
    """How many names each inode has inside the run's places (all on one file system)."""
    counts: dict[int, int] = {}
    for after in afters.values():
        for entry in after.values():
            if entry.kind == "file" and entry.nlink > 1:
                counts[entry.ino] = counts.get(entry.ino, 0) + 1
    return counts


def snapshot_effects(
    name: str,
    changes: list[tuple[str, Change]],
    after: Snapshot,
    root: Path,
    visible: Callable[[str], str],
    scope: RunScope,
    file_size_mb: int,
    links: dict[int, int] | None = None,
    phases: Phases | None = None,
) -> list[SideEffect]:
    """Judge one root's changes: leaks, setuid/setgid modes, size-limit hits, links and special files anywhere;
    every other change outside the run's own places unless a named entry allows it. Harmful records come first, so
    the per-source cap can never hide one behind allowed noise. Each is tagged with the test running at its mtime."""
    phases = phases or Phases([])
    harmful: list[SideEffect] = []
    allowed: list[SideEffect] = []
    source = SOURCES[name]
    for relative, change in changes:
        path = visible(relative)
        entry = after.get(relative)
        test = phases.at(entry.mtime_ns / 1e9 if entry is not None else None)
        why = harm_anywhere(relative, change, entry, root, path, scope, file_size_mb, name, links or {})
        if why is not None:
            harmful.append(SideEffect(kind=why[0], target=path, source=source, detail=why[1], test=test))
            continue
        if own_place(path, scope):
            continue
        named = named_entry(path, scope, change)
        if named is not None and not (change == "deleted" and is_entry_root(path, named, scope)):
            allowed.append(SideEffect(kind=CHANGE_KINDS[change], target=path, source=source, benign=True, test=test,
                                      detail=f"{change}; allow-list entry '{named.name}': {named.why}"))  # fmt: skip
            continue
        harmful.append(SideEffect(kind=CHANGE_KINDS[change], target=path, source=source, test=test,
                                  detail=f"{change} in {place_of(path, scope)}"))  # fmt: skip
    return [*harmful, *allowed][:MAX_EFFECTS_PER_SOURCE]


def harm_anywhere(
    relative: str,
    change: Change,
    entry: Entry | None,
    root: Path,
    path: str,
    scope: RunScope,
    file_size_mb: int,
    place: str,
    links: dict[int, int],
) -> tuple[EffectKind, str] | None:
    """What makes a change harmful even inside the run's own places: a decoy secret in a file it wrote, a
    setuid/setgid mode, a file grown to the file-size limit, a hard link to a file outside its places, a device, a
    FIFO or socket left in its tree, a symlink out of its places (out of the system, outside the tree)."""
    if entry is None or change == "deleted":
        return None
    if entry.kind in ("fifo", "socket", "device", "other"):
        return special_file(entry, place)
    if entry.kind == "symlink":
        return link_out(entry, path, scope, place)
    if entry.kind != "file":
        return None
    decoy = place == "home" and relative in decoys().home_files()
    if not decoy and entry.size <= LEAK_SCAN_BYTES:
        data = safefs.read_entry(root, relative, LEAK_SCAN_BYTES)
        if data is not None and scanner().found_in(data):
            return "leak", f"{change} by the run; {LEAK_DETAIL}"
    if entry.mode & SPECIAL_MODE_BITS:
        return "privilege", f"{change} with a setuid/setgid mode ({stat.filemode(entry.mode)})"
    if entry.size >= file_size_mb * MIB:
        return "resource_limit", f"{LIMIT_NAMES['fsize']} reached: the file grew to {file_size_mb} MiB"
    if entry.nlink > links.get(entry.ino, 1):
        return "file_create", (
            f"{change} as a hard link: the file has {entry.nlink} names, only "
            f"{links.get(entry.ino, 1)} of them in the run's places (a link to a file elsewhere)"
        )
    return None


def special_file(entry: Entry, place: str) -> tuple[EffectKind, str] | None:
    if entry.kind == "device":
        return "privilege", "a device node left in the run's places"
    if place == "worktree":
        return "file_create", f"a {entry.kind} left in the tree: whoever reads the tree next blocks or is redirected"
    return None


def link_out(entry: Entry, path: str, scope: RunScope, place: str) -> tuple[EffectKind, str] | None:
    """A symlink is judged by where it points (lexically, never followed)."""
    target = os.path.normpath(os.path.join(os.path.dirname(path), entry.target))
    if own_place(target, scope):
        return None
    system = any(inside(target, s) for s in (*SYSTEM_TARGETS, *scope.read_only))
    if system and place != "worktree":
        return None  # a venv's interpreter link: the gate never follows a link in a run's places
    return "file_create", (
        f"a symlink to {entry.target} left in {place_of(path, scope)}: it points outside the run's "
        "places (a host following it would read or write there)"
    )


def checked(
    effects: list[SideEffect], reports: list[RunnerRecord], stdout: str, stderr: str, results: list[ReadBack]
) -> Observation:
    """Everything the run produced, scanned for the decoys; each place a copy was found is a ``leak`` record, and
    every copy is redacted before the result leaves the sandbox layer."""
    scan = scanner()
    leaks: list[SideEffect] = []

    def clean(text: str, where: str) -> str:
        if not scan.found_in(text):
            return text
        leaks.append(SideEffect(kind="leak", target=where, source="output_scan",
                                detail=f"a decoy credential appears in {where}: a secret was copied out"))  # fmt: skip
        return scan.redact(text)

    stdout, stderr = clean(stdout, "the run's stdout"), clean(stderr, "the run's stderr")
    results = [r.model_copy(update={"data": clean(r.data.decode("utf-8", "replace"), f"its report file {r.name}")
                                    .encode()}) if r.data is not None and scan.found_in(r.data) else r
               for r in results]  # fmt: skip
    reports = [r.model_copy(update={"message": clean(r.message, f"the test runner's message for {r.nodeid}"),
                                    "excerpt": clean(r.excerpt, f"the test runner's excerpt for {r.nodeid}")})
               for r in reports]  # fmt: skip
    effects = [e.model_copy(update={"target": clean(e.target, "a command line or path the run used"),
                                    "detail": clean(e.detail, "a record's detail")}) for e in effects]  # fmt: skip
    return Observation(effects=deduplicate([*leaks, *effects]), reports=reports, stdout=stdout, stderr=stderr,
                       results=results)  # fmt: skip
