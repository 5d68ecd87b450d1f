"""cocotb bench of ``ComputeUnit``: random COMPUTE programs, bit-exact against numpy.

Started from ``tests/test_hw_compute_unit.py`` through ``tensorforge.sim.rtl_harness``. The
bench config carries ``accelerator`` (``AcceleratorConfig.to_dict()``), ``instructions``,
``stall`` (probability that a memory holds ``ready`` low in a cycle) and ``latency`` (cycles
from a read request to its response). Parts: `ReadMemory` (a line memory answering a read
port in order), `WriteMemory` (the accumulator's write port), `ComputeBench` (clock, reset,
instruction driver). Seeded from ``cocotb.RANDOM_SEED``; the harness prints it on failure.
"""

from __future__ import annotations

from collections import deque

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, ReadOnly
from compute_golden import execute, random_memories, random_program, with_overwrite

from tensorforge.config import AcceleratorConfig
from tensorforge.hw.compute_unit import step_latency
from tensorforge.hw.ports import ACC_ADDR_BITS
from tensorforge.isa import Compute
from tensorforge.sim.bench_support import bench_config

SPAD_LINES, ACC_LINES = 96, 64


def pack(values, bits: int) -> int:
    mask = (1 << bits) - 1
    return sum((int(v) & mask) << (i * bits) for i, v in enumerate(values))


def unpack(word: int, bits: int, count: int) -> list[int]:
    half, mask = 1 << (bits - 1), (1 << bits) - 1
    return [((word >> (i * bits)) & mask ^ half) - half for i in range(count)]


class ReadMemory:
    """Answers ``<name>__req`` with lines of ``lines`` on ``<name>__resp``, in order."""

    def __init__(self, dut, name, lines, bits, rng, stall, latency):
        self.req_valid = getattr(dut, f"{name}__req__valid")
        self.req_ready = getattr(dut, f"{name}__req__ready")
        self.req_addr = getattr(dut, f"{name}__req__payload")
        self.resp_valid = getattr(dut, f"{name}__resp__valid")
        self.resp_ready = getattr(dut, f"{name}__resp__ready")
        self.resp_data = getattr(dut, f"{name}__resp__payload")
        self.lines, self.bits, self.rng = lines, bits, rng
        self.stall, self.latency = stall, latency

    async def run(self, clock) -> None:
        queue, cycle = deque(), 0
        while True:
            await FallingEdge(clock)
            ready = int(self.rng.random() >= self.stall)
            self.req_ready.value = ready
            showing = bool(queue) and queue[0][0] <= cycle
            self.resp_valid.value = int(showing)
            if showing:
                self.resp_data.value = queue[0][1]
            await ReadOnly()
            if showing and self.resp_ready.value:
                queue.popleft()
            cycle += 1
            if self.req_valid.value and ready:
                line = self.lines[self.req_addr.value.to_unsigned()]
                queue.append((cycle + self.latency - 1, pack(line, self.bits)))


class WriteMemory:
    """Takes ``acc_write__req`` writes ({addr, data, mask}) into the accumulator lines."""

    def __init__(self, dut, lines, bits, rng, stall):
        self.dut, self.lines, self.bits = dut, lines, bits
        self.rng, self.stall = rng, stall

    async def run(self, clock) -> None:
        elems = self.lines.shape[1]
        while True:
            await FallingEdge(clock)
            ready = int(self.rng.random() >= self.stall)
            self.dut.acc_write__req__ready.value = ready
            await ReadOnly()
            if ready and self.dut.acc_write__req__valid.value:
                word = self.dut.acc_write__req__payload.value.to_unsigned()
                addr = word & ((1 << ACC_ADDR_BITS) - 1)
                data = unpack(word >> ACC_ADDR_BITS, self.bits, elems)
                mask = word >> (ACC_ADDR_BITS + self.bits * elems)
                for e in range(elems):
                    if mask >> e & 1:
                        self.lines[addr, e] = data[e]


