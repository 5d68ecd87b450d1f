"""The DMA: a load unit (DRAM -> scratchpad/accumulator) and a store unit (accumulator -> DRAM).

Both are AXI4 managers moving one tile row (one buffer line) at a time: a row's bytes are
covered by bus-aligned INCR bursts of at most ``dma.max_burst`` beats that never cross a 4 KiB
boundary (`tensorforge.hw.axi.plan_bursts` is the reference plan). Element addresses need not
be bus-aligned: the load unit shifts each beat into place in a line buffer, the store unit
shifts the line into beats and marks the valid bytes with ``wstrb``. Rows longer than a buffer
line are cut to the line (the ISA's ``row_len`` cannot usefully exceed it).

The load unit reads on its own AR/R channels and the store unit writes on AW/W/B, so a LOAD
and a STORE run at the same time on one AXI port; the top level shares the read channels with
the instruction fetch through `AxiReadArbiter`.

The units live in `load_unit` and `store_unit`, what they share in `dma_rows`; this module
names both.
"""

from tensorforge.hw.load_unit import LoadUnit
from tensorforge.hw.store_unit import StoreUnit

__all__ = ["LoadUnit", "StoreUnit"]
