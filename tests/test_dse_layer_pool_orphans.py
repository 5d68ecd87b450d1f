"""A killed sweep leaves no worker behind: each worker exits when its parent is gone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

PARENT = """
import multiprocessing, os, time
from concurrent.futures import ProcessPoolExecutor
from tensorforge.dse.layer_pool import exit_with_parent

if __name__ == "__main__":
    pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"),
                               initializer=exit_with_parent, initargs=(os.getpid(), 0.1))
    print(pool.submit(os.getpid).result(), flush=True)
    pool.submit(time.sleep, 300)  # a long layer in flight
    time.sleep(300)
"""


def _alive(pid: int) -> bool:
    status = Path(f"/proc/{pid}/status")
    try:
        return "\nState:\tZ" not in status.read_text()
    except FileNotFoundError:
        return False


def test_workers_exit_when_the_sweep_is_killed(tmp_path):
    script = tmp_path / "parent.py"
    script.write_text(PARENT)
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        worker = int(parent.stdout.readline())
        assert _alive(worker)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        for _ in range(300):  # the worker polls every 0.1 s; allow a very loaded machine
            if not _alive(worker):
                break
            time.sleep(0.1)
        assert not _alive(worker), "the worker outlived its killed parent"
    finally:
        parent.kill()
        parent.wait()
        parent.stdout.close()
