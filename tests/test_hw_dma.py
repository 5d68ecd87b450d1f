"""The DMA (load and store units) on an AxiRam, and the burst planner they follow.

The RTL test builds one Verilator model per configuration (cached across runs) and runs
``cocotb_benches/bench_dma.py``; the configurations are chosen so that every burst length from
1 to ``max_burst`` can occur (rows at least ``max_burst`` beats long) in both directions.
"""

from __future__ import annotations

import functools
import random

import pytest
from amaranth import Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from tensorforge.config import (
    AcceleratorConfig,
    ArrayConfig,
    DmaConfig,
    PrecisionConfig,
    ScratchpadConfig,
)
from tensorforge.errors import ToolError
from tensorforge.fpga.tools import YOSYS, run_tool
from tensorforge.hw.accumulator import AccumulatorBuffer
from tensorforge.hw.axi import (
    ADDR_BITS,
    BOUNDARY_BYTES,
    BurstPlanner,
    axi_signature,
    forward,
    plan_bursts,
)
from tensorforge.hw.dma import LoadUnit, StoreUnit
from tensorforge.hw.ports import instruction_layout, spad_read_port
from tensorforge.hw.scratchpad import Scratchpad
from tensorforge.isa import Opcode, Store


class DmaHarness(wiring.Component):
    """Load unit, store unit, scratchpad and accumulator behind one AXI4 port, for the bench."""

    def __init__(self, config: AcceleratorConfig, target: str = "generic") -> None:
        self.config = config
        self.target = target
        super().__init__(
            {
                "m_axi": Out(axi_signature(config.dma.bus_bits)),
                "load_cmd": In(stream.Signature(instruction_layout(Opcode.LOAD))),
                "store_cmd": In(stream.Signature(instruction_layout(Opcode.STORE))),
                "load_idle": Out(1),
                "store_idle": Out(1),
                "error": Out(1),
                "spad_read": In(spad_read_port(config)),
            }
        )

    def elaborate(self, platform) -> Module:
        m = Module()
        m.submodules.load = load = LoadUnit(self.config, self.target)
        m.submodules.store = store = StoreUnit(self.config, self.target)
        every_cycle = self.target == "ecp5"  # the buffers as the ECP5 accelerator builds them
        m.submodules.scratchpad = scratchpad = Scratchpad(self.config, every_cycle, every_cycle)
        m.submodules.accumulator = accumulator = AccumulatorBuffer(
            self.config, every_cycle, every_cycle, every_cycle,
            registered_dma_reads=store.registered_acc_reads)
        wiring.connect(m, wiring.flipped(self.load_cmd), load.cmd)
        wiring.connect(m, wiring.flipped(self.store_cmd), store.cmd)
        wiring.connect(m, wiring.flipped(self.spad_read), scratchpad.a_read)
        wiring.connect(m, load.spad_write, scratchpad.write)
        wiring.connect(m, load.acc_write, accumulator.dma_write)
        wiring.connect(m, store.acc_read, accumulator.dma_read)
        forward(m, load.axi, self.m_axi)
        forward(m, store.axi, self.m_axi)
        m.d.comb += [
            self.load_idle.eq(load.idle),
            self.store_idle.eq(store.idle),
            self.error.eq(load.error | store.error),
        ]
        return m


def _config(
    intrinsic: str,
    rows: int,
    cols: int,
    bus_bits: int,
    max_burst: int,
    banks: int,
    acc_bits: int = 32,
    outstanding: int = 16,
) -> AcceleratorConfig:
    return AcceleratorConfig(
        intrinsic=intrinsic,
        array=ArrayConfig(rows=rows, cols=cols, dataflow="os"),
        scratchpad=ScratchpadConfig(capacity=8192, banks=banks, accumulator=8192),
        dma=DmaConfig(bus_bits=bus_bits, max_burst=max_burst, outstanding=outstanding),
        precision=PrecisionConfig(in_bits=8, acc_bits=acc_bits),
    )


