"""The result store: typed get/put, and entries that cannot be trusted are ignored, never returned."""

from __future__ import annotations

import json
import multiprocessing
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import BaseModel

from cascade.config import CacheConfig
from cascade.store import CACHE_DIR_ENV, ResultStore, StoreKey, cache_root, open_store


class OutcomeKey(StoreKey):
    kind: Literal["test-outcome"] = "test-outcome"
    commit: str
    targets: list[str]


class OtherKey(StoreKey):
    kind: Literal["other"] = "other"
    commit: str
    targets: list[str]


class Outcome(BaseModel):
    passed: list[str]
    seconds: float


KEY = OutcomeKey(commit="a" * 40, targets=["tests/test_a.py"])
VALUE = Outcome(passed=["tests/test_a.py::test_one"], seconds=1.5)


def test_put_then_get_returns_the_value(tmp_path: Path) -> None:
    store = ResultStore(tmp_path)
    assert store.get(KEY, Outcome).status == "miss"
    store.put(KEY, VALUE)
    found = store.get(KEY, Outcome)
    assert found.status == "hit" and found.value == VALUE and found.entry == KEY.digest()
    assert store.get(KEY.model_copy(update={"targets": ["tests/test_b.py"]}), Outcome).status == "miss"
    assert store.get(OtherKey(commit=KEY.commit, targets=KEY.targets), Outcome).status == "miss"  # kinds apart
    entry = store.path_of(KEY)
    assert [p.name for p in entry.parent.iterdir()] == [entry.name]  # no temporary file left
    assert stat.S_IMODE(entry.parent.stat().st_mode) == 0o700


def _entry(store: ResultStore) -> dict[str, Any]:
    return json.loads(store.path_of(KEY).read_text())


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda d: d["value"].update(passed=[]), "checksum mismatch"),
        (lambda d: d["key"].update(targets=["x.py"]), "an entry for another key"),
        (lambda d: d.update(schema_version=0), "schema 0"),
        (lambda d: d["value"].update(passed="no list"), "not an entry of this schema"),
        (lambda d: d.pop("checksum"), "not an entry of this schema"),
        (lambda d: d["key"].update(kind="other"), "not an entry of this schema"),
    ],
    ids=["edited", "foreign-key", "old-schema", "wrong-type", "no-checksum", "other-kind"],
)
def test_an_entry_that_cannot_be_trusted_is_ignored(
    tmp_path: Path, change: Callable[[dict[str, Any]], object], why: str
) -> None:
    store = ResultStore(tmp_path)
    store.put(KEY, VALUE)
    data = _entry(store)
    change(data)
    store.path_of(KEY).write_text(json.dumps(data))
    found = store.get(KEY, Outcome)
    assert found.status == "ignored" and found.value is None and found.why.startswith(why)
    store.put(KEY, VALUE)  # the caller recomputes and overwrites it
    assert store.get(KEY, Outcome).value == VALUE


def test_truncated_and_garbled_entries_are_ignored(tmp_path: Path) -> None:
    store = ResultStore(tmp_path)
    store.put(KEY, VALUE)
    whole = store.path_of(KEY).read_bytes()
    for damaged in (whole[: len(whole) // 2], b"", b"\xff\xfe not json"):
        store.path_of(KEY).write_bytes(damaged)
        assert store.get(KEY, Outcome).status == "ignored"


def test_an_entry_read_as_another_value_type_is_ignored(tmp_path: Path) -> None:
    class Other(BaseModel):
        failed: list[str]

    store = ResultStore(tmp_path)
    store.put(KEY, VALUE)
    assert store.get(KEY, Other).status == "ignored"


def _writer(root: str, n: int) -> None:
    store = ResultStore(Path(root))
    for i in range(n):
        store.put(KEY, Outcome(passed=[f"t{i}"] * 2000, seconds=float(i)))


def test_concurrent_writers_never_leave_a_partial_entry(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    writers = [ctx.Process(target=_writer, args=(str(tmp_path), 30)) for _ in range(2)]
    for w in writers:
        w.start()
    store = ResultStore(tmp_path)
    seen = set()
    while any(w.is_alive() for w in writers):
        seen.add(store.get(KEY, Outcome).status)
    for w in writers:
        w.join()
    assert "ignored" not in seen
    assert store.get(KEY, Outcome).status == "hit"
    assert [p.name for p in store.path_of(KEY).parent.iterdir()] == [store.path_of(KEY).name]


def test_an_unwritable_store_only_loses_the_reuse(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a directory")
    store = ResultStore(tmp_path / "file")
    store.put(KEY, VALUE)
    assert store.get(KEY, Outcome).status in {"miss", "ignored"}


def test_the_cache_directory_comes_from_config_then_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "env"))
    assert cache_root(None) == tmp_path / "env"
    assert cache_root(str(tmp_path / "cfg")) == tmp_path / "cfg"
    monkeypatch.delenv(CACHE_DIR_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root(None) == tmp_path / "xdg" / "cascade"
    assert open_store(CacheConfig(enabled=False)) is None
    store = open_store(CacheConfig(dir=str(tmp_path / "cfg")))
    assert store is not None and store.root == tmp_path / "cfg"
