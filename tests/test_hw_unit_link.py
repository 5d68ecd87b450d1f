"""`RegisteredUnitLink` (the ECP5 target's controller-to-unit registers) in Amaranth's simulator,
against a random unit that keeps the controller's unit contract: commands arrive in order, the
gate's inputs are registers, and the gate sees the pair idle exactly one cycle after the link
held nothing, took nothing, and the unit was idle without a retire pulse."""

from __future__ import annotations

import numpy as np
import pytest
from amaranth import unsigned
from amaranth_bench import drive_stream_pair, run_testbench

from tensorforge.hw.unit_link import RegisteredUnitLink


@pytest.mark.amaranth_sim
def test_link_passes_commands_in_order_and_reports_idle_a_cycle_late(random_seed):
    rng = np.random.default_rng(random_seed)
    dut = RegisteredUnitLink(unsigned(10))
    sent, received = [], []
    retires = 0

    async def testbench(ctx):
        item, busy_for, retire_at = 0, 0, []
        nonlocal retires
        quiet_before = True  # after reset: nothing held, an idle unit
        retired_before = False
        for cycle in range(3000):
            where = f"seed {random_seed}, cycle {cycle}"
            unit_retired = bool(retire_at) and retire_at[0] == cycle
            if unit_retired:
                retire_at.pop(0)
                retires += 1
            unit_idle = busy_for == 0 and not retire_at  # may be high with its last retire
            offer = bool(rng.random() < 0.3)
            take = busy_for == 0 and bool(rng.random() < 0.7)
            ctx.set(dut.unit_idle, unit_idle)
            ctx.set(dut.unit_retired, unit_retired)
            ready = drive_stream_pair(ctx, dut.gate_cmd, dut.unit_cmd, offer=offer,
                                      payload=item, take=take, where=where)
            assert ctx.get(dut.gate_idle) == quiet_before, f"{where}: idle"
            assert ctx.get(dut.gate_retired) == retired_before, f"{where}: retired"

            gate_took = offer and ready
            unit_took = ctx.get(dut.unit_cmd.valid) and take
            if unit_took:
                received.append(ctx.get(dut.unit_cmd.payload))
                busy_for = int(rng.integers(1, 6))
                done = cycle + busy_for + int(rng.integers(0, 4))
                retire_at.append(max(done, retire_at[-1] + 1) if retire_at else done)  # in order
            elif busy_for:
                busy_for -= 1
            link_empty = len(sent) == len(received) and not unit_took
            quiet_before = link_empty and not gate_took and unit_idle and not unit_retired
            retired_before = unit_retired
            if gate_took:
                sent.append(item)
                item = (item + 1) % 1024
            await ctx.tick()

    run_testbench(dut, testbench)
    assert received == sent[:len(received)], f"seed {random_seed}: commands out of order"
    assert len(sent) - len(received) <= 2
    assert len(received) > 200, "too few commands went through to test anything"
    assert retires >= len(received) - 4, "the unit's retire pulses were lost"