# (name, config): long accumulator rows (GEMM 4x16: 64 B) on a 32-bit bus reach 16 beats;
# long scratchpad rows (DOT 4x16: 64 B) with bursts of 5; a 64-bit bus, bursts of 2, 3 banks,
# at most 3 bursts in flight; a 128-bit bus (two 8 B scratchpad lines a beat) with 64-bit
# accumulators. Rows back to back in DRAM move as long bursts across lines.
CONFIGS = {
    "gemm4x16-bus32-burst16": _config("gemm", 4, 16, 32, 16, 4),
    "dot4x16-bus32-burst5": _config("dot", 4, 16, 32, 5, 3),
    "gemm8x8-bus64-burst2-out3": _config("gemm", 8, 8, 64, 2, 3, outstanding=3),
    "gemm4x8-bus128-burst3-acc64": _config("gemm", 4, 8, 128, 3, 2, acc_bits=64),
}
REACH_OUTSTANDING = {"gemm8x8-bus64-burst2-out3"}  # the limit, not the DRAM, binds


@functools.cache
def dma_model(name: str, target: str = "generic"):
    from tensorforge.sim.rtl_harness import build_model

    return build_model(DmaHarness(CONFIGS[name], target), top="dma_harness")


@pytest.mark.rtl
@pytest.mark.parametrize("target", ["generic", "ecp5"])  # ecp5: both units' other data halves
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_dma_moves_random_tiles(name, target, tmp_path, cocotb_benches, random_seed):
    config = CONFIGS[name]
    seed = random_seed
    results = dma_model(name, target).run(
        cocotb_benches / "bench_dma.py",
        test_dir=tmp_path,
        config={
            "accelerator": config.to_dict(),
            "transfers": 12,
            "reach_outstanding": name in REACH_OUTSTANDING,
        },
        seed=seed,
    )
    assert len(results.passed) == 1, f"seed {seed}"


def _store_with_accumulator(config, target: str):
    """A store unit reading an accumulator built as the ``target``'s accelerator builds it;
    returns (the module, the store unit, the accumulator)."""
    m = Module()
    m.submodules.store = store = StoreUnit(config, target)
    ecp5 = target == "ecp5"
    m.submodules.accumulator = accumulator = AccumulatorBuffer(
        config, ecp5, ecp5, ecp5, registered_dma_reads=store.registered_acc_reads)
    wiring.connect(m, store.acc_read, accumulator.dma_read)
    return m, store, accumulator


