"""cocotb bench of a hand-written registered adder: the Verilog-text path of the harness."""

from __future__ import annotations

import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge

from tensorforge.sim.bench_support import bench_config


@cocotb.test()
async def adder_sums_with_one_cycle_latency(dut) -> None:
    """``total`` shows ``a + b`` (9 bits, no overflow) one clock after the operands."""
    cycles = bench_config().get("cycles", 200)
    rng = random.Random(cocotb.RANDOM_SEED)
    Clock(dut.clk, 10, unit="ns").start()
    await FallingEdge(dut.clk)
    for cycle in range(cycles):
        a, b = rng.randrange(256), rng.randrange(256)
        dut.a.value = a
        dut.b.value = b
        await FallingEdge(dut.clk)  # the rising edge in between registered a + b
        total = dut.total.value.to_unsigned()
        assert total == a + b, f"cycle {cycle}: total={total}, expected {a} + {b} = {a + b}"
