"""The board SoC's host link in Amaranth's simulator: UART, host bridge, decoder, on-chip memory.

Each block against a Python model: bytes through the UART (also at a baud 3% off), frames
through the bridge into a memory whose contents are compared with a bytearray, and the
memory's AXI4 burst side (random bursts, random back-pressure) against the same bytearray.
"""

from __future__ import annotations

import numpy as np
import pytest
from amaranth import Elaboratable, Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from tensorforge.errors import ConfigError
from tensorforge.hw.axi import Response as AxiResponse
from tensorforge.hw.board.axi_lite_decoder import AxiLiteDecoder
from tensorforge.hw.board.host_bridge import HostBridge
from tensorforge.hw.board.host_protocol import (
    INFO_BASE,
    INFO_MAGIC,
    MEMORY_BASE,
    WINDOW_BITS,
    Response,
    read_frame,
    status_response,
    write_frame,
)
from tensorforge.hw.board.onchip_memory import OnChipMemory
from tensorforge.hw.board.soc import MEMORY_WINDOW_BITS, SocInfo
from tensorforge.hw.board.uart import UartReceiver, UartTransmitter, uart_divisor

pytestmark = pytest.mark.amaranth_sim

DIVISOR = 6
MEMORY_BYTES = 1024
BUS_BITS = 64


def _run(dut, testbench, deadline_cycles: int = 200_000) -> None:
    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(testbench)
    sim.run_until(deadline_cycles * 1e-6)


def test_divisor_rounds_and_rejects_rates_it_cannot_frame():
    assert uart_divisor(25e6, 115200) == 217
    assert uart_divisor(25e6, 1_000_000) == 25
    with pytest.raises(ConfigError, match="too fast"):
        uart_divisor(25e6, 10_000_000)
    with pytest.raises(ConfigError, match="off at"):
        uart_divisor(25e6, 4_500_000)  # 5.56 cycles per bit rounds to 6: 7% slow


class UartLoop(wiring.Component):
    """A transmitter whose line is fed to a receiver through the testbench (``line``)."""

    def __init__(self, divisor: int) -> None:
        self.divisor = divisor
        super().__init__({"tx": Out(1), "rx": In(1, init=1)})

    def elaborate(self, platform) -> Module:
        m = Module()
        m.submodules.transmitter = self.transmitter = UartTransmitter(self.divisor)
        m.submodules.receiver = self.receiver = UartReceiver(self.divisor)
        m.d.comb += [self.tx.eq(self.transmitter.tx), self.receiver.rx.eq(self.rx)]
        return m


@pytest.mark.parametrize("bit_cycles", [DIVISOR, DIVISOR * 1.03, DIVISOR * 0.97])
def test_uart_receives_what_the_transmitter_sent(bit_cycles, random_seed):
    """The transmitter's frames are exactly 8N1 at ``DIVISOR``; the receiver decodes a line
    driven at ``bit_cycles`` per bit (3% off either way, as a rounded divisor can be)."""
    rng = np.random.default_rng(random_seed)
    sent = [int(b) for b in rng.integers(0, 256, 24)]
    dut = UartLoop(DIVISOR)
    received, line = [], []

    async def testbench(ctx):
        transmitter, receiver = dut.transmitter, dut.receiver
        ctx.set(receiver.bytes.ready, 1)
        for byte in sent:
            # the transmitter's frame, sampled every cycle
            ctx.set(transmitter.bytes.payload, byte)
            ctx.set(transmitter.bytes.valid, 1)
            await ctx.tick().until(transmitter.bytes.ready)  # taken at this edge
            ctx.set(transmitter.bytes.valid, 0)
            frame = []
            for _ in range(10 * DIVISOR):
                frame.append(ctx.get(dut.tx))
                await ctx.tick()
            line.append(frame)
            # the same bits, re-timed at bit_cycles, into the receiver
            bits = [0] + [(byte >> i) & 1 for i in range(8)] + [1]
            for index in range(round(10 * bit_cycles) + 2):
                ctx.set(dut.rx, bits[min(int(index / bit_cycles), 9)])
                await ctx.tick()
                if ctx.get(receiver.bytes.valid):
                    received.append(ctx.get(receiver.bytes.payload))
            ctx.set(dut.rx, 1)
            for _ in range(3 * DIVISOR):
                await ctx.tick()
                if ctx.get(receiver.bytes.valid):
                    received.append(ctx.get(receiver.bytes.payload))

    _run(dut, testbench)
    for byte, frame in zip(sent, line, strict=True):
        expected = [0] + [(byte >> i) & 1 for i in range(8)] + [1]
        assert frame == [bit for bit in expected for _ in range(DIVISOR)]
    assert received == sent  # taken at once, each byte is offered for one cycle


