"""SRAM macros for the ASIC flow: an analytical 0.18um memory compiler.

Standard cells are the wrong model for an accelerator's scratchpad: Yosys would build every bit
from a flip-flop and every read port from a mux tree, so a 64 KiB buffer would dominate area and
set the clock. Real flows instantiate SRAM macros from a memory compiler, which hands back a
black box plus its area, timing (a Liberty file) and power. This module plays that compiler:
`characterize` gives one macro's figures from the analytical model below, `liberty` writes the
Liberty cells OpenSTA times the macros with, and `blackbox_verilog` the empty modules Yosys
keeps in the netlist in place of the ``$mem_v2`` cells.

The model (F = 0.18 um feature size, 1.8 V, typical corner) is the usual first-order shape of
CACTI-style estimates: area = bit-cell array over an array efficiency plus per-row decoders,
per-column sense amplifiers/write drivers and a fixed control block; access time grows with the
log of the depth (decoder stages) and with the square root of the array size (word/bit lines);
access energy grows with the bits read and with the bit-line length. The constants are chosen to
fall in the range of published 0.18um figures and are estimates, not silicon data:

* 6T bit cell: 120 F^2 = 3.9 um^2 (the ITRS 1999/2001 SRAM cell area factor for the 180 nm node;
  foundry 0.18um logic-process 6T cells were 4-5 um^2). One read and one write port share it
  (a two-port macro); each further port adds 60% (8T/10T multi-port cells).
* Array efficiency 70% and 10 000 um^2 of control per macro: compiled SRAMs of a few KiB to
  tens of KiB in 0.18um report 60-80% efficiency (CACTI 3.0, Shivakumar and Jouppi, WRL
  Research Report 2001/2, area-efficiency plots at 0.18um).
* Access time 0.6 ns + 0.12 ns x log2(words) + 0.9 ps x sqrt(bits): about 2.4 ns for a 16 KiB
  array, the order CACTI 3.0 reports for 16 KiB caches at 0.18um (1.5-2.5 ns).
* Read energy 2 pJ + 0.05 pJ x bits x sqrt(words) / 4, write 1.2x read: about 30 pJ for a
  4096 x 32 array, within the 10-100 pJ per access of 8-32 KiB 0.18um SRAMs in CACTI 3.0.
* Leakage 5 pW per bit: 0.18um is a low-leakage node (the OSU018 flip-flop leaks about 0.1 nW;
  a 6T cell has a few off transistors of minimum size).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from tensorforge.errors import ConfigError

FEATURE_UM = 0.18
BITCELL_UM2 = 120 * FEATURE_UM**2
EXTRA_PORT_CELL_FACTOR = 0.6  # per port beyond one read and one write
ARRAY_EFFICIENCY = 0.70
ROW_PERIPHERY_UM2 = 30.0  # row decoder slice + word-line driver, per word line
COLUMN_PERIPHERY_UM2 = 150.0  # sense amplifier + write driver + column mux, per bit and port
CONTROL_UM2 = 10_000.0
ACCESS_BASE_NS = 0.6
ACCESS_PER_ADDRESS_BIT_NS = 0.12
ACCESS_PER_SQRT_BIT_NS = 0.0009
SETUP_NS = 0.3  # address/data/enable setup before the clock edge
OUTPUT_TRANSITION_NS = 0.2
READ_BASE_PJ = 2.0
READ_PER_BIT_SQRT_WORD_PJ = 0.05 / 4
WRITE_OVER_READ = 1.2
LEAKAGE_PER_BIT_NW = 0.005
PIN_CAPACITANCE_PF = 0.01

MACRO_PREFIX = "tf_sram_"


@dataclass(frozen=True)
class SramGeometry:
    """What a memory compiler is asked for: words x bits and the ports."""

    words: int
    bits: int
    read_ports: int = 1
    write_ports: int = 1
    abits: int = 0  # address width when wider than the depth needs (0: just wide enough)

    def __post_init__(self) -> None:
        for name in ("words", "bits", "read_ports", "write_ports"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"SRAM {name} must be a positive integer, not {value!r}")

    @property
    def needed_address_bits(self) -> int:
        return max(1, (self.words - 1).bit_length())

    @property
    def address_bits(self) -> int:
        return max(self.abits, self.needed_address_bits)

    @property
    def ports(self) -> int:
        return self.read_ports + self.write_ports

    @property
    def name(self) -> str:
        """The macro's cell name, e.g. ``tf_sram_256x16_1r1w``."""
        wide = f"_a{self.address_bits}" if self.address_bits > self.needed_address_bits else ""
        return (
            f"{MACRO_PREFIX}{self.words}x{self.bits}_{self.read_ports}r{self.write_ports}w{wide}"
        )


