"""cocotb bench of an IHP macro-array wrapper: seeded random writes and reads against a dict.

Started by pytest through ``tensorforge.sim.rtl_harness`` from ``test_fpga_ihp_wrappers.py``
(never collected by pytest itself). The top (``memcheck``) wraps the wrapper under test with one
clock; its macros are behavioural models written after the foundry's. Configuration from
:func:`bench_config`: ``words``, ``bits``, ``reads``, ``groups`` (the enable signal of each
bit), ``shared`` (one address for reading and writing) and ``cycles``. A read returns the
word as it was before the write of the same cycle, as the ``$mem_v2`` cell it replaces does;
a single-port memory never reads and writes in one cycle here, as a one-port macro cannot
do both at one address with those semantics.
"""

from __future__ import annotations

import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, RisingEdge

from tensorforge.sim.bench_support import bench_config


@cocotb.test()
async def random_writes_and_reads(dut) -> None:
    config = bench_config()
    words, bits, reads = config["words"], config["bits"], config["reads"]
    groups, shared = config["groups"], config["shared"]
    abits = max(1, (words - 1).bit_length())
    rng = random.Random(cocotb.RANDOM_SEED)
    Clock(dut.clk, 10, unit="ns").start()
    memory = dict.fromkeys(range(words), 0)

    # every word written once, so that no read sees the models' uninitialized contents
    for address in range(words):
        await FallingEdge(dut.clk)
        dut.wen.value, dut.waddr.value, dut.wdata.value, dut.ren.value = (1 << bits) - 1, \
            address, 0, 0
    await FallingEdge(dut.clk)
    dut.wen.value = 0

    expected: list[int | None] = [None] * reads
    for cycle in range(config["cycles"]):
        await FallingEdge(dut.clk)
        data = int(dut.rdata.value)
        for port, want in enumerate(expected):
            got = (data >> (port * bits)) & ((1 << bits) - 1)
            assert want is None or got == want, (
                f"cycle {cycle}, read port {port}: got {got:#x}, want {want:#x}")
        enabled = [rng.random() < 0.5 for _ in range(max(groups) + 1)]
        write_enable = sum(1 << bit for bit in range(bits) if enabled[groups[bit]])
        write_address = rng.randrange(words)
        write_data = rng.getrandbits(bits)
        read_enable = [rng.random() < 0.6 for _ in range(reads)]
        read_addresses = [write_address if shared else rng.randrange(words) for _ in range(reads)]
        if shared and read_enable[0]:
            write_enable = 0
        dut.wen.value, dut.waddr.value, dut.wdata.value = write_enable, write_address, write_data
        dut.ren.value = sum(int(on) << port for port, on in enumerate(read_enable))
        dut.raddr.value = sum(a << (port * abits) for port, a in enumerate(read_addresses))
        await RisingEdge(dut.clk)
        expected = [memory[a] if on else expected[port]
                    for port, (a, on) in enumerate(zip(read_addresses, read_enable, strict=True))]
        kept = memory[write_address] & ~write_enable
        memory[write_address] = kept | (write_data & write_enable)
