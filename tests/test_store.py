"""The result store: round trips, one table per kind, overrides, and several writers at once."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap

import pytest

from tensorforge.errors import TensorforgeError
from tensorforge.hashing import stable_hash
from tensorforge.store import SCHEMA_VERSION, STORE_ENV, ResultStore, default_store_path


@pytest.fixture
def store(tmp_path):
    return ResultStore(tmp_path / "results.sqlite")


def test_put_then_get_returns_payload_inputs_and_time(store):
    key = stable_hash("design", {"pe": 4})
    store.put("synth_asic", key, {"area_um2": 12.5, "cells": {"INVX1": 3}}, inputs={"pe": 4})
    row = store.get("synth_asic", key)
    assert row is not None
    assert row.payload == {"area_um2": 12.5, "cells": {"INVX1": 3}}
    assert row.inputs == {"pe": 4}
    assert row.kind == "synth_asic" and row.key == key
    assert row.created_at > 0
    assert ("synth_asic", key) in store
    assert ("synth_asic", "other") not in store


def test_missing_kind_or_key_is_none(store):
    assert store.get("never_written", "k") is None
    store.put("seen", "a", {"x": 1})
    assert store.get("seen", "b") is None
    assert store.items("never_written") == []
    assert store.keys("never_written") == []
    assert store.delete("never_written", "k") is False


def test_each_kind_is_its_own_table(store, tmp_path):
    store.put("synth_ecp5", "k", {"luts": 1})
    store.put("sweep_point", "k", {"latency": 2})
    assert store.kinds() == ["sweep_point", "synth_ecp5"]
    assert store.get("synth_ecp5", "k").payload == {"luts": 1}
    assert store.get("sweep_point", "k").payload == {"latency": 2}
    with sqlite3.connect(tmp_path / "results.sqlite") as connection:
        tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master")}
    connection.close()
    assert {"result_synth_ecp5", "result_sweep_point"} <= tables


def test_rewriting_a_key_replaces_the_row(store):
    store.put("kind", "k", {"v": 1})
    store.put("kind", "k", {"v": 2})
    assert store.keys("kind") == ["k"]
    assert store.get("kind", "k").payload == {"v": 2}


def test_items_keys_and_delete(store):
    for index in range(5):
        store.put("points", f"key{index}", {"index": index})
    assert store.keys("points") == [f"key{index}" for index in range(5)]
    assert sorted(row.payload["index"] for row in store.items("points")) == list(range(5))
    assert store.delete("points", "key2") is True
    assert store.delete("points", "key2") is False
    assert "key2" not in store.keys("points")


@pytest.mark.parametrize("kind", ["", "Upper", "drop table", "a;b", "1abc", "x" * 80])
def test_unsafe_kind_names_are_rejected(store, kind):
    with pytest.raises(ValueError, match="result kind"):
        store.put(kind, "k", {})


def test_store_uses_write_ahead_logging(store):
    connection = sqlite3.connect(store.path)
    try:
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        connection.close()


def test_environment_overrides_location(tmp_path, monkeypatch):
    target = tmp_path / "elsewhere" / "mine.sqlite"
    monkeypatch.setenv(STORE_ENV, str(target))
    assert default_store_path() == target
    ResultStore().put("kind", "k", {"v": 1})
    assert target.is_file()


def test_default_location_is_in_the_cache(tmp_path, monkeypatch):
    monkeypatch.delenv(STORE_ENV, raising=False)
    monkeypatch.setenv("TENSORFORGE_CACHE", str(tmp_path / "cache"))
    assert default_store_path() == tmp_path / "cache" / "results.sqlite"


def test_newer_schema_is_refused_with_a_fix(tmp_path):
    path = tmp_path / "future.sqlite"
    connection = sqlite3.connect(path)
    connection.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    connection.commit()
    connection.close()
    with pytest.raises(TensorforgeError, match="upgrade tensorforge"):
        ResultStore(path)


def test_two_processes_writing_at_once_lose_nothing(tmp_path):
    path = tmp_path / "shared.sqlite"
    ResultStore(path)
    writer = textwrap.dedent(
        """
        import sys
        from tensorforge.store import ResultStore
        store = ResultStore(sys.argv[1], timeout_s=60)
        for index in range(150):
            store.put("points", f"{sys.argv[2]}-{index}", {"index": index})
        """
    )
    processes = [
        subprocess.Popen([sys.executable, "-c", writer, str(path), name]) for name in ("p", "q")
    ]
    assert [process.wait(timeout=120) for process in processes] == [0, 0]
    keys = ResultStore(path).keys("points")
    assert len(keys) == 300
    assert {key.split("-")[0] for key in keys} == {"p", "q"}


def test_unopenable_file_is_a_clear_error(tmp_path):
    directory = tmp_path / "a-directory.sqlite"
    directory.mkdir()
    with pytest.raises(TensorforgeError, match="cannot open the result store"):
        ResultStore(directory)


def test_source_digest_follows_the_module_text(tmp_path, monkeypatch):
    """Results keyed by a model's source change key when the model's file changes."""
    from tensorforge.hashing import source_digest

    module = tmp_path / "model_under_test.py"
    module.write_text("SCALE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    first = source_digest("model_under_test")
    assert source_digest("model_under_test") == first
    module.write_text("SCALE = 2\n")
    assert source_digest("model_under_test") != first
    with pytest.raises(ModuleNotFoundError, match="no_such_model"):
        source_digest("no_such_model")
