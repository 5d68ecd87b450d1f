"""IHP SG13G2 (130 nm, typical corner 1.20 V / 25 C): the default ASIC target.

The data is the foundry's own, vendored from the IHP Open PDK under ``data/ihp_sg13g2/`` (see
its PROVENANCE): the standard-cell Liberty and the Liberty of every SRAM macro, single-port
(``RM_IHPSG13_1P_*``) and two-port (``RM_IHPSG13_2P_*``). They are unpacked once into the
cache, where Yosys and OpenSTA read them.

Memories become real macro instances, as in a real flow: `map_memories` picks an array of
macros for each ``$mem_v2`` cell (`macro_picker`) and writes a wrapper module that instantiates
them with the decode, masking and read-multiplexing glue around them (`ihp_wrappers`). The
wrapper replaces the ``$mem_v2`` cell, so its glue is mapped onto standard cells with the rest
of the logic, and OpenSTA times every path into and out of the macros with their Liberty
tables and counts their leakage. Their access power is the read and write energy of the same
files, charged per access (`access_power_mw`: each port busy in ``accesses_per_cycle`` of the
cycles, as for the OSU macros), because OpenSTA misreads those energies (`sta_liberty`).

Not modelled: read-during-write transparency (the memories of `hw/` ask for none) and a
synchronous or asynchronous reset of read data (none either); the macros' BIST ports are tied
off and their ``*_DLY`` timing inputs tied high, as the macros' data sheets require.
"""

from __future__ import annotations

import functools
import lzma
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tensorforge.errors import ToolError
from tensorforge.fpga import liberty
from tensorforge.fpga.ihp_wrappers import MASK_BUFFER, NET_BUFFER, stub_verilog, wrapper_verilog
from tensorforge.fpga.macro_picker import FlopCost, MacroArray, MacroType, MemoryChoice, pick
from tensorforge.fpga.memories import MEM_V2_PARAMETERS, MemoryCell, MemoryMapping
from tensorforge.fpga.technology import Technology
from tensorforge.hashing import stable_hash
from tensorforge.paths import cache_subdir

NAME = "ihp-sg13g2"
DESCRIPTION = "IHP SG13G2 130 nm, typ 1.20 V 25 C, with the IHP SRAM macros"
DATA_DIR = Path(__file__).resolve().parent / "data" / "ihp_sg13g2"
STDCELL_LIBERTY = "sg13g2_stdcell_typ_1p20V_25C.lib"
# What ABC assumes drives the mapped logic's inputs and loads its outputs (a few gate inputs).
ABC_DRIVING_CELL = "sg13g2_buf_2"
ABC_OUTPUT_LOAD_PF = 0.01
# Cells mapping must not pick: delay cells (hold fixing), the bus keeper, clock gates and scan
# flip-flops, as ORFS has it for this library; and the weakest buffer, because ABC's
# buffering builds ladders of it on high-fanout nets (24 stages, 6.8 ns of the 8.5 ns path of
# a gemm 4x4 on one 240-load select) where with sg13g2_buf_2 it builds trees (7.3 ns, the
# accumulate adder; logic area +0.8%).
DONT_USE = (
    "sg13g2_dlygate4sd1_1", "sg13g2_dlygate4sd2_1", "sg13g2_dlygate4sd3_1", "sg13g2_sighold",
    "sg13g2_lgcp_1", "sg13g2_slgcp_1", "sg13g2_sdfbbp_1", "sg13g2_sdfrbp_1", "sg13g2_sdfrbp_2",
    "sg13g2_sdfrbpq_1", "sg13g2_sdfrbpq_2", "sg13g2_buf_1",
)
FLIP_FLOP = "sg13g2_dfrbpq_1"
MULTIPLEXER = "sg13g2_mux2_1"
# Where the clock-to-output delay of a macro is read for the report (OpenSTA uses the tables).
NOMINAL_SLEW_NS = 0.1
NOMINAL_LOAD_PF = 0.01
MACRO_STUBS = "ihp_macros.v"
MEMORY_WRAPPERS = "ihp_memories.v"

