"""cocotb bench: the ECP5 scratchpad with fabric read registers beside the one on DP16KD blocks.

Started by pytest through ``tensorforge.sim.rtl_harness`` on
`tests.test_hw_ecp5_bram.ScratchpadPair`: both get the same random inputs every cycle (reads
on both ports, response back-pressure, masked writes, over a few lines so reads find written
data and the ports clash), and every output must be equal in every cycle (a response's line
while it is valid). Seeded by ``cocotb.RANDOM_SEED``; ``lines`` and ``cycles`` arrive as
:func:`bench_config`.
"""

from __future__ import annotations

import cocotb
from cocotb.triggers import FallingEdge
from pair_bench_parts import answered_lines, assert_sides_equal, start

#: the pair's outputs, each as ``fabric__NAME`` and ``blocks__NAME``; a line only while valid
OUTPUTS = ("a_req_ready", "a_resp_valid", "b_req_ready", "b_resp_valid", "conflict", "conflicts")


@cocotb.test()
async def block_ram_scratchpad_matches_fabric_one(dut) -> None:
    cycles, inputs = await start(dut, 24)
    answered = 0
    for cycle in range(cycles):
        for port in "ab":
            getattr(dut, f"{port}_valid").value = inputs.chance(0.8)
            getattr(dut, f"{port}_line").value = inputs.line()
            getattr(dut, f"{port}_ready").value = inputs.chance(0.7)
        dut.w_valid.value = inputs.chance(0.5)
        dut.w_line.value = inputs.line()
        dut.w_data.value = inputs.bits(dut.w_data)
        dut.w_mask.value = inputs.bits(dut.w_mask)
        await FallingEdge(dut.clk)
        assert_sides_equal(dut, OUTPUTS, cycle)
        answered += answered_lines(dut, "ab", cycle)
    assert answered > cycles // 2, f"only {answered} lines answered in {cycles} cycles"
    dut._log.info("bram scratchpad bench: %d cycles equal (%d lines)", cycles, answered)