@pytest.mark.amaranth_sim
@pytest.mark.parametrize("target", ["generic", "ecp5"])
@pytest.mark.parametrize("lane", [0, 3])
def test_store_unit_sends_w_beats_back_to_back(target, lane):
    """A STORE's W beats go out one a cycle (`StoreUnit.beats_per_cycle`) while W is ready:
    on ``ecp5`` the beat queue (`store_pack.BEAT_QUEUE_DEPTH`) holds every beat between its
    decision and WREADY. Four contiguous 64-byte rows, 64 beats in bursts of 16; starting at
    byte lane 3, every line straddles a beat and 65 beats go out, still back to back."""
    from amaranth.sim import Simulator

    config = CONFIGS["gemm4x16-bus32-burst16"]
    rows = 4
    bus = config.dma.bus_bytes
    beats = -(-(lane + rows * config.acc_line_bytes) // bus)
    m, store, accumulator = _store_with_accumulator(config, target)
    width = len(store.cmd.payload.as_value())
    insn = Store(rows=rows, row_len=config.acc_line_elems, stride=config.acc_line_elems,
                 dram_addr=0x100 + lane)
    sent = []  # cycle of each W beat, and its WLAST

    async def bench(ctx):
        ctx.set(store.axi.awready, 1)
        ctx.set(store.axi.wready, 1)
        ctx.set(store.cmd.payload.as_value(), insn.encode() & ((1 << width) - 1))
        ctx.set(store.cmd.valid, 1)
        await ctx.tick().until(store.cmd.ready)
        ctx.set(store.cmd.valid, 0)
        for cycle in range(4 * beats):
            if ctx.get(store.axi.wvalid):
                sent.append((cycle, ctx.get(store.axi.wlast)))
            await ctx.tick()

    simulator = Simulator(m)
    simulator.add_clock(1e-8)
    simulator.add_testbench(bench)
    simulator.run()
    assert len(sent) == beats, sent
    assert sent[-1][0] - sent[0][0] == beats - 1, f"gaps between W beats: {sent}"
    if lane == 0:
        assert [k for k, (_, last) in enumerate(sent) if last] == [15, 31, 47, 63]


# Yosys selection: the cells a W output's value comes through in its cycle, up to flip-flops.
W_CONE = "o:axi__{port} %ci*:-[D,EN,CLK,SRST,ARST,CE,AD,ALOAD,SET,CLR]"


@pytest.mark.synth
def test_ecp5_store_unit_drives_w_from_flip_flops(tmp_path):
    """The ``ecp5`` W packer (`store_pack`): WVALID, WDATA, WSTRB and WLAST are flip-flops, so
    no decision of the packer's (the bursts queue's level, the line queue's head) reaches W
    in the cycle it is made. Yosys checks each output's driving cone, small memories mapped to
    flip-flops; the generic unit's WVALID is logic, which the same check finds."""
    from amaranth.back import verilog

    config = CONFIGS["gemm8x8-bus64-burst2-out3"]
    checks = []
    for port in ("wvalid", "wdata", "wstrb", "wlast"):
        cone = W_CONE.format(port=port)
        checks += [f"select -assert-none {cone} t:* %i t:$*dff* %d",
                   f"select -assert-min 1 {cone} t:$*dff* %i"]
    for target, passes in (("ecp5", True), ("generic", False)):
        (tmp_path / f"{target}.v").write_text(verilog.convert(
            StoreUnit(config, target), name="store_unit", emit_src=False))
        (tmp_path / f"{target}.ys").write_text("\n".join([
            f"read_verilog {target}.v", "hierarchy -top store_unit", "proc", "flatten",
            "memory", "opt -fast", "opt_clean -purge", *checks]))
        try:
            run_tool(YOSYS, ["-q", "-s", f"{target}.ys"], cwd=tmp_path,
                     log_name=f"{target}.log", timeout_s=300)
        except ToolError:
            log = (tmp_path / f"{target}.log").read_text()
            assert not passes, log[-2000:]
            assert "Assertion failed: selection is not empty: o:axi__wvalid" in log, log[-2000:]
        else:
            assert passes, "the check passed the generic unit's combinational WVALID"


@pytest.mark.parametrize("seed", range(20))
def test_burst_plan_covers_the_row_and_obeys_axi(seed):
    rng = random.Random(seed)
    bus_bytes = rng.choice([4, 8, 16, 32, 64])
    max_burst = rng.randint(1, 256)
    start, length = rng.randrange(1 << 20), rng.randrange(1, 20_000)
    plan = plan_bursts(start, length, bus_bytes, max_burst)
    covered = start - start % bus_bytes
    for address, beats in plan:
        assert address == covered, f"seed {seed}: gap or overlap at {address:#x}"
        assert 1 <= beats <= max_burst
        end = address + beats * bus_bytes - 1
        assert address // BOUNDARY_BYTES == end // BOUNDARY_BYTES, f"seed {seed}: 4 KiB crossed"
        covered += beats * bus_bytes
    assert covered >= start + length > covered - bus_bytes, f"seed {seed}: wrong extent"


@pytest.mark.amaranth_sim
@pytest.mark.parametrize("prepared", [False, True, "staged_limit"])
def test_burst_planner_issues_the_reference_plan(prepared, random_seed):
    """`BurstPlanner` in Amaranth's simulator, one burst taken per cycle (or with gaps):
    its bursts are `plan_bursts`'s for random starts, lengths, bus widths and burst limits
    (power of two or not), starts near 4 KiB boundaries and transfers that end on one, and
    ``last`` is set on exactly the burst after which no beats are left. ``prepared``: a burst
    that is not the last is taken only while ``ready`` (``staged_limit``: the limit registered
    a cycle after the distance, ``ready`` a cycle later)."""
    from amaranth.sim import Simulator

    rng = random.Random(random_seed)
    for _ in range(6):
        bus_bytes = rng.choice([4, 8, 16])
        max_burst = rng.choice([1, 3, 16, 64, 256, rng.randint(2, 40)])
        m = Module()
        planner = BurstPlanner(bus_bytes, max_burst, "dut", 1 << 12, prepared=bool(prepared),
                               staged_limit=prepared == "staged_limit")
        if prepared:
            planner.prepare(m)
        address, beats = Signal(ADDR_BITS), Signal(13)
        load, advance = Signal(), Signal()
        with m.If(load):
            planner.start(m, address, beats)
        with m.Elif(advance):
            planner.advance(m)
        cases = []
        for _ in range(8):
            start, length = rng.randrange(1 << 20), rng.randrange(1, 6_000)
            if rng.random() < 0.6:  # near a 4 KiB boundary, maybe ending on it
                start = rng.randrange(1, 64) * BOUNDARY_BYTES - rng.randrange(1, 64 * bus_bytes)
                if rng.random() < 0.5:
                    length = -start % BOUNDARY_BYTES
            cases.append((start, length))

        async def testbench(ctx, cases=cases, bus_bytes=bus_bytes, max_burst=max_burst,
                            planner=planner, address=address, beats=beats, load=load,
                            advance=advance):
            for start, length in cases:
                aligned = start - start % bus_bytes
                ctx.set(address, aligned)
                ctx.set(beats, -(-(start % bus_bytes + length) // bus_bytes))
                ctx.set(load, 1)
                await ctx.tick()
                ctx.set(load, 0)
                issued = []
                while not ctx.get(planner.empty):
                    take = rng.random() < 0.8 and (
                        not prepared or ctx.get(planner.ready) or ctx.get(planner.last))
                    ctx.set(advance, take)
                    if take:
                        issued.append((ctx.get(planner.address), ctx.get(planner.beats)))
                        last = ctx.get(planner.last)
                    await ctx.tick()
                    ctx.set(advance, 0)
                    if take:  # the burst said whether it was the last
                        assert ctx.get(planner.empty) == last, (start, length, issued)
                expected = plan_bursts(start, length, bus_bytes, max_burst)
                assert issued == expected, (start, length, bus_bytes, max_burst)

        sim = Simulator(m)
        sim.add_clock(1e-6)
        sim.add_testbench(testbench)
        sim.run()


@pytest.mark.amaranth_sim
@pytest.mark.parametrize("bus_bytes", [4, 16, 64])
def test_limit_at_is_the_limit_of_the_distance(bus_bytes):
    """`BurstPlanner.limit_at` (the ``ecp5`` units' compare on the address beside the
    subtraction) equals `limit` of `beats_to_boundary` at every bus-aligned address of a page,
    for burst limits below, at and above a page's beats."""
    from amaranth.sim import Simulator

    for max_burst in (1, 3, 16, 64, 256):
        m = Module()
        planner = BurstPlanner(bus_bytes, max_burst, "dut", 1 << 12)
        address = Signal(ADDR_BITS)
        fast, reference = Signal(16), Signal(16)
        m.d.comb += [fast.eq(planner.limit_at(address)),
                     reference.eq(planner.limit(planner.beats_to_boundary(address)))]

        async def bench(ctx, fast=fast, reference=reference, address=address,
                        max_burst=max_burst):
            for page in (0, 5):
                for offset in range(0, BOUNDARY_BYTES, bus_bytes):
                    ctx.set(address, page * BOUNDARY_BYTES + offset)
                    to_boundary = (BOUNDARY_BYTES - offset) // bus_bytes
                    assert ctx.get(fast) == ctx.get(reference) == min(to_boundary, max_burst), \
                        (bus_bytes, max_burst, offset)

        simulator = Simulator(m)
        simulator.add_testbench(bench)
        simulator.run()


@pytest.mark.amaranth_sim
@pytest.mark.parametrize("depth", [2, 4, 5])
def test_ready_register_is_the_fifo_r_rdy(depth, random_seed):
    """`ready_register` (the ``ecp5`` compute unit's writer decides on it) equals the FIFO's
    own ``r_rdy`` in every cycle, under random writes (also while full) and reads taken
    while it is high."""
    from amaranth.lib.fifo import SyncFIFO
    from amaranth.sim import Simulator

    from tensorforge.hw.dma_rows import ready_register

    m = Module()
    m.submodules.fifo = fifo = SyncFIFO(width=8, depth=depth)
    ready = ready_register(m, fifo, "ready")
    rng = random.Random(random_seed)

    async def bench(ctx):
        seen = set()
        for cycle in range(500):
            assert ctx.get(ready) == ctx.get(fifo.r_rdy), f"seed {random_seed} cycle {cycle}"
            ctx.set(fifo.w_en, rng.random() < 0.5)
            ctx.set(fifo.w_data, rng.getrandbits(8))
            ctx.set(fifo.r_en, ctx.get(ready) and rng.random() < 0.45)
            seen.add(ctx.get(fifo.level))
            await ctx.tick()
        assert seen == set(range(depth + 1)), "the bench never filled or emptied the FIFO"

    simulator = Simulator(m)
    simulator.add_clock(1e-8)
    simulator.add_testbench(bench)
    simulator.run()


@pytest.mark.amaranth_sim
@pytest.mark.parametrize("depth", [1, 2, 4, 7])
def test_held_queue_behaves_as_a_queue(depth, random_seed):
    """`HeldQueue` (the ``ecp5`` store unit's line queue: narrow fields in registers, the
    head's held beside the read pointer) behaves as a plain `Queue` of the same struct, fed
    the same pushes and pops at random (pushes while full and pops while empty included):
    the same ``w_rdy``, ``r_rdy`` and ``level`` every cycle, and the same head while it has
    one, its held fields from registers as its wide ones from the memory."""
    from amaranth.sim import Simulator

    from tensorforge.hw.dma_rows import HeldQueue, Queue

    layout = data.StructLayout({"data": 40, "bytes": 6, "first": 1, "last": 1})
    m = Module()
    m.submodules.held = held = HeldQueue(layout, depth, ("bytes", "first", "last"))
    m.submodules.plain = plain = Queue(layout, depth)
    rng = random.Random(random_seed)

    async def bench(ctx):
        for cycle in range(400):
            pushing, popping = rng.random() < 0.55, rng.random() < 0.5
            value = rng.getrandbits(layout.size)
            for queue in (held, plain):
                ctx.set(queue.w_data, value)
                ctx.set(queue.w_en, pushing)
                ctx.set(queue.r_en, popping)
            what = f"seed {random_seed} depth {depth} cycle {cycle}"
            for port in ("w_rdy", "r_rdy", "level"):
                assert ctx.get(getattr(held, port)) == ctx.get(getattr(plain, port)), what
            if ctx.get(plain.r_rdy):
                assert ctx.get(held.head.as_value()) == ctx.get(plain.r_data), what
            await ctx.tick()

    simulator = Simulator(m)
    simulator.add_clock(1e-8)
    simulator.add_testbench(bench)
    simulator.run()


def _store_under_stalls(config, target: str, stores, lines, seed: int):
    """Runs ``stores`` through a `StoreUnit` reading ``lines`` from its accumulator, with AW,
    W and B stalled at random; returns the AW bursts ``(address, beats)``, the W beats
    ``(data, strobes, last)``, the bytes written (address -> byte) and the B responses
    answered before each ``retired`` pulse, in order."""
    from amaranth.sim import Simulator

    m, store, accumulator = _store_with_accumulator(config, target)
    width = len(store.cmd.payload.as_value())
    axi, fill = store.axi, accumulator.dma_write.req
    bus_bytes = config.dma.bus_bytes
    rng = random.Random(seed)
    bursts, beats, written, retired = [], [], {}, []

    async def bench(ctx):
        for address, line in enumerate(lines):
            ctx.set(fill.valid, 1)
            ctx.set(fill.payload.addr, address)
            ctx.set(fill.payload.data.as_value(), line)
            ctx.set(fill.payload.mask, (1 << config.acc_line_elems) - 1)
            await ctx.tick()
        ctx.set(fill.valid, 0)
        waiting = list(stores)
        addresses = []  # AW bursts whose beats are not all in yet: [address, beats left]
        unanswered = answered = 0
        for _ in range(3000):
            ctx.set(axi.awready, rng.random() < 0.6)
            ctx.set(axi.wready, rng.random() < 0.7)
            ctx.set(axi.bvalid, unanswered > 0 and rng.random() < 0.5)
            ctx.set(axi.bresp, 0)
            if waiting:
                ctx.set(store.cmd.payload.as_value(), waiting[0].encode() & ((1 << width) - 1))
            ctx.set(store.cmd.valid, bool(waiting))
            if waiting and ctx.get(store.cmd.ready):
                waiting.pop(0)
            if ctx.get(axi.awvalid) and ctx.get(axi.awready):
                burst = (ctx.get(axi.awaddr), ctx.get(axi.awlen) + 1)
                bursts.append(burst)
                addresses.append(list(burst))
            if ctx.get(axi.wvalid) and ctx.get(axi.wready):
                beat = (ctx.get(axi.wdata), ctx.get(axi.wstrb), ctx.get(axi.wlast))
                beats.append(beat)
                for lane in range(bus_bytes):
                    if beat[1] >> lane & 1:
                        written[addresses[0][0] + lane] = beat[0] >> (8 * lane) & 0xFF
                addresses[0][0] += bus_bytes
                addresses[0][1] -= 1
                if addresses[0][1] == 0:
                    addresses.pop(0)
                    unanswered += 1
            if ctx.get(axi.bvalid):
                unanswered -= 1
                answered += 1
            if ctx.get(store.retired):
                retired.append(answered)
            await ctx.tick()
            if not waiting and not unanswered and ctx.get(store.idle):
                return
        raise AssertionError("the STOREs did not finish in 3000 cycles")

    simulator = Simulator(m)
    simulator.add_clock(1e-8)
    simulator.add_testbench(bench)
    simulator.run()
    return bursts, beats, written, retired


@pytest.mark.amaranth_sim
def test_ecp5_store_unit_writes_what_the_generic_one_does_under_stalls(random_seed):
    """The ``ecp5`` store unit (registered accumulator reads with their row fields queued
    beside them, the planner started from a staged span) sends the same AW bursts and W beats
    as the generic one, with AW, W and B stalled at random; and the bytes written are the
    accumulator's rows, as `transfer_runs` places them (the reference)."""
    config = CONFIGS["gemm8x8-bus64-burst2-out3"]
    rng = random.Random(random_seed)
    elem_bytes = config.precision.acc_bytes
    lines = [rng.getrandbits(config.acc_line_elems * 8 * elem_bytes) for _ in range(12)]
    stores = [
        Store(line=0, rows=4, row_len=8, stride=8, dram_addr=BOUNDARY_BYTES - 40),
        Store(line=4, rows=3, row_len=5, stride=11, dram_addr=0x2004 + 4 * rng.randrange(8)),
        Store(line=7, rows=5, row_len=3, stride=3, dram_addr=0x3000 + 4 * rng.randrange(64)),
    ]
    expected = {}
    for insn in stores:
        rows = insn.rows
        for r in range(rows):
            line = lines[insn.line + r].to_bytes(config.acc_line_bytes, "little")
            start = insn.dram_addr + r * insn.stride * elem_bytes
            for k in range(min(insn.row_len, config.acc_line_elems) * elem_bytes):
                expected[start + k] = line[k]
    got = {target: _store_under_stalls(config, target, stores, lines, random_seed)
           for target in ("generic", "ecp5")}
    assert got["ecp5"][2] == expected, f"seed {random_seed}"
    assert got["ecp5"][:2] == got["generic"][:2], f"seed {random_seed}"
    assert got["generic"][2] == expected
    # each STORE retires once, in order, not before the B response of its last burst (the
    # STOREs write below 0x2000, below 0x3000 and above: the bursts answered by then)
    ends = [sum(1 for start, _ in got["generic"][0] if start < limit)
            for limit in (0x2000, 0x3000, 1 << 32)]
    for target in ("generic", "ecp5"):
        answered = got[target][3]
        assert len(answered) == len(stores), (target, answered)
        assert all(seen >= end for seen, end in zip(answered, ends, strict=True)), (
            target, answered, ends)


def _random_stores(config, rng, count: int):
    """``count`` STOREs of random shapes: tiles that are one run (back to back, up to 12
    rows), strided rows, rows longer than a line and empty ones, at random DRAM addresses
    (some just before a 4 KiB boundary); each reads its own accumulator lines."""
    elems = config.acc_line_elems
    stores, line = [], 0
    for _ in range(count):
        kind = rng.randrange(4)
        rows = rng.randrange(1, 13) if kind == 0 else rng.randrange(0 if kind == 3 else 1, 5)
        row_len = rng.randrange(1, elems + 1)
        if kind == 2:
            row_len = rng.randrange(elems + 1, 2 * elems + 1)
        stride = row_len if kind == 0 else row_len + rng.randrange(1, 9)
        start = rng.choice([rng.randrange(1, 8) * BOUNDARY_BYTES - rng.randrange(1, 200),
                            rng.randrange(0x100, 0x8000)])
        stores.append(Store(line=line, rows=rows, row_len=row_len, stride=stride,
                            dram_addr=start & ~(config.precision.acc_bytes - 1)))
        line += rows
    return stores


@pytest.mark.amaranth_sim
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_ecp5_store_unit_matches_the_generic_one_on_random_stores(name, random_seed):
    """The ``ecp5`` store unit's registered control (the walker's request from registers,
    the whole tile's elements added over two cycles, the lane shifted in two steps, the
    packer's burst and beat counts from registers, AW's room from a register) sends the same
    AW bursts and W beats as the generic unit, for random STORE shapes under random AW, W
    and B stalls; the bytes written are the accumulator's rows where `transfer_runs` puts
    them."""
    config = CONFIGS[name]
    rng = random.Random(random_seed)
    elem_bytes = config.precision.acc_bytes
    for trial in range(2):
        stores = _random_stores(config, rng, 4)
        used = max(1, sum(insn.rows for insn in stores))
        lines = [rng.getrandbits(config.acc_line_bytes * 8) for _ in range(used)]
        expected = {}
        for insn in stores:
            for r in range(insn.rows):
                line = lines[insn.line + r].to_bytes(config.acc_line_bytes, "little")
                start = insn.dram_addr + r * insn.stride * elem_bytes
                for k in range(min(insn.row_len, config.acc_line_elems) * elem_bytes):
                    expected[start + k] = line[k]
        seed = rng.getrandbits(32)
        got = {target: _store_under_stalls(config, target, stores, lines, seed)
               for target in ("generic", "ecp5")}
        what = f"seed {random_seed} trial {trial}: {stores}"
        assert got["generic"][2] == expected, what
        assert got["ecp5"][2] == expected, what
        assert got["ecp5"][:2] == got["generic"][:2], what
        assert len(got["ecp5"][3]) == len(stores), what
