"""Power of a mapped netlist under the switching activity of each of its flip-flops.

`tensorforge.fpga.asic` sets activity on the input ports and lets OpenSTA propagate it through
registers, which guesses a register's activity from its input's. A simulation knows better: it
counted every register's toggles. This module puts those counts on the netlist.

OpenSTA 2.0.17 cannot take them on the flip-flops themselves: ``set_power_activity -pins`` is
broken in its Tcl (it calls a procedure that does not exist), and its activity propagation
overwrites any activity set on an internal pin. What it does honour is activity on input
ports, and it carries a flip-flop's D activity over to Q. So the netlist is *cut* before
OpenSTA reads it (`cut_flop_inputs`): each flip-flop's D pin is disconnected from the logic
that drives it and driven by a new input port, which gets the flip-flop's measured rate. At
the clock edges D and Q then change exactly as often as the simulation saw Q change, OpenSTA
propagates Q's activity through the logic behind it, and the flip-flops, their Q nets and all
the logic they drive are priced with the run's activity; the real inputs keep their own
rates. The logic that drove D still switches (its inputs are annotated), only its load lacks
one D pin's capacitance. Flip-flops of cells whose next state is not a single pin (none in the
cells the flow maps to) are left uncut and keep OpenSTA's propagated estimate.

The mapped netlist is kept in the cache (`mapped_netlist`, keyed by the Verilog, technology
and clock, not by activity), so one synthesis serves every run of a design; each annotated
power analysis is an OpenSTA run of seconds, stored by the hash of its activities. It reports
the power by group of cells and, with ``report_power -instances``, each flip-flop's own: the
flip-flops carry the RTL names (their output nets), the logic between them does not (its
cells are Yosys' ``_123_``), so per-component power is the flip-flops' alone.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tensorforge.errors import ToolError
from tensorforge.fpga.asic import MAPPED_NETLIST, AsicOptions, map_netlist
from tensorforge.fpga.cache import synthesis_key
from tensorforge.fpga.opensta import (
    PowerReport,
    parse_instance_power,
    parse_power_groups,
    power_script,
)
from tensorforge.fpga.technology import DEFAULT_TECH, technology
from tensorforge.fpga.tools import OPENSTA, run_tool
from tensorforge.hashing import stable_hash
from tensorforge.paths import cache_subdir
from tensorforge.store import ResultStore

logger = logging.getLogger(__name__)

CUT_NETLIST = "cut.v"
METADATA = "netlist.json"
CUT_PORT_PREFIX = "tf_flop_d_"
_FORMAT = 1  # bump when the cached netlist directory's layout changes
_STORE_FORMAT = 2  # bump when a stored NetlistPower's layout changes (2: flops' totals only)
_CELL = re.compile(r"^\s*cell\s*\(\s*\"?([\w$]+)\"?\s*\)\s*\{", re.MULTILINE)
_INSTANCE = re.compile(r"^  ([\w$\\.]+)\s+(\S+)\s*\((.*?)\);", re.MULTILINE | re.DOTALL)
_CONNECTION = re.compile(r"\.(\w+)\(([^()]*)\)")


@dataclass(frozen=True)
class FlopCell:
    """A flip-flop cell of a Liberty file: the pin it samples and the pin it drives."""

    name: str
    data_pin: str
    output_pin: str


def flop_cells(liberty_text: str) -> dict[str, FlopCell]:
    """The flip-flops of a Liberty text whose next state is one pin (``next_state : "D"``)
    and that drive an output pin with the flip-flop's state (``function : "IQ"``)."""
    cells = {}
    starts = list(_CELL.finditer(liberty_text))
    for number, start in enumerate(starts):
        end = starts[number + 1].start() if number + 1 < len(starts) else len(liberty_text)
        body = liberty_text[start.end():end]
        state = re.search(r"\bff\s*\(\s*\"?(\w+)", body)
        data = re.search(r"next_state\s*:\s*\"?\s*(\w+)\s*\"?\s*;", body)
        if state is None or data is None:
            continue
        pins = list(re.finditer(r"\bpin\s*\(\s*\"?(\w+)\"?\s*\)", body))
        for index, pin in enumerate(pins):
            stop = pins[index + 1].start() if index + 1 < len(pins) else len(body)
            function = re.search(r"function\s*:\s*\"?\s*(\w+)\s*\"?\s*;", body[pin.end():stop])
            if function and function[1] == state[1]:
                cells[start[1]] = FlopCell(start[1], data[1], pin[1])
                break
    return cells


