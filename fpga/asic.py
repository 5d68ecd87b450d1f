"""The ASIC-style flow: Yosys maps onto the OSU 0.18um cells, OpenSTA times it and sizes power.

The co-design search needs area and power that respond to the design the way silicon would,
which LUT counts do not. So the Verilog is mapped onto a real standard-cell library (flip-flops
with ``dfflibmap``, logic with ``abc``), its cell area summed by Yosys from the liberty, and the
mapped netlist handed to OpenSTA for the worst setup path and the power at a switching activity.
There is no placement or wiring: area is cell area, and timing and power ignore wire loads.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tensorforge.errors import ConfigError
from tensorforge.fpga.cache import SynthesisReport, cached_synthesis, run_directory
from tensorforge.fpga.opensta import PowerReport, run_sta, sta_script
from tensorforge.fpga.tools import (
    OPENSTA,
    YOSYS,
    find_osu018_liberty,
    log_tail,
    tool_version,
)
from tensorforge.fpga.yosys import check_top_name, read_stat, run_yosys, stat_command
from tensorforge.hashing import stable_hash
from tensorforge.store import ResultStore

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 1800.0
MAPPED_NETLIST = "mapped.v"
CLOCK_NAMES = ("clk", "clock")

_INPUT = re.compile(r"^\s*input\s+(?:\[[^\]]*\]\s*)?([A-Za-z_][A-Za-z0-9_$]*)\s*;", re.MULTILINE)


@dataclass(frozen=True)
class AsicOptions:
    """Everything besides the Verilog that an ASIC result depends on (part of the cache key)."""

    top: str
    clock_ns: float = 10.0
    activity: float = 0.1
    port_activity: dict[str, float] = field(default_factory=dict)
    clock_port: str | None = None
    liberty_hash: str = ""

    def __post_init__(self) -> None:
        if not self.clock_ns > 0:
            raise ConfigError(f"clock_ns must be a positive period in ns, not {self.clock_ns}")
        for name, value in {"activity": self.activity, **self.port_activity}.items():
            if not 0.0 <= value <= 2.0:
                raise ConfigError(
                    f"switching activity of {name} must be between 0 and 2 transitions per "
                    f"clock period, not {value}"
                )


@dataclass(frozen=True)
class AsicReport(SynthesisReport):
    """Cell area, worst setup path and power of one design in OSU 0.18um cells."""

    top: str
    clock_ns: float
    activity: float
    area_um2: float
    cells: int
    critical_path_ns: float
    slack_ns: float
    power_mw: PowerReport
    clock_port: str | None = None
    cells_by_type: dict[str, int] = field(default_factory=dict)
    port_activity: dict[str, float] = field(default_factory=dict)

    @classmethod
    def _decode(cls, values: dict[str, Any]) -> dict[str, Any]:
        return {**values, "power_mw": PowerReport(**values["power_mw"])}

    def summary(self) -> dict[str, Any]:
        """The flat, stable JSON view the CLI prints (the first six keys are a contract)."""
        return {
            "flow": "asic",
            "area_um2": self.area_um2,
            "cells": self.cells,
            "critical_path_ns": self.critical_path_ns,
            "slack_ns": self.slack_ns,
            "power_mw": dataclasses.asdict(self.power_mw),
            "clock_ns": self.clock_ns,
            "clock_port": self.clock_port,
            "activity": self.activity,
            "top": self.top,
            "cells_by_type": self.cells_by_type,
            "cached": self.cached,
            "key": self.key,
        }


def synthesize_asic(
    verilog: str,
    top: str,
    *,
    clock_ns: float = 10.0,
    activity: float = 0.1,
    port_activity: dict[str, float] | None = None,
    clock_port: str | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    store: ResultStore | None = None,
    use_cache: bool = True,
) -> AsicReport:
    """Map ``verilog`` onto OSU 0.18um cells and report area, timing and power.

    ``activity`` is the switching activity of every input (transitions per clock period),
    ``port_activity`` overrides it per input port (bus names cover all their bits).
    ``clock_port`` defaults to an input called ``clk`` or ``clock``; without one the design is
    timed against a virtual clock of ``clock_ns``. ``timeout_s`` bounds each tool run. The
    result is stored and returned from the store on later calls.
    """
    check_top_name(top)
    liberty = find_osu018_liberty()
    options = AsicOptions(
        top=top,
        clock_ns=clock_ns,
        activity=activity,
        port_activity=dict(port_activity or {}),
        clock_port=clock_port,
        liberty_hash=stable_hash(liberty.read_bytes()),
    )

    def run(key: str) -> AsicReport:
        with run_directory("asic", key) as run_dir:
            return _run_flow(verilog, options, liberty, run_dir, timeout_s, key)

    return cached_synthesis(
        "asic", verilog, options, run, AsicReport, store=store, use_cache=use_cache
    )


def _run_flow(
    verilog: str,
    options: AsicOptions,
    liberty: Path,
    run_dir: Path,
    timeout_s: float,
    key: str,
) -> AsicReport:
    yosys = run_yosys(
        verilog,
        [
            f"synth -flatten -top {options.top}",
            f'dfflibmap -liberty "{liberty}"',
            f'abc -liberty "{liberty}"',
            "opt_clean",
            stat_command(liberty),
            f"write_verilog -noattr {MAPPED_NETLIST}",
        ],
        run_dir=run_dir,
        timeout_s=timeout_s,
    )
    stat = read_stat(run_dir, options.top)
    inputs = input_ports((run_dir / MAPPED_NETLIST).read_text())
    clock_port = options.clock_port or detect_clock(inputs)
    _check_ports(options, inputs, clock_port)
    if clock_port is None:
        logger.info("%s has no clock input; timing it against a virtual clock", options.top)
    script = sta_script(
        liberty=liberty,
        netlist=MAPPED_NETLIST,
        top=options.top,
        clock_port=clock_port,
        clock_ns=options.clock_ns,
        activity=options.activity,
        port_activity=options.port_activity,
    )
    sta = run_sta(script, run_dir=run_dir, clock_ns=options.clock_ns, timeout_s=timeout_s)
    return AsicReport(
        top=options.top,
        clock_ns=options.clock_ns,
        activity=options.activity,
        area_um2=stat.area or 0.0,
        cells=stat.cells,
        critical_path_ns=sta.critical_path_ns,
        slack_ns=sta.slack_ns,
        power_mw=sta.power_mw,
        clock_port=clock_port,
        cells_by_type=stat.cells_by_type,
        port_activity=options.port_activity,
        tool_seconds={"yosys": round(yosys.seconds, 3), "sta": round(sta.run.seconds, 3)},
        tool_versions={"yosys": tool_version(YOSYS), "sta": tool_version(OPENSTA)},
        logs={"yosys": log_tail(yosys.log()), "sta": log_tail(sta.run.log())},
        key=key,
    )


def input_ports(netlist: str) -> list[str]:
    """The input ports of a Yosys-written netlist, in declaration order."""
    return _INPUT.findall(netlist)


def detect_clock(inputs: list[str]) -> str | None:
    """The input that is the clock by name (``clk``, ``clock``), or None for a virtual clock."""
    for name in CLOCK_NAMES:
        if name in inputs:
            return name
    return None


def _check_ports(options: AsicOptions, inputs: list[str], clock_port: str | None) -> None:
    wanted = set(options.port_activity) | ({clock_port} if clock_port else set())
    missing = sorted(wanted - set(inputs))
    if missing:
        raise ConfigError(
            f"{options.top} has no input port(s) {', '.join(missing)}; its inputs are "
            f"{', '.join(inputs) or 'none'}"
        )
