"""OSU 0.18 um (the qflow standard cells) with analytical SRAM macros: the second ASIC target.

The standard cells come from the Debian package ``qflow-tech-osu018``. Memories become black
boxes of the analytical memory compiler in `sram` (the PDK has no SRAM macros): one macro per
``$mem_v2`` cell whose read ports are all synchronous, timed by OpenSTA through the scalar
Liberty file `sram.liberty` writes, with area, leakage and access power (each port used in
``accesses_per_cycle`` of the cycles) from the compiler's model.
"""

from __future__ import annotations

import functools
from pathlib import Path

from tensorforge.fpga.memories import MEM_V2_PARAMETERS, MemoryCell, MemoryMapping
from tensorforge.fpga.sram import SramGeometry, SramMacro, blackbox_verilog, characterize, liberty
from tensorforge.fpga.technology import Technology
from tensorforge.fpga.tools import find_osu018_liberty
from tensorforge.hashing import stable_hash

NAME = "osu018"
MACRO_VERILOG = "macros.v"
MACRO_LIBERTY = "macros.lib"


def technology() -> Technology:
    return Technology(
        name=NAME,
        description="OSU 0.18 um standard cells (qflow), analytical SRAM macros",
        liberty=find_osu018_liberty,
        digest=lambda: _digest(find_osu018_liberty()),
        map_memories=map_memories,
        abc_driving_cell="BUFX2",
        abc_output_load_pf=0.05,
    )


@functools.cache
def _digest(path: Path) -> str:
    return stable_hash(path.read_bytes())


def map_memories(memories: list[MemoryCell], run_dir: Path, top: str,
                 accesses_per_cycle: float, clock_ns: float) -> MemoryMapping:
    """One analytical macro per memory with synchronous reads and a write port."""
    macros: list[tuple[str, SramMacro]] = []
    choices = []
    for memory in memories:
        reads, writes = memory.integer("RD_PORTS"), memory.integer("WR_PORTS")
        entry = {"instance": memory.name, "words": memory.integer("SIZE"),
                 "bits": memory.integer("WIDTH"), "read_ports": reads, "write_ports": writes}
        if not memory.synchronous_read or not reads or not writes or not memory.selectable:
            choices.append({**entry, "choice": "flops",
                            "reason": "an asynchronous read, no write port or a name Yosys "
                                      "cannot select"})
            continue
        geometry = SramGeometry(words=memory.integer("SIZE"), bits=memory.integer("WIDTH"),
                                read_ports=reads, write_ports=writes,
                                abits=memory.integer("ABITS"))
        macro = characterize(geometry)
        macros.append((memory.name, macro))
        choices.append({**entry, "choice": "macros",
                        "reason": f"analytical macro {geometry.name}"})
    if not macros:
        return MemoryMapping(choices=tuple(choices))
    (run_dir / MACRO_VERILOG).write_text(blackbox_verilog(m.geometry for _, m in macros))
    (run_dir / MACRO_LIBERTY).write_text(liberty(m for _, m in macros))
    unset = " ".join(f"-unset {p}" for p in MEM_V2_PARAMETERS)
    commands = [f"read_verilog -lib {MACRO_VERILOG}"]
    commands += [f"setparam -type {macro.geometry.name} {unset} {top}/{name}"
                 for name, macro in macros]
    return MemoryMapping(
        yosys_commands=tuple(commands),
        sta_liberties=(run_dir / MACRO_LIBERTY,),
        macros=tuple(_macro_entry(name, macro, accesses_per_cycle, clock_ns)
                     for name, macro in macros),
        choices=tuple(choices),
        area_um2=round(sum(m.area_um2 for _, m in macros), 3),
        leakage_mw=sum(m.leakage_nw for _, m in macros) * 1e-6,
        access_ns=round(max(m.access_ns + m.setup_ns for _, m in macros), 6),
        dynamic_mw=sum(m.dynamic_mw(accesses_per_cycle, clock_ns) for _, m in macros),
    )


def _macro_entry(name: str, macro: SramMacro, accesses_per_cycle: float,
                 clock_ns: float) -> dict:
    g = macro.geometry
    return {
        "instance": name, "cell": g.name, "count": 1, "words": g.words, "bits": g.bits,
        "read_ports": g.read_ports, "write_ports": g.write_ports,
        "area_um2": macro.area_um2, "access_ns": macro.access_ns, "setup_ns": macro.setup_ns,
        "read_pj": macro.read_pj, "write_pj": macro.write_pj,
        "leakage_mw": macro.leakage_nw * 1e-6,
        "dynamic_mw": float(f"{macro.dynamic_mw(accesses_per_cycle, clock_ns):.6g}"),
    }
