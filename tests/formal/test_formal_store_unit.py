"""Bounded proofs that the store unit is a correct AXI4 write manager (issue 16, item 3).

For every sequence of STORE commands, accumulator read latencies and subordinate behaviours
within the depth: AW and W are held with stable payloads until ready; every burst is a legal
INCR burst inside its 4 KiB page; W beats come only for addressed bursts, with WLAST on each
burst's last beat; at most ``dma.outstanding`` bursts wait for B; each STORE retires exactly
once, and idle means every burst has its B response. The per-STORE counters of unanswered
bursts never leave 0..outstanding: commit 89632aa fixed one that went below 0 when a B
response came back to back with the retiring STORE's last one.
"""

from __future__ import annotations

import pytest
from amaranth.hdl import Assume, Cat, Signal
from formal_axi_models import write_subordinate
from formal_harness import Harness
from formal_probe import fifos, signal_named
from formal_properties import (
    address_channel,
    held_until_ready,
    never_wraps,
    queues_never_overflow,
    retires_each_once,
)
from sby_runner import check_harness
from test_formal_load_unit import CONFIG_PARAMS, CONFIGS, small_config

from tensorforge.hw.scratchpad import RegisteredReadBuffer
from tensorforge.hw.store_unit import StoreUnit
from tensorforge.isa import Opcode

DEPTH = 11  # the B-response underflow fixed in 89632aa fails at step 10


def accumulator_reader(harness: Harness, port, registered: bool = False) -> None:
    """Answers the unit's line reads in order, after any delay (the lines' bits are 0).
    ``registered``: as the accumulator's registered DMA port promises (`RegisteredReadBuffer`),
    a line comes two cycles after its read at the earliest and at most
    `RegisteredReadBuffer.LINES` lines are owned (read, not yet taken)."""
    m, past = harness.m, harness.past
    ready = harness.free_input(port.req.ready)
    valid = harness.free_input(port.resp.valid)
    m.d.comb += port.resp.payload.as_value().eq(0)
    pending = Signal(4, name="acc_reads_pending")
    accepted = port.req.valid & port.req.ready
    m.d.sync += pending.eq(pending + accepted - (port.resp.valid & port.resp.ready))
    if registered:
        recent = Signal(name="acc_read_last_cycle")  # read a cycle ago: not answerable yet
        m.d.sync += recent.eq(accepted)
        m.d.comb += [Assume(~valid | (pending - recent != 0)),
                     Assume(~ready | (pending < RegisteredReadBuffer.LINES))]
        return held_until_ready(m, past, valid=valid, ready=port.resp.ready, payload=valid,
                                name="acc_resp", promise=Assume)
    m.d.comb += Assume(~valid | (pending != 0))
    held_until_ready(m, past, valid=valid, ready=port.resp.ready, payload=valid,
                     name="acc_resp", promise=Assume)


def store_unit_harness(config, unit_type=StoreUnit, max_rows: int = 1,
                       target: str = "generic") -> Harness:
    """``max_rows`` 1 keeps the default check near half a minute; tiles of more rows (one run,
    or a run per row) are checked in the slow tier. ``target`` ``ecp5``: its W packer, whose
    beats queue and go out from registers (`store_pack`)."""
    harness = Harness(unit_type(config, target))
    m, past, unit = harness.m, harness.past, harness.design
    insn = harness.command_source(unit.cmd, "store_cmd")
    line_elems = config.acc_line_elems
    m.d.comb += [
        Assume(insn.opcode == Opcode.STORE),
        Assume(insn.dram_addr < 3 * 4096),  # two 4 KiB page ends: crossings are reachable
        Assume(insn.rows <= max_rows),
        Assume(insn.row_len <= line_elems),
        Assume(insn.stride <= 2 * line_elems),
    ]
    accumulator_reader(harness, unit.acc_read, registered=unit.registered_acc_reads)

    axi = unit.axi
    address_channel(m, past, axi, "aw", max_burst=config.dma.max_burst,
                    bus_bytes=config.dma.bus_bytes)
    held_until_ready(m, past, valid=axi.wvalid, ready=axi.wready,
                     payload=Cat(axi.wdata, axi.wstrb, axi.wlast), name="W")
    unanswered = write_subordinate(m, past, axi, outstanding=config.dma.outstanding,
                                   free=harness.free, name="dram")
    retires_each_once(m, cmd=unit.cmd, retired=unit.retired, idle=unit.idle,
                      unanswered=unanswered, what="STORE")
    for k in range(unit_type.stores_in_flight):
        counter = signal_named(harness.fragment, f"store_unanswered_{k}")
        never_wraps(m, counter, limit=config.dma.outstanding, name=counter.name)
    queues_never_overflow(m, fifos(harness.fragment))
    return harness


@pytest.mark.parametrize("target", ["generic", "ecp5"])
@pytest.mark.parametrize("name", CONFIG_PARAMS)
def test_store_unit_is_a_correct_axi_write_manager(name, target, tmp_path):
    harness = store_unit_harness(small_config(CONFIGS[name]), target=target)
    result = check_harness(harness, depth=DEPTH, workdir=tmp_path)
    assert result.passed, result.failure()


@pytest.mark.slow
@pytest.mark.parametrize("target", ["generic", "ecp5"])
def test_store_unit_with_tiles_of_two_rows(target, tmp_path):
    harness = store_unit_harness(small_config(CONFIGS["bus32-burst4-out2"]), max_rows=2,
                                 target=target)
    result = check_harness(harness, depth=DEPTH, workdir=tmp_path)
    assert result.passed, result.failure()
