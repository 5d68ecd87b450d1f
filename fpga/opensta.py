"""Static timing and power of a mapped netlist with OpenSTA.

The script constrains every input and output against one clock (the design's clock port, or a
virtual clock for purely combinational logic, so input-to-output paths are still timed), then
asks for the worst setup path and the power at a given switching activity.

Activity is set on the inputs (``set_power_activity -input``) and propagated through the logic
by OpenSTA, rather than forced onto every net with ``-global``: in OpenSTA 2.0 a global activity
overrides the per-port ones, and propagation lets a quiet port really be quiet. Activity is in
transitions per clock period.

OpenSTA 2.0 prints ``report_power`` in watts without a unit column and keeps going after an
``Error:`` line, so both are handled here: values are converted to mW (or taken in the unit a
newer version names in its header) and any ``Error`` line fails the run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from tensorforge.errors import ToolError
from tensorforge.fpga.tools import OPENSTA, ToolRun, run_tool

VIRTUAL_CLOCK = "tensorforge_virtual_clk"
SCRIPT_FILE = "sta.tcl"

_ARRIVAL = re.compile(r"^\s*(-?[\d.]+(?:[eE][-+]?\d+)?)\s+data arrival time", re.MULTILINE)
_SLACK = re.compile(r"^\s*(-?[\d.]+(?:[eE][-+]?\d+)?)\s+slack \((MET|VIOLATED)\)", re.MULTILINE)
_NUMBER = r"(-?[\d.]+(?:[eE][-+]?\d+)?)"
_POWER_TOTAL = re.compile(rf"^Total\s+{_NUMBER}\s+{_NUMBER}\s+{_NUMBER}\s+{_NUMBER}", re.MULTILINE)
_POWER_UNIT = re.compile(r"\((W|Watts|mW|uW|nW)\)")
_TO_MILLIWATTS = {"W": 1e3, "Watts": 1e3, "mW": 1.0, "uW": 1e-3, "nW": 1e-6}


@dataclass(frozen=True)
class PowerReport:
    """Power by kind, in milliwatts."""

    internal: float
    switching: float
    leakage: float
    total: float


@dataclass(frozen=True)
class StaResult:
    critical_path_ns: float
    slack_ns: float
    power_mw: PowerReport
    run: ToolRun


def sta_script(
    *,
    liberty: Path,
    extra_liberties: list[Path] | None = None,
    netlist: str,
    top: str,
    clock_port: str | None,
    clock_ns: float,
    activity: float,
    port_activity: dict[str, float],
) -> str:
    """The Tcl script that times ``netlist`` and estimates its power.

    ``extra_liberties`` hold cells the standard-cell library lacks (the SRAM macros).
    """
    clock = clock_port or VIRTUAL_CLOCK
    lines = [
        f"read_liberty {{{liberty}}}",
        *(f"read_liberty {{{path}}}" for path in extra_liberties or []),
        f"read_verilog {{{netlist}}}",
        f"link_design {{{top}}}",
        "set_cmd_units -time ns",
    ]
    if clock_port:
        lines += [
            f"create_clock -name {clock} -period {clock_ns} [get_ports {{{clock_port}}}]",
            f"set data_inputs [delete_from_list [all_inputs] [get_ports {{{clock_port}}}]]",
        ]
    else:
        lines += [
            f"create_clock -name {clock} -period {clock_ns}",
            "set data_inputs [all_inputs]",
        ]
    lines += [
        f"set_input_delay 0 -clock {clock} $data_inputs",
        f"set_output_delay 0 -clock {clock} [all_outputs]",
        "report_checks -path_delay max -group_count 1 -digits 6",
        f"set_power_activity -input -activity {activity}",
    ]
    for port, port_value in sorted(port_activity.items()):
        lines.append(
            f"set_power_activity -input_ports [get_ports {{{port}}}] -activity {port_value}"
        )
    lines.append("report_power -digits 6")
    return "\n".join(lines) + "\n"


def run_sta(script: str, *, run_dir: Path, clock_ns: float, timeout_s: float) -> StaResult:
    """Run ``script`` in ``run_dir`` and read the worst path and the power from its log."""
    (run_dir / SCRIPT_FILE).write_text(script)
    run = run_tool(
        OPENSTA, ["-no_init", "-exit", SCRIPT_FILE], cwd=run_dir, log_name="sta.log",
        timeout_s=timeout_s,
    )
    log = run.log()
    errors = [line for line in log.splitlines() if line.startswith("Error")]
    if errors:
        raise ToolError("sta", f"reported {len(errors)} error(s), first: {errors[0]}", log)
    critical_path_ns, slack_ns = parse_timing(log, clock_ns)
    return StaResult(critical_path_ns, slack_ns, parse_power(log), run)


def parse_timing(log: str, clock_ns: float) -> tuple[float, float]:
    """The worst path's data arrival time and its slack, in ns.

    A design with no timed path at all (constant outputs) has a zero-length critical path and
    the whole period as slack.
    """
    arrival = _ARRIVAL.search(log)
    slack = _SLACK.search(log)
    if arrival is None or slack is None:
        if "No paths found" in log:
            return 0.0, clock_ns
        raise ToolError("sta", "the timing report has no data arrival time or slack", log)
    return float(arrival[1]), float(slack[1])


def parse_power(log: str) -> PowerReport:
    """The ``Total`` row of ``report_power``, converted to mW."""
    start = log.rfind("Internal")
    total = _POWER_TOTAL.search(log, max(start, 0))
    if start < 0 or total is None:
        raise ToolError("sta", "the power report has no Total row", log)
    header = log[start:total.start()]
    unit = _POWER_UNIT.search(header)
    scale = _TO_MILLIWATTS[unit[1]] if unit else _TO_MILLIWATTS["W"]
    # Six significant digits: what sta printed, without float noise from the unit scaling.
    internal, switching, leakage, overall = (
        float(f"{float(total[i]) * scale:.6g}") for i in range(1, 5)
    )
    return PowerReport(internal, switching, leakage, overall)


#: The rows of ``report_power`` by group of cells.
POWER_GROUPS = ("Sequential", "Combinational", "Macro")
_POWER_ROW = re.compile(
    rf"^(\w+)\s+{_NUMBER}\s+{_NUMBER}\s+{_NUMBER}\s+{_NUMBER}(?:\s+[\d.]+%)?\s*$", re.MULTILINE)
_INSTANCE_ROW = re.compile(rf"^\s*{_NUMBER}\s+{_NUMBER}\s+{_NUMBER}\s+{_NUMBER}\s+(\S+)\s*$",
                           re.MULTILINE)


def power_script(
    *,
    liberties: list[Path],
    netlist: str,
    top: str,
    clock_port: str,
    clock_ns: float,
    port_activity: dict[str, float],
    instances: list[str] = (),
) -> str:
    """A power-only script: every input at its own activity (0 where none is given), then the
    power by group and, for ``instances``, per instance (no timing report).

    Ports of equal activity share one ``set_power_activity`` command, so a netlist with ten
    thousand annotated ports reads in a few hundred commands.
    """
    lines = [
        *(f"read_liberty {{{path}}}" for path in liberties),
        f"read_verilog {{{netlist}}}",
        f"link_design {{{top}}}",
        "set_cmd_units -time ns",
        f"create_clock -name {clock_port} -period {clock_ns} [get_ports {{{clock_port}}}]",
        "set_power_activity -input -activity 0",
    ]
    by_rate: dict[float, list[str]] = {}
    for port, rate in sorted(port_activity.items()):
        by_rate.setdefault(rate, []).append(port)
    for rate, ports in sorted(by_rate.items()):
        for start in range(0, len(ports), 500):
            names = " ".join(ports[start:start + 500])
            lines.append(f"set_power_activity -input_ports [get_ports {{{names}}}] "
                         f"-activity {rate}")
    lines.append("report_power -digits 6")
    for start in range(0, len(instances), 2000):
        names = " ".join(instances[start:start + 2000])
        lines.append(f"report_power -instances [get_cells {{{names}}}] -digits 6")
    return "\n".join(lines) + "\n"


def _scale(log: str) -> float:
    start = log.find("Internal")
    unit = _POWER_UNIT.search(log[start:start + 400]) if start >= 0 else None
    return _TO_MILLIWATTS[unit[1]] if unit else _TO_MILLIWATTS["W"]


def parse_power_groups(log: str) -> dict[str, PowerReport]:
    """Each group row of the first ``report_power`` (and ``Total``), in mW."""
    scale = _scale(log)
    groups = {}
    for row in _POWER_ROW.finditer(log):
        if row[1] in (*POWER_GROUPS, "Total") and row[1] not in groups:
            groups[row[1]] = PowerReport(*(float(f"{float(row[i]) * scale:.6g}")
                                           for i in range(2, 6)))
    if "Total" not in groups:
        raise ToolError("sta", "the power report has no Total row", log)
    return groups


def parse_instance_power(log: str) -> dict[str, PowerReport]:
    """The rows of ``report_power -instances``: per instance, its power in mW."""
    scale = _scale(log)
    return {
        row[5]: PowerReport(*(float(row[i]) * scale for i in range(1, 5)))
        for row in _INSTANCE_ROW.finditer(log)
    }