_MACRO_FILE = re.compile(r"^(RM_IHPSG13_([12])P_(\d+)x(\d+)_c\d(_bm)?\w*?)_typ_1p20V_25C\.lib$")
_BRACE = re.compile(r"[{}]")
_LEAKAGE_UNIT_NW = {"1pW": 1e-3, "1nW": 1.0, "1uW": 1e3, "1mW": 1e6}


def unpacked(name: str) -> Path:
    """The path of the vendored file ``name`` (without ``.xz``), unpacked into the cache.

    Keyed by the compressed file's digest, so a newer vendored file never meets a stale copy;
    written under a temporary name and renamed, so parallel runs never read half a file.
    """
    packed = DATA_DIR / f"{name}.xz"
    if not packed.is_file():
        raise ToolError("ihp-sg13g2", f"the vendored PDK file {packed} is missing; reinstall "
                                      f"tensorforge (the wheel ships fpga/data/ihp_sg13g2)")
    data = packed.read_bytes()
    target = cache_subdir(f"pdk/ihp_sg13g2/{stable_hash(data)[:16]}") / name
    if not target.is_file():
        fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{name}.")
        with os.fdopen(fd, "wb") as out:
            out.write(lzma.decompress(data))
        os.chmod(temporary, 0o644)  # mkstemp's 0600 would hide it from other users' runs
        os.replace(temporary, target)
    return target


def stdcell_liberty() -> Path:
    return unpacked(STDCELL_LIBERTY)


def without_internal_power(text: str) -> str:
    """``text`` with every ``internal_power`` group removed (see `sta_liberty`)."""
    out, position = [], 0
    for match in re.finditer(r"\binternal_power\s*\(\s*\)\s*\{", text):
        if match.start() < position:
            continue  # nested inside a group already removed
        depth, end = 1, len(text)
        for brace in _BRACE.finditer(text, match.end()):
            depth += 1 if brace[0] == "{" else -1
            if depth == 0:
                end = brace.end()
                break
        out.append(text[position:match.start()])
        position = end
    out.append(text[position:])
    return "".join(out)


def sta_liberty(name: str) -> Path:
    """The macro Liberty OpenSTA reads: the vendored one without its internal power tables.

    OpenSTA 2.0 reads the energies of these files as joules, not pJ (twelve orders of
    magnitude too much: gigawatts for one macro), so the macros' access energy is taken from
    the same tables here (`read_macro`) and charged per access by `access_power_mw`; OpenSTA
    keeps their timing, leakage and the switching of their output nets.
    """
    source = unpacked(name)
    target = source.with_name(source.stem + ".sta.lib")
    if not target.is_file():
        fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
        with os.fdopen(fd, "w") as out:
            out.write(without_internal_power(source.read_text()))
        os.chmod(temporary, 0o644)
        os.replace(temporary, target)
    return target


@dataclass(frozen=True)
class MacroModel:
    """A macro of the catalogue with its pins (``(name, direction, width)``) and Liberty file."""

    macro: MacroType
    pins: tuple[tuple[str, str, int], ...]
    liberty_name: str
    setup_ns: float


def _when(text: str) -> str:
    return re.sub(r"[\s()]", "", text)


