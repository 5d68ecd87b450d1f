"""A DMA unit's bursts for the instruction timeline (`cost_trace`), and the activation
window's: where a LOAD or STORE's address lies in ``scratchpad.activations``'s window, the
on-chip memory (`hw.axi_memory.AxiMemory`) answers it, not DRAM, and the unit's decoder
(`hw.axi_window`) holds a burst for the other target until the outstanding ones are
answered.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tensorforge.hw.axi_memory import AxiMemory

if TYPE_CHECKING:
    from tensorforge.dse.cost_trace import TraceTerms
    from tensorforge.dse.cost_transfers import TransferShape

#: The activation window's AR handshake to its first R beat (`AxiMemory.first_read_beat`:
#: the block RAM's read cycle, then the R register); the next AR goes with the last beat.
WINDOW_READ_DELAY = AxiMemory.first_read_beat
#: Its last W beat to B; the next AW comes the cycle after B (`AxiMemory.write_burst_cycles`
#: = 2 cycles per burst beyond its beats).
WINDOW_WRITE_RESPONSE = AxiMemory.write_burst_cycles - 1


class Dma:
    """One DMA unit's bursts: addresses a cycle apart, ``outstanding`` in flight, data in
    order; ``freed[j]`` is when burst ``j``'s slot (of ``outstanding``) freed."""

    def __init__(self, outstanding: int, reading: bool = False) -> None:
        self.outstanding = outstanding
        self.freed: list[float] = []  # per burst ever issued: when its slot freed
        self.address = -1.0  # last address handshake
        self.data = 0.0  # last data beat moved
        self.pace = 1.0  # cycles a beat of the last burst took
        self.on_chip = False  # the last burst went to the activation window
        self.reading = reading  # a load unit's (bursts free with their last beat)

    def switch(self, at: float, on_chip: bool) -> float:
        """``at``, or later where the burst goes to the other target than the outstanding
        ones (the window decoder holds it until they are answered: the cycle after the last
        beat or response), or to the window, which takes the next read burst with its last
        beat and the next write burst the cycle after its response."""
        if self.freed and (on_chip or self.on_chip):
            after = 0 if on_chip and self.on_chip and self.reading else 1
            at = max(at, self.freed[-1] + after)
        self.on_chip = on_chip
        return at

    def slot(self, reuse: int) -> float:
        """When the next burst may issue its address: ``reuse`` cycles after a slot of the
        ``outstanding`` freed."""
        k = len(self.freed) - self.outstanding
        return self.freed[k] + reuse if k >= 0 else 0.0


def window_load_time(dma: Dma, t: TransferShape, start: float, terms: TraceTerms
                     ) -> tuple[float, float]:
    """(when the unit may take its next LOAD, when this one retires) for a LOAD from the
    activation window (`cost_trace`'s ``_load_time`` for DRAM; the module docstring)."""
    beats = sum(t.bursts)
    per_beat = max(1.0, t.rows / beats) if beats else 0.0
    at = last = start + terms.load_address
    gap = terms.load_run_gap
    for count in t.bursts:
        at = dma.switch(max(at, dma.address + 1, dma.slot(terms.slot_reuse)), True)
        dma.address = at
        earliest = dma.data + dma.pace + gap if dma.freed else 0.0
        gap = 0.0
        first = max(at + WINDOW_READ_DELAY, earliest)
        last = first + (count - 1) * per_beat
        dma.freed.append(last)
        dma.data, dma.pace = last, per_beat
    retire = max(last + max(per_beat - 1, 0) + terms.load_tail, start + 1) + t.zero_lines
    return (dma.address + terms.load_next if t.bursts else start + 1), retire
