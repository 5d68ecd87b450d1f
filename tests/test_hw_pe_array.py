"""The PE, the array plans and the PE array, against `apply_intrinsic` (numpy).

Tiers: the plans are checked in pure Python over every intrinsic x dataflow x shape; the PE and
one intrinsic step on the array run on Amaranth's simulator (marker ``amaranth_sim``), over
every intrinsic x interconnect x dataflow on small shapes. The randomized RTL tests of whole
COMPUTE instructions live in ``test_hw_compute_unit.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
from amaranth.sim import Simulator

from tensorforge.config import (
    AcceleratorConfig,
    ArrayConfig,
    Dataflow,
    Interconnect,
    ScratchpadConfig,
)
from tensorforge.hw.dataflow_plan import Drain, Operand, design_grid, local_banks, plan_for
from tensorforge.hw.pe import ProcessingElement
from tensorforge.hw.pe_array import PEArray, array_latency
from tensorforge.intrinsics import Intrinsic, apply_intrinsic, wrap

SHAPES = [(4, 4), (2, 8), (3, 5)]


def make_config(intrinsic, dataflow, interconnect, rows, cols, taps=3, local_bytes=0):
    return AcceleratorConfig(
        intrinsic=intrinsic,
        array=ArrayConfig(
            rows=rows,
            cols=cols,
            dataflow=dataflow,
            interconnect=interconnect,
            local_bytes=max(local_bytes, taps),
        ),
        scratchpad=ScratchpadConfig(capacity=4096, banks=2, accumulator=4096),
        conv_taps=taps,
    )


grid = design_grid


def random_blocks(config, rng):
    blocks, low, high = config.blocks, -128, 128
    a = rng.integers(low, high, (blocks["A"].lines, config.spad_line_elems))
    b = rng.integers(low, high, (blocks["B"].lines, config.spad_line_elems))
    c = rng.integers(-(1 << 31), 1 << 31, (blocks["C"].lines, config.acc_line_elems))
    return a, b, c


def plan_reference(plan, a, b):
    """The output lines of one step, computed the way the plan says the PEs compute them."""
    stationary, streamed = (a, b) if plan.stationary is Operand.A else (b, a)
    store = np.zeros((plan.rows, plan.cols, plan.slots), dtype=np.int64)
    for index in range(plan.stationary_lines):
        for r, c, slot, elem in plan.loads_of_line(index):
            store[r, c, slot] = stationary[index, elem]
    acc = np.zeros((plan.rows, plan.cols), dtype=np.int64)
    lines = []
    for beat in plan.beats:
        for r in range(plan.rows):
            for c in range(plan.cols):
                if beat.columns >> c & 1:
                    product = streamed[beat.line, plan.stream_elem[r][c]] * store[r, c, beat.slot]
                    acc[r, c] = product if beat.first else acc[r, c] + product
        if beat.last:
            lines += {
                Drain.COLUMNS: [acc.sum(0)],
                Drain.ROWS: list(acc),
                Drain.ALL: [acc.sum(keepdims=True)[0]],
            }[plan.drain]
    return lines


@pytest.mark.parametrize(
    "intrinsic,dataflow,rows,cols",
    [(i, d, r, c) for i, d, _, r, c in grid(SHAPES + [(1, 1), (5, 3)], (Interconnect.NONE,))],
)
def test_plan_computes_the_intrinsic(intrinsic, dataflow, rows, cols):
    config = make_config(intrinsic, dataflow, Interconnect.NONE, rows, cols)
    plan = plan_for(config)
    seed = rows * 100 + cols
    rng = np.random.default_rng(seed)
    a, b, c = random_blocks(config, rng)
    lines = plan_reference(plan, a, b)
    assert len(lines) == len(plan.output_lines) * 1
    got = c.copy()
    for offset, line in zip(plan.output_lines, lines, strict=True):
        got[offset] += np.asarray(line).reshape(-1)
    expected = apply_intrinsic(intrinsic, config.intrinsic_sizes, a, b, c)
    assert (wrap(got, 32) == expected).all(), f"seed {seed}"


@pytest.mark.amaranth_sim
def test_pe_accumulates_store_times_operand():
    pe = ProcessingElement(in_bits=8, acc_bits=32, slots=3, banks=2)
    rng = np.random.default_rng(7)
    store = rng.integers(-128, 128, (2, 3))
    beats = [
        (
            int(rng.integers(-128, 128)),
            int(rng.integers(2)),
            int(rng.integers(3)),
            bool(rng.random() < 0.3),
            bool(rng.random() < 0.8),
        )
        for _ in range(60)
    ]
    seen = []

    async def bench(ctx):
        for bank in range(2):
            ctx.set(pe.load_valid, 1)
            ctx.set(pe.load_bank, bank)
            ctx.set(pe.load_mask, 0b111)
            ctx.set(pe.load_data, [int(v) for v in store[bank]])
            await ctx.tick()
        ctx.set(pe.load_valid, 0)
        for operand, bank, slot, first, enable in beats:
            ctx.set(pe.operand, operand)
            ctx.set(pe.bank, bank)
            ctx.set(pe.slot, slot)
            ctx.set(pe.first, first)
            ctx.set(pe.enable, enable)
            await ctx.tick()
            seen.append(ctx.get(pe.acc))
        ctx.set(pe.enable, 0)
        for _ in range(pe.latency - 1):  # the last beats' sums, still in the pipeline
            await ctx.tick()
            seen.append(ctx.get(pe.acc))

    sim = Simulator(pe)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    acc, expected = 0, []
    for operand, bank, slot, first, enable in beats:
        if enable:
            acc = (0 if first else acc) + operand * int(store[bank, slot])
        expected.append(acc)
    assert seen[pe.latency - 1 :] == expected, "seed 7"


def run_array_step(config, a, b, bank=1):
    """Load the stationary block into ``bank``, stream one step's beats back to back.

    Returns the output lines and the cycle (counted in clock edges from the edge that took the
    step's last beat) at which the first line of the last group appeared.
    """
    array = PEArray(config)
    plan = array.plan
    stationary, streamed = (a, b) if plan.stationary is Operand.A else (b, a)
    lines, seen_at = [], []

    async def bench(ctx):
        for index in range(plan.stationary_lines):
            ctx.set(array.load.valid, 1)
            ctx.set(
                array.load.payload,
                {"bank": bank, "index": index, "line": [int(v) for v in stationary[index]]},
            )
            await ctx.tick()
        ctx.set(array.load.valid, 0)
        edge = 0
        for beat in plan.beats:
            ctx.set(array.beat.valid, 1)
            ctx.set(
                array.beat.payload,
                {
                    "first": beat.first,
                    "last": beat.last,
                    "slot": beat.slot,
                    "bank": bank,
                    "columns": beat.columns,
                    "line": [int(v) for v in streamed[beat.line]],
                },
            )
            await ctx.tick()
            edge = 1  # cycles since the cycle that presented the last beat
            if ctx.get(array.out.valid):
                lines.append(list(ctx.get(array.out.payload)))
        ctx.set(array.beat.valid, 0)
        for _ in range(array.latency + plan.rows + 4):
            await ctx.tick()
            edge += 1
            if ctx.get(array.out.valid):
                lines.append(list(ctx.get(array.out.payload)))
                seen_at.append(edge)

    sim = Simulator(array)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return lines, seen_at, array


@pytest.mark.amaranth_sim
@pytest.mark.parametrize(
    "intrinsic,dataflow,interconnect,rows,cols",
    list(grid([(3, 5), (2, 2)])) + list(grid([(4, 4), (2, 8)], (Interconnect.SYSTOLIC,))),
)
def test_array_step_matches_intrinsic(intrinsic, dataflow, interconnect, rows, cols):
    config = make_config(intrinsic, dataflow, interconnect, rows, cols)
    seed = hash((intrinsic.value, dataflow.value, interconnect.value, rows, cols)) % 10_000
    rng = np.random.default_rng(seed)
    a, b, c = random_blocks(config, rng)
    lines, seen_at, array = run_array_step(config, a, b)
    plan = array.plan
    assert len(lines) == len(plan.output_lines), f"seed {seed}"
    got = c.copy()
    for offset, line in zip(plan.output_lines, lines, strict=True):
        got[offset] += np.asarray(line)
    expected = apply_intrinsic(intrinsic, config.intrinsic_sizes, a, b, c)
    assert (wrap(got, 32) == expected).all(), f"seed {seed}"
    # the last group's first line appears exactly `latency` edges after its last beat
    last_group_lines = plan.lines_per_group
    assert seen_at[-last_group_lines] == array_latency(config), f"seed {seed}"


def test_local_bytes_adds_banks():
    small = make_config(Intrinsic.GEMM, Dataflow.WEIGHT_STATIONARY, Interconnect.SYSTOLIC, 4, 4)
    large = make_config(
        Intrinsic.GEMM, Dataflow.WEIGHT_STATIONARY, Interconnect.SYSTOLIC, 4, 4, local_bytes=8
    )
    assert local_banks(small, plan_for(small)) == 3  # 3 bytes (taps): 3 one-byte weight sets
    assert local_banks(large, plan_for(large)) == 8
