"""cocotb bench: the ECP5 accumulator with fabric read registers beside the one on DP16KD blocks.

Started by pytest through ``tensorforge.sim.rtl_harness`` on
`tests.test_hw_ecp5_bram.AccumulatorPair`: both get the same random inputs every cycle (reads on
both ports with response back-pressure, masked writes from both writers, over a few lines so
reads find lines written in their own cycle and the cycles around it), and every output must be
equal in every cycle (a response's line while it is valid). Seeded by ``cocotb.RANDOM_SEED``;
``lines`` and ``cycles`` arrive as :func:`bench_config`.
"""

from __future__ import annotations

import cocotb
from cocotb.triggers import FallingEdge
from pair_bench_parts import answered_lines, assert_sides_equal, start

READS = ("compute_read", "dma_read")
WRITES = ("compute_write", "dma_write")
#: the pair's outputs, each as ``fabric__NAME`` and ``blocks__NAME``; a line only while valid
OUTPUTS = tuple(f"{port}_{what}" for port in READS for what in ("req_ready", "resp_valid")) + (
    "dma_write_ready",)


@cocotb.test()
async def block_ram_accumulator_matches_fabric_one(dut) -> None:
    cycles, inputs = await start(dut, 6)
    answered = stalled = 0
    for cycle in range(cycles):
        for port in READS:
            getattr(dut, f"{port}_valid").value = inputs.chance(0.8)
            getattr(dut, f"{port}_line").value = inputs.line()
            getattr(dut, f"{port}_ready").value = inputs.chance(0.7)
        for port in WRITES:
            getattr(dut, f"{port}_valid").value = inputs.chance(0.5)
            getattr(dut, f"{port}_line").value = inputs.line()
            getattr(dut, f"{port}_data").value = inputs.bits(getattr(dut, f"{port}_data"))
            getattr(dut, f"{port}_mask").value = inputs.bits(getattr(dut, f"{port}_mask"))
        await FallingEdge(dut.clk)
        assert_sides_equal(dut, OUTPUTS, cycle)
        answered += answered_lines(dut, READS, cycle)
        stalled += sum(int(getattr(dut, f"fabric__{port}_resp_valid").value)
                       and not int(getattr(dut, f"{port}_ready").value) for port in READS)
    assert answered > cycles // 2, f"only {answered} lines answered in {cycles} cycles"
    assert stalled > cycles // 10, f"only {stalled} responses stalled in {cycles} cycles"
    dut._log.info("bram accumulator bench: %d cycles equal (%d lines)", cycles, answered)
