"""The ASIC-style flow: Yosys maps onto the OSU 0.18um cells, OpenSTA times it and sizes power.

The co-design search needs area and power that respond to the design the way silicon would,
which LUT counts do not. So the Verilog is mapped onto a real standard-cell library (flip-flops
with ``dfflibmap``, logic with ``abc``), its cell area summed by Yosys from the liberty, and the
mapped netlist handed to OpenSTA for the worst setup path and the power at a switching activity.
ABC maps towards the clock period and buffers and sizes as it goes (`abc_command`), so a net
with hundreds of loads gets a buffer tree instead of one X1 driver, as in a real synthesis.
There is no placement or wiring: area is cell area, and timing and power ignore wire loads.

Memories (``amaranth.lib.memory``) become SRAM macros by default (``memories="macros"``), as in
a real flow: after Yosys' coarse synthesis every ``$mem_v2`` cell whose read ports are all
synchronous is turned into a black-box cell of the analytical memory compiler in `sram`, whose
Liberty file OpenSTA reads next to the standard cells, so paths into and out of a macro are
timed with its setup and access time. Macro area, leakage and access power (each port used in
``activity`` of the cycles) are added to the logic's. ``memories="flops"`` builds memories from
flip-flops and multiplexers instead (small register files, and the old behaviour); memories
with an asynchronous read port always do.

The netlist OpenSTA reads is kept to the structural Verilog its reader accepts: no
concatenations on the left of an ``assign`` (internal buses are split into bits and aliases
purged), no ``x`` constants, constants in binary.
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
from tensorforge.fpga.sram import (
    SramGeometry,
    SramMacro,
    blackbox_verilog,
    characterize,
    liberty,
)
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
MEMORY_MODES = ("macros", "flops")
COARSE_DESIGN = "coarse.il"
MEMORY_DUMP = "memories.txt"
MACRO_VERILOG = "macros.v"
MACRO_LIBERTY = "macros.lib"
ABC_CONSTRAINTS = "abc.constr"
# What ABC assumes drives each of its inputs (flip-flop outputs, ports) and loads each of its
# outputs while it buffers and sizes the logic: a small buffer, and a few gate inputs (pF).
ABC_DRIVING_CELL = "BUFX2"
ABC_OUTPUT_LOAD_PF = 0.05

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
    memories: str = "macros"

    def __post_init__(self) -> None:
        if self.memories not in MEMORY_MODES:
            raise ConfigError(
                f"memories must be one of {', '.join(MEMORY_MODES)}, not {self.memories!r}"
            )
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
    """Cell area, worst setup path and power of one design in OSU 0.18um cells and SRAM macros.

    ``area_um2`` = ``logic_area_um2`` (standard cells) + ``macro_area_um2``; ``power_mw``
    includes the macros' leakage and, in ``internal``, their access power (``macro_power_mw``);
    ``critical_path_ns`` is at least the slowest macro's access plus setup time. ``macros``
    lists each macro instance (cell, words, bits, ports and its characterization).
    """

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
    memories: str = "macros"
    logic_area_um2: float = 0.0
    macro_area_um2: float = 0.0
    macro_access_ns: float = 0.0
    macro_power_mw: float = 0.0
    macros: list[dict[str, Any]] = field(default_factory=list)

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
            "memories": self.memories,
            "logic_area_um2": self.logic_area_um2,
            "macro_area_um2": self.macro_area_um2,
            "macro_access_ns": self.macro_access_ns,
            "macro_power_mw": self.macro_power_mw,
            "macros": self.macros,
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
    memories: str = "macros",
    timeout_s: float = DEFAULT_TIMEOUT_S,
    store: ResultStore | None = None,
    use_cache: bool = True,
) -> AsicReport:
    """Map ``verilog`` onto OSU 0.18um cells and report area, timing and power.

    ``activity`` is the switching activity of every input (transitions per clock period),
    ``port_activity`` overrides it per input port (bus names cover all their bits).
    ``clock_port`` defaults to an input called ``clk`` or ``clock``; without one the design is
    timed against a virtual clock of ``clock_ns``. ``memories`` is ``"macros"`` (SRAM macros,
    see the module docstring) or ``"flops"``. ``timeout_s`` bounds each tool run. The result
    is stored and returned from the store on later calls.
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
        memories=memories,
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
    liberty_path: Path,
    run_dir: Path,
    timeout_s: float,
    key: str,
) -> AsicReport:
    top = options.top
    seconds: dict[str, float] = {}
    macros: list[tuple[str, SramMacro]] = []
    if options.memories == "macros":
        coarse = run_yosys(
            verilog,
            [f"synth -flatten -top {top} -run :fine",
             f"tee -q -o {MEMORY_DUMP} dump t:$mem_v2",
             f"write_rtlil {COARSE_DESIGN}"],
            run_dir=run_dir, timeout_s=timeout_s, log_name="yosys-coarse",
        )
        seconds["yosys_coarse"] = round(coarse.seconds, 3)
        memories = parse_memories((run_dir / MEMORY_DUMP).read_text())
        macros = [(name, characterize(geometry)) for name, geometry in macro_memories(memories)]
        front = [f"read_rtlil {COARSE_DESIGN}"]
        if macros:
            (run_dir / MACRO_VERILOG).write_text(blackbox_verilog(m.geometry for _, m in macros))
            (run_dir / MACRO_LIBERTY).write_text(liberty(m for _, m in macros))
            front.append(f"read_verilog -lib {MACRO_VERILOG}")
            unset = " ".join(f"-unset {p}" for p in MEM_V2_PARAMETERS)
            front += [f"setparam -type {macro.geometry.name} {unset} {top}/{name}"
                      for name, macro in macros]
        front.append(f"synth -top {top} -run fine:")
        verilog_in: str | None = None
    else:
        front = [f"synth -flatten -top {top}"]
        verilog_in = verilog
    (run_dir / ABC_CONSTRAINTS).write_text(abc_constraints())
    yosys = run_yosys(
        verilog_in,
        [
            *front,
            f'dfflibmap -liberty "{liberty_path}"',
            abc_command(liberty_path, options.clock_ns),
            *STA_NETLIST_CLEANUP,
            stat_command(liberty_path),
            f"write_verilog -noattr -noexpr -nohex -nodec {MAPPED_NETLIST}",
        ],
        run_dir=run_dir,
        timeout_s=timeout_s,
    )
    seconds["yosys"] = round(yosys.seconds, 3)
    stat = read_stat(run_dir, top)
    inputs = input_ports((run_dir / MAPPED_NETLIST).read_text())
    clock_port = options.clock_port or detect_clock(inputs)
    _check_ports(options, inputs, clock_port)
    if clock_port is None:
        logger.info("%s has no clock input; timing it against a virtual clock", top)
    script = sta_script(
        liberty=liberty_path,
        extra_liberties=[run_dir / MACRO_LIBERTY] if macros else [],
        netlist=MAPPED_NETLIST,
        top=top,
        clock_port=clock_port,
        clock_ns=options.clock_ns,
        activity=options.activity,
        port_activity=options.port_activity,
    )
    sta = run_sta(script, run_dir=run_dir, clock_ns=options.clock_ns, timeout_s=timeout_s)
    seconds["sta"] = round(sta.run.seconds, 3)

    access = max((m.access_ns + m.setup_ns for _, m in macros), default=0.0)
    accesses_per_cycle = min(1.0, options.activity)
    macro_power = sum(m.dynamic_mw(accesses_per_cycle, options.clock_ns) for _, m in macros)
    power = sta.power_mw
    if macro_power:
        power = PowerReport(
            internal=_round6(power.internal + macro_power),
            switching=power.switching,
            leakage=power.leakage,
            total=_round6(power.total + macro_power),
        )
    logic_area = stat.area or 0.0
    macro_area = sum(m.area_um2 for _, m in macros)
    return AsicReport(
        top=top,
        clock_ns=options.clock_ns,
        activity=options.activity,
        area_um2=round(logic_area + macro_area, 3),
        cells=stat.cells,
        critical_path_ns=max(sta.critical_path_ns, round(access, 6)),
        slack_ns=min(sta.slack_ns, round(options.clock_ns - access, 6)),
        power_mw=power,
        clock_port=clock_port,
        cells_by_type=stat.cells_by_type,
        port_activity=options.port_activity,
        memories=options.memories,
        logic_area_um2=logic_area,
        macro_area_um2=round(macro_area, 3),
        macro_access_ns=max((m.access_ns for _, m in macros), default=0.0),
        macro_power_mw=_round6(macro_power),
        macros=[_macro_entry(name, macro, accesses_per_cycle, options.clock_ns)
                for name, macro in macros],
        tool_seconds=seconds,
        tool_versions={"yosys": tool_version(YOSYS), "sta": tool_version(OPENSTA)},
        logs={"yosys": log_tail(yosys.log()), "sta": log_tail(sta.run.log())},
        key=key,
    )


