"""Where co-design sweeps live: one SQLite row per trial, written the moment it finishes.

The shared `tensorforge.store.ResultStore` keeps one JSON payload per content hash, which suits
synthesis results; a sweep needs its trials *in order* (trial index) and by sweep, to replay
them into an optimizer on resume. So sweeps get two tables of their own, in their own file
(``cache_dir()/sweeps.sqlite`` by default):

* ``sweeps``: one row per sweep id, with the JSON description of everything that determines it
  (workload, space, constraints, method, seed, trials, evaluator versions);
* ``trials``: ``(sweep_id, trial_index)`` -> design point, config JSON (null when the point is
  not a valid accelerator), status (``ok``, ``failed``, ``infeasible``), metrics, per-layer
  metrics and mappings, error text, and the exact objective and constraint values the optimizer
  was told, so a replay tells it the same numbers bit for bit (JSON keeps floats exact).

Like the result store, every operation opens its own short-lived connection in WAL mode and
waits for locks, so a worker process or a second terminal never corrupts a sweep.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tensorforge.paths import cache_dir
from tensorforge.store import sqlite_connection

SWEEP_STORE_FILENAME = "sweeps.sqlite"

#: Trial outcomes: evaluated; an evaluation raised or its worker died; not a valid accelerator.
OK, FAILED, INFEASIBLE = "ok", "failed", "infeasible"
STATUSES = (OK, FAILED, INFEASIBLE)

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS sweeps ("
    " sweep_id TEXT PRIMARY KEY, description TEXT NOT NULL, created_at REAL NOT NULL)",
    "CREATE TABLE IF NOT EXISTS trials ("
    " sweep_id TEXT NOT NULL, trial_index INTEGER NOT NULL, point TEXT NOT NULL,"
    " config TEXT, status TEXT NOT NULL, metrics TEXT NOT NULL, layers TEXT NOT NULL,"
    " error TEXT NOT NULL, objectives TEXT NOT NULL, constraint_values TEXT NOT NULL,"
    " seconds REAL NOT NULL, created_at REAL NOT NULL,"
    " PRIMARY KEY (sweep_id, trial_index))",
)


def default_sweep_store_path() -> Path:
    return cache_dir() / SWEEP_STORE_FILENAME


@dataclass(frozen=True)
class TrialRecord:
    """One finished trial, exactly as stored.

    ``layers`` has one entry per distinct layer: its name, repeat count, and `LayerMetrics`
    as a dict (or an ``error``). ``objectives`` / ``constraint_values`` are what the optimizer
    was told (penalty values for failed and infeasible trials).
    """

    index: int
    point: dict[str, Any]
    status: str
    config: dict[str, Any] | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    layers: list[dict[str, Any]] = field(default_factory=list)
    error: str = ""
    objectives: list[float] = field(default_factory=list)
    constraint_values: list[float] = field(default_factory=list)
    seconds: float = 0.0

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"trial status must be one of {STATUSES}, not {self.status!r}")

    def comparable(self) -> dict[str, Any]:
        """Everything but the wall-clock time: two runs of one sweep agree on this."""
        return {
            "index": self.index,
            "point": self.point,
            "status": self.status,
            "config": self.config,
            "metrics": self.metrics,
            "layers": self.layers,
            "error": self.error,
            "objectives": self.objectives,
            "constraint_values": self.constraint_values,
        }


class SweepStore:
    """Sweeps and their trials in one SQLite file."""

    def __init__(self, path: Path | str | None = None, *, timeout_s: float = 60.0) -> None:
        self.path = Path(path).expanduser() if path is not None else default_sweep_store_path()
        self.timeout_s = timeout_s
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as connection:
            connection.execute("PRAGMA journal_mode=WAL")
            for statement in _SCHEMA:
                connection.execute(statement)

    def __repr__(self) -> str:
        return f"SweepStore({str(self.path)!r})"

    def _connect(self) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        return sqlite_connection(self.path, self.timeout_s, what="sweep store (--store)")

    # --- sweeps ----------------------------------------------------------------------------

    def open_sweep(self, sweep_id: str, description: dict[str, Any]) -> None:
        """Register a sweep (kept as is when it exists: its trials are being resumed)."""
        with self._connect() as connection:
            connection.execute(
                "INSERT OR IGNORE INTO sweeps (sweep_id, description, created_at) VALUES (?,?,?)",
                (sweep_id, json.dumps(description, sort_keys=True), time.time()),
            )

    def description(self, sweep_id: str) -> dict[str, Any] | None:
        with self._connect() as connection:
            row = connection.execute(
                "SELECT description FROM sweeps WHERE sweep_id=?", (sweep_id,)
            ).fetchone()
        return None if row is None else json.loads(row[0])

    def sweeps(self) -> list[str]:
        with self._connect() as connection:
            rows = connection.execute("SELECT sweep_id FROM sweeps ORDER BY created_at").fetchall()
        return [row[0] for row in rows]

    def delete_sweep(self, sweep_id: str) -> None:
        """Forget a sweep and its trials (to re-run it from scratch)."""
        with self._connect() as connection:
            connection.execute("DELETE FROM trials WHERE sweep_id=?", (sweep_id,))
            connection.execute("DELETE FROM sweeps WHERE sweep_id=?", (sweep_id,))

    # --- trials ----------------------------------------------------------------------------

    def put_trial(self, sweep_id: str, trial: TrialRecord) -> None:
        with self._connect() as connection:
            connection.execute(
                "INSERT OR REPLACE INTO trials (sweep_id, trial_index, point, config, status,"
                " metrics, layers, error, objectives, constraint_values, seconds, created_at)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    sweep_id,
                    trial.index,
                    json.dumps(trial.point, sort_keys=True),
                    None if trial.config is None else json.dumps(trial.config, sort_keys=True),
                    trial.status,
                    json.dumps(trial.metrics, sort_keys=True),
                    json.dumps(trial.layers, sort_keys=True),
                    trial.error,
                    json.dumps(trial.objectives),
                    json.dumps(trial.constraint_values),
                    trial.seconds,
                    time.time(),
                ),
            )

    def trials(self, sweep_id: str) -> list[TrialRecord]:
        """Every stored trial of a sweep, by trial index."""
        with self._connect() as connection:
            rows = connection.execute(
                "SELECT trial_index, point, config, status, metrics, layers, error, objectives,"
                " constraint_values, seconds FROM trials WHERE sweep_id=? ORDER BY trial_index",
                (sweep_id,),
            ).fetchall()
        return [
            TrialRecord(
                index=row[0],
                point=json.loads(row[1]),
                config=None if row[2] is None else json.loads(row[2]),
                status=row[3],
                metrics=json.loads(row[4]),
                layers=json.loads(row[5]),
                error=row[6],
                objectives=json.loads(row[7]),
                constraint_values=json.loads(row[8]),
                seconds=row[9],
            )
            for row in rows
        ]

    def trial_count(self, sweep_id: str) -> int:
        with self._connect() as connection:
            row = connection.execute(
                "SELECT COUNT(*) FROM trials WHERE sweep_id=?", (sweep_id,)
            ).fetchone()
        return int(row[0])
