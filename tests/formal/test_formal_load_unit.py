"""Bounded proofs that the load unit is a correct AXI4 read manager (issue 16, item 3).

For every sequence of LOAD commands and every subordinate behaviour the solver can find within
the depth: AR is held with a stable payload until ARREADY; every burst is a legal INCR burst
that stays inside its 4 KiB page; no more than ``dma.outstanding`` bursts are in flight; each
LOAD retires exactly once, and when the unit says idle every burst has been answered and
every LOAD taken has retired. The unit's run queue is never pushed full or popped empty.
"""

from __future__ import annotations

import pytest
from amaranth.hdl import Assume
from formal_axi_models import read_subordinate
from formal_harness import Harness
from formal_probe import fifos
from formal_properties import address_channel, queues_never_overflow, retires_each_once
from sby_runner import check_harness

from tensorforge.config import AcceleratorConfig, ArrayConfig, DmaConfig, ScratchpadConfig
from tensorforge.hw.load_unit import LoadUnit
from tensorforge.hw.targets import Target
from tensorforge.isa import Opcode
from tensorforge.units import Bytes

DEPTH = 10

CONFIGS = {
    "bus32-burst4-out2": DmaConfig(bus_bits=32, max_burst=4, outstanding=2),
    "bus64-burst2-out3": DmaConfig(bus_bits=64, max_burst=2, outstanding=3),
}

# The first runs by default; the second, a wider bus with short bursts, is marked slow.
CONFIG_PARAMS = [
    "bus32-burst4-out2",
    pytest.param("bus64-burst2-out3", marks=pytest.mark.slow),
]


def small_config(dma: DmaConfig) -> AcceleratorConfig:
    return AcceleratorConfig(
        array=ArrayConfig(rows=2, cols=2, dataflow="os"),
        scratchpad=ScratchpadConfig(capacity=Bytes(64), banks=1, accumulator=Bytes(64)),
        dma=dma,
    )


def load_unit_harness(config: AcceleratorConfig, unit_type=LoadUnit) -> Harness:
    harness = Harness(unit_type(config))
    m, past, unit = harness.m, harness.past, harness.design
    insn = harness.command_source(unit.cmd, "load_cmd")
    # Small tiles the solver can finish within the depth; any DRAM address, so any page end.
    line_elems = min(config.spad_line_elems, config.acc_line_elems)
    m.d.comb += [
        Assume(insn.opcode == Opcode.LOAD),
        Assume(insn.dram_addr < 3 * 4096),  # two 4 KiB page ends: crossings are reachable
        Assume(insn.rows <= 2),
        Assume(insn.row_len <= line_elems),
        Assume(insn.stride <= 2 * line_elems),
        Assume(insn.pad_before <= 1),
        Assume(insn.pad_after <= 1),
    ]
    harness.free_input(unit.spad_write.req.ready)
    harness.free_input(unit.acc_write.req.ready)

    axi = unit.axi
    address_channel(m, past, axi, "ar", max_burst=config.dma.max_burst,
                    bus_bytes=config.dma.bus_bytes)
    in_flight = read_subordinate(m, past, axi, outstanding=config.dma.outstanding,
                                 free=harness.free, name="dram")

    retires_each_once(m, cmd=unit.cmd, retired=unit.retired, idle=unit.idle,
                      unanswered=in_flight, what="LOAD")
    queues_never_overflow(m, fifos(harness.fragment))
    return harness


@pytest.mark.parametrize("name", CONFIG_PARAMS)
def test_load_unit_is_a_correct_axi_read_manager(name, tmp_path):
    harness = load_unit_harness(small_config(CONFIGS[name]))
    result = check_harness(harness, depth=DEPTH, workdir=tmp_path)
    assert result.passed, result.failure()


@pytest.mark.parametrize("name", CONFIG_PARAMS)
def test_ecp5_load_unit_is_a_correct_axi_read_manager(name, tmp_path):
    """The ``ecp5`` unit (registered slices, the runs queue written from each state's run,
    the three-cycle line cutter) under the same properties."""
    harness = load_unit_harness(small_config(CONFIGS[name]),
                                lambda config: LoadUnit(config, Target.ECP5))
    result = check_harness(harness, depth=DEPTH, workdir=tmp_path)
    assert result.passed, result.failure()


def test_the_check_finds_a_unit_that_keeps_too_many_bursts_in_flight(tmp_path):
    """Not vacuous: a unit built for one more outstanding burst than its bus promises fails."""
    config = small_config(CONFIGS["bus32-burst4-out2"])
    greedy = config.replace(dma=DmaConfig(bus_bits=32, max_burst=4, outstanding=3))
    harness = load_unit_harness(config, lambda _: LoadUnit(greedy))
    result = check_harness(harness, depth=DEPTH, workdir=tmp_path)
    assert not result.passed
    assert result.failed_messages() == ["dram: read bursts in flight left 0..2"], result.failure()
