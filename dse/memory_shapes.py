"""The memories the generated RTL holds, predicted from an `AcceleratorConfig`, and what the
IHP SG13G2 flow makes of them (macro arrays, their area and leakage), without synthesis.

Memories are most of an accelerator's area, and their cost is not a trend to fit: the ASIC
flow picks an array of foundry macros for each ``$mem_v2`` cell by its shape
(`fpga.macro_picker.pick`) and sums the macros' Liberty area. So the area model predicts the
same shapes from the configuration and picks the same way, which makes its memory area exact
for any configuration, inside the calibration set or not.

Only memories with synchronous read ports can become macros; the rest (the first-word-through
FIFOs of the compute, load and store units, read asynchronously) are always flip-flops, whose
area the logic fit carries. `memory_requests` therefore lists the synchronous ones, each as the
`MemoryRequest` the flow builds from Yosys' ``$mem_v2`` cell (`tests/test_memory_shapes.py`
checks the list against Yosys on generated designs):

=====================  ==============================================================
memory                 shape
=====================  ==============================================================
scratchpad bank (x B)  ``bank_depth`` lines of the operand line, 1 read + 1 write port,
                       write enable per operand element (`hw.scratchpad`)
accumulator            ``acc_lines`` lines of the accumulator line, 2 read + 1 write,
                       write enable per accumulator element (`hw.accumulator`)
instruction queues x3  ``controller.queue_depth - 1`` instructions, 1 + 1, one enable
                       (`hw.controller`, a `SyncFIFOBuffered` keeps one word in a register)
fetch queue            ``fetch_chunks - 1`` chunks of max(instruction, bus width), 1 + 1
activation memory      ``scratchpad.activations / bus bytes`` bus words, 1 + 1, write enable
                       per byte (`hw.axi_memory`; only where the configuration has one, and
                       not checked against Yosys: no calibrated design holds one)
=====================  ==============================================================
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from tensorforge.config import AcceleratorConfig
from tensorforge.fpga.macro_picker import MemoryChoice, MemoryRequest, pick
from tensorforge.isa import INSTRUCTION_BITS

#: The technology whose macros `memory_choices` picks (the only one with a macro catalogue).
TECH = "ihp-sg13g2"


@dataclass(frozen=True)
class PredictedMemory:
    """One memory of the generated RTL: its instance path (as Yosys names it) and shape."""

    instance: str
    request: MemoryRequest


def _enables(bits: int, granularity: int) -> tuple[int, ...]:
    """One write-enable signal per ``granularity`` bits (``granularity == bits``: one)."""
    return tuple(bit // granularity for bit in range(bits))


def _fifo(instance: str, words: int, bits: int) -> PredictedMemory:
    return PredictedMemory(instance, MemoryRequest(words, bits, enable_groups=_enables(bits,
                                                                                      bits)))


def memory_requests(config: AcceleratorConfig) -> list[PredictedMemory]:
    """The synchronous-read memories of ``Accelerator(config)`` (see the module docstring)."""
    from tensorforge.hw.controller import Controller

    in_bits, acc_bits = config.precision.in_bits, config.precision.acc_bits
    line_bits = config.spad_line_elems * in_bits
    acc_line_bits = config.acc_line_elems * acc_bits
    memories = [
        PredictedMemory(f"scratchpad.bank{index}", MemoryRequest(
            config.bank_depth, line_bits, enable_groups=_enables(line_bits, in_bits)))
        for index in range(config.scratchpad.banks)
    ]
    memories.append(PredictedMemory("accumulator.memory", MemoryRequest(
        config.acc_lines, acc_line_bits, read_ports=2,
        enable_groups=_enables(acc_line_bits, acc_bits))))
    memories += [_fifo(f"controller.{unit}_queue.storage", config.controller.queue_depth - 1,
                       INSTRUCTION_BITS) for unit in ("load", "compute", "store")]
    memories.append(_fifo("controller.fetched.storage", Controller.fetch_chunks - 1,
                          max(INSTRUCTION_BITS, config.dma.bus_bits)))
    if config.scratchpad.activations:
        bus_bits = config.dma.bus_bits
        memories.append(PredictedMemory("activations.memory", MemoryRequest(
            config.scratchpad.activations * 8 // bus_bits, bus_bits,
            enable_groups=_enables(bus_bits, 8))))
    return [m for m in memories if m.request.words > 1]


@functools.cache
def _catalogue():
    from tensorforge.fpga import ihp_sg13g2

    return [model.macro for model in ihp_sg13g2.catalogue()], ihp_sg13g2.flop_cost()


def choose(request: MemoryRequest) -> MemoryChoice:
    """What the IHP flow makes of ``request``: `fpga.ihp_sg13g2.map_memories`' own pick."""
    macros, flops = _catalogue()
    return pick(request, macros, flops)


@dataclass(frozen=True)
class MemoryCost:
    """What the flow builds for an accelerator's memories: macro area (um^2), leakage (mW) and
    count, the bits read through a multiplexer between macro rows (the wrappers' glue), the
    flip-flop estimate of memories left to flip-flops (a feature of the logic fit, not part of
    the macro area), and the macros' energy (pJ) of a line read and written in each memory,
    as the flow charges them (`fpga.ihp_sg13g2.access_power_mw`)."""

    macro_area_um2: float
    macro_leakage_mw: float
    macro_count: int
    muxed_bits: int
    flop_area_um2: float
    access_pj: float  # one line read and one written in every memory


@functools.lru_cache(maxsize=4096)
def memory_cost(config: AcceleratorConfig, prefix: str = "") -> MemoryCost:
    """The cost of the memories of ``config`` whose instance starts with ``prefix``
    (``"scratchpad."``, ``"accumulator."``, ``"controller."``; empty: all)."""
    area = leakage = flops = energy = 0.0
    count = muxed = 0
    for memory in memory_requests(config):
        if not memory.instance.startswith(prefix):
            continue
        choice = choose(memory.request)
        array = choice.array
        if array is None:
            flops += choice.flop_area_um2
            continue
        area += array.area_um2
        leakage += array.leakage_nw * 1e-6
        count += array.count
        muxed += memory.request.bits * (array.rows - 1) * array.copies
        energy += array.cols * array.copies * (array.macro.read_pj + array.macro.write_pj)
    return MemoryCost(area, leakage, count, muxed, flops, energy)


def memory_glue(config: AcceleratorConfig, prefix: str) -> dict[str, float]:
    """Features of the standard-cell logic around memories (the area model's fit): one wrapper
    per macro, the read multiplexers between macro rows, memories built from flip-flops."""
    cost = memory_cost(config, prefix)
    return {"macros": cost.macro_count, "muxed_bits": cost.muxed_bits,
            "flop_memory_um2": cost.flop_area_um2}
