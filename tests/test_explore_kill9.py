"""`tensorforge explore` survives kill -9 (issue 16, item 4).

The sweep runs as a real process with two worker processes. It is SIGKILLed once the store
holds a finished trial, while later trials are still in flight, and the same command is run
again. The store is read with plain SQL, not through the sweep store's own code: every trial
index is there exactly once, the trials stored before the kill are the same rows afterwards
(resumed, not evaluated again), and SQLite finds the file intact.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

TRIALS = 6


def _explore(tmp_path: Path) -> list[str]:
    return [
        str(Path(sys.executable).parent / "tensorforge"),
        "explore",
        "--workload", "C[i,j] += A[i,k] * B[k,j]",
        "--sizes", "i=64,j=64,k=64",
        "--sizes", "i=32,j=128,k=16",
        "--evaluator", "hasco",
        "--hardware-model", "first-order",
        "--method", "random",
        "--trials", str(TRIALS),
        "--batch-size", "2",
        "--workers", "2",
        "--seed", "5",
        "--store", str(tmp_path / "sweeps.sqlite"),
        "--out", str(tmp_path / "out"),
    ]  # fmt: skip


def _query(store: Path, sql: str) -> list[tuple]:
    with contextlib.closing(sqlite3.connect(store, timeout=60)) as connection:
        return connection.execute(sql).fetchall()


def _rows(store: Path) -> list[tuple]:
    if not store.exists():
        return []
    try:
        return _query(
            store,
            "SELECT sweep_id, trial_index, created_at, point, status, objectives"
            " FROM trials ORDER BY sweep_id, trial_index",
        )
    except sqlite3.OperationalError:  # the table is not created yet
        return []


def _kill_when_a_trial_is_stored(process: subprocess.Popen, store: Path) -> list[tuple]:
    while not _rows(store):
        if process.poll() is not None:
            raise AssertionError(f"explore ended (status {process.returncode}) before any trial")
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    # The workers it spawned are orphans now: stop them too (they share its session).
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return _rows(store)


def test_explore_resumes_after_sigkill_without_losing_or_repeating_trials(tmp_path):
    store = tmp_path / "sweeps.sqlite"
    env = {**os.environ, "TENSORFORGE_CACHE": str(tmp_path / "cache")}
    process = subprocess.Popen(
        _explore(tmp_path), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    before = _kill_when_a_trial_is_stored(process, store)
    assert process.returncode == -signal.SIGKILL
    assert 1 <= len(before) < TRIALS, "the sweep finished before it could be killed"

    again = subprocess.run(_explore(tmp_path), env=env, capture_output=True, text=True)
    assert again.returncode == 0, again.stderr[-3000:]
    after = _rows(store)
    assert len({row[0] for row in after}) == 1  # one sweep, resumed, not a second one
    assert [row[1] for row in after] == list(range(TRIALS))
    # Trials stored before the kill (in completion order: any indices) are the same rows now,
    # created before the kill: kept and replayed, not evaluated again.
    assert set(before) <= set(after)
    errors = _query(store, "SELECT error FROM trials")
    assert not [e for (e,) in errors if "worker" in e], errors  # no worker lost with the kill
    assert _query(store, "PRAGMA integrity_check") == [("ok",)]
    trials_csv = (tmp_path / "out" / "trials.csv").read_text().splitlines()
    assert len(trials_csv) == TRIALS + 1
