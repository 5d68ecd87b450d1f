"""cocotb bench: `Ecp5BlockRam` (DP16KD blocks, sim/dp16kd.v) beside a `Memory` + register.

Started by pytest through ``tensorforge.sim.rtl_harness`` on `tests.test_hw_ecp5_bram.BramPair`.
Every cycle draws a read address and, half the time, a write of random data under a random
lane mask; both memories see the same inputs and their read data must be equal in every
cycle. Addresses come from a few rows (the first and the last, random ones, and one row with
its neighbours in every address bit, so a lost or swapped address bit shows) so reads find
written data and often hit the row written in the same cycle. Seeded by
``cocotb.RANDOM_SEED``; the configuration (``depth``, ``width``, ``granularity``,
``cycles``) arrives as :func:`bench_config`.
"""

from __future__ import annotations

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge

from tensorforge.sim.bench_support import bench_config


@cocotb.test()
async def block_ram_matches_memory(dut) -> None:
    """Random reads every cycle and random masked writes; read data equal in every cycle."""
    config = bench_config()
    depth, width, lanes = config["depth"], config["width"], config["width"] // config["granularity"]
    cycles = config.get("cycles", 3000)
    rng = np.random.default_rng(cocotb.RANDOM_SEED)
    base = int(rng.integers(0, depth))  # with its neighbours in every address bit
    flips = [base ^ 1 << bit for bit in range((depth - 1).bit_length()) if base ^ 1 << bit < depth]
    rows = sorted({0, depth - 1, base, *flips, *(int(r) for r in rng.integers(0, depth, 16))})
    Clock(dut.clk, 10, unit="ns").start()
    dut.rst.value = 0
    nonzero = 0
    for cycle in range(cycles):
        read_row = rows[int(rng.integers(0, len(rows)))]
        write = rng.random() < 0.5
        dut.read_addr.value = read_row
        dut.write_addr.value = (read_row if rng.random() < 0.2
                                else rows[int(rng.integers(0, len(rows)))])
        dut.write_data.value = int.from_bytes(rng.bytes((width + 7) // 8)) & ((1 << width) - 1)
        dut.write_en.value = int(rng.integers(0, 1 << lanes)) if write else 0
        await FallingEdge(dut.clk)
        reference, blocks = int(dut.reference_data.value), int(dut.bram_data.value)
        assert reference == blocks, (f"cycle {cycle}: Memory+register {reference:#x}, "
                                     f"DP16KD {blocks:#x}")
        nonzero += reference != 0
    assert nonzero > cycles // 2, f"only {nonzero} of {cycles} reads returned written data"
    dut._log.info("bram bench: %d cycles equal (%d nonzero reads)", cycles, nonzero)
