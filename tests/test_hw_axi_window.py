# amaranth: UnusedElaboratable=no
# (the constructions refused in the last test are never elaborated)
"""The activation window's address decoders with the window's `AxiMemory`, in Amaranth's
simulator, against a Python reference: one manager (one ID) interleaves bursts to a slow DRAM
model and to the window; every R beat, B response and byte must be what two plain byte arrays
say, in request order.

The DRAM model answers 6-20 cycles after an address and the window the next cycle, so a burst
to the window that did not wait for the DRAM's outstanding bursts would overtake them and its
beats would arrive out of order. A write burst's W beats reach the DRAM model only through
the decoder: a beat sent to the wrong subordinate leaves a byte that differs from the
reference.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from tensorforge.hw.axi import Response, axi_signature, forward
from tensorforge.hw.axi_memory import AxiMemory
from tensorforge.hw.axi_window import AxiWindowDecoder, Channels

pytestmark = pytest.mark.amaranth_sim

BUS_BITS = 64
BUS_BYTES = BUS_BITS // 8
BASE = 1 << 31
WINDOW_BYTES = 1024  # under 4 KiB, so a legal burst can run past the window's end
DRAM_BYTES = 8192
MAX_OUTSTANDING = 4


class WindowedPort(wiring.Component):
    """A manager port ``bus`` whose bursts from ``BASE`` up go to an on-chip `AxiMemory`
    and the rest to ``dram``: the accelerator's arrangement on one port."""

    def __init__(self) -> None:
        super().__init__({"bus": In(axi_signature(BUS_BITS)),
                          "dram": Out(axi_signature(BUS_BITS))})

    def elaborate(self, platform) -> Module:
        m = Module()
        m.submodules.memory = memory = AxiMemory(WINDOW_BYTES, BUS_BITS)
        for channels in Channels:
            decoder = AxiWindowDecoder(BUS_BITS, channels, BASE, MAX_OUTSTANDING)
            m.submodules[channels.name.lower()] = decoder
            for name in decoder.bus.signature.members:
                outer, inner = getattr(self.bus, name), getattr(decoder.bus, name)
                if decoder.bus.signature.members[name].flow == In:
                    m.d.comb += inner.eq(outer)
                else:
                    m.d.comb += outer.eq(inner)
            forward(m, decoder.dram, self.dram)
            forward(m, decoder.window, memory.axi)
        return m


@dataclass(frozen=True)
class Burst:
    address: int
    beats: int

    def addresses(self):
        return [self.address + beat * BUS_BYTES for beat in range(self.beats)]


class Reference:
    """DRAM and window as byte arrays; what each beat should answer."""

    def __init__(self) -> None:
        self.dram = bytearray(DRAM_BYTES)
        self.window = bytearray(WINDOW_BYTES)

    def fits(self, address: int) -> bool:
        return address < BASE or address - BASE < WINDOW_BYTES

    def read(self, address: int) -> bytes | None:
        """A beat's bytes, None for a beat that must answer SLVERR."""
        if address < BASE:
            return bytes(self.dram[address : address + BUS_BYTES])
        offset = address - BASE
        return bytes(self.window[offset : offset + BUS_BYTES]) if self.fits(address) else None

    def write(self, address: int, data: bytes, strobe: int) -> None:
        if not self.fits(address):
            return
        memory, offset = (self.dram, address) if address < BASE else (self.window, address - BASE)
        for lane in range(BUS_BYTES):
            if strobe >> lane & 1:
                memory[offset + lane] = data[lane]