@dataclass(frozen=True)
class Flop:
    """One flip-flop instance of a netlist and the net its output drives (as Yosys named it:
    after flattening, the register's RTL path and bit, e.g. ``compute.array.pe_0_0.acc[3]``)."""

    instance: str
    cell: str
    output_net: str


def _net_name(text: str) -> str:
    name = text.strip()
    return name[1:].strip() if name.startswith("\\") else name


def cut_flop_inputs(netlist: str, cells: dict[str, FlopCell]) -> tuple[str, list[Flop]]:
    """``netlist`` with each flip-flop's data pin driven by its own new input port
    (``tf_flop_d_<n>``, n the flip-flop's position in the returned list), and the flip-flops.
    """
    flops: list[Flop] = []

    def cut(match: re.Match) -> str:
        cell = cells.get(match[1])
        if cell is None:
            return match[0]
        connections = dict(_CONNECTION.findall(match[3]))
        if cell.data_pin not in connections or cell.output_pin not in connections:
            return match[0]
        port = f"{CUT_PORT_PREFIX}{len(flops)}"
        flops.append(Flop(_net_name(match[2]), cell.name,
                          _net_name(connections[cell.output_pin])))
        body = re.sub(rf"\.{cell.data_pin}\([^()]*\)", f".{cell.data_pin}({port})", match[3])
        return f"  {match[1]} {match[2]} ({body});"

    text = _INSTANCE.sub(cut, netlist)
    if not flops:
        return text, flops
    ports = [f"{CUT_PORT_PREFIX}{n}" for n in range(len(flops))]
    header_end = text.index(");", text.index("module "))
    declarations = "".join(f"  input {port};\n" for port in ports)
    text = (text[:header_end] + ", " + ", ".join(ports) + ");\n" + declarations
            + text[header_end + 2:])
    return text, flops


@dataclass(frozen=True)
class MappedNetlist:
    """A design mapped onto a technology, kept in the cache for activity-annotated power.

    ``directory`` holds the cut netlist (`cut_flop_inputs`); ``flops`` are in cut-port order;
    ``macros`` are the flow's macro entries (``read_pj``, ``write_pj``, ``cols``, ``copies``,
    ``leakage_mw`` per memory, by its Yosys name ``instance``).
    """

    key: str
    directory: Path
    top: str
    tech: str
    clock_ns: float
    clock_port: str
    liberties: tuple[str, ...]
    flops: tuple[Flop, ...]
    macros: tuple[dict[str, Any], ...]
    logic_area_um2: float
    macro_area_um2: float
    cells: int

    @property
    def area_um2(self) -> float:
        return round(self.logic_area_um2 + self.macro_area_um2, 3)

    def to_json(self) -> str:
        values = dataclasses.asdict(self)
        values["directory"] = str(self.directory)
        return json.dumps(values)

    @classmethod
    def from_json(cls, text: str) -> MappedNetlist:
        values = json.loads(text)
        values["directory"] = Path(values["directory"])
        values["liberties"] = tuple(values["liberties"])
        values["flops"] = tuple(Flop(**flop) for flop in values["flops"])
        values["macros"] = tuple(values["macros"])
        return cls(**values)


def _netlist_key(verilog: str, top: str, tech: str, clock_ns: float) -> str:
    """The cache key of a mapped netlist: the Verilog, technology and clock, not activity."""
    target = technology(tech)
    options = AsicOptions(top=top, clock_ns=clock_ns, activity=0.0, liberty_hash=target.digest(),
                          tech=target.name)
    return stable_hash("netlist", _FORMAT, synthesis_key(verilog, "asic", options))


def cached_netlist(verilog: str, top: str, *, tech: str = DEFAULT_TECH,
                   clock_ns: float = 10.0) -> MappedNetlist | None:
    """The mapped netlist `mapped_netlist` would return, if one is cached; else None."""
    key = _netlist_key(verilog, top, tech, clock_ns)
    metadata = cache_subdir("asic-netlists") / key / METADATA
    if not metadata.is_file():
        return None
    netlist = MappedNetlist.from_json(metadata.read_text())
    return netlist if all(Path(path).is_file() for path in netlist.liberties) else None


