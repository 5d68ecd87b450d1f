"""cocotb bench of ``Scratchpad``: random concurrent traffic, checked cycle by cycle.

Two read ports that often address the same bank, a masked writer and random response
back-pressure (`ScratchpadTraffic`); every cycle the ``ready``s, the responses and the conflict
flag must equal `ScratchpadModel`'s, and at the end the ``conflicts`` counter its count.
Configuration: ``bench_config()`` = ``accelerator`` (config dict) and ``cycles``.
"""

from __future__ import annotations

import cocotb
import numpy as np
from axi_bench_parts import reset, start_clock
from cocotb.triggers import FallingEdge, ReadOnly

from tensorforge.config import AcceleratorConfig
from tensorforge.hw.ports import SPAD_ADDR_BITS
from tensorforge.hw.scratchpad import ScratchpadModel, ScratchpadTraffic
from tensorforge.sim.bench_support import bench_config


class LinePacking:
    """Lines of signed elements <-> the flat bit vectors of the Verilog ports."""

    def __init__(self, elems: int, bits: int) -> None:
        self.elems, self.bits = elems, bits

    def pack(self, elements) -> int:
        mask = (1 << self.bits) - 1
        return sum((value & mask) << (i * self.bits) for i, value in enumerate(elements))

    def unpack(self, word: int) -> tuple[int, ...]:
        out = []
        for i in range(self.elems):
            value = (word >> (i * self.bits)) & ((1 << self.bits) - 1)
            out.append(value - (1 << self.bits) if value >> (self.bits - 1) else value)
        return tuple(out)

    def write_payload(self, line: int, elements, mask: int) -> int:
        """``addr`` | ``data`` | ``mask`` packed as the write port's struct layout."""
        data_lsb = SPAD_ADDR_BITS
        mask_lsb = data_lsb + self.elems * self.bits
        return line | self.pack(elements) << data_lsb | mask << mask_lsb


@cocotb.test()
async def scratchpad_matches_model(dut) -> None:
    settings = bench_config()
    config = AcceleratorConfig.from_dict(settings["accelerator"])
    cycles = settings.get("cycles", 2000)
    rng = np.random.default_rng(cocotb.RANDOM_SEED)
    banks = config.scratchpad.banks
    lines, elems = config.spad_lines, config.spad_line_elems
    dut._log.info(
        "scratchpad bench: %d banks, %d lines, RANDOM_SEED=%d", banks, lines, cocotb.RANDOM_SEED
    )
    model = ScratchpadModel(banks, lines, elems)
    traffic = ScratchpadTraffic(rng, lines, elems, config.precision.in_bits, banks)
    packing = LinePacking(elems, config.precision.in_bits)
    start_clock(dut)
    for name in ("a_read", "b_read"):
        getattr(dut, f"{name}__req__valid").value = 0
    dut.write__req__valid.value = 0
    await reset(dut)

    for cycle in range(cycles):
        for port in ("a", "b"):
            line = traffic.requests[port]
            getattr(dut, f"{port}_read__req__valid").value = int(line is not None)
            getattr(dut, f"{port}_read__req__payload").value = line or 0
            getattr(dut, f"{port}_read__resp__ready").value = int(traffic.resp_ready[port])
        dut.write__req__valid.value = int(traffic.write is not None)
        if traffic.write is not None:
            dut.write__req__payload.value = packing.write_payload(*traffic.write)
        await ReadOnly()
        granted = model.ready(traffic.requests, traffic.resp_ready)
        where = f"cycle {cycle}"
        for port in ("a", "b"):
            ready = int(getattr(dut, f"{port}_read__req__ready").value)
            assert ready == granted[port], f"{where}: {port} ready {ready}"
            valid, expected = model.response(port)
            assert int(getattr(dut, f"{port}_read__resp__valid").value) == valid, (
                f"{where}: {port} resp.valid"
            )
            if valid:
                observed = packing.unpack(int(getattr(dut, f"{port}_read__resp__payload").value))
                assert observed == expected, f"{where}: {port} read {observed}, not {expected}"
        assert int(dut.conflict.value) == granted["conflict"], f"{where}: conflict flag"
        model.clock(traffic.requests, traffic.resp_ready, traffic.write)
        traffic.advance(granted)
        await FallingEdge(dut.clk)

    assert int(dut.conflicts.value) == model.conflicts, (
        f"conflicts {int(dut.conflicts.value)}, model {model.conflicts}"
    )
    dut._log.info("scratchpad bench: %d cycles, %d conflicts, all matched", cycles, model.conflicts)
