"""cocotb bench: the generic PE and the ECP5 PEs (on a MULT18X18D, and with the generic
multiplier beyond the DSPs) side by side on the same inputs.

Started by pytest through ``tensorforge.sim.rtl_harness`` on `tests.test_hw_dsp.PePair`, whose
Verilog carries the MULT18X18D simulation model. Every cycle draws random loads, beats and a
random ``advance`` (the array's freeze); each ECP5 PE's ``acc`` and ``done`` must be the
generic PE's of ``lag`` advancing edges before. Seeded by ``cocotb.RANDOM_SEED``; the
configuration (``in_bits``, ``slots``, ``banks``, ``cycles``, ``lag``) arrives as
:func:`bench_config`.
"""

from __future__ import annotations

from collections import deque

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge

from tensorforge.sim.bench_support import bench_config


def _drive(dut, rng: np.random.Generator, in_bits: int, slots: int, banks: int) -> int:
    """Draws and writes one cycle's inputs; returns ``advance`` (a write is not readable back
    before the next edge)."""
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
    advance = int(rng.random() < 0.85)
    dut.advance.value = advance
    return advance


@cocotb.test()
async def dsp_pe_matches_generic_pe(dut) -> None:
    """Random stimulus every cycle; the ECP5 PEs' outputs must be the generic PE's, ``lag``
    advancing edges late, in every cycle."""
    config = bench_config()
    in_bits, slots, banks = config["in_bits"], config["slots"], config["banks"]
    cycles, lag = config.get("cycles", 2000), config["lag"]
    rng = np.random.default_rng(cocotb.RANDOM_SEED)
    Clock(dut.clk, 10, unit="ns").start()
    dut.rst.value = 1
    _drive(dut, rng, in_bits, slots, banks)
    for _ in range(2):
        await FallingEdge(dut.clk)
    dut.rst.value = 0

    def generic():
        return dut.acc_generic.value.to_signed(), int(dut.done_generic.value)

    history = deque([generic()] * (lag + 1), maxlen=lag + 1)  # after the last lag+1 advances
    nonzero = 0
    for cycle in range(cycles):
        advancing = _drive(dut, rng, in_bits, slots, banks)
        await FallingEdge(dut.clk)
        if advancing:
            history.append(generic())
        expected_acc, expected_done = history[0]
        for kind in ("dsp", "fabric"):
            acc = getattr(dut, f"acc_{kind}").value.to_signed()
            done = int(getattr(dut, f"done_{kind}").value)
            assert acc == expected_acc, f"cycle {cycle}: acc {kind}={acc}, expected {expected_acc}"
            assert done == expected_done, f"cycle {cycle}: done {kind}"
        nonzero += expected_acc != 0
    assert nonzero > cycles // 2, f"only {nonzero} of {cycles} cycles had a nonzero sum"
    dut._log.info("pe dsp bench: %d cycles equal (%d nonzero sums)", cycles, nonzero)