def abc_constraints() -> str:
    """ABC's ``-constr`` file: the cell driving the mapped logic's inputs and its output load."""
    return f"set_driving_cell {ABC_DRIVING_CELL}\nset_load {ABC_OUTPUT_LOAD_PF}\n"


def abc_command(liberty_path: Path, clock_ns: float) -> str:
    """Map logic with ABC towards the clock period, buffering and sizing as it goes.

    With ``-constr`` and a delay target (``-D``, in ps) ABC's script ends in ``buffer; upsize;
    dnsize``: nets that fan out to hundreds of pins (a synchronous reset, an array-wide enable,
    a wide multiplexer's select) get buffer trees and stronger drivers, as synthesis buffering
    would give them. Without it one X1 cell drives them all, and OpenSTA extrapolates its delay
    tables far past their range (tens of pF on a cell characterized to 0.5 pF), so paths came
    out ten times longer than the logic's depth and grew with the design's size.
    """
    return (f'abc -liberty "{liberty_path}" -constr {ABC_CONSTRAINTS} '
            f"-D {round(clock_ns * 1000)}")


# Steps between technology mapping and writing the netlist, for OpenSTA's Verilog reader: x
# bits become 0, internal buses become single bits and aliases are purged, so that no
# concatenation is left on the left of an assign (which the reader rejects).
STA_NETLIST_CLEANUP = (
    "setundef -zero",
    "opt_clean -purge",
    "splitnets",
    "opt_clean -purge",
)

