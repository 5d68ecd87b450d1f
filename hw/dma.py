"""The DMA: a load unit (DRAM -> scratchpad/accumulator) and a store unit (accumulator -> DRAM).

Both are AXI4 managers that move a tile as *runs* (`tensorforge.hw.dma_rows.transfer_runs`):
a tile whose rows lie back to back in DRAM (``stride == row_len``, rows not cut at the line)
is one run, any other tile one run per row. A run's bytes are covered by bus-aligned INCR
bursts of at most ``dma.max_burst`` beats that never cross a 4 KiB boundary
(`tensorforge.hw.axi.plan_bursts` is the reference plan), and each unit keeps at most
``dma.outstanding`` bursts in flight. Element addresses need not be bus-aligned, and a beat
may carry the end of one line and the start of the next: the load unit gathers beats' bytes
and cuts them into lines, the store unit packs lines into beats and marks the valid bytes
with ``wstrb``. Rows longer than a buffer line are cut to the line (the ISA's ``row_len``
cannot usefully exceed it).

The load unit reads on its own AR/R channels and the store unit writes on AW/W/B, so a LOAD
and a STORE run at the same time on one AXI port; the top level shares the read channels with
the instruction fetch through `AxiReadArbiter`.

The units live in `load_unit` and `store_unit`, what they share in `dma_rows`; this module
names both.
"""

from tensorforge.hw.load_unit import LoadUnit
from tensorforge.hw.store_unit import StoreUnit

__all__ = ["LoadUnit", "StoreUnit"]
