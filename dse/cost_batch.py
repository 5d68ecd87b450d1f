"""What the batch cost model returns: a `CostBatch` of ``n`` values per figure, and the
program events it counts without generating a program (`batch_events`).

It exists apart from the model so that the result's form (the figures a search ranks by,
the events a technology's energies price) is stated once, for the model that fills it and
for the callers that read it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tensorforge.dse.cost_rows import SpaceRows
from tensorforge.dse.cost_space import movement_hops
from tensorforge.isa import INSTRUCTION_BYTES


@dataclass(frozen=True)
class CostBatch:
    """Per-mapping results, each an ``n``-vector. ``legal`` is False where a tile is not a
    block multiple or the tiles do not fit the buffers double-buffered; their cycles are inf."""

    legal: np.ndarray
    cycles: np.ndarray
    energy_pj: np.ndarray
    compute_cycles: np.ndarray
    load_cycles: np.ndarray
    store_cycles: np.ndarray
    host_cycles: np.ndarray
    mac_steps: np.ndarray
    zero_steps: np.ndarray
    dram_read_bytes: np.ndarray
    dram_write_bytes: np.ndarray
    spad_lines: np.ndarray
    acc_lines: np.ndarray
    utilization: np.ndarray  # useful MACs / executed MACs (padding waste)
    extra: dict[str, np.ndarray] = field(default_factory=dict)

    def row(self, i: int) -> dict[str, float]:
        """Mapping ``i``'s numbers as a plain dict (for reports and `LayerMetrics.details`)."""
        names = [n for n in self.__dataclass_fields__ if n != "extra"]
        return {n: float(getattr(self, n)[i]) for n in names}


def concatenate(parts: list[CostBatch]) -> CostBatch:
    """One `CostBatch` of the slices ``parts``, in order."""
    names = [n for n in CostBatch.__dataclass_fields__ if n != "extra"]
    return CostBatch(**{n: np.concatenate([getattr(b, n) for b in parts]) for n in names},
                     extra={k: np.concatenate([b.extra[k] for b in parts])
                            for k in parts[0].extra})


def batch_events(rows: SpaceRows, mac_steps: np.ndarray, stationary_runs: np.ndarray,
                 spad_writes: np.ndarray, overwritten_lines: np.ndarray,
                 out: dict[str, np.ndarray], transfer_beats: np.ndarray, dram_bytes: np.ndarray,
                 instructions: np.ndarray) -> dict[str, np.ndarray]:
    """The program's `energy.EVENTS` as `program_events` counts them, from the batch's counts
    (no program): a MAC step reads its beats and writes its C block (reading it too unless it
    overwrites), a stationary block is read once per run of steps that keep it (at least once
    per MAC instruction), a LOAD writes its lines, a STORE reads its lines, every instruction
    is fetched from DRAM (16 bytes)."""
    config, step = rows.config, rows.step
    c_lines = config.blocks["C"].lines
    fetched = instructions * INSTRUCTION_BYTES  # NaN where the boundary was not priced
    return {
        "macs": mac_steps * config.macs_per_step,
        "spad_line_reads": mac_steps * step.beats + stationary_runs * step.stationary_lines,
        "spad_line_writes": spad_writes,
        "acc_line_reads": mac_steps * c_lines - overwritten_lines + out["lines"],
        "acc_line_writes": mac_steps * c_lines,
        "forward_bytes": mac_steps * step.beats * config.spad_line_elems
        * config.precision.in_bytes * movement_hops(config),
        "dma_beats": transfer_beats + np.ceil(fetched / config.dma.bus_bytes),
        "dram_bytes": dram_bytes + rows.host_bytes + fetched,
    }
