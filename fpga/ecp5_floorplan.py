"""A floorplan for a generated accelerator on an ECP5 part: its hard blocks pinned to sites.

nextpnr's placer puts the PE multipliers wherever the part has free DSP sites, in no order
(an 8x8 array's neighbours 24 rows and 32 columns apart), and the block RAMs across the
block-RAM rows; every unit's control then stretches between them and most of each failing
path is routing (docs/ecp5_target.md). A floorplan pins them compactly, centred on the die:

* the PE array's MULT18X18D (cells ``...pe_R_C...``, the ``ecp5`` target's `DspMultiplier`)
  on the few DSP rows that make the most nearly square block, array rows split into one
  contiguous group per DSP row, each array column on adjacent sites;
* the scratchpad's block RAMs (the operands' source), then the accumulator's, on the
  block-RAM rows nearest the middle of those DSP rows, over the same columns.

The rest of the design is left to the placer, which then gathers each unit's logic between
the blocks it uses. The floorplan is `BEL` attributes on those cells of Yosys's JSON netlist,
which nextpnr honours ("Placed N cells based on constraints"). A design without such cells, a
part without site data here (`SITE_GRIDS`), or an array whose rows do not fit whole on the
DSP rows (more than 13 tile blocks wide) is left to the placer.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

PE_CELL = re.compile(r"(?:^|\.)pe_(\d+)_(\d+)\.")
#: the units whose block RAMs are pinned, in the order they get the rows nearest the array
RAM_UNITS = ("scratchpad", "accumulator")


def _in_unit(name: str, unit: str) -> bool:
    return name.startswith(unit + ".") or f".{unit}." in name


@dataclass(frozen=True)
class SiteGrid:
    """Where an ECP5 die has its DSP and block-RAM sites.

    Both repeat in tile blocks nine columns wide starting at the X of ``blocks``: a block
    holds four MULT18X18D sites (``MULT18_0/1/4/5`` at X + 0, 1, 4, 5) on each DSP row and
    four DP16KD sites (``EBR0..3`` at X + 0, 2, 4, 6) on each block-RAM row. ``middle`` is
    the die's middle tile (X, Y).
    """

    blocks: tuple[int, ...]
    dsp_rows: tuple[int, ...]
    ram_rows: tuple[int, ...]
    middle: tuple[int, int]

    def dsp_sites(self, row: int, blocks: tuple[int, ...]) -> list[str]:
        return [f"X{x + dx}/Y{row}/MULT18_{dx}" for x in blocks for dx in (0, 1, 4, 5)]

    def ram_sites(self, row: int, blocks: tuple[int, ...]) -> list[str]:
        return [f"X{x + 2 * k}/Y{row}/EBR{k}" for x in blocks for k in range(4)]

    def centred_start(self, count: int) -> int:
        """The first of ``count`` adjacent tile blocks whose span is nearest the middle."""
        starts = range(len(self.blocks) - count + 1)
        return min(starts, key=lambda s: abs(
            (self.blocks[s] + self.blocks[s + count - 1] + 5) / 2 - self.middle[0]))

    def blocks_from(self, start: int, count: int) -> tuple[int, ...]:
        """``count`` adjacent tile blocks from ``start``, moved left where the die ends."""
        start = min(start, len(self.blocks) - count)
        return self.blocks[start:start + count]


#: Read from placements nextpnr-ecp5 0.11 made on the 85k die (its cells' NEXTPNR_BEL).
_ECP5_85K = SiteGrid(blocks=(4, 13, 22, 31, 40, 49, 58, 69, 78, 87, 96, 105, 114),
                     dsp_rows=(10, 34, 58), ram_rows=(22, 46, 70, 82), middle=(63, 47))
SITE_GRIDS = {"LFE5U-85F": _ECP5_85K, "LFE5UM-85F": _ECP5_85K, "LFE5UM5G-85F": _ECP5_85K}


@dataclass(frozen=True)
class Floorplan:
    """What was pinned where: ``bels`` maps cell names to sites; ``summary`` says it in a line
    (``none`` when nothing was pinned)."""

    bels: dict[str, str]
    summary: str


def plan_floorplan(cells: dict[str, dict], part: str) -> Floorplan:
    """The floorplan of a netlist's ``cells`` (Yosys JSON: name -> {type, ...}) on ``part``."""
    grid = SITE_GRIDS.get(part.upper())
    pes = {}
    for name, cell in cells.items():
        match = PE_CELL.search(name)
        if cell["type"] == "MULT18X18D" and match:
            pes[int(match[1]), int(match[2])] = name
    if grid is None or not pes:
        return Floorplan({}, "none")
    rows, cols = 1 + max(r for r, _ in pes), 1 + max(c for _, c in pes)
    layout = _dsp_rows(grid, rows, cols)
    if layout is None:
        return Floorplan({}, "none")
    dsp_rows, groups = layout
    width = math.ceil(max(groups) * cols / 4)
    start = grid.centred_start(width)
    blocks = grid.blocks_from(start, width)
    bels = {}
    first_row = 0
    for dsp_row, group in zip(dsp_rows, groups, strict=True):
        sites = grid.dsp_sites(dsp_row, blocks)
        for local in range(group):
            for col in range(cols):
                name = pes.get((first_row + local, col))
                if name is not None:
                    bels[name] = sites[col * group + local]
        first_row += group
    # block RAMs: each unit on the rows nearest the array's middle row, from its first column
    middle = (dsp_rows[0] + dsp_rows[-1]) / 2
    free_rows = sorted(grid.ram_rows, key=lambda y: (abs(y - middle), y))
    ram_text = []
    for unit in RAM_UNITS:
        rams = sorted(name for name, cell in cells.items()
                      if cell["type"] == "DP16KD" and _in_unit(name, unit))
        row_blocks = grid.blocks_from(start, min(math.ceil(len(rams) / 4), len(grid.blocks)))
        sites, taken = [], []
        while rams and len(sites) < len(rams) and free_rows:
            taken.append(free_rows.pop(0))
            sites += grid.ram_sites(taken[-1], row_blocks)
        # beyond what the rows hold, the placer's
        bels.update(zip(rams, sites[:len(rams)], strict=False))
        if taken:
            ram_text.append(f"{unit} RAMs on Y{'/'.join(map(str, taken))}")
    summary = "; ".join([f"{len(pes)} PE DSPs on Y{'/'.join(map(str, dsp_rows))} "
                         f"X{blocks[0]}-{blocks[-1] + 5}", *ram_text])
    return Floorplan(bels, summary)