@dataclass(frozen=True)
class SramMacro:
    """One characterized macro (area um^2, times ns, energies pJ, leakage nW)."""

    geometry: SramGeometry
    area_um2: float
    access_ns: float
    setup_ns: float
    read_pj: float
    write_pj: float
    leakage_nw: float

    def dynamic_mw(self, accesses_per_cycle: float, clock_ns: float) -> float:
        """Access power when every port is used in ``accesses_per_cycle`` of the cycles."""
        g = self.geometry
        energy_pj = accesses_per_cycle * (g.read_ports * self.read_pj
                                          + g.write_ports * self.write_pj)
        return energy_pj / clock_ns  # pJ per ns is mW


def characterize(geometry: SramGeometry) -> SramMacro:
    """Area, timing, energy and leakage of one macro from the model in the module docstring."""
    words, bits = geometry.words, geometry.bits
    cell = BITCELL_UM2 * (1 + EXTRA_PORT_CELL_FACTOR * max(0, geometry.ports - 2))
    array = words * bits * cell / ARRAY_EFFICIENCY
    periphery = words * ROW_PERIPHERY_UM2 + bits * geometry.ports * COLUMN_PERIPHERY_UM2
    access = (ACCESS_BASE_NS + ACCESS_PER_ADDRESS_BIT_NS * math.log2(max(words, 2))
              + ACCESS_PER_SQRT_BIT_NS * math.sqrt(words * bits))
    read = READ_BASE_PJ + READ_PER_BIT_SQRT_WORD_PJ * bits * math.sqrt(words)
    return SramMacro(
        geometry=geometry,
        area_um2=round(array + periphery + CONTROL_UM2, 3),
        access_ns=round(access, 4),
        setup_ns=SETUP_NS,
        read_pj=round(read, 4),
        write_pj=round(WRITE_OVER_READ * read, 4),
        leakage_nw=round(LEAKAGE_PER_BIT_NW * words * bits, 4),
    )


def _pins(geometry: SramGeometry) -> list[tuple[str, str, int]]:
    """``(name, direction, width)`` of a macro's pins, named after Yosys' ``$mem_v2`` ports."""
    r, w, a, d = geometry.read_ports, geometry.write_ports, geometry.address_bits, geometry.bits
    return [
        ("RD_CLK", "input", r), ("RD_EN", "input", r), ("RD_ARST", "input", r),
        ("RD_SRST", "input", r), ("RD_ADDR", "input", r * a), ("RD_DATA", "output", r * d),
        ("WR_CLK", "input", w), ("WR_EN", "input", w * d), ("WR_ADDR", "input", w * a),
        ("WR_DATA", "input", w * d),
    ]


def blackbox_verilog(geometries: Iterable[SramGeometry]) -> str:
    """Empty (black-box) modules with the macros' ports, for Yosys to keep as cells."""
    modules = []
    for geometry in sorted(set(geometries), key=lambda g: g.name):
        pins = _pins(geometry)
        lines = [f"(* blackbox *)\nmodule {geometry.name}({', '.join(p[0] for p in pins)});"]
        lines += [f"  {direction} [{width - 1}:0] {name};" for name, direction, width in pins]
        lines.append("endmodule")
        modules.append("\n".join(lines))
    return "\n\n".join(modules) + "\n"


