"""`RtlResult`: one program's run on the RTL, its output checked and its counters read.

Kept apart from `tensorforge.sim.rtl_run` (which produces it) so that consumers such as the
CLI, the benchmarks and the cost-model calibration can read results without the runner.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from tensorforge.errors import SimulationError
from tensorforge.sim.activity import PortActivity
from tensorforge.sim.axi_traffic import Traffic

if TYPE_CHECKING:
    from tensorforge.sim.register_activity import RegisterActivity

#: Mismatching elements an `RtlResult` keeps (the first ones, in C order).
MISMATCHES_KEPT = 10


@dataclass(frozen=True)
class Mismatch:
    index: tuple[int, ...]
    observed: int
    expected: int


@dataclass(frozen=True)
class RtlResult:
    """One program's run on the RTL: the output, how it compares, and what the counters say.

    ``ideal_cycles`` is the device stage's MACs / PEs; ``utilization`` = ideal / ``cycles``.
    ``expected_traffic`` is the AXI traffic predicted from the instructions
    (`tensorforge.sim.axi_traffic`); ``traffic_consistent`` says the counters agree with it.
    ``sim_seconds`` is the wall time of the run itself (from start to done, not the build or
    the simulator start), ``sim_cycles_per_second`` = cycles / that.
    """

    workload: str
    config: str
    seed: int
    match: bool
    output: np.ndarray
    expected: np.ndarray
    mismatches: tuple[Mismatch, ...]
    cycles: int
    ideal_cycles: float
    load_busy: int
    compute_busy: int
    store_busy: int
    bank_conflict_stalls: int
    dependency_waits: int
    dram_bytes_read: int
    dram_bytes_written: int
    expected_traffic: Traffic
    instructions: int
    sim_seconds: float
    activity: PortActivity | None = None
    register_activity: RegisterActivity | None = None
    test_dir: Path | None = None
    waveform: Path | None = None
    counters: dict[str, int] = field(default_factory=dict)

    @property
    def utilization(self) -> float:
        return self.ideal_cycles / self.cycles if self.cycles else 0.0

    @property
    def sim_cycles_per_second(self) -> float:
        return self.cycles / self.sim_seconds if self.sim_seconds > 0 else 0.0

    @property
    def mismatch_count(self) -> int:
        return int(np.count_nonzero(self.output != self.expected))

    @property
    def traffic_consistent(self) -> bool:
        return (self.dram_bytes_read, self.dram_bytes_written) == (
            self.expected_traffic.read, self.expected_traffic.written)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able summary (no arrays)."""
        return {
            "workload": self.workload,
            "config": self.config,
            "seed": self.seed,
            "match": self.match,
            "mismatch_count": self.mismatch_count,
            "mismatches": [
                {"index": list(m.index), "observed": m.observed, "expected": m.expected}
                for m in self.mismatches
            ],
            "cycles": self.cycles,
            "ideal_cycles": self.ideal_cycles,
            "utilization": self.utilization,
            "load_busy": self.load_busy,
            "compute_busy": self.compute_busy,
            "store_busy": self.store_busy,
            "bank_conflict_stalls": self.bank_conflict_stalls,
            "dependency_waits": self.dependency_waits,
            "dram_bytes_read": self.dram_bytes_read,
            "dram_bytes_written": self.dram_bytes_written,
            "expected_dram_bytes_read": self.expected_traffic.read,
            "expected_dram_bytes_written": self.expected_traffic.written,
            "instructions": self.instructions,
            "sim_seconds": self.sim_seconds,
            "sim_cycles_per_second": self.sim_cycles_per_second,
            "waveform": str(self.waveform) if self.waveform else None,
        }


def first_mismatches(output: np.ndarray, expected: np.ndarray) -> tuple[Mismatch, ...]:
    if output.shape != expected.shape:
        raise SimulationError(f"RTL output has shape {output.shape}, the reference "
                              f"{expected.shape}")
    wrong = np.argwhere(output != expected)[:MISMATCHES_KEPT]
    return tuple(
        Mismatch(tuple(int(i) for i in index), int(output[tuple(index)]),
                 int(expected[tuple(index)]))
        for index in wrong
    )