def read_macro(name: str, text: str) -> MacroModel:
    """One macro's catalogue entry from its Liberty text (file ``name``)."""
    match = _MACRO_FILE.match(name)
    if match is None:
        raise ToolError("ihp-sg13g2", f"{name} is not named like an IHP SRAM macro Liberty file")
    library = liberty.parse(text)
    cell = library.child("cell", match[1])
    if cell is None:
        raise ToolError("ihp-sg13g2", f"{name} has no cell {match[1]}")
    widths = {t.name: int(t.number("bit_width")) for t in library.children("type")}
    pins = tuple(
        (group.name, group.attributes["direction"],
         widths[group.attributes["bus_type"]] if group.kind == "bus" else 1)
        for group in cell.groups if group.kind in ("pin", "bus")
    )
    dout = cell.child("bus", "A_DOUT")
    arc = dout.child("timing") if dout else None
    if arc is None:
        raise ToolError("ihp-sg13g2", f"{name}: no clock-to-output arc on A_DOUT")
    access = max(liberty.table(arc.child(edge)).at(NOMINAL_SLEW_NS, NOMINAL_LOAD_PF)
                 for edge in ("cell_rise", "cell_fall"))
    address = cell.child("bus", "A_ADDR")
    setup = max(
        liberty.table(constraint).at(NOMINAL_SLEW_NS, NOMINAL_SLEW_NS)
        for timing in (address.children("timing") if address else ())
        if timing.attributes.get("timing_type") == "setup_rising"
        for constraint in timing.groups
    )
    energy = {
        _when(power.attributes.get("when", "")): liberty.table(power.child("rise_power")).at(0)
        for power in cell.child("pin", "A_CLK").children("internal_power")
    }
    unit = _LEAKAGE_UNIT_NW[library.attributes.get("leakage_power_unit", "1nW")]
    macro = MacroType(
        cell=match[1], words=int(match[3]), bits=int(match[4]), ports=int(match[2]),
        bit_mask=any(pin == "A_BM" for pin, _, _ in pins),
        area_um2=cell.number("area"), leakage_nw=cell.number("cell_leakage_power") * unit,
        access_ns=round(access, 4),
        read_pj=energy["A_MEN&!A_WEN&A_REN"], write_pj=energy["A_MEN&A_WEN&!A_REN"],
    )
    return MacroModel(macro, pins, name, round(setup, 4))


@functools.cache
def catalogue() -> tuple[MacroModel, ...]:
    """Every vendored SRAM macro, read from its Liberty file (once per process)."""
    models = []
    for packed in sorted(DATA_DIR.glob("RM_IHPSG13_*.lib.xz")):
        name = packed.name[:-len(".xz")]
        models.append(read_macro(name, lzma.decompress(packed.read_bytes()).decode()))
    if not models:
        raise ToolError("ihp-sg13g2", f"no SRAM macro Liberty files in {DATA_DIR}")
    return tuple(models)


@functools.cache
def flop_cost() -> FlopCost:
    """A memory bit in flip-flops, from the standard-cell Liberty's areas."""
    text = stdcell_liberty().read_text()

    def area(cell: str) -> float:
        found = re.search(rf"cell \(\"?{cell}\"?\) \{{\s*area : ([\d.]+)", text)
        if found is None:
            raise ToolError("ihp-sg13g2", f"{STDCELL_LIBERTY} has no cell {cell}")
        return float(found[1])

    return FlopCost(storage_bit_um2=area(FLIP_FLOP) + area(MULTIPLEXER),
                    mux_um2=area(MULTIPLEXER))


def access_power_mw(array: MacroArray, accesses_per_cycle: float, clock_ns: float) -> float:
    """Access power of a macro array when it reads and writes a line in ``accesses_per_cycle``
    of the cycles: a line spans ``cols`` macros of one row, and a write goes to every copy,
    as does a read (one per read port)."""
    macro = array.macro
    energy_pj = accesses_per_cycle * array.cols * array.copies * (macro.read_pj + macro.write_pj)
    return energy_pj / clock_ns  # pJ per ns is mW