class ComputeBench:
    """Clock, reset, memories and the instruction driver around one ``ComputeUnit``."""

    def __init__(self, dut, config: AcceleratorConfig, rng, stall, latency):
        self.dut, self.config, self.rng = dut, config, rng
        self.spad, self.acc = random_memories(config, rng, SPAD_LINES, ACC_LINES)
        in_bits, acc_bits = config.precision.in_bits, config.precision.acc_bits
        self.parts = [
            ReadMemory(dut, "a_read", self.spad, in_bits, rng, stall, latency),
            ReadMemory(dut, "b_read", self.spad, in_bits, rng, stall, latency),
            ReadMemory(dut, "acc_read", self.acc, acc_bits, rng, stall, latency),
            WriteMemory(dut, self.acc, acc_bits, rng, stall),
        ]

    async def reset(self) -> None:
        Clock(self.dut.clk, 10, unit="ns").start()
        self.dut.cmd__valid.value = 0
        self.dut.rst.value = 1
        for part in self.parts:
            cocotb.start_soon(part.run(self.dut.clk))
        for _ in range(3):
            await FallingEdge(self.dut.clk)
        self.dut.rst.value = 0

    async def execute(self, instruction: Compute) -> int:
        """Issue one instruction; return the cycles from its acceptance to ``idle``."""
        await FallingEdge(self.dut.clk)
        self.dut.cmd__payload.value = instruction.encode() & ((1 << len(self.dut.cmd__payload)) - 1)
        self.dut.cmd__valid.value = 1
        await ReadOnly()
        while not self.dut.cmd__ready.value:
            await FallingEdge(self.dut.clk)
            await ReadOnly()
        await FallingEdge(self.dut.clk)
        self.dut.cmd__valid.value = 0
        cycles = 1
        await ReadOnly()
        while not self.dut.idle.value:
            await FallingEdge(self.dut.clk)
            await ReadOnly()
            cycles += 1
            assert cycles < 50_000, f"{instruction.describe()} never finished"
        return cycles


@cocotb.test()
async def random_programs_match_numpy(dut) -> None:
    """Random MAC/ZERO instructions, some with the ``overwrite`` bit, under random stalls; the
    accumulator must match numpy."""
    settings = bench_config()
    config = AcceleratorConfig.from_dict(settings["accelerator"])
    rng = np.random.default_rng(cocotb.RANDOM_SEED)
    bench = ComputeBench(dut, config, rng, settings.get("stall", 0.3), settings.get("latency", 1))
    await bench.reset()
    count = settings.get("instructions", 6)
    program: list[Compute] = []
    while not any(ins.overwrite for ins in program):  # some draws allow it nowhere
        program = with_overwrite(config, random_program(config, rng, count, SPAD_LINES,
                                                        ACC_LINES), rng)
    expected = bench.acc.copy()
    for instruction in program:
        execute(config, instruction, bench.spad, expected)
        await bench.execute(instruction)
    bad = np.argwhere(bench.acc != expected)
    assert bad.size == 0, (
        f"{len(bad)} wrong accumulator elements (first at line/elem {bad[0].tolist()}) after:\n"
        + "\n".join(i.describe() for i in program)
    )


@cocotb.test()
async def one_step_takes_step_latency(dut) -> None:
    """An isolated one-step MAC on an idle unit with never-stalling 1-cycle memories."""
    config = AcceleratorConfig.from_dict(bench_config()["accelerator"])
    bench = ComputeBench(dut, config, np.random.default_rng(cocotb.RANDOM_SEED), 0.0, 1)
    await bench.reset()
    expected = bench.acc.copy()
    execute(config, Compute(), bench.spad, expected)
    cycles = await bench.execute(Compute())
    assert cycles == step_latency(config), f"measured {cycles}, documented {step_latency(config)}"
    bad = np.argwhere(bench.acc != expected)
    lines = bad[:, 0]
    assert bad.size == 0, f"lines {lines.tolist()}: {bench.acc[lines]} != {expected[lines]}"