def mapped_netlist(verilog: str, top: str, *, tech: str = DEFAULT_TECH,
                   clock_ns: float = 10.0, timeout_s: float = 1800.0) -> MappedNetlist:
    """The mapped netlist of ``verilog`` in ``tech`` at ``clock_ns``: synthesized once (about
    a minute for a 4x4 accelerator), then read from ``cache_subdir("asic-netlists")``, where
    `tensorforge synth --flow asic` of the same Verilog and clock also leaves it
    (`keep_mapped_run`), so a large design is mapped once for its timing and its power."""
    cached = cached_netlist(verilog, top, tech=tech, clock_ns=clock_ns)
    if cached is not None:
        return cached
    target = technology(tech)
    options = AsicOptions(top=top, clock_ns=clock_ns, activity=0.0, liberty_hash=target.digest(),
                          tech=target.name)
    staging = _staging(_netlist_key(verilog, top, tech, clock_ns))
    mapped = map_netlist(verilog, options, target, target.liberty(), staging, timeout_s)
    return _store_netlist(staging, mapped, _netlist_key(verilog, top, tech, clock_ns),
                          top, target, clock_ns)


def keep_mapped_run(verilog: str, options: AsicOptions, mapped: Any, run_dir: Path) -> None:
    """Keep a `synth` run's mapped netlist for `mapped_netlist`, when the run mapped it as
    that would (macros, no per-port activity or named clock: activity changes only the
    macros' access power, which the power flow does not read from the netlist)."""
    if options.memories != "macros" or options.port_activity or options.clock_port is not None:
        return
    if mapped.clock_port is None:
        return
    key = _netlist_key(verilog, options.top, options.tech, options.clock_ns)
    if cached_netlist(verilog, options.top, tech=options.tech,
                      clock_ns=options.clock_ns) is not None:
        return
    staging = _staging(key)
    own = _own_liberties(mapped, run_dir)
    for name in (MAPPED_NETLIST, *own):
        shutil.copyfile(run_dir / name, staging / name)
    # as `mapped_netlist` maps it: at activity 0, with the run's own Liberty files beside it
    macros = tuple({**macro, "dynamic_mw": 0.0} if "dynamic_mw" in macro else macro
                   for macro in mapped.mapping.macros)
    liberties = tuple(staging / path.name if path.name in own else path
                      for path in mapped.mapping.sta_liberties)
    mapping = dataclasses.replace(mapped.mapping, macros=macros, dynamic_mw=0.0,
                                  sta_liberties=liberties)
    _store_netlist(staging, dataclasses.replace(mapped, mapping=mapping), key, options.top,
                   technology(options.tech), options.clock_ns)


def _staging(key: str) -> Path:
    """A fresh directory beside the cache entry ``key``, moved into place when complete."""
    directory = cache_subdir("asic-netlists") / key
    staging = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=directory.parent))
    staging.chmod(0o755)  # mkdtemp's 0700 would hide it from other users' runs
    return staging


def _own_liberties(mapped: Any, run_dir: Path) -> set[str]:
    """A technology may write its macros' Liberty into the run directory (OSU): those files
    move with the netlist."""
    return {path.name for path in mapped.mapping.sta_liberties
            if path.resolve().parent == run_dir.resolve()}


def _store_netlist(staging: Path, mapped: Any, key: str, top: str, target: Any,
                   clock_ns: float) -> MappedNetlist:
    """Cut the mapped netlist in ``staging``, describe it, and move it into the cache as
    entry ``key`` atomically."""
    directory = cache_subdir("asic-netlists") / key
    if mapped.clock_port is None:
        shutil.rmtree(staging, ignore_errors=True)
        raise ToolError("sta", f"{top} has no clock input (clk or clock): register activity "
                               f"needs a clocked design")
    liberty = target.liberty()
    cut, flops = cut_flop_inputs((staging / MAPPED_NETLIST).read_text(),
                                 flop_cells(liberty.read_text()))
    (staging / CUT_NETLIST).write_text(cut)
    own = _own_liberties(mapped, staging)
    netlist = MappedNetlist(
        key=key, directory=directory, top=top, tech=target.name, clock_ns=clock_ns,
        clock_port=mapped.clock_port,
        liberties=(str(liberty), *(str(directory / path.name) if path.name in own else str(path)
                                   for path in mapped.mapping.sta_liberties)),
        flops=tuple(flops), macros=tuple(mapped.mapping.macros),
        logic_area_um2=mapped.stat.area or 0.0, macro_area_um2=mapped.mapping.area_um2,
        cells=mapped.stat.cells,
    )
    (staging / METADATA).write_text(netlist.to_json())
    keep = {CUT_NETLIST, METADATA, *own}  # the cut netlist holds the mapped one (~6 MB each)
    for path in staging.iterdir():
        if path.name not in keep:
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    shutil.rmtree(directory, ignore_errors=True)
    try:
        os.replace(staging, directory)  # atomic: a reader sees the whole directory or none
    except OSError:  # another process put the same netlist there first
        shutil.rmtree(staging, ignore_errors=True)
    return netlist