def map_memories(memories: list[MemoryCell], run_dir: Path, top: str,
                 accesses_per_cycle: float, clock_ns: float) -> MemoryMapping:
    """Macro arrays for the memories that take them (wrappers written into ``run_dir``)."""
    models = {model.macro.cell: model for model in catalogue()}
    macro_types = [model.macro for model in models.values()]
    choices, mapped = [], []
    for memory in memories:
        request = memory.request()
        if memory.selectable:
            choice = pick(request, macro_types, flop_cost())
        else:
            choice = MemoryChoice(request, None, flop_cost().area_um2(request),
                                  "a name Yosys cannot select")
        choices.append(_choice_entry(memory.name, choice))
        if choice.array is not None:
            mapped.append((memory, choice.array))
    if not mapped:
        return MemoryMapping(choices=tuple(choices))
    used = sorted({array.macro.cell for _, array in mapped})
    stubs = [stub_verilog(cell, models[cell].pins) for cell in used]
    stubs += [f"(* blackbox *)\nmodule {buffer}(A, X);\n  input A;\n  output X;\nendmodule\n"
              for buffer in (MASK_BUFFER, NET_BUFFER)]
    (run_dir / MACRO_STUBS).write_text("\n".join(stubs))
    wrappers, commands = [], [f"read_verilog -lib {MACRO_STUBS}"]
    unset = " ".join(f"-unset {p}" for p in MEM_V2_PARAMETERS)
    for index, (memory, array) in enumerate(mapped):
        module = f"tf_ihp_mem{index}"
        wrappers.append(wrapper_verilog(module, memory, array, models[array.macro.cell].pins))
        commands.append(f"setparam -type {module} {unset} {top}/{memory.name}")
    (run_dir / MEMORY_WRAPPERS).write_text("\n".join(wrappers))
    commands[1:1] = [f"read_verilog {MEMORY_WRAPPERS}"]
    commands += [f"hierarchy -top {top}", "proc", "flatten", "opt_clean"]
    return MemoryMapping(
        yosys_commands=tuple(commands),
        sta_liberties=tuple(sta_liberty(models[cell].liberty_name) for cell in used),
        macros=tuple(_macro_entry(memory.name, array, models[array.macro.cell],
                                  access_power_mw(array, accesses_per_cycle, clock_ns))
                     for memory, array in mapped),
        choices=tuple(choices),
        area_um2=round(sum(array.area_um2 for _, array in mapped), 3),
        leakage_mw=sum(array.leakage_nw for _, array in mapped) * 1e-6,
        dynamic_mw=sum(access_power_mw(array, accesses_per_cycle, clock_ns)
                       for _, array in mapped),
    )


def _choice_entry(instance: str, choice: MemoryChoice) -> dict:
    request = choice.request
    return {
        "instance": instance, "words": request.words, "bits": request.bits,
        "read_ports": request.read_ports, "write_ports": request.write_ports,
        "choice": choice.kind, "reason": choice.reason,
        "macro_area_um2": round(choice.array.area_um2, 3) if choice.array else None,
        "flop_area_um2": round(choice.flop_area_um2, 3),
    }


def _macro_entry(instance: str, array: MacroArray, model: MacroModel,
                 dynamic_mw: float) -> dict:
    macro = array.macro
    return {
        "instance": instance, "cell": macro.cell, "count": array.count, "rows": array.rows,
        "cols": array.cols, "copies": array.copies, "words": macro.words, "bits": macro.bits,
        "area_um2": round(array.area_um2, 3), "access_ns": macro.access_ns,
        "setup_ns": model.setup_ns, "read_pj": macro.read_pj, "write_pj": macro.write_pj,
        "leakage_mw": array.leakage_nw * 1e-6, "dynamic_mw": float(f"{dynamic_mw:.6g}"),
    }


def technology() -> Technology:
    return Technology(
        name=NAME,
        description=DESCRIPTION,
        liberty=stdcell_liberty,
        digest=data_digest,
        map_memories=map_memories,
        abc_driving_cell=ABC_DRIVING_CELL,
        abc_output_load_pf=ABC_OUTPUT_LOAD_PF,
        dont_use=DONT_USE,
    )


@functools.cache
def data_digest() -> str:
    """The hash of every vendored file: a new PDK snapshot is a new cache key."""
    return stable_hash(*(path.read_bytes() for path in sorted(DATA_DIR.glob("*.xz"))))
