"""The ASIC-style flow: Yosys maps onto a technology's cells, OpenSTA times it and sizes power.

The co-design search needs area and power that respond to the design the way silicon would,
which LUT counts do not. So the Verilog is mapped onto a real standard-cell library (flip-flops
with ``dfflibmap``, logic with ``abc``), its cell area summed by Yosys from the liberty, and the
mapped netlist handed to OpenSTA for the worst setup path and the power at a switching activity.
ABC maps towards the clock period and buffers and sizes as it goes (`abc_command`), so a net
with hundreds of loads gets a buffer tree instead of one X1 driver, as in a real synthesis.
There is no placement or wiring: area is cell area, and timing and power ignore wire loads.

The technology (`tensorforge.fpga.technology`) is IHP SG13G2 by default (``tech=
"ihp-sg13g2"``: the foundry's 130 nm cells and SRAM macros) or OSU 0.18 um (``"osu018"``:
qflow's cells and an analytical memory compiler); it names the cells and maps the memories.

Memories (``amaranth.lib.memory``) become SRAM macros by default (``memories="macros"``), as in
a real flow: after Yosys' coarse synthesis the ``$mem_v2`` cells are dumped and the technology
turns those it can into macros (IHP: arrays of foundry macros picked by `macro_picker`, behind
a wrapper of decode and multiplexing logic; OSU: one analytical black box each), whose Liberty
files OpenSTA reads next to the standard cells, so paths into and out of a macro are timed
with its own timing. The others stay flip-flops, and the report says which and why
(``memory_map``). ``memories="flops"`` builds every memory from flip-flops and multiplexers.

The netlist OpenSTA reads is kept to the structural Verilog its reader accepts: no
concatenations on the left of an ``assign`` (internal buses are split into bits and aliases
purged), no ``x`` constants, constants in binary, and no ``signed`` declarations.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tensorforge.errors import ConfigError, ToolError
from tensorforge.fpga.cache import SynthesisReport, cached_synthesis, run_directory
from tensorforge.fpga.memories import MemoryMapping, parse_memories
from tensorforge.fpga.opensta import PowerReport, run_sta, sta_script
from tensorforge.fpga.technology import DEFAULT_TECH, Technology, technology
from tensorforge.fpga.tools import OPENSTA, YOSYS, log_tail, tool_version
from tensorforge.fpga.yosys import check_top_name, read_stat, run_yosys, stat_command
from tensorforge.store import ResultStore

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 1800.0
MAPPED_NETLIST = "mapped.v"
CLOCK_NAMES = ("clk", "clock")
MEMORY_MODES = ("macros", "flops")
COARSE_DESIGN = "coarse.il"
MEMORY_DUMP = "memories.txt"
ABC_CONSTRAINTS = "abc.constr"
CELL_LIBERTY = "cells.lib"

_INPUT = re.compile(r"^\s*input\s+(?:\[[^\]]*\]\s*)?([A-Za-z_][A-Za-z0-9_$]*)\s*;", re.MULTILINE)
_SIGNED = re.compile(r"^(\s*(?:input|output|inout|wire|reg)\s+)signed\s+", re.MULTILINE)


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
    tech: str = DEFAULT_TECH

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
    """Cell area, worst setup path and power of one design in a technology's cells and macros.

    ``tech`` names the technology. ``area_um2`` = ``logic_area_um2`` (standard cells) +
    ``macro_area_um2``; ``power_mw`` includes the macros' leakage and, in ``internal``, their
    access power (``macro_power_mw``); ``critical_path_ns`` includes the paths through the
    macros. ``macros`` lists each memory built from macros (cell, how many, their
    characterization), ``memory_map`` every memory with what it became and why.
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
    tech: str = DEFAULT_TECH
    macro_leakage_mw: float = 0.0
    memory_map: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def _decode(cls, values: dict[str, Any]) -> dict[str, Any]:
        # Reports stored before there was a choice of technology were all OSU 0.18 um.
        return {"tech": "osu018", **values, "power_mw": PowerReport(**values["power_mw"])}

    @property
    def min_period_ns(self) -> float | None:
        """The shortest clock period the design meets: the target less the worst slack. It
        counts the endpoint's setup time, which ``critical_path_ns`` (the data's arrival)
        leaves out, and which is ns at a macro's address pins; None without a clock port."""
        if self.clock_port is None:
            return None
        return round(self.clock_ns - self.slack_ns, 6)

    def summary(self) -> dict[str, Any]:
        """The flat, stable JSON view the CLI prints (the first six keys are a contract)."""
        period = self.min_period_ns
        return {
            "flow": "asic",
            "area_um2": self.area_um2,
            "cells": self.cells,
            "critical_path_ns": self.critical_path_ns,
            "slack_ns": self.slack_ns,
            "power_mw": dataclasses.asdict(self.power_mw),
            "min_period_ns": period,
            "fmax_mhz": round(1e3 / period, 3) if period else None,
            "tech": self.tech,
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
            "macro_leakage_mw": self.macro_leakage_mw,
            "macros": self.macros,
            "memory_map": self.memory_map,
            "cached": self.cached,
            "key": self.key,
        }


