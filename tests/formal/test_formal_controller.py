"""Bounded proofs of the controller's queues and dependency tokens (issue 16, item 3).

The fetched words are whatever the solver likes (any opcode, any token flags, any program
length and address), the units take and finish commands after any delay, and the retiring
units retire them after any delay. Within the depth: the fetch queue is never pushed while
full (its R beats cannot wait: RREADY is always high); fetch's beats in flight stay within its
queue; each unit is issued only commands that were queued for it, and no more wait than its
queue and gate hold; no token counter is popped at 0, and one pushed past its top raises
``error``; no retire window holds more commands than it has slots; fetch is a correct AXI4
read manager.
"""

from __future__ import annotations

import dataclasses

import pytest
from amaranth.hdl import Assert, Assume, Signal
from formal_axi_models import read_subordinate
from formal_harness import Harness
from formal_probe import fifos, signal_named
from formal_properties import (
    address_channel,
    counted,
    never_wraps,
    queues_never_overflow,
)
from sby_runner import check_harness
from test_formal_load_unit import CONFIGS, small_config

from tensorforge.config import ControllerConfig
from tensorforge.hw.controller import TOKEN_BITS, TOKEN_QUEUES, UNITS, Controller

DEPTH = 16  # a command issues from step 11, a token is popped from step 14


class SmallController(Controller):
    """Two fetched chunks instead of sixteen: the same logic, a state space a solver covers."""

    fetch_chunks = 2


def unit_model(harness: Harness, controller, unit: str) -> None:
    """A unit that takes its commands and finishes (and retires) them after any delay."""
    m = harness.m
    cmd = getattr(controller, f"{unit}_cmd")
    harness.free_input(cmd.ready)
    finish = harness.free_input(Signal(name=f"{unit}_finish"))
    busy = Signal(name=f"{unit}_busy")
    taken = cmd.valid & cmd.ready
    m.d.sync += busy.eq(taken | (busy & ~finish))
    m.d.comb += getattr(controller, f"{unit}_idle").eq(~busy)
    if unit in controller.retiring:
        pending = Signal(4, name=f"{unit}_unretired")
        retired = harness.free_input(getattr(controller, f"{unit}_retired"))
        m.d.sync += pending.eq(pending + taken - retired)
        m.d.comb += Assume(~retired | (pending != 0))


def controller_harness(config, retiring: tuple[str, ...]) -> Harness:
    harness = Harness(SmallController(config, retiring))
    m, past, controller = harness.m, harness.past, harness.design
    for name in ("start", "insn_addr", "insn_count"):
        harness.free_input(getattr(controller, name))
    m.d.comb += Assume(controller.insn_count <= 6)
    for unit in UNITS:
        unit_model(harness, controller, unit)

    bus_bytes = config.dma.bus_bytes
    chunk_beats = max(16, bus_bytes) // bus_bytes
    capacity = SmallController.fetch_chunks * chunk_beats
    axi = controller.fetch
    read_subordinate(m, past, axi, outstanding=capacity, free=harness.free, name="dram",
                     data_matters=True)
    address_channel(m, past, axi, "ar", max_burst=config.dma.max_burst, bus_bytes=bus_bytes)
    never_wraps(m, signal_named(harness.fragment, "in_flight"), limit=capacity,
                name="fetch beats in flight")
    # The fetch queue (the unit queues are streams: a full one holds dispatch back).
    fetched = [f for f in fifos(harness.fragment) if f.depth == SmallController.fetch_chunks]
    assert len(fetched) == 1
    queues_never_overflow(m, fetched, pops_checked=False)  # a flush after FINISH pops freely

    depth = config.controller.queue_depth
    unit_queues = [f for f in fifos(harness.fragment) if f.depth == depth]
    for unit, queue in zip(UNITS, unit_queues, strict=True):  # created in UNITS order
        cmd = getattr(controller, f"{unit}_cmd")
        queued = counted(m, queue.w_en & queue.w_rdy, bits=8, name=f"{unit}_queued")
        issued = counted(m, cmd.valid & cmd.ready, bits=8, name=f"{unit}_issued")
        # Underflow: a command that was never queued. Overflow: more waiting than the queue
        # and the gate's one held instruction can hold.
        m.d.comb += [
            Assert(issued <= queued, f"{unit}: a command issued that was never queued"),
            Assert(queued - issued <= depth + 1, f"{unit}: queue overflowed"),
        ]
    for name, *_ in TOKEN_QUEUES:
        counter = signal_named(harness.fragment, f"tokens_{name}")
        push = signal_named(harness.fragment, f"push_{name}")
        pop = signal_named(harness.fragment, f"pop_{name}")
        m.d.comb += Assert(~pop | (counter != 0), f"token queue {name} popped at 0")
        top = (1 << TOKEN_BITS) - 1
        with m.If(past.exists & past(push & ~pop & (counter == top), f"{name}_overflowed")):
            m.d.comb += Assert(controller.error, f"token queue {name} overflowed silently")
    for unit in retiring:
        count = signal_named(harness.fragment, f"{unit}_deferred_count")
        never_wraps(m, count, limit=Controller.retire_windows[unit], name=count.name)
    return harness


def _plain_gates():
    """The harness matches one issued command to each queued instruction, which a repeated
    LOAD/STORE (controller.repeat, the default) breaks by design: these proofs cover the
    plain gates; the repeating ones are checked against numpy on the RTL
    (tests/test_repeat.py), not formally yet."""
    config = small_config(CONFIGS["bus32-burst4-out2"])
    return dataclasses.replace(config, controller=ControllerConfig(repeat=False))


@pytest.mark.parametrize(
    "retiring",
    [("load", "compute", "store"), pytest.param((), marks=pytest.mark.slow)],
    ids=["retiring", "idle"],
)
def test_controller_queues_and_tokens_never_overflow_or_underflow(retiring, tmp_path):
    harness = controller_harness(_plain_gates(), retiring)
    result = check_harness(harness, depth=DEPTH, workdir=tmp_path)
    assert result.passed, result.failure()


@pytest.mark.slow  # guards the harness's depth, not the design: the slow tier is enough
def test_the_depth_reaches_a_token_pop(tmp_path):
    """Not vacuous: within the depth a compute instruction pops a token a LOAD pushed (a
    claim that it never happens fails)."""
    harness = controller_harness(_plain_gates(), ("load",))
    pop = signal_named(harness.fragment, "pop_l2c")
    harness.m.d.comb += Assert(~pop, "no token is ever popped")
    result = check_harness(harness, depth=DEPTH, workdir=tmp_path)
    assert "no token is ever popped" in result.failed_messages(), result.failure()
