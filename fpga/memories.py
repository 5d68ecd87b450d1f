"""The memories of a design as Yosys sees them, and what a technology made of them.

After Yosys' coarse synthesis every memory of the design is one ``$mem_v2`` cell. The ASIC
flow dumps those cells (``dump t:$mem_v2``), reads them here (`parse_memories`), and lets the
technology map each one onto macros or leave it to flip-flops (`MemoryMapping`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tensorforge.fpga.macro_picker import MemoryRequest

MEM_V2_PARAMETERS = (
    "MEMID", "SIZE", "OFFSET", "ABITS", "WIDTH", "INIT", "RD_PORTS", "RD_CLK_ENABLE",
    "RD_CLK_POLARITY", "RD_TRANSPARENCY_MASK", "RD_COLLISION_X_MASK", "RD_WIDE_CONTINUATION",
    "RD_CE_OVER_SRST", "RD_ARST_VALUE", "RD_SRST_VALUE", "RD_INIT_VALUE", "WR_PORTS",
    "WR_CLK_ENABLE", "WR_CLK_POLARITY", "WR_PRIORITY_MASK", "WR_WIDE_CONTINUATION",
)

_CELL = re.compile(r"^\s*cell \$mem_v2 (\S+)\s*$")
_PARAMETER = re.compile(r"^\s*parameter \\(\w+) (\S+)")
_CONNECT = re.compile(r"^\s*connect \\(\w+) (.*?)\s*$")
_GLOB = re.compile(r"[*?\[\]%]")
# One chunk of a Yosys signal spec: a bit or a slice of a wire, a constant, or a whole wire.
_CHUNK = re.compile(r"(\S+) \[(\d+)(?::(\d+))?\]|(\d+)'([01xz]+)|(\S+)")


@dataclass(frozen=True)
class MemoryCell:
    """One ``$mem_v2`` cell as Yosys' ``dump`` printed it (its name without the backslash)."""

    name: str
    parameters: dict[str, str]
    connections: dict[str, str] = field(default_factory=dict)

    def integer(self, name: str) -> int:
        return int(self.parameters[name])

    @property
    def synchronous_read(self) -> bool:
        """Every read port is clocked (``RD_CLK_ENABLE`` is all ones): an SRAM can do it."""
        value = self.parameters.get("RD_CLK_ENABLE", "")
        bits = value.split("'", 1)[1] if "'" in value else ""
        return bool(bits) and set(bits) == {"1"}

    @property
    def selectable(self) -> bool:
        """Whether Yosys can select the cell by its name (no glob characters in it)."""
        return not _GLOB.search(self.name)

    def request(self) -> MemoryRequest:
        """What a macro array for this memory has to offer."""
        reads, writes = self.integer("RD_PORTS"), self.integer("WR_PORTS")
        shared = (reads == 1 and writes == 1 and "RD_ADDR" in self.connections
                  and self.connections.get("RD_ADDR") == self.connections.get("WR_ADDR"))
        return MemoryRequest(
            words=self.integer("SIZE"), bits=self.integer("WIDTH"), read_ports=reads,
            write_ports=writes, shared_address=shared, synchronous_read=self.synchronous_read,
            enable_groups=enable_groups(self.connections.get("WR_EN", ""),
                                        self.integer("WIDTH") * writes)
            if writes == 1 else (),
        )


def parse_memories(dump: str) -> list[MemoryCell]:
    """The ``$mem_v2`` cells of a ``dump t:$mem_v2`` output."""
    cells: list[MemoryCell] = []
    for line in dump.splitlines():
        cell = _CELL.match(line)
        if cell:
            name = cell[1][1:] if cell[1].startswith("\\") else cell[1]
            cells.append(MemoryCell(name, {}, {}))
            continue
        parameter = _PARAMETER.match(line)
        if parameter and cells and parameter[1] != "INIT":
            cells[-1].parameters[parameter[1]] = parameter[2]
            continue
        connect = _CONNECT.match(line)
        if connect and cells:
            cells[-1].connections[connect[1]] = connect[2]
    return cells


def enable_groups(signal: str, width: int) -> tuple[int, ...]:
    """A number per bit (bit 0 first) naming the signal behind it; () where unknown.

    ``signal`` is a Yosys signal spec as ``dump`` prints it (``{ a [8] a [8] b [0] }``, most
    significant chunk first). A whole wire of unknown width makes the answer unknown.
    """
    text = signal.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1]
    bits: list[str] = []
    for chunk in _CHUNK.finditer(text):
        wire, high, low, size, constant, whole = chunk.groups()
        if wire is not None:
            top, bottom = int(high), int(low) if low is not None else int(high)
            bits += [f"{wire}[{i}]" for i in range(top, bottom - 1, -1)]
        elif constant is not None:
            bits += [f"const:{c}" for c in constant.rjust(int(size), constant[0])]
        elif whole is not None:
            return ()
    if len(bits) != width:
        return ()
    numbers: dict[str, int] = {}
    return tuple(numbers.setdefault(bit, len(numbers)) for bit in reversed(bits))


@dataclass(frozen=True)
class MemoryMapping:
    """What a technology made of a design's memories, for the rest of the ASIC flow.

    ``yosys_commands`` run after the coarse design is read back and before fine synthesis
    (they read the macros' models and retype the mapped ``$mem_v2`` cells); ``sta_liberties``
    are read by OpenSTA next to the standard cells. ``macros`` has one report entry per mapped
    memory, ``choices`` one per memory (macros or flip-flops, and why). ``area_um2`` and
    ``leakage_mw`` are the macros' own; ``access_ns`` is a floor for the critical path where
    OpenSTA cannot see into the macros' timing (0 where it can), ``dynamic_mw`` their access
    power (OpenSTA counts their leakage from their Liberty files, not their accesses).
    """

    yosys_commands: tuple[str, ...] = ()
    sta_liberties: tuple[Path, ...] = ()
    macros: tuple[dict[str, Any], ...] = ()
    choices: tuple[dict[str, Any], ...] = ()
    area_um2: float = 0.0
    leakage_mw: float = 0.0
    access_ns: float = 0.0
    dynamic_mw: float = 0.0