MEM_V2_PARAMETERS = (
    "MEMID", "SIZE", "OFFSET", "ABITS", "WIDTH", "INIT", "RD_PORTS", "RD_CLK_ENABLE",
    "RD_CLK_POLARITY", "RD_TRANSPARENCY_MASK", "RD_COLLISION_X_MASK", "RD_WIDE_CONTINUATION",
    "RD_CE_OVER_SRST", "RD_ARST_VALUE", "RD_SRST_VALUE", "RD_INIT_VALUE", "WR_PORTS",
    "WR_CLK_ENABLE", "WR_CLK_POLARITY", "WR_PRIORITY_MASK", "WR_WIDE_CONTINUATION",
)

_CELL = re.compile(r"^\s*cell \$mem_v2 (\S+)\s*$")
_PARAMETER = re.compile(r"^\s*parameter \\(\w+) (\S+)")
_GLOB = re.compile(r"[*?\[\]%]")


@dataclass(frozen=True)
class MemoryCell:
    """One ``$mem_v2`` cell as Yosys' ``dump`` printed it (its name without the backslash)."""

    name: str
    parameters: dict[str, str]

    def integer(self, name: str) -> int:
        return int(self.parameters[name])

    @property
    def synchronous_read(self) -> bool:
        """Every read port is clocked (``RD_CLK_ENABLE`` is all ones): an SRAM can do it."""
        value = self.parameters.get("RD_CLK_ENABLE", "")
        bits = value.split("'", 1)[1] if "'" in value else ""
        return bool(bits) and set(bits) == {"1"}


def parse_memories(dump: str) -> list[MemoryCell]:
    """The ``$mem_v2`` cells of a ``dump t:$mem_v2`` output."""
    cells: list[MemoryCell] = []
    for line in dump.splitlines():
        cell = _CELL.match(line)
        if cell:
            name = cell[1][1:] if cell[1].startswith("\\") else cell[1]
            cells.append(MemoryCell(name, {}))
            continue
        parameter = _PARAMETER.match(line)
        if parameter and cells and parameter[1] != "INIT":
            cells[-1].parameters[parameter[1]] = parameter[2]
    return cells


def macro_memories(memories: list[MemoryCell]) -> list[tuple[str, SramGeometry]]:
    """The memories that become macros, with their geometry; the others stay flip-flops."""
    chosen = []
    for memory in memories:
        reads, writes = memory.integer("RD_PORTS"), memory.integer("WR_PORTS")
        if not memory.synchronous_read or not reads or not writes or _GLOB.search(memory.name):
            logger.info("memory %s stays in flip-flops (asynchronous read, no write port "
                        "or an unselectable name)", memory.name)
            continue
        geometry = SramGeometry(
            words=memory.integer("SIZE"), bits=memory.integer("WIDTH"), read_ports=reads,
            write_ports=writes, abits=memory.integer("ABITS"),
        )
        chosen.append((memory.name, geometry))
    return chosen


def _macro_entry(name: str, macro: SramMacro, accesses_per_cycle: float,
                 clock_ns: float) -> dict[str, Any]:
    g = macro.geometry
    return {
        "instance": name, "cell": g.name, "words": g.words, "bits": g.bits,
        "read_ports": g.read_ports, "write_ports": g.write_ports,
        "area_um2": macro.area_um2, "access_ns": macro.access_ns, "setup_ns": macro.setup_ns,
        "read_pj": macro.read_pj, "write_pj": macro.write_pj,
        "leakage_mw": macro.leakage_nw * 1e-6,
        "dynamic_mw": _round6(macro.dynamic_mw(accesses_per_cycle, clock_ns)),
    }


def _round6(value: float) -> float:
    return float(f"{value:.6g}")


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
