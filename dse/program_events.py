"""The events of a compiled program (`tensorforge.dse.energy.EVENTS`), counted instruction by
instruction as the hardware runs them, for the energy of a reported figure.

* ``LOAD``: its DRAM rows and zero lines are buffer lines written (scratchpad, or accumulator
  for a bias or partial sum), its bursts' beats pass the load unit, its elements come from
  DRAM;
* ``STORE``: its rows are accumulator lines read, its beats pass the store unit, its elements
  go to DRAM at the accumulator's width;
* ``COMPUTE`` (MAC): every step executes the intrinsic's MACs, streams its beats (one
  scratchpad line each, forwarded through the interconnect), and reads and writes each line
  of its C block once in the accumulator, except on the steps that overwrite it (write only:
  the RTL's accumulator port counts agree, `benchmarks/calibrate_energy.py`); the
  stationary block is read from the scratchpad once per run of steps that keep it
  (`cost_trace.stationary_run`); ZERO writes its output lines;
* instruction fetch: 16 bytes per instruction from DRAM through the load path.

A LOAD or STORE in the activation window (``scratchpad.activations``) moves no DRAM byte: its
bytes are read from (LOAD) or written to (STORE) the on-chip memory, priced as scratchpad
SRAM per byte (a scratchpad line read or written per ``spad_line_bytes``), an extrapolation
no synthesized window has calibrated.
"""

from __future__ import annotations

import math

from tensorforge.config import AcceleratorConfig
from tensorforge.dse.cost_space import movement_hops
from tensorforge.dse.cost_trace import stationary_run
from tensorforge.dse.cost_transfers import transfer_shape
from tensorforge.dse.energy import EVENTS
from tensorforge.isa import (
    INSTRUCTION_BYTES,
    Buffer,
    Compute,
    ComputeMode,
    Load,
    Store,
    expand,
)
from tensorforge.requant import PARAM_LINES
from tensorforge.sim.axi_traffic import line_geometry


def program_events(instructions, config: AcceleratorConfig, step) -> dict[str, float]:
    """Counts of every `EVENTS` entry for ``instructions`` on ``config``; ``step`` is the layer
    space's `cost_space.StepPlan`."""
    events = dict.fromkeys(EVENTS, 0.0)
    bus = config.dma.bus_bytes
    fetched = len(instructions) * INSTRUCTION_BYTES
    events["dram_bytes"] += fetched
    events["dma_beats"] += math.ceil(fetched / bus)
    for instruction in expand(instructions, config.precision.in_bytes,
                              config.precision.acc_bytes):
        if isinstance(instruction, (Load, Store)):
            _transfer(events, config, instruction)
        elif isinstance(instruction, Compute):
            _compute(events, config, step, instruction)
    return events


def _transfer(events: dict[str, float], config: AcceleratorConfig, instruction) -> None:
    shape = transfer_shape(config, instruction)
    events["dma_beats"] += sum(shape.bursts)
    lines = shape.rows + shape.zero_lines
    moved = shape.elements * line_geometry(config, instruction)[1]
    if shape.on_chip:
        window = "spad_line_reads" if isinstance(instruction, Load) else "spad_line_writes"
        events[window] += moved / config.spad_line_bytes
    else:
        events["dram_bytes"] += moved
    if isinstance(instruction, Store):
        # a requantizing STORE also reads its 3 parameter lines; the Requantizer's own
        # energy (a multiplier per lane) is not modelled
        events["acc_line_reads"] += lines + (PARAM_LINES if instruction.requant else 0)
    elif instruction.buffer is Buffer.ACC:
        events["acc_line_writes"] += lines
    else:
        events["spad_line_writes"] += lines


def _compute(events: dict[str, float], config: AcceleratorConfig, step,
             c: Compute) -> None:
    steps = c.outer * c.inner
    c_lines = config.blocks["C"].lines  # the block each step reads and writes once
    if c.mode is ComputeMode.ZERO:
        events["acc_line_writes"] += steps * c_lines
        return
    events["macs"] += steps * config.macs_per_step
    streamed = steps * step.beats
    runs = math.ceil(steps / stationary_run(step, c))
    events["spad_line_reads"] += streamed + runs * step.stationary_lines
    events["forward_bytes"] += (streamed * config.spad_line_elems * config.precision.in_bytes
                                * movement_hops(config))
    overwriting = _overwriting_steps(c)
    events["acc_line_writes"] += steps * c_lines
    events["acc_line_reads"] += (steps - overwriting) * c_lines


def _overwriting_steps(c: Compute) -> int:
    """Steps of ``c`` that write their C block without reading it (`isa.Compute.overwrites`:
    the first visit of each block the loop names)."""
    if not c.overwrite:
        return 0
    return (c.inner if c.acc_inner else 1) * (c.outer if c.acc_outer else 1)
