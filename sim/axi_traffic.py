"""The DRAM traffic a program causes on the AXI bus, counted from its instructions alone.

`Program.statistics()` counts payload bytes (elements x width). The accelerator's counters
count bus beats x bus width, instruction fetch included, so they differ by the bus alignment
of each row. This module predicts the counters exactly, from the same rules the hardware
follows: each LOAD/STORE run (a tile whose rows lie back to back, else a row cut to one
buffer line: `dram_runs`) goes as the bursts `tensorforge.hw.axi.plan_bursts` plans, and
fetch reads the program in aligned chunks of ``max(16, bus bytes)``; transfers in the
activation memory's window (`AcceleratorConfig.activation_window`) stay on chip and count
nothing. An RTL run whose counters differ has moved data nobody asked for.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from tensorforge.config import AcceleratorConfig
from tensorforge.hw.axi import plan_bursts
from tensorforge.hw.dma_rows import transfer_runs
from tensorforge.isa import INSTRUCTION_BYTES, Buffer, Instruction, Load, Store, expand


def line_geometry(config: AcceleratorConfig, instruction: Load | Store) -> tuple[int, int]:
    """``(elements per buffer line, bytes per DRAM element)`` of a LOAD or STORE: a
    requantizing STORE (the output pipeline) writes ``in_bits`` elements."""
    if isinstance(instruction, Store):
        precision = config.precision
        return config.acc_line_elems, (precision.in_bytes if instruction.requant
                                       else precision.acc_bytes)
    if instruction.buffer is Buffer.ACC:
        return config.acc_line_elems, config.precision.acc_bytes
    return config.spad_line_elems, config.precision.in_bytes


def dram_rows(config: AcceleratorConfig, instruction: Load | Store) -> list[tuple[int, int]]:
    """``(start, bytes)`` of each DRAM row a LOAD reads or a STORE writes (empty rows left out).

    Rows longer than a buffer line are cut to the line, as the DMA does.
    """
    elems, elem_bytes = line_geometry(config, instruction)
    length = min(instruction.row_len, elems) * elem_bytes
    if not length:
        return []
    step = instruction.stride * elem_bytes
    return [(instruction.dram_addr + row * step, length) for row in range(instruction.rows)]


def dram_runs(config: AcceleratorConfig, instruction: Load | Store) -> list[tuple[int, int]]:
    """``(start, bytes)`` of each run of DRAM a LOAD or STORE moves as bursts: one run for a
    tile whose rows lie back to back, else one a row (`hw.dma_rows.transfer_runs`, the DMA
    units' own rule)."""
    elems, elem_bytes = line_geometry(config, instruction)
    return transfer_runs(instruction.dram_addr, instruction.rows, instruction.row_len,
                         instruction.stride, elems, elem_bytes)


def _beats(rows: Iterable[tuple[int, int]], config: AcceleratorConfig) -> int:
    bus_bytes, burst = config.dma.bus_bytes, config.dma.max_burst
    return sum(
        beats for start, length in rows for _, beats in plan_bursts(start, length, bus_bytes, burst)
    )


def fetch_bytes(config: AcceleratorConfig, base: int, count: int) -> int:
    """Bytes instruction fetch reads for ``count`` instructions at ``base``: whole chunks."""
    if count == 0:
        return 0
    chunk = max(INSTRUCTION_BYTES, config.dma.bus_bytes)
    first = base // chunk
    last = (base + count * INSTRUCTION_BYTES - 1) // chunk
    return (last - first + 1) * chunk


@dataclass(frozen=True)
class Traffic:
    """Bytes on the AXI data channels: ``read`` (R beats, fetch included), ``written`` (W)."""

    read: int
    written: int
    fetch: int


def bus_traffic(
    config: AcceleratorConfig, instructions: Iterable[Instruction], base: int
) -> Traffic:
    """What the ``bytes_read``/``bytes_written`` counters should say after the program."""
    instructions = list(instructions)
    fetch = fetch_bytes(config, base, len(instructions))
    instructions = expand(instructions, config.precision.in_bytes, config.precision.acc_bytes)
    window = config.activation_window  # on chip: never on the AXI port

    def runs(kind):
        return [run for i in instructions if isinstance(i, kind) for run in dram_runs(config, i)
                if run[0] not in window]

    loads, stores = runs(Load), runs(Store)
    bus_bytes = config.dma.bus_bytes
    return Traffic(
        read=_beats(loads, config) * bus_bytes + fetch,
        written=_beats(stores, config) * bus_bytes,
        fetch=fetch,
    )