class HostPath(Elaboratable):
    """Bridge, decoder, memory and information words as in the SoC, without the accelerator:
    the testbench drives the bridge's byte streams and the memory's AXI4 port."""

    def __init__(self, frame_timeout: int = 400) -> None:
        self.bridge = HostBridge(frame_timeout)
        self.decoder = AxiLiteDecoder({"memory": (MEMORY_BASE, MEMORY_WINDOW_BITS),
                                       "info": (INFO_BASE, WINDOW_BITS)})
        self.memory = OnChipMemory(MEMORY_BYTES, BUS_BITS, host_address_bits=MEMORY_WINDOW_BITS)
        self.info = SocInfo({"magic": INFO_MAGIC, "version": 1, "memory_bytes": MEMORY_BYTES,
                             "config_digest": 7, "clock_hz": 1, "baud": 1})

    def elaborate(self, platform) -> Module:
        m = Module()
        m.submodules.bridge, m.submodules.decoder = self.bridge, self.decoder
        m.submodules.memory, m.submodules.info = self.memory, self.info
        wiring.connect(m, self.bridge.bus, self.decoder.bus)
        wiring.connect(m, self.decoder.memory, self.memory.host)
        wiring.connect(m, self.decoder.info, self.info.bus)
        return m


async def exchange(ctx, bridge: HostBridge, frame: bytes, answer_bytes: int) -> bytes:
    """Send ``frame`` into the bridge a byte a cycle and collect ``answer_bytes`` bytes."""
    answer = bytearray()
    ctx.set(bridge.tx.ready, 1)
    position = 0
    for _ in range(20 * (len(frame) + answer_bytes) + 100):
        ctx.set(bridge.rx.valid, position < len(frame))
        ctx.set(bridge.rx.payload, frame[position] if position < len(frame) else 0)
        taken = ctx.get(bridge.rx.valid) and ctx.get(bridge.rx.ready)
        if ctx.get(bridge.tx.valid):
            answer.append(ctx.get(bridge.tx.payload))
        await ctx.tick()
        position += bool(taken)
        if position == len(frame) and len(answer) == answer_bytes:
            break
    ctx.set(bridge.rx.valid, 0)
    return bytes(answer)


def _words(answer: bytes) -> list[int]:
    return list(np.frombuffer(answer[:-1], dtype="<u4"))


