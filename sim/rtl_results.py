"""The outcome of one cocotb run, read back from the xUnit file cocotb writes.

cocotb reports each test's status, failure message and random seed only in its results XML
(the simulator's exit status says nothing about failed tests), so the harness parses that file
and turns a failed run into one :class:`SimulationError` that names every failing test, its
message and the seed to rerun it with.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from xml.etree import ElementTree

from tensorforge.errors import SimulationError

#: How many lines of the simulator log an error message quotes.
_LOG_TAIL_LINES = 30


@dataclass(frozen=True)
class CocotbTestResult:
    """One cocotb test as the results file records it.

    ``status`` is one of ``passed``, ``failed``, ``error``, ``skipped`` (cocotb's vocabulary).
    """

    name: str
    module: str
    status: str
    message: str
    seed: int | None
    sim_time_ns: float
    wall_seconds: float

    @property
    def ok(self) -> bool:
        return self.status in ("passed", "skipped")


@dataclass(frozen=True)
class RtlResults:
    """Every cocotb test of one simulator run, plus where its files are."""

    top: str
    tests: tuple[CocotbTestResult, ...]
    seed: int
    results_xml: Path
    log_path: Path
    waveform: Path | None

    @property
    def ran(self) -> tuple[CocotbTestResult, ...]:
        """The tests that actually executed (not skipped)."""
        return tuple(test for test in self.tests if test.status != "skipped")

    @property
    def passed(self) -> tuple[CocotbTestResult, ...]:
        return tuple(test for test in self.tests if test.status == "passed")

    @property
    def failed(self) -> tuple[CocotbTestResult, ...]:
        return tuple(test for test in self.tests if not test.ok)

    def raise_for_failures(self) -> None:
        """Raise :class:`SimulationError` if a test failed or no test ran at all.

        A run in which nothing executed counts as a failure: a misspelt test name or a bench
        that did not import would otherwise pass silently.
        """
        if self.failed:
            lines = [
                f"RTL simulation of {self.top}: {len(self.failed)} of {len(self.ran)} cocotb "
                f"tests failed (COCOTB_RANDOM_SEED={self.seed}; rerun with seed={self.seed})"
            ]
            lines += [f"  {test.module}.{test.name}: {test.message}" for test in self.failed]
        elif not self.ran:
            lines = [
                f"RTL simulation of {self.top}: no cocotb test ran (seed={self.seed}); "
                "check the test module and testcase names"
            ]
        else:
            return
        lines.append(f"log: {self.log_path}")
        if self.waveform is not None:
            lines.append(f"waveform: {self.waveform}")
        raise SimulationError("\n".join(lines))


def _float(text: str | None) -> float:
    try:
        return float(text) if text is not None else 0.0
    except ValueError:
        return 0.0


def _parse_testcase(element: ElementTree.Element) -> CocotbTestResult:
    properties = {
        prop.get("name", ""): prop.get("value", "")
        for prop in element.iterfind("properties/property")
    }
    status, message = "passed", ""
    for kind, status_name in (("failure", "failed"), ("error", "error"), ("skipped", "skipped")):
        child = element.find(kind)
        if child is not None:
            status = status_name
            message = (child.get("message") or child.text or "").strip()
            break
    seed_text = properties.get("random_seed", "")
    return CocotbTestResult(
        name=element.get("name", "?"),
        module=element.get("classname", "?"),
        status=status,
        message=message,
        seed=int(seed_text) if seed_text.lstrip("-").isdigit() else None,
        sim_time_ns=_float(properties.get("sim_time_duration")),
        wall_seconds=_float(element.get("time")),
    )


def parse_results(results_xml: Path) -> tuple[CocotbTestResult, ...]:
    """Every ``testcase`` in a cocotb results file, in the order they ran."""
    root = ElementTree.parse(results_xml).getroot()
    return tuple(_parse_testcase(element) for element in root.iter("testcase"))


def log_tail(log_path: Path, lines: int = _LOG_TAIL_LINES) -> str:
    """The last lines of a log, or a note that there is none (for error messages)."""
    try:
        text = log_path.read_text(errors="replace")
    except OSError:
        return f"(no log at {log_path})"
    return "\n".join(text.strip().splitlines()[-lines:])


def crashed_run_error(top: str, seed: int, log_path: Path, cause: str) -> SimulationError:
    """The error for a simulator that ended without writing its results file."""
    return SimulationError(
        f"RTL simulation of {top} ended abnormally ({cause}; seed={seed}); no results file.\n"
        f"--- last lines of {log_path} ---\n{log_tail(log_path)}"
    )