def random_bursts(rng, count: int) -> list[Burst]:
    """DRAM bursts, window bursts, bursts that run past the window's end or start beyond it,
    mixed (never across 4 KiB, as AXI requires)."""
    bursts = []
    for _ in range(count):
        beats = int(rng.integers(1, 9))
        kind = rng.integers(0, 10)
        if kind < 4:
            start = int(rng.integers(0, DRAM_BYTES // BUS_BYTES))
            start -= max(0, (start % 512) + beats - 512)  # stay in the 4 KiB page
            bursts.append(Burst(start * BUS_BYTES, beats))
        elif kind < 8:
            start = int(rng.integers(0, WINDOW_BYTES // BUS_BYTES - beats + 1))
            bursts.append(Burst(BASE + start * BUS_BYTES, beats))
        elif kind == 8:  # straddles the window's end
            bursts.append(Burst(BASE + WINDOW_BYTES - BUS_BYTES * int(rng.integers(1, 3)), 4))
        else:  # wholly past the window's end
            bursts.append(Burst(BASE + WINDOW_BYTES + BUS_BYTES * int(rng.integers(0, 8)), 2))
    return bursts


class DramModel:
    """A slow AXI4 subordinate on ``port``: in-order bursts, each answered 6-20 cycles after
    its address (R) or its last W beat (B), random ready; it records every address it sees."""

    def __init__(self, port, memory: bytearray, rng) -> None:
        self.port, self.memory, self.rng = port, memory, rng
        self.addresses: list[int] = []

    async def run(self, ctx) -> None:
        port, rng = self.port, self.rng
        cycle = 0
        reads = []  # [due cycle, address, beats left, id]
        writes = []  # [address, id] whose W beats are being taken
        answers = []  # [due cycle, id]
        while True:
            ctx.set(port.arready, rng.random() < 0.7)
            ctx.set(port.awready, rng.random() < 0.7)
            ctx.set(port.wready, bool(writes) and rng.random() < 0.7)
            read_beat = bool(reads) and reads[0][0] <= cycle and rng.random() < 0.8
            ctx.set(port.rvalid, read_beat)
            if read_beat:
                _, address, left, ident = reads[0]
                ctx.set(port.rdata, int.from_bytes(self.memory[address : address + BUS_BYTES],
                                                   "little"))
                ctx.set(port.rlast, left == 1)
                ctx.set(port.rid, ident)
                ctx.set(port.rresp, Response.OKAY)
            answer = bool(answers) and answers[0][0] <= cycle
            ctx.set(port.bvalid, answer)
            if answer:
                ctx.set(port.bid, answers[0][1])
                ctx.set(port.bresp, Response.OKAY)
            (_, _, arvalid, arready, araddr, arlen, arid, rready, awvalid, awready, awaddr,
             awid, wvalid, wready, wdata, wstrb, wlast, bready) = await ctx.tick().sample(
                port.arvalid, port.arready, port.araddr, port.arlen, port.arid, port.rready,
                port.awvalid, port.awready, port.awaddr, port.awid, port.wvalid, port.wready,
                port.wdata, port.wstrb, port.wlast, port.bready)
            cycle += 1
            if arvalid and arready:
                assert araddr < DRAM_BYTES, f"DRAM asked for {araddr:#x}"
                self.addresses.append(araddr)
                reads.append([cycle + int(rng.integers(6, 21)), araddr, arlen + 1, arid])
            if read_beat and rready:
                reads[0][1] += BUS_BYTES
                reads[0][2] -= 1
                if reads[0][2] == 0:
                    reads.pop(0)
            if awvalid and awready:
                assert awaddr < DRAM_BYTES, f"DRAM asked for {awaddr:#x}"
                self.addresses.append(awaddr)
                writes.append([awaddr, awid])
            if wvalid and wready:
                address = writes[0][0]
                data = wdata.to_bytes(BUS_BYTES, "little")
                for lane in range(BUS_BYTES):
                    if wstrb >> lane & 1:
                        self.memory[address + lane] = data[lane]
                writes[0][0] += BUS_BYTES
                if wlast:
                    answers.append([cycle + int(rng.integers(6, 21)), writes.pop(0)[1]])
            if answer and bready:
                answers.pop(0)


async def write_bursts(ctx, bus, bursts, reference: Reference, rng, checks) -> None:
    """AW of each burst as soon as the decoder takes it; each burst's W beats after its AW,
    with gaps; B responses in order. Up to 6 bursts without a B (the decoder holds 4)."""
    expected = []
    pending = list(bursts)
    beats = []  # (address, data, strobe, last) of bursts whose AW is taken
    answered = 0
    while answered < len(bursts):
        offer = bool(pending) and len(expected) - answered < 6
        ctx.set(bus.awvalid, offer)
        if offer:
            ctx.set(bus.awaddr, pending[0].address)
            ctx.set(bus.awlen, pending[0].beats - 1)
            ctx.set(bus.awid, 0)
        send = bool(beats) and rng.random() < 0.7
        ctx.set(bus.wvalid, send)
        if send:
            _, data, strobe, last = beats[0]
            ctx.set(bus.wdata, int.from_bytes(data, "little"))
            ctx.set(bus.wstrb, strobe)
            ctx.set(bus.wlast, last)
        ready = rng.random() < 0.7
        ctx.set(bus.bready, ready)
        _, _, awready, wready, bvalid, bresp, bid = await ctx.tick().sample(
            bus.awready, bus.wready, bus.bvalid, bus.bresp, bus.bid)
        if offer and awready:
            burst = pending.pop(0)
            fits = all(reference.fits(address) for address in burst.addresses())
            expected.append(Response.OKAY if fits else Response.SLVERR)
            for index, address in enumerate(burst.addresses()):
                data = rng.integers(0, 256, BUS_BYTES, dtype=np.uint8).tobytes()
                beats.append((address, data, int(rng.integers(1, 1 << BUS_BYTES)),
                              index == burst.beats - 1))
        if send and wready:
            address, data, strobe, _ = beats.pop(0)
            reference.write(address, data, strobe)
        if bvalid and ready:
            checks.append(("B", answered, (bresp, bid), (expected[answered], 0)))
            answered += 1
    ctx.set(bus.awvalid, 0)
    ctx.set(bus.wvalid, 0)
    ctx.set(bus.bready, 0)


async def read_bursts(ctx, bus, bursts, reference: Reference, rng, checks) -> None:
    """AR of each burst as soon as the decoder takes it, R beats taken with gaps; every beat
    is compared, in order, with the reference."""
    expected = [(address, index == burst.beats - 1)
                for burst in bursts for index, address in enumerate(burst.addresses())]
    pending = list(bursts)
    received = 0
    while received < len(expected):
        offer = bool(pending)
        ctx.set(bus.arvalid, offer)
        if offer:
            ctx.set(bus.araddr, pending[0].address)
            ctx.set(bus.arlen, pending[0].beats - 1)
            ctx.set(bus.arid, 0)
        ready = rng.random() < 0.7
        ctx.set(bus.rready, ready)
        _, _, arready, rvalid, rdata, rresp, rlast, rid = await ctx.tick().sample(
            bus.arready, bus.rvalid, bus.rdata, bus.rresp, bus.rlast, bus.rid)
        if offer and arready:
            pending.pop(0)
        if rvalid and ready:
            address, last = expected[received]
            data = reference.read(address)
            got = (rresp, rlast, rid)
            if data is None:
                checks.append(("R", received, got, (Response.SLVERR, last, 0)))
            else:
                checks.append(("R", received, (*got, rdata.to_bytes(BUS_BYTES, "little")),
                               (Response.OKAY, last, 0, data)))
            received += 1
    ctx.set(bus.arvalid, 0)
    ctx.set(bus.rready, 0)


def test_interleaved_bursts_keep_order_and_reach_their_memory(random_seed):
    rng = np.random.default_rng(random_seed)
    dut = WindowedPort()
    reference = Reference()
    dram = DramModel(dut.dram, bytearray(DRAM_BYTES), rng)
    writes, reads = random_bursts(rng, 60), random_bursts(rng, 60)
    checks = []
    finished = []

    async def manager(ctx):
        await write_bursts(ctx, dut.bus, writes, reference, rng, checks)
        await read_bursts(ctx, dut.bus, reads, reference, rng, checks)
        finished.append(True)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(dram.run, background=True)
    sim.add_testbench(manager)
    sim.run_until(60_000 * 1e-6)
    assert finished, f"the bursts did not all complete (seed {random_seed})"
    assert len(checks) == len(writes) + sum(burst.beats for burst in reads)
    for name, index, got, expected in checks:
        assert got == expected, f"{name} {index} (seed {random_seed})"
    # W beats went where their AW went: the DRAM holds exactly the reference's bytes, and
    # it never saw a window address
    assert dram.memory == reference.dram
    assert sorted(dram.addresses) == sorted(
        b.address for b in writes + reads if b.address < BASE)
    # both kinds and both errors were exercised
    kinds = {(b.address >= BASE, reference.fits(b.addresses()[-1])) for b in writes + reads}
    assert kinds == {(False, True), (True, True), (True, False)}


def test_a_window_burst_waits_for_the_dram_burst_before_it():
    """A DRAM read, then a window read with the same ID: the window's AR is taken only in
    the cycle after the DRAM burst's last beat, although the window could answer at once."""
    dut = WindowedPort()
    taken_at = {}

    async def bench(ctx):
        bus, dram = dut.bus, dut.dram
        ctx.set(dram.arready, 1)
        ctx.set(bus.rready, 1)
        cycle = 0
        for address in (64, BASE):
            ctx.set(bus.araddr, address)
            ctx.set(bus.arlen, 1)
            ctx.set(bus.arvalid, 1)
            while True:
                ctx.set(dram.rvalid, 10 <= cycle < 12)  # the DRAM's two beats, late
                ctx.set(dram.rlast, cycle == 11)
                _, _, arready = await ctx.tick().sample(bus.arready)
                cycle += 1
                if arready:
                    taken_at[address] = cycle
                    break
        ctx.set(bus.arvalid, 0)
        ctx.set(dram.rvalid, 0)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run_until(100e-6)
    assert taken_at == {64: 1, BASE: 13}  # the last DRAM beat is taken in cycle 12


def test_sizes_the_memory_cannot_take_are_refused():
    from tensorforge.errors import ConfigError

    with pytest.raises(ConfigError, match="power of two of at least 8 bytes, not 1000"):
        AxiMemory(1000, BUS_BITS)
    with pytest.raises(ConfigError, match="bus must be a power of two of bytes, not 12 bits"):
        AxiMemory(1024, 12)
    with pytest.raises(ValueError, match="window base"):
        AxiWindowDecoder(BUS_BITS, Channels.READ, 0, MAX_OUTSTANDING)


def test_memory_timing_is_what_its_attributes_say():
    """Two bursts of 4 beats each way, the manager never waiting: the cycles of every
    handshake follow `AxiMemory`'s timing attributes."""
    beats = 4
    events = {}

    async def stream(ctx, dut, write: bool):
        axi = dut.axi
        prefix = "aw" if write else "ar"
        ctx.set(axi.bready if write else axi.rready, 1)
        ctx.set(axi.wstrb, 0xFF)
        addresses = [0, 64]
        w_left = []  # W beats of the bursts whose AW is taken
        for cycle in range(30):
            ctx.set(getattr(axi, f"{prefix}valid"), bool(addresses))
            if addresses:
                ctx.set(getattr(axi, f"{prefix}addr"), addresses[0])
                ctx.set(getattr(axi, f"{prefix}len"), beats - 1)
            ctx.set(axi.wvalid, bool(w_left))
            ctx.set(axi.wlast, w_left[:1] == [1])
            _, _, valid, ready, wready, rvalid, bvalid = await ctx.tick().sample(
                getattr(axi, f"{prefix}valid"), getattr(axi, f"{prefix}ready"), axi.wready,
                axi.rvalid, axi.bvalid)
            if valid and ready:
                addresses.pop(0)
                events.setdefault("address", []).append(cycle)
                w_left += list(range(beats, 0, -1))
            if write and w_left and wready:
                w_left.pop(0)
                events.setdefault("W", []).append(cycle)
            for name, happened in (("R", rvalid and not write), ("B", bvalid and write)):
                if happened:
                    events.setdefault(name, []).append(cycle)

    for write in (False, True):
        dut = AxiMemory(WINDOW_BYTES, BUS_BITS)
        sim = Simulator(dut)
        sim.add_clock(1e-6)

        async def bench(ctx, dut=dut, write=write):
            await stream(ctx, dut, write)

        sim.add_testbench(bench)
        sim.run()
        first, second = events.pop("address")
        if write:
            w, b = events.pop("W"), events.pop("B")
            assert w == [first + 1 + k for k in range(beats)] + [second + 1 + k
                                                                 for k in range(beats)]
            assert b == [w[beats - 1] + 1, w[-1] + 1] and second == b[0] + 1
            assert second - first == beats + AxiMemory.write_burst_cycles
        else:
            r = events.pop("R")
            assert r[0] == first + AxiMemory.first_read_beat
            assert r == [r[0] + k for k in range(beats)] + [
                r[0] + beats + AxiMemory.read_burst_cycles + k for k in range(beats)]
