"""Energy as events times per-event energies: what a program does, priced by a technology.

A layer evaluator counts what the program does (`EVENTS`: MACs executed, scratchpad and
accumulator lines read and written, operand bytes forwarded between PEs, bus beats through
the load and store units, DRAM bytes); those counts do not depend on the process. The hardware
model prices them (`EventEnergies`), so one sweep never mixes a 45 nm energy with a 130 nm
clock: the technology that sets the area and the clock also sets every energy.

Energy of a run = sum over events of count x energy + (leakage + clock power) x run time.
The clock power is what the design draws with its clock running and its data still (the clock
tree and every flip-flop's clock pin): an idle accelerator draws leakage plus that.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass

#: The events a layer evaluator counts (keys of `LayerMetrics.details`).
EVENTS = (
    "macs",              # multiply-accumulates executed (padding included)
    "spad_line_reads",   # scratchpad lines read (operands streamed and stationary loads)
    "spad_line_writes",  # scratchpad lines written by LOADs
    "acc_line_reads",    # accumulator lines read (accumulation and STOREs)
    "acc_line_writes",   # accumulator lines written (accumulation)
    "forward_bytes",     # operand bytes moved from one PE to the next (the interconnect)
    "dma_beats",         # bus beats through the load and store units
    "dram_bytes",        # bytes read from or written to DRAM (off chip)
)


@dataclass(frozen=True)
class EventEnergies:
    """pJ per event of one accelerator in one technology, and where they come from.

    ``on_chip`` is everything the accelerator itself draws (what a workload-driven power run
    of its netlist measures); DRAM energy is off chip, a published per-byte figure.
    """

    mac_pj: float
    spad_read_pj: float  # per line
    spad_write_pj: float
    acc_read_pj: float
    acc_write_pj: float
    forward_pj_per_byte: float
    dma_beat_pj: float
    dram_pj_per_byte: float
    acc_write_logic_pj: float = 0.0  # the accumulate adders and write staging of a line
    source: str = ""

    def per_event(self) -> dict[str, float]:
        """Energy of one of each `EVENTS`, in pJ."""
        return {
            "macs": self.mac_pj, "spad_line_reads": self.spad_read_pj,
            "spad_line_writes": self.spad_write_pj, "acc_line_reads": self.acc_read_pj,
            "acc_line_writes": self.acc_write_pj, "forward_bytes": self.forward_pj_per_byte,
            "dma_beats": self.dma_beat_pj, "dram_bytes": self.dram_pj_per_byte,
        }

    def split_pj(self, events: Mapping[str, float]) -> dict[str, float]:
        """``events`` priced, by kind: logic (MACs, forwarding, DMA), memories (scratchpad
        and accumulator), dram (off chip)."""
        count = {name: float(events.get(name, 0.0)) for name in EVENTS}
        return {
            "logic": count["macs"] * self.mac_pj + count["forward_bytes"]
            * self.forward_pj_per_byte + count["dma_beats"] * self.dma_beat_pj
            + count["acc_line_writes"] * self.acc_write_logic_pj,
            "memories": count["spad_line_reads"] * self.spad_read_pj
            + count["spad_line_writes"] * self.spad_write_pj
            + count["acc_line_reads"] * self.acc_read_pj
            + count["acc_line_writes"] * self.acc_write_pj,
            "dram": count["dram_bytes"] * self.dram_pj_per_byte,
        }

    def dynamic_pj(self, events: Mapping[str, float], *, on_chip: bool = False) -> float:
        """The dynamic energy of ``events`` (without DRAM where ``on_chip``)."""
        split = self.split_pj(events)
        return split["logic"] + split["memories"] + (0.0 if on_chip else split["dram"])

    def to_dict(self) -> dict[str, float | str]:
        return asdict(self)


def missing_events(details: Mapping[str, float]) -> list[str]:
    """The `EVENTS` a layer's details lack (an evaluator that does not count them)."""
    return [name for name in EVENTS if name not in details]