def synthesize_asic(
    verilog: str,
    top: str,
    *,
    tech: str = DEFAULT_TECH,
    clock_ns: float = 10.0,
    activity: float = 0.1,
    port_activity: dict[str, float] | None = None,
    clock_port: str | None = None,
    memories: str = "macros",
    timeout_s: float = DEFAULT_TIMEOUT_S,
    store: ResultStore | None = None,
    use_cache: bool = True,
    keep_run: Path | None = None,
) -> AsicReport:
    """Map ``verilog`` onto the cells of ``tech`` and report area, timing and power.

    ``tech`` is ``"ihp-sg13g2"`` (the default) or ``"osu018"``. ``activity`` is the switching
    activity of every input (transitions per clock period), ``port_activity`` overrides it per
    input port (bus names cover all their bits). ``clock_port`` defaults to an input called
    ``clk`` or ``clock``; without one the design is timed against a virtual clock of
    ``clock_ns``. ``memories`` is ``"macros"`` (SRAM macros, see the module docstring) or
    ``"flops"``. ``timeout_s`` bounds each tool run. The result is stored and returned from the
    store on later calls. ``keep_run``: run in that new or empty directory and keep it, logs
    and all (the store is not read then).
    """
    check_top_name(top)
    target = technology(tech)
    liberty = target.liberty()
    options = AsicOptions(
        top=top,
        clock_ns=clock_ns,
        activity=activity,
        port_activity=dict(port_activity or {}),
        clock_port=clock_port,
        liberty_hash=target.digest(),
        memories=memories,
        tech=target.name,
    )

    def run(key: str) -> AsicReport:
        with run_directory("asic", key, keep_run) as run_dir:
            return _run_flow(verilog, options, target, liberty, run_dir, timeout_s, key)

    return cached_synthesis(
        "asic", verilog, options, run, AsicReport, store=store,
        use_cache=use_cache and keep_run is None,
    )


@dataclass(frozen=True)
class MappedRun:
    """The Yosys half of the flow: the mapped netlist (``MAPPED_NETLIST`` in the run
    directory, ready for OpenSTA), its statistics, what became of the memories, and the clock."""

    stat: Any
    mapping: MemoryMapping
    clock_port: str | None
    seconds: dict[str, float]
    yosys: Any


def map_netlist(
    verilog: str,
    options: AsicOptions,
    target: Technology,
    liberty_path: Path,
    run_dir: Path,
    timeout_s: float,
) -> MappedRun:
    """Map ``verilog`` onto ``target``'s cells and macros in ``run_dir`` (see the module
    docstring); the activity-annotated power flow (`tensorforge.fpga.netlist_power`) reuses it."""
    top = options.top
    seconds: dict[str, float] = {}
    accesses_per_cycle = min(1.0, options.activity)
    mapping = MemoryMapping()
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
        mapping = target.map_memories(memories, run_dir, top, accesses_per_cycle,
                                      options.clock_ns)
        front = [f"read_rtlil {COARSE_DESIGN}", *mapping.yosys_commands,
                 f"synth -top {top} -run fine:"]
        verilog_in: str | None = None
    else:
        front = [f"synth -flatten -top {top}"]
        verilog_in = verilog
    (run_dir / ABC_CONSTRAINTS).write_text(abc_constraints(target))
    # YoWASP's Yosys sees the host's /tmp only as its own scratch directory, so a liberty in
    # a cache under /tmp (tests, TENSORFORGE_CACHE) is read from a copy beside the design.
    shutil.copyfile(liberty_path, run_dir / CELL_LIBERTY)
    yosys = run_yosys(
        verilog_in,
        [
            *front,
            f"dfflibmap -liberty {CELL_LIBERTY}{_dont_use(target)}",
            abc_command(Path(CELL_LIBERTY), options.clock_ns, target),
            *STA_NETLIST_CLEANUP,
            stat_command(Path(CELL_LIBERTY)),
            f"write_verilog -noattr -noexpr -nohex -nodec {MAPPED_NETLIST}",
        ],
        run_dir=run_dir,
        timeout_s=timeout_s,
    )
    seconds["yosys"] = round(yosys.seconds, 3)
    stat = read_stat(run_dir, top)
    netlist_path = run_dir / MAPPED_NETLIST
    netlist = strip_signed(netlist_path.read_text())
    netlist_path.write_text(netlist)
    inputs = input_ports(netlist)
    clock_port = options.clock_port or detect_clock(inputs)
    _check_ports(options, inputs, clock_port)
    if clock_port is None:
        logger.info("%s has no clock input; timing it against a virtual clock", top)
    return MappedRun(stat, mapping, clock_port, seconds, yosys)


