"""The result store: every expensive result, kept by the hash of the inputs that made it.

Synthesis runs, RTL simulations and co-design sweep points each take seconds to hours, and a
sweep that is killed must resume without redoing any of them. So each result is written, as
soon as it exists, to one embedded SQLite file: one table per kind of result (``synth_ecp5``,
``synth_asic``, ``sweep_point``, ...), rows keyed by `tensorforge.hashing.stable_hash` of the
inputs, holding a JSON payload, a JSON description of those inputs (so a row can be understood
and re-run without the code that wrote it) and the time it was created.

Several processes may share the file (parallel sweep workers, two terminals): it runs in WAL
mode, every operation opens its own short-lived connection and waits for a lock instead of
failing. The file is ``cache_dir()/results.sqlite`` unless ``$TENSORFORGE_STORE`` or the
constructor says otherwise.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tensorforge.errors import TensorforgeError
from tensorforge.paths import cache_dir

logger = logging.getLogger(__name__)

STORE_ENV = "TENSORFORGE_STORE"
STORE_FILENAME = "results.sqlite"
SCHEMA_VERSION = 1

_KIND_PATTERN = re.compile(r"[a-z][a-z0-9_]{0,62}")


def default_store_path() -> Path:
    """``$TENSORFORGE_STORE`` when set, else ``results.sqlite`` in the cache directory."""
    override = os.environ.get(STORE_ENV)
    if override:
        return Path(override).expanduser()
    return cache_dir() / STORE_FILENAME


@contextlib.contextmanager
def sqlite_connection(
    path: Path, timeout_s: float, *, what: str = "result store"
) -> Iterator[sqlite3.Connection]:
    """A short-lived connection to the SQLite file at ``path``, committed on success.

    One connection per operation: nothing is shared between threads or forked workers, no
    connection is left open for a ResourceWarning, and a writer holding the lock is waited for
    (``timeout_s``) instead of failing. Other stores (sweeps) open their files through this too.
    """
    try:
        connection = sqlite3.connect(path, timeout=timeout_s)
    except sqlite3.Error as error:
        raise TensorforgeError(
            f"cannot open the {what} {path}: {error}; check the directory is writable or "
            f"set ${STORE_ENV} / pass another path"
        ) from error
    try:
        connection.execute(f"PRAGMA busy_timeout={int(timeout_s * 1000)}")
        with connection:  # commits, or rolls back on an exception
            yield connection
    finally:
        connection.close()


@dataclass(frozen=True)
class StoredResult:
    """One row of the store."""

    kind: str
    key: str
    payload: dict[str, Any]
    inputs: dict[str, Any]
    created_at: float


class ResultStore:
    """A SQLite file of JSON results, one table per kind, keyed by content hash.

    Payloads and input descriptions must be JSON-serializable dicts. Writing a key that exists
    replaces its row (a recomputed result is at least as good as the stored one).
    """

    def __init__(self, path: Path | str | None = None, *, timeout_s: float = 60.0) -> None:
        self.path = Path(path).expanduser() if path is not None else default_store_path()
        self.timeout_s = timeout_s
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as connection:
            connection.execute("PRAGMA journal_mode=WAL")
            version = connection.execute("PRAGMA user_version").fetchone()[0]
            if version == 0:
                connection.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            elif version > SCHEMA_VERSION:
                raise TensorforgeError(
                    f"the result store {self.path} has schema version {version}, newer than "
                    f"this tensorforge ({SCHEMA_VERSION}); upgrade tensorforge or point "
                    f"${STORE_ENV} at another file"
                )

    def __repr__(self) -> str:
        return f"ResultStore({str(self.path)!r})"

    def _connect(self) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        return sqlite_connection(self.path, self.timeout_s, what="result store")

    @staticmethod
    def _table(kind: str) -> str:
        # Table names cannot be bound parameters, so the kind is checked before it is spliced.
        if not _KIND_PATTERN.fullmatch(kind):
            raise ValueError(
                f"a result kind must be lower-case letters, digits and underscores starting "
                f"with a letter, not {kind!r}"
            )
        return f"result_{kind}"

    def _ensure_table(self, connection: sqlite3.Connection, kind: str) -> str:
        table = self._table(kind)
        connection.execute(
            f"CREATE TABLE IF NOT EXISTS {table} ("
            "key TEXT PRIMARY KEY, payload TEXT NOT NULL, inputs TEXT NOT NULL, "
            "created_at REAL NOT NULL)"
        )
        return table

    def _has_table(self, connection: sqlite3.Connection, kind: str) -> bool:
        row = connection.execute(
            "SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (self._table(kind),)
        ).fetchone()
        return row is not None

    def put(
        self,
        kind: str,
        key: str,
        payload: dict[str, Any],
        *,
        inputs: dict[str, Any] | None = None,
    ) -> None:
        """Store ``payload`` under (``kind``, ``key``), with a description of its inputs."""
        payload_text = json.dumps(payload, sort_keys=True)
        inputs_text = json.dumps(inputs or {}, sort_keys=True)
        with self._connect() as connection:
            table = self._ensure_table(connection, kind)
            connection.execute(
                f"INSERT OR REPLACE INTO {table} (key, payload, inputs, created_at) "
                "VALUES (?, ?, ?, ?)",
                (key, payload_text, inputs_text, time.time()),
            )
        logger.debug("stored %s/%s in %s", kind, key, self.path)

    def get(self, kind: str, key: str) -> StoredResult | None:
        """The row stored under (``kind``, ``key``), or None."""
        with self._connect() as connection:
            if not self._has_table(connection, kind):
                return None
            row = connection.execute(
                f"SELECT key, payload, inputs, created_at FROM {self._table(kind)} WHERE key=?",
                (key,),
            ).fetchone()
        return None if row is None else _row(kind, row)

    def __contains__(self, kind_and_key: tuple[str, str]) -> bool:
        kind, key = kind_and_key
        return self.get(kind, key) is not None

    def items(self, kind: str) -> list[StoredResult]:
        """Every row of ``kind``, oldest first."""
        with self._connect() as connection:
            if not self._has_table(connection, kind):
                return []
            rows = connection.execute(
                f"SELECT key, payload, inputs, created_at FROM {self._table(kind)} "
                "ORDER BY created_at, key"
            ).fetchall()
        return [_row(kind, row) for row in rows]

    def keys(self, kind: str) -> list[str]:
        """The keys stored for ``kind``, sorted."""
        with self._connect() as connection:
            if not self._has_table(connection, kind):
                return []
            rows = connection.execute(
                f"SELECT key FROM {self._table(kind)} ORDER BY key"
            ).fetchall()
        return [row[0] for row in rows]

    def delete(self, kind: str, key: str) -> bool:
        """Remove one row; True when it existed."""
        with self._connect() as connection:
            if not self._has_table(connection, kind):
                return False
            cursor = connection.execute(f"DELETE FROM {self._table(kind)} WHERE key=?", (key,))
            return cursor.rowcount > 0

    def kinds(self) -> list[str]:
        """The kinds of result the store holds, sorted."""
        with self._connect() as connection:
            rows = connection.execute(
                "SELECT name FROM sqlite_master WHERE type='table' AND name GLOB 'result_*' "
                "ORDER BY name"
            ).fetchall()
        return [row[0].removeprefix("result_") for row in rows]


def _row(kind: str, row: tuple[str, str, str, float]) -> StoredResult:
    key, payload, inputs, created_at = row
    return StoredResult(kind, key, json.loads(payload), json.loads(inputs), created_at)