def _dsp_rows(grid: SiteGrid, rows: int, cols: int) -> tuple[tuple[int, ...], list[int]] | None:
    """The DSP rows the array takes, nearest the die's middle, and how many array rows each
    holds (contiguous, the larger groups first): the layout whose longer side is shortest;
    None when whole array rows do not fit the DSP rows (the placer spreads such an array)."""
    pitch = grid.dsp_rows[1] - grid.dsp_rows[0]
    best = None
    for count in range(1, min(rows, len(grid.dsp_rows)) + 1):
        groups = [rows // count + (i < rows % count) for i in range(count)]
        width = math.ceil(groups[0] * cols / 4)
        if width > len(grid.blocks):
            continue
        longer_side = max(9 * width, pitch * (count - 1))
        start = min(range(len(grid.dsp_rows) - count + 1), key=lambda s: abs(
            (grid.dsp_rows[s] + grid.dsp_rows[s + count - 1]) / 2 - grid.middle[1]))
        if best is None or longer_side < best[0]:
            best = (longer_side, grid.dsp_rows[start:start + count], groups)
    return None if best is None else (best[1], best[2])


def apply_floorplan(netlist_path: Path, part: str) -> Floorplan:
    """Plan the floorplan of the Yosys JSON netlist at ``netlist_path`` and write it there as
    ``BEL`` attributes (the file is rewritten only when something is pinned)."""
    netlist = json.loads(netlist_path.read_text())
    top = next(name for name, module in netlist["modules"].items()
               if module.get("attributes", {}).get("top"))
    cells = netlist["modules"][top]["cells"]
    plan = plan_floorplan(cells, part)
    if plan.bels:
        for name, bel in plan.bels.items():
            cells[name].setdefault("attributes", {})["BEL"] = bel
        netlist_path.write_text(json.dumps(netlist))
    return plan