def _keep_for_power(verilog: str, options: AsicOptions, mapped: MappedRun,
                    run_dir: Path) -> None:
    """Leave the mapped netlist where the activity-annotated power flow looks for it
    (`netlist_power.keep_mapped_run`): mapping a large design takes hours, and
    ``simulate --power`` of the same Verilog and clock would otherwise map it again. Timing
    and power of this run do not depend on it, so a failure here is only logged."""
    from tensorforge.fpga.netlist_power import keep_mapped_run

    try:
        keep_mapped_run(verilog, options, mapped, run_dir)
    except (OSError, ValueError, ToolError) as error:
        logger.warning("the mapped netlist was not kept for power runs: %s", error)


def _run_flow(
    verilog: str,
    options: AsicOptions,
    target: Technology,
    liberty_path: Path,
    run_dir: Path,
    timeout_s: float,
    key: str,
) -> AsicReport:
    top = options.top
    mapped = map_netlist(verilog, options, target, liberty_path, run_dir, timeout_s)
    _keep_for_power(verilog, options, mapped, run_dir)
    stat, mapping, clock_port, seconds = (mapped.stat, mapped.mapping, mapped.clock_port,
                                          mapped.seconds)
    script = sta_script(
        liberty=liberty_path,
        extra_liberties=list(mapping.sta_liberties),
        netlist=MAPPED_NETLIST,
        top=top,
        clock_port=clock_port,
        clock_ns=options.clock_ns,
        activity=options.activity,
        port_activity=options.port_activity,
    )
    sta = run_sta(script, run_dir=run_dir, clock_ns=options.clock_ns, timeout_s=timeout_s)
    seconds["sta"] = round(sta.run.seconds, 3)

    power = sta.power_mw
    if mapping.dynamic_mw:  # the macros' accesses, which OpenSTA does not count
        power = PowerReport(
            internal=_round6(power.internal + mapping.dynamic_mw),
            switching=power.switching,
            leakage=power.leakage,
            total=_round6(power.total + mapping.dynamic_mw),
        )
    logic_area = stat.area or 0.0
    access = mapping.access_ns
    return AsicReport(
        top=top,
        clock_ns=options.clock_ns,
        activity=options.activity,
        area_um2=round(logic_area + mapping.area_um2, 3),
        cells=stat.cells,
        critical_path_ns=max(sta.critical_path_ns, access),
        slack_ns=min(sta.slack_ns, round(options.clock_ns - access, 6)),
        power_mw=power,
        clock_port=clock_port,
        cells_by_type=stat.cells_by_type,
        port_activity=options.port_activity,
        memories=options.memories,
        logic_area_um2=logic_area,
        macro_area_um2=mapping.area_um2,
        macro_access_ns=max((m["access_ns"] for m in mapping.macros), default=0.0),
        macro_power_mw=_round6(mapping.dynamic_mw),
        macros=list(mapping.macros),
        tech=options.tech,
        macro_leakage_mw=_round6(mapping.leakage_mw),
        memory_map=list(mapping.choices),
        tool_seconds=seconds,
        tool_versions={"yosys": tool_version(YOSYS), "sta": tool_version(OPENSTA)},
        logs={"yosys": log_tail(mapped.yosys.log()), "sta": log_tail(sta.run.log())},
        key=key,
    )


def abc_constraints(target: Technology) -> str:
    """ABC's ``-constr`` file: the cell driving the mapped logic's inputs and its output load."""
    return f"set_driving_cell {target.abc_driving_cell}\nset_load {target.abc_output_load_pf}\n"


def _dont_use(target: Technology) -> str:
    return "".join(f" -dont_use {cell}" for cell in target.dont_use)


def abc_command(liberty_path: Path, clock_ns: float, target: Technology) -> str:
    """Map logic with ABC towards the clock period, buffering and sizing as it goes.

    With ``-constr`` and a delay target (``-D``, in ps) ABC's script ends in ``buffer; upsize;
    dnsize``: nets that fan out to hundreds of pins (a synchronous reset, an array-wide enable,
    a wide multiplexer's select) get buffer trees and stronger drivers, as synthesis buffering
    would give them. Without it one X1 cell drives them all, and OpenSTA extrapolates its delay
    tables far past their range (tens of pF on a cell characterized to 0.5 pF), so paths came
    out ten times longer than the logic's depth and grew with the design's size.
    """
    return (f'abc -liberty "{liberty_path}" -constr {ABC_CONSTRAINTS} '
            f"-D {round(clock_ns * 1000)}{_dont_use(target)}")


# Steps between technology mapping and writing the netlist, for OpenSTA's Verilog reader: x
# bits become 0, internal buses become single bits and aliases are purged, so that no
# concatenation is left on the left of an assign (which the reader rejects).
STA_NETLIST_CLEANUP = (
    "setundef -zero",
    "opt_clean -purge",
    "splitnets",
    "opt_clean -purge",
)


def strip_signed(netlist: str) -> str:
    """The netlist without ``signed`` in its declarations, which OpenSTA's reader rejects.

    Yosys keeps the signedness of ports and wires (``input signed [7:0] x;``); in a netlist of
    cells it means nothing, and OpenSTA 2.0 stops at it with a syntax error.
    """
    return _SIGNED.sub(r"\1", netlist)


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
