"""The result store: work whose result a key fully determines, kept across reviews (docs/architecture.md, Reuse).

A result is stored under a key model naming everything that determines it (repository, base commit, environment,
tool versions, settings, targets, the code that produced it). An entry is one JSON file named after the key's
digest, holding the whole key, the value and a checksum of both. Reading validates the entry with pydantic and
compares its key with the one asked for and its checksum with its content: a truncated, corrupt, foreign (another
key or schema) or edited entry is ignored — the caller recomputes and overwrites it — never trusted.

Only the gate writes here, outside any sandbox: entries are written to a temporary file and renamed into place, so a
reader (another review, ``--jobs 2``) sees a whole entry or none. Directories are private to the user (0700). The
checksum finds damage, not a forger who can write the directory: keep the directory out of reach of untrusted code
(README, "Reuse across reviews").
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from cascade.config import CacheConfig

STORE_SCHEMA = 1
CACHE_DIR_ENV = "CASCADE_CACHE_DIR"
RESULTS = "results"


def cache_root(configured: str | None) -> Path:
    """The cache directory: the configured one, else $CASCADE_CACHE_DIR, else $XDG_CACHE_HOME/cascade, else
    ~/.cache/cascade."""
    if configured:
        return Path(configured).expanduser()
    if os.environ.get(CACHE_DIR_ENV):
        return Path(os.environ[CACHE_DIR_ENV]).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "cascade"


def _canonical(data: Any) -> bytes:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


class StoreKey(BaseModel):
    """Base of every key: ``kind`` names what is stored (entries of different kinds never meet)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Any  # each key narrows it to its own literal

    def digest(self) -> str:
        return hashlib.sha256(_canonical(self.model_dump(mode="json"))).hexdigest()


K = TypeVar("K", bound=StoreKey)
V = TypeVar("V", bound=BaseModel)


class StoreEntry(BaseModel, Generic[K, V]):
    """One stored result: the full key it answers, the value, and a checksum of schema, key and value."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int
    key: K
    value: V
    checksum: str

    @staticmethod
    def checksum_of(key: StoreKey, value: BaseModel) -> str:
        content = {"schema": STORE_SCHEMA, "key": key.model_dump(mode="json"), "value": value.model_dump(mode="json")}
        return hashlib.sha256(_canonical(content)).hexdigest()


class Lookup(BaseModel, Generic[V]):
    """What a lookup found: ``hit`` (the value), ``miss`` (no entry) or ``ignored`` (an entry, not trusted: why)."""

    status: Literal["hit", "miss", "ignored"]
    value: V | None = None
    why: str = ""
    entry: str = ""  # the key's digest: the entry's file name


class ResultStore:
    """Typed get/put of pydantic values under pydantic keys, in ``root/results/<kind>/<digest>.json``."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def path_of(self, key: StoreKey) -> Path:
        digest = key.digest()
        return self.root / RESULTS / key.kind / digest[:2] / f"{digest}.json"

    def get(self, key: StoreKey, value_type: type[V]) -> Lookup[V]:
        path, digest = self.path_of(key), key.digest()
        try:
            text = path.read_bytes()
        except FileNotFoundError:
            return Lookup[value_type](status="miss", entry=digest)
        except OSError as exc:
            return Lookup[value_type](status="ignored", why=f"unreadable: {exc.strerror}", entry=digest)
        why, value = _check(text, key, value_type)
        if value is None:
            return Lookup[value_type](status="ignored", why=why, entry=digest)
        return Lookup[value_type](status="hit", value=value, entry=digest)

    def put(self, key: StoreKey, value: BaseModel) -> None:
        """Write the entry atomically (temporary file, then rename); an unwritable store only loses the reuse."""
        path = self.path_of(key)
        entry = {
            "schema_version": STORE_SCHEMA,
            "key": key.model_dump(mode="json"),
            "value": value.model_dump(mode="json"),
            "checksum": StoreEntry.checksum_of(key, value),
        }
        try:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            handle, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
            with os.fdopen(handle, "wb") as out:
                out.write(_canonical(entry))
            os.replace(tmp, path)
        except OSError:
            return


def _check(text: bytes, key: StoreKey, value_type: type[V]) -> tuple[str, V | None]:
    """(why not, None) for an entry that cannot be trusted for ``key``; ("", value) otherwise."""
    try:
        entry = StoreEntry[type(key), value_type].model_validate_json(text)  # type: ignore[misc]
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "entry"
        return f"not an entry of this schema ({where}: {first['msg']})", None
    if entry.schema_version != STORE_SCHEMA:
        return f"schema {entry.schema_version}, not {STORE_SCHEMA}", None
    if entry.key != key:
        return "an entry for another key", None
    if entry.checksum != StoreEntry.checksum_of(entry.key, entry.value):
        return "checksum mismatch: the entry was changed after it was written", None
    return "", entry.value


def open_store(cfg: CacheConfig) -> ResultStore | None:
    """The configured store, or None when reuse is off."""
    return ResultStore(cache_root(cfg.dir)) if cfg.enabled else None