def test_bridge_frames_read_and_write_memory_like_a_bytearray(random_seed):
    rng = np.random.default_rng(random_seed)
    dut = HostPath()
    model = bytearray(MEMORY_BYTES)
    checks = []

    async def testbench(ctx):
        for _ in range(12):
            count = int(rng.integers(1, 9))
            address = 4 * int(rng.integers(0, MEMORY_BYTES // 4 - count + 1))
            words = [int(w) for w in rng.integers(0, 1 << 32, count, dtype=np.uint64)]
            status = await exchange(ctx, dut.bridge, write_frame(address, words), 1)
            checks.append(("write", status_response(status[0]), Response.OKAY))
            model[address : address + 4 * count] = np.array(words, "<u4").tobytes()
            start = 4 * int(rng.integers(0, MEMORY_BYTES // 4 - 8))
            answer = await exchange(ctx, dut.bridge, read_frame(start, 8), 33)
            checks.append(("read status", status_response(answer[-1]), Response.OKAY))
            checks.append(("read", _words(answer),
                           list(np.frombuffer(model[start : start + 32], "<u4"))))
        # a frame that runs past the end: the words inside are written, the status says SLVERR
        status = await exchange(ctx, dut.bridge, write_frame(MEMORY_BYTES - 4, [5, 6]), 1)
        model[MEMORY_BYTES - 4 :] = np.array([5], "<u4").tobytes()
        checks.append(("past the end", status_response(status[0]), Response.SLVERR))
        answer = await exchange(ctx, dut.bridge, read_frame(MEMORY_BYTES - 4, 1), 5)
        checks.append(("last word", _words(answer), [5]))
        answer = await exchange(ctx, dut.bridge, read_frame(0xA000_0000, 2), 9)
        checks.append(("unmapped", status_response(answer[-1]), Response.DECERR))
        answer = await exchange(ctx, dut.bridge, read_frame(INFO_BASE, 3), 13)
        checks.append(("info", _words(answer), [INFO_MAGIC, 1, MEMORY_BYTES]))
        status = await exchange(ctx, dut.bridge, write_frame(INFO_BASE, [1]), 1)
        checks.append(("info is read-only", status_response(status[0]), Response.SLVERR))
        # a frame cut short is abandoned after the timeout; the next frame is understood
        await exchange(ctx, dut.bridge, read_frame(0, 1)[:3], 0)
        for _ in range(450):
            await ctx.tick()
        answer = await exchange(ctx, dut.bridge, read_frame(0, 4), 17)
        checks.append(("after a timeout", _words(answer), list(np.frombuffer(model[:16], "<u4"))))

    _run(dut, testbench)
    assert len(checks) == 12 * 3 + 6
    for name, got, expected in checks:
        assert got == expected, name


def test_memory_bursts_and_host_words_agree_with_a_bytearray(random_seed):
    """Random AXI4 bursts (wstrb masks, random gaps and back-pressure) and host words."""
    rng = np.random.default_rng(random_seed)
    dut = OnChipMemory(MEMORY_BYTES, BUS_BITS, host_address_bits=MEMORY_WINDOW_BITS)
    bus_bytes = BUS_BITS // 8
    model = bytearray(MEMORY_BYTES)
    checks = []

    async def write_burst(ctx, axi, address, beats):
        ctx.set(axi.awaddr, address)
        ctx.set(axi.awlen, beats - 1)
        ctx.set(axi.awvalid, 1)
        await ctx.tick().until(axi.awready)
        ctx.set(axi.awvalid, 0)
        for beat in range(beats):
            data = rng.integers(0, 256, bus_bytes, dtype=np.uint8)
            strobe = int(rng.integers(0, 1 << bus_bytes))
            while rng.random() < 0.3:
                await ctx.tick()
            ctx.set(axi.wdata, int.from_bytes(data.tobytes(), "little"))
            ctx.set(axi.wstrb, strobe)
            ctx.set(axi.wlast, beat == beats - 1)
            ctx.set(axi.wvalid, 1)
            await ctx.tick().until(axi.wready)
            ctx.set(axi.wvalid, 0)
            base = address + beat * bus_bytes
            for lane in range(bus_bytes):
                if strobe >> lane & 1:
                    model[base + lane] = data[lane]
        ctx.set(axi.bready, 1)
        response, = await ctx.tick().sample(axi.bresp).until(axi.bvalid)
        ctx.set(axi.bready, 0)
        checks.append(("bresp", response, AxiResponse.OKAY))

    async def read_bursts(ctx, axi, bursts):
        """Read ``[(address, beats), ...]``, each AR offered as soon as the previous one is
        taken (so one is taken while the previous burst's beats still wait on R), with
        alternating IDs; every beat must carry its burst's ID."""
        expected = [(ident % 2, address + beat * bus_bytes, beat == beats - 1)
                    for ident, (address, beats) in enumerate(bursts) for beat in range(beats)]
        pending = list(enumerate(bursts))
        received = []
        while len(received) < len(expected):
            if pending:
                ident, (address, beats) = pending[0]
                ctx.set(axi.arid, ident % 2)
                ctx.set(axi.araddr, address)
                ctx.set(axi.arlen, beats - 1)
            ctx.set(axi.arvalid, bool(pending))
            ready = rng.random() < 0.6
            ctx.set(axi.rready, ready)
            taken = bool(pending) and ctx.get(axi.arready)
            beat = [ctx.get(axi.rvalid), ctx.get(axi.rid), ctx.get(axi.rdata), ctx.get(axi.rlast)]
            await ctx.tick()
            if taken:
                pending.pop(0)
            if beat[0] and ready:
                received.append(beat[1:])
        ctx.set(axi.arvalid, 0)
        ctx.set(axi.rready, 0)
        for (ident, address, last), (rid, data, rlast) in zip(expected, received, strict=True):
            checks.append(("burst", (rid, data.to_bytes(bus_bytes, "little"), rlast),
                           (ident, bytes(model[address : address + bus_bytes]), last)))

    async def host_word(ctx, host, address, value=None):
        if value is not None:
            ctx.set(host.awaddr, address)
            ctx.set(host.wdata, value)
            ctx.set(host.wstrb, 0b1111)
            ctx.set(host.awvalid, 1)
            ctx.set(host.wvalid, 1)
            await ctx.tick().until(host.awready)
            ctx.set(host.awvalid, 0)
            ctx.set(host.wvalid, 0)
            ctx.set(host.bready, 1)
            await ctx.tick().until(host.bvalid)
            ctx.set(host.bready, 0)
            model[address : address + 4] = value.to_bytes(4, "little")
            return
        ctx.set(host.araddr, address)
        ctx.set(host.arvalid, 1)
        await ctx.tick().until(host.arready)
        ctx.set(host.arvalid, 0)
        ctx.set(host.rready, 1)
        word, = await ctx.tick().sample(host.rdata).until(host.rvalid)
        ctx.set(host.rready, 0)
        checks.append(("host", word, int.from_bytes(model[address : address + 4], "little")))

    async def testbench(ctx):
        for _ in range(40):
            beats = int(rng.integers(1, 9))
            address = bus_bytes * int(rng.integers(0, MEMORY_BYTES // bus_bytes - beats + 1))
            word_address = 4 * int(rng.integers(0, MEMORY_BYTES // 4))
            action = rng.integers(0, 4)
            if action == 0:
                await write_burst(ctx, dut.axi, address, beats)
            elif action == 1:
                second = bus_bytes * int(rng.integers(0, MEMORY_BYTES // bus_bytes - 2))
                await read_bursts(ctx, dut.axi, [(address, beats), (second, 2)])
            elif action == 2:
                await host_word(ctx, dut.host, word_address, int(rng.integers(0, 1 << 32)))
            else:
                await host_word(ctx, dut.host, word_address)
        await read_bursts(ctx, dut.axi, [(address, 16) for address in
                                          range(0, MEMORY_BYTES, 16 * bus_bytes)])

    _run(dut, testbench)
    assert sum(name == "burst" for name, _, _ in checks) >= MEMORY_BYTES // bus_bytes
    for name, got, expected in checks:
        assert got == expected, name
