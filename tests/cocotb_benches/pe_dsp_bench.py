"""cocotb bench: the generic PE and the ECP5 (MULT18X18D) PE side by side on the same inputs.

Started by pytest through ``tensorforge.sim.rtl_harness`` on `tests.test_hw_dsp.PePair`, whose
Verilog carries the MULT18X18D simulation model. Every cycle draws random loads, beats and a
random ``advance`` (the array's freeze), and both PEs' ``acc`` and ``done`` must agree. Seeded
by ``cocotb.RANDOM_SEED``; the configuration (``in_bits``, ``slots``, ``banks``, ``cycles``)
arrives as :func:`bench_config`.
"""

from __future__ import annotations

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge

from tensorforge.sim.bench_support import bench_config


def _drive(dut, rng: np.random.Generator, in_bits: int, slots: int, banks: int) -> None:
    low, high = -(1 << (in_bits - 1)), 1 << (in_bits - 1)
    mask = (1 << in_bits) - 1
    words = rng.integers(low, high, slots)
    dut.load_valid.value = int(rng.random() < 0.3)
    dut.load_bank.value = int(rng.integers(0, banks))
    dut.load_mask.value = int(rng.integers(0, 1 << slots))
    dut.load_data.value = sum((int(w) & mask) << (i * in_bits) for i, w in enumerate(words))
    dut.enable.value = int(rng.random() < 0.8)
    dut.first.value = int(rng.random() < 0.15)
    dut.last.value = int(rng.random() < 0.15)
    dut.slot.value = int(rng.integers(0, slots))
    dut.bank.value = int(rng.integers(0, banks))
    dut.operand.value = int(rng.integers(low, high)) & mask
    dut.advance.value = int(rng.random() < 0.85)


@cocotb.test()
async def dsp_pe_matches_generic_pe(dut) -> None:
    """Random stimulus every cycle; the two PEs' outputs must be equal in every cycle."""
    config = bench_config()
    in_bits, slots, banks = config["in_bits"], config["slots"], config["banks"]
    cycles = config.get("cycles", 2000)
    rng = np.random.default_rng(cocotb.RANDOM_SEED)
    Clock(dut.clk, 10, unit="ns").start()
    dut.rst.value = 1
    _drive(dut, rng, in_bits, slots, banks)
    for _ in range(2):
        await FallingEdge(dut.clk)
    dut.rst.value = 0
    nonzero = 0
    for cycle in range(cycles):
        _drive(dut, rng, in_bits, slots, banks)
        await FallingEdge(dut.clk)
        generic, dsp = dut.acc_generic.value.to_signed(), dut.acc_dsp.value.to_signed()
        assert generic == dsp, f"cycle {cycle}: acc generic={generic}, ecp5={dsp}"
        assert int(dut.done_generic.value) == int(dut.done_dsp.value), f"cycle {cycle}: done"
        nonzero += generic != 0
    assert nonzero > cycles // 2, f"only {nonzero} of {cycles} cycles had a nonzero sum"
    dut._log.info("pe dsp bench: %d cycles equal (%d nonzero sums)", cycles, nonzero)
