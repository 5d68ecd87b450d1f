"""`SkidBuffer` (the ECP5 target's scratchpad request registers) in Amaranth's simulator:
random valid and ready on both sides, every item out once and in order, a cycle after it
went in at the earliest, one a cycle while both sides are willing, ``i.ready`` never a
function of ``o.ready`` in the same cycle."""

from __future__ import annotations

import numpy as np
import pytest
from amaranth import unsigned
from amaranth_bench import drive_stream_pair, run_testbench

from tensorforge.hw.skid import SkidBuffer


@pytest.mark.amaranth_sim
def test_skid_buffer_keeps_order_throughput_and_registered_ready(random_seed):
    rng = np.random.default_rng(random_seed)
    dut = SkidBuffer(unsigned(12))
    sent, received = [], []  # (item, cycle)

    async def testbench(ctx):
        item = 0
        for cycle in range(2000):
            where = f"seed {random_seed}, cycle {cycle}"
            full_speed = cycle < 200 or 1000 <= cycle < 1200
            offer = full_speed or bool(rng.random() < 0.7)
            take = full_speed or bool(rng.random() < 0.6)
            drive_stream_pair(ctx, dut.i, dut.o, offer=offer, payload=item, take=take,
                              where=where)
            if ctx.get(dut.o.valid) and take:
                received.append((ctx.get(dut.o.payload), cycle))
            if full_speed and cycle % 1000 >= 2:
                assert ctx.get(dut.o.valid), f"{where}: o.valid low at full speed"
                assert ctx.get(dut.i.ready), f"{where}: i.ready low at full speed"
            if offer and ctx.get(dut.i.ready):
                sent.append((item, cycle))
                item = (item + 1) % 4096
            await ctx.tick()

    run_testbench(dut, testbench)
    assert len(sent) - len(received) in (0, 1, 2), f"seed {random_seed}: items lost"
    for (item, went_in), (out, came_out) in zip(sent[:len(received)], received, strict=True):
        assert out == item, f"seed {random_seed}: item {item} came out as {out}"
        assert came_out >= went_in + SkidBuffer.latency, f"seed {random_seed}: item {item} early"


@pytest.mark.amaranth_sim
def test_elastic_buffer_matches_its_contract_cycle_by_cycle(random_seed):
    """`ElasticBuffer` against a model of its contract (a deque, ``i.ready`` from the count
    held and the item accepted in the last cycle, not from the last take): random stalls on
    both sides and full-speed stretches; every item out once, in order, a cycle after it went
    in at the earliest; ``i.ready`` and ``o.valid`` do not follow either side in the cycle."""
    from collections import deque

    from tensorforge.hw.skid import ElasticBuffer

    rng = np.random.default_rng(random_seed)
    dut = ElasticBuffer(unsigned(12))
    sent, received = [], []  # item, in order

    async def testbench(ctx):
        held, ready = deque(), True  # the model: items held, i.ready
        item = 0
        for cycle in range(3000):
            where = f"seed {random_seed}, cycle {cycle}"
            full_speed = cycle < 200 or 1500 <= cycle < 1700
            offer = full_speed or bool(rng.random() < 0.7)
            take = full_speed or bool(rng.random() < rng.choice([0.3, 0.9]))
            ctx.set(dut.i.valid, 0)
            valid = bool(ctx.get(dut.o.valid))
            got_ready = drive_stream_pair(ctx, dut.i, dut.o, offer=offer, payload=item,
                                          take=take, where=where)
            assert bool(ctx.get(dut.o.valid)) == valid, f"{where}: o.valid follows i.valid"
            assert got_ready == ready, f"{where}: i.ready {got_ready}, the model's {ready}"
            assert valid == bool(held), f"{where}: o.valid {valid}, {len(held)} held"
            if full_speed and cycle % 1500 >= 2:
                assert valid and got_ready, f"{where}: a stall at full speed"
            if valid:
                assert ctx.get(dut.o.payload) == held[0], f"{where}: not the oldest item"
                if take:
                    received.append(held.popleft())
            pushed = offer and ready
            if pushed:
                sent.append(item)
            # room next cycle: the items held before this cycle's take, and the one accepted now
            ready = len(held) + (valid and take) + pushed < dut.depth
            if pushed:
                held.append(item)
                item = (item + 1) % 4096
            await ctx.tick()

    run_testbench(dut, testbench)
    assert received == sent[:len(received)], f"seed {random_seed}: items lost or reordered"
    assert len(sent) - len(received) <= dut.depth, f"seed {random_seed}: items lost"
