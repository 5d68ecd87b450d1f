"""The COMPUTE unit alone in Amaranth's simulator, with memory models on its three ports.

One driver serves the unit's tests (random stalls, against the golden model) and
``benchmarks/bench_pe_array.py`` (ideal memories, cycle counts), so both measure the same
thing the same way.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np
from amaranth.sim import Simulator

from tensorforge.config import AcceleratorConfig
from tensorforge.hw.compute_unit import ComputeUnit
from tensorforge.isa import Compute

COMPUTE_FIELDS = ("mode", "outer", "inner", "acc_base", "a_base", "b_base", "acc_outer",
                  "acc_inner", "a_outer", "a_inner", "b_outer", "b_inner", "overwrite")
HANG_CYCLES = 50_000  # far beyond any program the tests and benchmarks run


@dataclass
class ComputeRun:
    """What a program did: the accumulator memory after it, cycle counts, retire pulses.

    ``cycles`` holds one count per instruction when they are issued one by one (from the
    offer until the unit is idle again), or a single total when issued back to back.
    """

    acc: np.ndarray
    cycles: list[int]
    retired: int


def command_payload(instruction: Compute, output_pipeline: bool = False) -> dict:
    """The unit's command port payload for one COMPUTE instruction (with ``reduce`` on a unit
    built with the output pipeline, whose command carries it)."""
    names = COMPUTE_FIELDS + (("reduce",) if output_pipeline else ())
    return {name: int(getattr(instruction, name)) for name in names} | {"opcode": 2}


def read_port_model(port, lines, rng: np.random.Generator, stall: float, latency: int):
    """A memory answering ``port``'s requests in order, ``latency`` cycles later, refusing
    each request cycle with probability ``stall``."""

    async def model(ctx):
        queue, cycle = deque(), 0
        while True:
            ready = int(rng.random() >= stall)
            ctx.set(port.req.ready, ready)
            showing = bool(queue) and queue[0][0] <= cycle
            ctx.set(port.resp.valid, int(showing))
            if showing:
                ctx.set(port.resp.payload, queue[0][1])
            _, _, req_valid, addr, resp_ready = await ctx.tick().sample(
                port.req.valid, port.req.payload, port.resp.ready
            )
            cycle += 1
            if showing and resp_ready:
                queue.popleft()
            if req_valid and ready:
                queue.append((cycle + latency - 1, [int(v) for v in lines[int(addr)]]))

    return model


def run_compute_program(
    config: AcceleratorConfig,
    program: list[Compute],
    spad: np.ndarray,
    acc: np.ndarray,
    *,
    seed: int = 0,
    stall: float = 0.0,
    latency: int = 1,
    back_to_back: bool = False,
    registered_control: bool = False,
) -> ComputeRun:
    """Run ``program`` on a fresh unit; ``acc`` is copied, not changed.

    ``back_to_back`` offers each instruction as soon as the last was taken (so it overlaps the
    last one's drain); otherwise each waits until the unit is idle. ``registered_control``:
    the unit as the ``ecp5`` target builds its control (`ComputeUnit`), on the generic array.
    """
    unit = ComputeUnit(config, registered_control=registered_control)
    rng = np.random.default_rng(seed)
    acc = acc.copy()
    cycles: list[int] = []
    retired: list[int] = []

    async def writer(ctx):
        while True:
            ready = int(rng.random() >= stall)
            ctx.set(unit.acc_write.req.ready, ready)
            _, _, valid, payload = await ctx.tick().sample(
                unit.acc_write.req.valid, unit.acc_write.req.payload
            )
            if valid and ready:
                acc[int(payload.addr)] = [int(v) for v in payload.data]

    async def retire_counter(ctx):
        async for _, _, pulse in ctx.tick().sample(unit.retired):
            retired.append(int(pulse))

    async def until_idle(ctx, count: int) -> int:
        while not ctx.get(unit.idle):
            await ctx.tick()
            count += 1
            assert count < HANG_CYCLES, f"COMPUTE hung (seed {seed})"
        return count

    async def driver(ctx):
        count = 0
        for instruction in program:
            ctx.set(unit.cmd.payload, command_payload(instruction, config.output_pipeline))
            ctx.set(unit.cmd.valid, 1)
            while True:
                *_, ready = await ctx.tick().sample(unit.cmd.ready)
                count += 1
                assert count < HANG_CYCLES, f"COMPUTE never took an instruction (seed {seed})"
                if ready:
                    break
            ctx.set(unit.cmd.valid, 0)
            if not back_to_back:
                cycles.append(await until_idle(ctx, count))
                count = 0
        if back_to_back:
            cycles.append(await until_idle(ctx, count))

    sim = Simulator(unit)
    sim.add_clock(1e-6)
    sim.add_testbench(driver)
    sim.add_testbench(retire_counter, background=True)
    for port in (unit.a_read, unit.b_read):
        sim.add_testbench(read_port_model(port, spad, rng, stall, latency), background=True)
    sim.add_testbench(read_port_model(unit.acc_read, acc, rng, stall, latency), background=True)
    sim.add_testbench(writer, background=True)
    sim.run()
    return ComputeRun(acc=acc, cycles=cycles, retired=sum(retired))