def liberty(macros: Iterable[SramMacro], library: str = "tensorforge_sram") -> str:
    """A Liberty library with one cell per macro, in the OSU018 library's units.

    Read data changes ``access_ns`` after the rising edge of the read clock; addresses, data and
    enables have ``setup_ns`` of setup before their clock. Constant (scalar) tables: a compiled
    macro's own Liberty file has load-dependent tables, but the standard cells are timed without
    wire loads here too.
    """
    macros = sorted({m.geometry.name: m for m in macros}.values(), key=lambda m: m.geometry.name)
    widths = sorted({width for m in macros for _, _, width in _pins(m.geometry)})
    out = [
        f"library ({library}) {{",
        "  delay_model : table_lookup;",
        '  time_unit : "1ns";',
        '  voltage_unit : "1V";',
        '  current_unit : "1uA";',
        '  pulling_resistance_unit : "1kohm";',
        '  leakage_power_unit : "1nW";',
        "  capacitive_load_unit (1,pf);",
        "  nom_process : 1;",
        "  nom_voltage : 1.8;",
        "  nom_temperature : 25;",
        "  input_threshold_pct_rise : 50;",
        "  input_threshold_pct_fall : 50;",
        "  output_threshold_pct_rise : 50;",
        "  output_threshold_pct_fall : 50;",
        "  slew_lower_threshold_pct_rise : 20;",
        "  slew_upper_threshold_pct_rise : 80;",
        "  slew_lower_threshold_pct_fall : 20;",
        "  slew_upper_threshold_pct_fall : 80;",
    ]
    for width in widths:
        out += [
            f"  type (tf_bus_{width}) {{",
            "    base_type : array;",
            "    data_type : bit;",
            f"    bit_width : {width};",
            f"    bit_from : {width - 1};",
            "    bit_to : 0;",
            "    downto : true;",
            "  }",
        ]
    for macro in macros:
        out += _liberty_cell(macro)
    out.append("}")
    return "\n".join(out) + "\n"


def _scalar(group: str, value: float) -> list[str]:
    return [f"        {group} (scalar) {{", f'          values ("{value:g}");', "        }"]


def _liberty_cell(macro: SramMacro) -> list[str]:
    geometry = macro.geometry
    out = [
        f"  cell ({geometry.name}) {{",
        f"    area : {macro.area_um2:g};",
        f"    cell_leakage_power : {macro.leakage_nw:g};",
        "    dont_use : true;",
        "    dont_touch : true;",
    ]
    for name, direction, width in _pins(geometry):
        clock = "RD_CLK" if name.startswith("RD_") else "WR_CLK"
        out += [f"    bus ({name}) {{", f"      bus_type : tf_bus_{width};",
                f"      direction : {direction};"]
        if name.endswith("_CLK"):
            out += ["      clock : true;", f"      capacitance : {PIN_CAPACITANCE_PF};"]
        elif direction == "output":
            out += ["      timing () {", f'        related_pin : "{clock}";',
                    "        timing_type : rising_edge;"]
            out += _scalar("cell_rise", macro.access_ns) + _scalar("cell_fall", macro.access_ns)
            out += _scalar("rise_transition", OUTPUT_TRANSITION_NS)
            out += _scalar("fall_transition", OUTPUT_TRANSITION_NS)
            out.append("      }")
        elif name.endswith("RST"):
            out.append(f"      capacitance : {PIN_CAPACITANCE_PF};")
        else:
            out.append(f"      capacitance : {PIN_CAPACITANCE_PF};")
            for kind, value in (("setup_rising", macro.setup_ns), ("hold_rising", 0.0)):
                out += ["      timing () {", f'        related_pin : "{clock}";',
                        f"        timing_type : {kind};"]
                out += _scalar("rise_constraint", value) + _scalar("fall_constraint", value)
                out.append("      }")
        out.append("    }")
    out.append("  }")
    return out
