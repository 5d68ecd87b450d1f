"""Verilog of a component, with its memories' zero fill left out unless asked for.

Amaranth gives every `Memory` an initial value (zeros when none is named), and Yosys writes
it as an ``initial`` block with one assignment per word: 42% of the 4x4 accelerator's file.
Hardware does not need it (SRAM macros and FPGA block RAMs power up as they do, and every
program writes a line before it reads it), so `component_verilog` drops the all-zero memory
initializations from the RTLIL before Yosys writes Verilog. Memories with a non-zero initial
value, and registers' reset values, are kept.
"""

from __future__ import annotations

import re

MEMORY_INIT_CELL = "$meminit_v2"
_DATA = re.compile(r"^\s*connect \\DATA (\d+)'([01]+)\s*$")


def _is_zero_memory_init(cell_lines: list[str]) -> bool:
    """Whether a ``$meminit_v2`` cell's DATA is a constant of zero bits only."""
    for line in cell_lines:
        match = _DATA.match(line)
        if match:
            return set(match.group(2)) == {"0"}
    return False


def drop_zero_memory_init(rtlil_text: str) -> str:
    """``rtlil_text`` without the ``$meminit_v2`` cells that fill a memory with zeros."""
    kept: list[str] = []
    cell: list[str] | None = None
    for line in rtlil_text.splitlines(keepends=True):
        stripped = line.strip()
        if cell is None and stripped.startswith(f"cell {MEMORY_INIT_CELL} "):
            cell = [line]
            continue
        if cell is not None:
            cell.append(line)
            if stripped == "end":
                if not _is_zero_memory_init(cell):
                    kept.extend(cell)
                cell = None
            continue
        kept.append(line)
    if cell is not None:
        raise ValueError(f"unterminated {MEMORY_INIT_CELL} cell in the RTLIL text")
    return "".join(kept)


def component_verilog(component, name: str, *, zero_init: bool = False) -> str:
    """Verilog of a ``wiring.Component`` (its signature is the port list), without source
    locations; ``zero_init`` keeps the memories' zero-filling ``initial`` blocks."""
    from amaranth.back import rtlil, verilog

    if zero_init:
        return verilog.convert(component, name=name, emit_src=False)
    text = rtlil.convert(component, name=name, emit_src=False)
    # Amaranth's own RTLIL -> Verilog step (the Yosys script verilog.convert runs).
    return verilog._convert_rtlil_text(drop_zero_memory_init(text))
