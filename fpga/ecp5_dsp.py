"""Keeping a design inside an ECP5 part's DSP multipliers (a ``max_dsp`` for Yosys).

``synth_ecp5`` maps every multiplier to MULT18X18D slices, so a design with more multipliers
than the part has DSPs (a 16x16 int8 array is 256 of them, an LFE5U-85F holds 156) passes
synthesis and then fails in nextpnr with no BEL left to place. Vivado answers this with its
``max_dsp`` setting; this module does the same for Yosys: the flow lists the flattened design's
``$mul`` cells, keeps as many on DSPs as the budget allows and has Yosys' ``booth`` pass build
the rest from LUTs and carry chains before ``synth_ecp5`` runs.

Why not pack two int8 products into one DSP instead: the two 16-bit products of ``a * (w1 <<
k | w2)`` only come apart for ``k >= 16``, a 24-bit operand, and the MULT18X18D takes 18 bits.
The slice's 9x9 mode (``MULT9X9D``) is not supported by Yosys or nextpnr-ecp5.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

#: MULT18X18D slices per ECP5 size (Lattice FPGA-DS-02012, table 1.1); LFE5UM/UM5G alike.
DSPS_BY_SIZE = {"12": 28, "25": 28, "45": 72, "85": 156}

#: The DSP operand width that ``mul2dsp`` splits wider multipliers at, and the narrowest
#: operand it maps to a DSP at all (``synth_lattice``: DSP_*_MAXWIDTH=18, DSP_*_MINWIDTH=2).
DSP_WIDTH = 18
DSP_MIN_WIDTH = 2

MULTIPLIER_DUMP = "multipliers.il"
LUT_SELECTION = "lut_multipliers.sel"

_CELL = re.compile(r"^\s*cell \$mul (\S+)\s*$")
_WIDTH = re.compile(r"^\s*parameter \\(A_WIDTH|B_WIDTH) (\d+)\s*$")


@dataclass(frozen=True)
class Multiplier:
    """One ``$mul`` cell of the flattened design and the DSP slices it would take."""

    name: str
    a_width: int
    b_width: int

    @property
    def dsps(self) -> int:
        """MULT18X18Ds after ``mul2dsp`` (an upper bound for operands wider than 18 bits).

        A wider signed operand is cut into an 18-bit top piece and 17-bit unsigned pieces.
        """
        if min(self.a_width, self.b_width) < DSP_MIN_WIDTH:
            return 0
        return _pieces(self.a_width) * _pieces(self.b_width)


def _pieces(width: int) -> int:
    return 1 if width <= DSP_WIDTH else 1 + math.ceil((width - DSP_WIDTH) / (DSP_WIDTH - 1))


def list_multipliers_commands(top: str) -> list[str]:
    """Yosys lines that flatten the design and dump its ``$mul`` cells for `read_multipliers`.

    ``wreduce`` first, so the widths are those ``synth_ecp5`` would map (Amaranth often emits a
    product wider than its operands need).
    """
    return [
        f"hierarchy -top {top}",
        "proc",
        "flatten",
        "opt_expr",
        "opt_clean",
        "wreduce",
        "opt_clean",
        f"tee -q -o {MULTIPLIER_DUMP} dump t:$mul",
    ]


def read_multipliers(dump: str) -> list[Multiplier]:
    """Parse the RTLIL ``dump`` of the ``$mul`` cells (name and operand widths)."""
    multipliers: list[Multiplier] = []
    name: str | None = None
    widths: dict[str, int] = {}
    for line in dump.splitlines():
        if cell := _CELL.match(line):
            name, widths = cell[1], {}
        elif (width := _WIDTH.match(line)) and name is not None:
            widths[width[1]] = int(width[2])
            if len(widths) == 2:
                multipliers.append(Multiplier(name, widths["A_WIDTH"], widths["B_WIDTH"]))
                name = None
    return multipliers


def lut_multipliers(multipliers: list[Multiplier], budget: int) -> list[Multiplier]:
    """The multipliers to build from LUTs so that the rest fit in ``budget`` DSPs.

    Cells are kept on DSPs in natural name order (``pe_2_3`` before ``pe_10_0``) until the
    budget runs out, so the choice is the same on every run of the same design and, for a PE
    array, the last PEs in row-major order are the ones built from LUTs.
    """
    on_luts, used = [], 0
    for multiplier in sorted(multipliers, key=_natural_key):
        if used + multiplier.dsps <= budget:
            used += multiplier.dsps
        else:
            on_luts.append(multiplier)
    return on_luts


def _natural_key(multiplier: Multiplier) -> list[tuple[int, int | str]]:
    """Sort key comparing runs of digits as numbers."""
    return [(0, int(part)) if part.isdigit() else (1, part)
            for part in re.split(r"(\d+)", multiplier.name)]


def selection_file(top: str, multipliers: list[Multiplier]) -> str:
    """A ``select -read`` file naming ``multipliers`` (literal names: no glob or ``$`` rules)."""
    return "".join(f"{top}/{m.name}\n" for m in multipliers)


def booth_commands(count: int) -> list[str]:
    """Yosys lines that turn the selected multipliers into LUT logic (none if ``count`` is 0)."""
    if count == 0:
        return []
    return [f"select -read {LUT_SELECTION}", "booth", "select -clear"]