@dataclass(frozen=True)
class NetlistPower:
    """OpenSTA's power of a cut netlist under one set of activities, in mW.

    ``groups`` has ``Sequential``, ``Combinational``, ``Macro`` and ``Total`` (internal,
    switching, leakage, total each); ``flops`` the total power of each flip-flop instance
    (only the total: the store keeps one row per run, and ten thousand flip-flops of four
    numbers each would make it a megabyte).
    """

    groups: dict[str, PowerReport]
    flops: dict[str, float]

    def to_dict(self) -> dict[str, Any]:
        return {"groups": {k: dataclasses.asdict(v) for k, v in self.groups.items()},
                "flops": {k: float(f"{v:.6g}") for k, v in self.flops.items()}}

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> NetlistPower:
        return cls({k: PowerReport(**v) for k, v in values["groups"].items()},
                   dict(values["flops"]))


def port_activity(netlist: MappedNetlist, flop_rates: dict[str, float],
                  input_rates: dict[str, float]) -> dict[str, float]:
    """The rate of every input port of the cut netlist: each flip-flop's D port at its
    flip-flop's rate (by instance; 0 if not given), the real inputs at theirs."""
    ports = {f"{CUT_PORT_PREFIX}{n}": flop_rates.get(flop.instance, 0.0)
             for n, flop in enumerate(netlist.flops)}
    ports.update({name: rate for name, rate in input_rates.items() if name != netlist.clock_port})
    return ports


def annotated_script(netlist: MappedNetlist, ports: dict[str, float]) -> str:
    """The OpenSTA script that prices the cut netlist with ``ports``' rates (`power_script`)."""
    return power_script(
        liberties=[Path(path) for path in netlist.liberties], netlist=CUT_NETLIST,
        top=netlist.top, clock_port=netlist.clock_port, clock_ns=netlist.clock_ns,
        port_activity=ports, instances=[flop.instance for flop in netlist.flops],
    )


def annotated_power(netlist: MappedNetlist, flop_rates: dict[str, float],
                    input_rates: dict[str, float], *, store: ResultStore | None = None,
                    timeout_s: float = 600.0) -> NetlistPower:
    """Power of ``netlist`` with each flip-flop (by instance) and input port at its rate
    (transitions per clock cycle); flip-flops and inputs not named are quiet (0).

    Stored by the hash of the netlist and the rates: equal runs cost one OpenSTA run.
    """
    store = store if store is not None else ResultStore()
    ports = port_activity(netlist, flop_rates, input_rates)
    key = stable_hash(netlist.key, _STORE_FORMAT, sorted(ports.items()))
    stored = store.get("netlist_power", key)
    if stored is not None:
        return NetlistPower.from_dict(stored.payload)
    script = annotated_script(netlist, ports)
    with tempfile.TemporaryDirectory(prefix="tensorforge-power-") as scratch:
        run_dir = Path(scratch)
        shutil.copyfile(netlist.directory / CUT_NETLIST, run_dir / CUT_NETLIST)
        (run_dir / "power.tcl").write_text(script)
        run = run_tool(OPENSTA, ["-no_init", "-exit", "power.tcl"], cwd=run_dir,
                       log_name="power.log", timeout_s=timeout_s)
        log = run.log()
    errors = [line for line in log.splitlines() if line.startswith("Error")]
    if errors:
        raise ToolError("sta", f"reported {len(errors)} error(s), first: {errors[0]}", log)
    power = NetlistPower(parse_power_groups(log),
                         {name: row.total for name, row in parse_instance_power(log).items()})
    store.put("netlist_power", key, power.to_dict(),
              inputs={"netlist": netlist.key, "ports": len(ports)})
    return power
