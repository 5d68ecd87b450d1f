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
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge

from tensorforge.sim.bench_support import bench_config

#: the pair's outputs, each as ``fabric__NAME`` and ``blocks__NAME``; a line only while valid
OUTPUTS = ("a_req_ready", "a_resp_valid", "b_req_ready", "b_resp_valid", "conflict", "conflicts")


@cocotb.test()
async def block_ram_scratchpad_matches_fabric_one(dut) -> None:
    config = bench_config()
    cycles = config.get("cycles", 3000)
    rng = np.random.default_rng(cocotb.RANDOM_SEED)
    lines = [int(line) for line in rng.integers(0, config["lines"], 24)]

    def any_line() -> int:
        return lines[int(rng.integers(0, len(lines)))]

    def bits(signal) -> int:
        return int.from_bytes(rng.bytes((len(signal) + 7) // 8)) & ((1 << len(signal)) - 1)

    Clock(dut.clk, 10, unit="ns").start()
    dut.rst.value = 1
    for _ in range(2):
        await FallingEdge(dut.clk)
    dut.rst.value = 0
    answered = 0
    for cycle in range(cycles):
        for port in "ab":
            getattr(dut, f"{port}_valid").value = int(rng.random() < 0.8)
            getattr(dut, f"{port}_line").value = any_line()
            getattr(dut, f"{port}_ready").value = int(rng.random() < 0.7)
        dut.w_valid.value = int(rng.random() < 0.5)
        dut.w_line.value = any_line()
        dut.w_data.value = bits(dut.w_data)
        dut.w_mask.value = bits(dut.w_mask)
        await FallingEdge(dut.clk)
        for name in OUTPUTS:
            fabric, blocks = (int(getattr(dut, f"{side}__{name}").value)
                              for side in ("fabric", "blocks"))
            assert fabric == blocks, f"cycle {cycle}: {name} fabric {fabric}, blocks {blocks}"
        for port in "ab":
            if int(getattr(dut, f"fabric__{port}_resp_valid").value):
                answered += 1
                fabric, blocks = (int(getattr(dut, f"{side}__{port}_resp_line").value)
                                  for side in ("fabric", "blocks"))
                assert fabric == blocks, (f"cycle {cycle}: {port} line fabric {fabric:#x}, "
                                          f"blocks {blocks:#x}")
    assert answered > cycles // 2, f"only {answered} lines answered in {cycles} cycles"
    dut._log.info("bram scratchpad bench: %d cycles equal (%d lines)", cycles, answered)
