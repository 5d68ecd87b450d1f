"""The performance counters (`hw/counters.py`): a count is the sum of the increments over the
busy cycles since the last start, computed here in Python from the same random stimulus; the
ECP5 target's registered increments reach the same totals a cycle after busy falls."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest
from amaranth import Module, Signal
from amaranth.sim import Simulator

from tensorforge.hw.counters import add_counters
from tensorforge.hw.registers import COUNTERS, REGISTER_BITS


def _counters_bench(registered: bool, seed: int) -> None:
    rng = random.Random(seed)
    m = Module()
    registers = SimpleNamespace(**{name: Signal(REGISTER_BITS, name=name) for name in COUNTERS})
    increments = {name: Signal(4, name=f"inc_{name}") for name in COUNTERS}
    starting, busy = Signal(), Signal()
    add_counters(m, registers, increments, starting=starting, busy=busy, registered=registered)

    async def testbench(ctx):
        for _ in range(3):  # three programs, each started while idle
            ctx.set(starting, 1)
            await ctx.tick()
            ctx.set(starting, 0)
            expected = dict.fromkeys(COUNTERS, 0)
            for _ in range(rng.randrange(5, 60)):
                ctx.set(busy, rng.random() < 0.85)
                for increment in increments.values():
                    ctx.set(increment, rng.randrange(16))
                if ctx.get(busy):
                    for name, increment in increments.items():
                        expected[name] += ctx.get(increment)
                await ctx.tick()
            ctx.set(busy, 0)
            for increment in increments.values():  # ignored while idle
                ctx.set(increment, rng.randrange(16))
            await ctx.tick().repeat(2)  # a host reads STATUS.done before the counters
            assert {name: ctx.get(getattr(registers, name)) for name in COUNTERS} == expected

    sim = Simulator(m)
    sim.add_clock(1e-6)
    sim.add_testbench(testbench)
    sim.run()


@pytest.mark.parametrize("registered", [False, True])
@pytest.mark.parametrize("seed", [1, 2])
def test_counters_sum_the_increments_of_the_busy_cycles(registered, seed):
    _counters_bench(registered, seed)
