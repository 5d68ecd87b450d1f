"""Stage-by-stage progress of long tool runs, on stderr.

A place-and-route of a whole accelerator runs for tens of minutes; a user who sees nothing for
that long assumes a hang (issue 17, item 5). `StageProgress` prints a line when a stage starts
and when it ends, with elapsed time, and while a tool runs it follows the tool's log and
prints each new phase it recognizes (nextpnr: pack, place, route), and once a minute within
a phase the log's latest line. On a terminal a rich spinner shows the running time as well.
Everything goes to stderr, so ``--json`` output on stdout stays clean.

Flows report without knowing who listens: a command wraps its work in `reporting`, and every
tool run inside it (`tensorforge.fpga.tools.run_tool`: Yosys, nextpnr, OpenSTA) becomes a
stage of that reporter with the tool's phases. Library callers (tests, sweeps) set none and
stay silent.
"""

from __future__ import annotations

import contextlib
import contextvars
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TextIO, TypeVar

Result = TypeVar("Result")

#: nextpnr-ecp5 log lines that open each phase, in order.
NEXTPNR_PHASES = (
    ("pack", re.compile(r"Packing|Info: Logic utilisation before packing")),
    ("place", re.compile(r"[Pp]lacer\b|Placing")),
    ("route", re.compile(r"Routing|router1|router2")),
    ("timing", re.compile(r"Max frequency for clock")),
)
#: Yosys log lines that open the phases of both flows' scripts, in order (a design is read
#: by a top-level command; passes such as techmap read their own libraries deeper down).
YOSYS_PHASES = (("read", re.compile(r"^\d+\. Executing (Verilog-2005|RTLIL) frontend", re.M)),
                ("flatten", re.compile(r"Executing FLATTEN")),
                ("synth", re.compile(r"Executing SYNTH(_ECP5)? pass")),
                ("memory", re.compile(r"Executing MEMORY pass")),
                ("techmap", re.compile(r"Executing TECHMAP pass")),
                ("dfflibmap", re.compile(r"Executing DFFLIBMAP pass")),
                ("abc", re.compile(r"Executing ABC9? pass")),
                ("stat", re.compile(r"Printing statistics")),
                ("write", re.compile(r"Executing Verilog backend|Executing JSON backend")))
#: OpenSTA prints little while it works; its reports are the phases a user waits for.
STA_PHASES = (("timing", re.compile(r"report_checks|Startpoint:")),
              ("power", re.compile(r"Group\s+Internal")))
#: Phases by tool name (`tensorforge.fpga.tools.ToolSpec.name`).
TOOL_PHASES = {"yosys": YOSYS_PHASES, "nextpnr-ecp5": NEXTPNR_PHASES, "sta": STA_PHASES}
POLL_S = 1.0
HEARTBEAT_S = 60.0  # within a phase, a line at least this often with the log's latest


def log_phase(text: str, phases=NEXTPNR_PHASES) -> str | None:
    """The phase whose opening line occurs last in ``text`` (None before the first): nextpnr
    reports timing after placement and again after routing, so order in the log decides."""
    latest, position = None, -1
    for name, pattern in phases:
        for match in pattern.finditer(text):
            if match.start() > position:
                latest, position = name, match.start()
    return latest


_REPORTER: contextvars.ContextVar[StageProgress | None] = contextvars.ContextVar(
    "tensorforge_progress", default=None)


@contextlib.contextmanager
def reporting(progress: StageProgress) -> Iterator[StageProgress]:
    """Within this block, every tool run (`tensorforge.fpga.tools.run_tool`) reports as a
    stage of ``progress``."""
    token = _REPORTER.set(progress)
    try:
        yield progress
    finally:
        _REPORTER.reset(token)


def current_reporter() -> StageProgress | None:
    """The `reporting` block's reporter, or None (tool runs stay silent)."""
    return _REPORTER.get()


class StageProgress:
    """Reports the stages of one flow (see the module docstring) on ``stream``."""

    def __init__(self, title: str, stream: TextIO | None = None) -> None:
        self.title = title
        self.stream = stream or sys.stderr
        self.started = time.monotonic()
        self.seconds: dict[str, float] = {}
        self._spinner_lock = threading.Lock()
        self._spinning = False

    def _say(self, text: str) -> None:
        elapsed = time.monotonic() - self.started
        print(f"[{self.title} {elapsed:7.1f} s] {text}", file=self.stream, flush=True)

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Announce ``name``, time it, and report its end (or its failure)."""
        self._say(f"{name} ...")
        begin = time.monotonic()
        try:
            yield
        except BaseException:
            self._say(f"{name} failed after {time.monotonic() - begin:.1f} s")
            raise
        self.seconds[name] = round(time.monotonic() - begin, 3)
        self._say(f"{name} done in {self.seconds[name]:.1f} s")

    def run_tool(self, name: str, work: Callable[[], Result], log_path: Path,
                 phases=NEXTPNR_PHASES) -> Result:
        """Run ``work`` (a tool run writing ``log_path``) as stage ``name``, reporting each
        phase of ``phases`` as it appears in the log."""
        outcome: dict[str, object] = {}

        def target() -> None:
            try:
                outcome["result"] = work()
            except BaseException as error:  # handed to the caller's thread
                outcome["error"] = error

        with self.stage(name), self._spinner(name) as update:
            worker = threading.Thread(target=target, name=f"{name}-tool", daemon=True)
            begin = time.monotonic()
            worker.start()
            seen, running, said = None, True, begin
            while running:  # once more after the tool ends: its last phase is reported too
                worker.join(POLL_S)
                running = worker.is_alive()
                text = _read(log_path)
                phase = log_phase(text, phases)
                now = time.monotonic()
                if phase is not None and phase != seen:
                    seen, said = phase, now
                    self._say(f"{name}: {phase}")
                elif running and now - said >= HEARTBEAT_S:
                    # a phase can last many minutes (nextpnr's placer on a whole accelerator)
                    said = now
                    self._say(f"{name}: {seen or 'starting'}, {now - begin:.0f} s; "
                              f"{last_line(text)}")
                update(f"{name}: {seen or 'starting'} ({now - begin:.0f} s)")
            if "error" in outcome:
                raise outcome["error"]  # type: ignore[misc]
        return outcome["result"]  # type: ignore[return-value]

    @contextlib.contextmanager
    def _spinner(self, name: str) -> Iterator[Callable[[str], None]]:
        """A rich spinner on a terminal, for one stage at a time: stages that run at once (a
        seed sweep's nextpnr runs) report by lines only beside it."""
        with self._spinner_lock:
            shown = self.stream.isatty() and not self._spinning
            self._spinning |= shown
        if not shown:
            yield lambda text: None
            return
        from rich.console import Console

        try:
            with Console(file=self.stream).status(name) as status:
                yield status.update
        finally:
            self._spinning = False


def last_line(text: str, width: int = 80) -> str:
    """The log's last non-empty line, shortened to ``width`` characters."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:width] if lines else ""


def _read(log_path: Path) -> str:
    try:
        return log_path.read_text(errors="replace")
    except OSError:
        return ""
