"""The batch cost model's constants: its timing terms (`CostParameters`) and its per-event
energies (`EnergyTable`), and how an accelerator and a memory system set them.

It exists apart from the model so that everything that only needs the constants (the
fidelity checks, calibration, the search's evaluators, the instruction-level timeline of
`cost_trace`) reads them from one small place, and a change of a constant is a change here.
"""

from __future__ import annotations

from dataclasses import dataclass

from tensorforge.config import AcceleratorConfig
from tensorforge.dse.evaluate import TECH_45NM, Technology
from tensorforge.hw.controller import Controller
from tensorforge.isa import INSTRUCTION_BYTES
from tensorforge.memory import MemorySystem


@dataclass(frozen=True)
class CostParameters:
    """The model's timing terms. Each unit term was measured on the RTL (the table and the
    commit are in docs/cost_model.md, `benchmarks/check_cost_model_rtl.py`); the DRAM
    latency is an assumption about the memory outside the accelerator."""

    dram_latency_cycles: int = 8  # a burst's address to its first data beat: a delay where
    # something waits for the data, not the DMA units' work (`cost_timeline.timeline`)
    load_fixed_cycles: int = 5  # a LOAD's cost beyond its stream (command, planning, last line)
    store_fixed_cycles: int = 5  # a STORE's cost beyond its stream (StoreUnit.fixed_cycles - 1)
    reload_conflict_share: float = 0.0  # of a reloading step's bank conflicts (the RTL reads
    # a stationary block behind the last beat that uses its bank: few collide)
    instruction_fill_cycles: int = 2  # per MAC COMPUTE: the next one starts while it drains
    issue_cycles: int = 1  # per instruction: decode and dispatch to its unit
    gate_cycles: int = Controller.gate_latency + 1  # LOAD/STORE units idle between commands:
    # their gate takes, checks and issues the next, and a unit lowers `idle` the cycle after
    # it accepts one (the compute unit's gate overlaps its run)
    run_cycles: int = 2  # per further run of a repeated LOAD/STORE: the gate goes from RUN
    # back to ISSUE, with no TAKE and no tokens (`Controller._repeat`)
    fetch_request_cycles: int = 3  # per fetched chunk beyond its beats and DRAM latency:
    # REQUEST, the address handshake, the first beat's response (`fetch_cycles`)
    beat_cycles: float = 1.0  # cycles a bus beat takes: above 1 where the DRAM's bandwidth is
    # below the bus's (MemorySystem.beats_per_cycle)
    bursts_in_flight: float = 16.0  # bursts a DMA unit and the DRAM together keep in flight
    # (reads awaiting data, writes awaiting their response; `dma.outstanding` bounds both)
    burst_round_trip_cycles: float = 0.0  # a burst's cycles beyond the DRAM latency, from its
    # address to what frees its slot (its last data beat, its response)

    def burst_cycles(self) -> float:
        """The least spacing of a DMA unit's bursts that the bursts in flight allow."""
        return (self.dram_latency_cycles + self.burst_round_trip_cycles) / self.bursts_in_flight


def dispatch_window(config: AcceleratorConfig) -> int:
    """Instructions of one unit dispatched ahead of the one it runs: its queue
    (``controller.queue_depth``) and the one its gate holds (hw/controller.py)."""
    return config.controller.queue_depth + 1


def fetch_cycles(config: AcceleratorConfig, p: CostParameters) -> float:
    """Cycles an instruction's fetch takes in steady state: the controller prefetches the
    program in chunks of ``max(16, bus bytes)`` into a queue of `Controller.fetch_chunks`,
    so the DRAM latency (with the request) is paid once per queue of chunks, and otherwise
    an instruction costs its beats and a cycle of dispatch."""
    chunk = max(INSTRUCTION_BYTES, config.dma.bus_bytes)
    per_chunk = chunk // INSTRUCTION_BYTES
    beats = chunk // config.dma.bus_bytes
    refill = (p.fetch_request_cycles + p.dram_latency_cycles + beats * Controller.fetch_chunks
              ) / (Controller.fetch_chunks * per_chunk)
    return max(refill, (beats + per_chunk) / per_chunk)


#: Terms fitted by `benchmarks/check_cost_model_rtl.py --dram` on the program cycles of the
#: calibration programs at 0, 16, 32 and 48 cycles of DRAM latency (the Verilog DRAM of the
#: RTL bench; the held-out programs never enter the fit): a burst's round trip beyond the
#: latency, the gate's gap, and the LOAD and STORE fixed costs (of which a retiring unit
#: hides all but a transfer's first under the stream: `unit_time`).
RTL_FITTED_TERMS = {"burst_round_trip_cycles": 4.0, "gate_cycles": 4, "load_fixed_cycles": 1,
                    "store_fixed_cycles": 5}


def rtl_parameters(memory: MemorySystem, config: AcceleratorConfig) -> CostParameters:
    """The parameters under which the model describes ``config``'s RTL on ``memory``: its
    latency, its bandwidth as cycles a bus beat, and as many bursts in flight as the DMA
    (``dma.outstanding``) and the memory both allow."""
    in_flight = config.dma.outstanding
    if memory.outstanding is not None:
        in_flight = min(in_flight, memory.outstanding)
    return CostParameters(
        dram_latency_cycles=memory.latency,
        beat_cycles=1.0 / memory.beats_per_cycle(config.dma.bus_bytes),
        bursts_in_flight=float(in_flight), **RTL_FITTED_TERMS)


@dataclass(frozen=True)
class EnergyTable:
    """Energy per event in pJ (see `energy_table` for where the numbers come from)."""

    mac_pj: float
    spad_pj_per_byte: float
    acc_pj_per_byte: float
    dram_pj_per_byte: float
    hop_pj_per_byte: float


def energy_table(config: AcceleratorConfig, technology: Technology = TECH_45NM) -> EnergyTable:
    """Per-event energies of ``config`` from a `Technology` (45 nm figures by default).

    SRAM energy follows the bank size (square-root law), the accumulator its whole size.
    """
    bank_bytes = config.scratchpad.capacity / config.scratchpad.banks
    return EnergyTable(
        mac_pj=technology.mac_pj(config.precision.in_bits, config.precision.acc_bits),
        spad_pj_per_byte=technology.sram_pj_per_byte(bank_bytes),
        acc_pj_per_byte=technology.sram_pj_per_byte(config.scratchpad.accumulator),
        dram_pj_per_byte=technology.dram_pj_per_byte,
        hop_pj_per_byte=technology.register_pj_per_byte,
    )
