"""What the block-RAM pair benches share (`bram_scratchpad_bench`, `bram_accumulator_bench`):
random inputs over a few lines, the clock and reset, and the two sides' outputs compared."""

from __future__ import annotations

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge

from tensorforge.sim.bench_support import bench_config

SIDES = ("fabric", "blocks")


class RandomInputs:
    """``cocotb.RANDOM_SEED``'s generator; lines drawn from ``count`` of ``lines`` lines, so
    reads find written data and ports clash."""

    def __init__(self, lines: int, count: int) -> None:
        self.rng = np.random.default_rng(cocotb.RANDOM_SEED)
        self.lines = [int(line) for line in self.rng.integers(0, lines, count)]

    def line(self) -> int:
        return self.lines[int(self.rng.integers(0, len(self.lines)))]

    def bits(self, signal) -> int:
        return int.from_bytes(self.rng.bytes((len(signal) + 7) // 8)) & ((1 << len(signal)) - 1)

    def chance(self, probability: float) -> int:
        return int(self.rng.random() < probability)


async def start(dut, count: int) -> tuple[int, RandomInputs]:
    """The clock started and two cycles of reset; returns the cycles to run and the inputs
    over ``count`` lines (``cycles`` and ``lines`` from :func:`bench_config`)."""
    config = bench_config()
    Clock(dut.clk, 10, unit="ns").start()
    dut.rst.value = 1
    for _ in range(2):
        await FallingEdge(dut.clk)
    dut.rst.value = 0
    return config.get("cycles", 3000), RandomInputs(config["lines"], count)


def assert_sides_equal(dut, names, cycle: int) -> None:
    """``fabric__NAME`` equals ``blocks__NAME`` for every name."""
    for name in names:
        fabric, blocks = (int(getattr(dut, f"{side}__{name}").value) for side in SIDES)
        assert fabric == blocks, f"cycle {cycle}: {name} fabric {fabric:#x}, blocks {blocks:#x}"


def answered_lines(dut, ports, cycle: int) -> int:
    """The ports whose (fabric) response is valid, their lines checked equal on both sides."""
    valid = [port for port in ports if int(getattr(dut, f"fabric__{port}_resp_valid").value)]
    assert_sides_equal(dut, [f"{port}_resp_line" for port in valid], cycle)
    return len(valid)
