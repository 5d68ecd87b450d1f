"""The host bridge: frames of bytes from the UART become AXI4-Lite word accesses.

The frame format and the address map are `tensorforge.hw.board.host_protocol`'s. The bridge is the
only manager of its bus and keeps one access in flight, so the decoder behind it may route
every channel by the address the bridge holds (`tensorforge.hw.board.soc.AxiLiteDecoder`).
"""

from __future__ import annotations

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from tensorforge.hw.axi import ADDR_BITS, axi_lite_signature
from tensorforge.hw.board.host_protocol import STATUS_BASE, WORD_BYTES, Opcode


class HostBridge(wiring.Component):
    """Decodes host frames from ``rx`` into accesses on ``bus``; answers on ``tx``.

    Contract: each word of a frame is one AXI4-Lite access, issued when its bytes are in
    (writes) or when the previous word's bytes have been handed to ``tx`` (reads); the status
    byte follows the frame's last access. Bytes of an unknown opcode are dropped. While a frame
    waits for host bytes, ``frame_timeout`` cycles without one abandon it (the words already
    written stay written, no status is sent).
    """

    def __init__(self, frame_timeout: int) -> None:
        self.frame_timeout = frame_timeout
        super().__init__({
            "rx": In(stream.Signature(8)),
            "tx": Out(stream.Signature(8)),
            "bus": Out(axi_lite_signature(ADDR_BITS)),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        rx, tx, bus = self.rx, self.tx, self.bus
        writing = Signal()  # the frame's opcode: write (1) or read (0)
        address = Signal(ADDR_BITS)
        words_left = Signal(8)  # after the current word
        word = Signal(32)
        byte_index = Signal(range(WORD_BYTES))
        worst = Signal(2)  # the worst response so far (OKAY < SLVERR < DECERR)
        address_sent = Signal()
        data_sent = Signal()
        idle_cycles = Signal(range(self.frame_timeout + 1))

        def take_response(response) -> None:
            m.d.sync += worst.eq(Mux(response.as_value() > worst, response.as_value(), worst))

        def next_word(then: str) -> None:
            m.d.sync += [address.eq(address + WORD_BYTES), words_left.eq(words_left - 1),
                         byte_index.eq(0)]
            with m.If(words_left != 0):
                m.next = then
            with m.Else():
                m.next = "STATUS"

        def frame_byte() -> None:
            """Take the frame's next byte; abandon the frame after ``frame_timeout`` cycles
            without one."""
            m.d.comb += rx.ready.eq(1)
            with m.If(rx.valid):
                m.d.sync += idle_cycles.eq(0)
            with m.Elif(idle_cycles == self.frame_timeout):
                m.d.sync += idle_cycles.eq(0)
                m.next = "OPCODE"
            with m.Else():
                m.d.sync += idle_cycles.eq(idle_cycles + 1)

        def shift_in_word(target: Signal, then: str) -> None:
            """Shift frame bytes into ``target``, least significant first; after the fourth
            go to ``then``."""
            frame_byte()
            with m.If(rx.valid):
                m.d.sync += [target.eq(Cat(target[8:], rx.payload)),
                             byte_index.eq(byte_index + 1)]
                with m.If(byte_index == WORD_BYTES - 1):
                    m.next = then

        m.d.comb += [bus.awaddr.eq(address), bus.araddr.eq(address), bus.wdata.eq(word),
                     bus.wstrb.eq(0b1111), bus.awprot.eq(0), bus.arprot.eq(0)]
        with m.FSM():
            with m.State("OPCODE"):
                m.d.comb += rx.ready.eq(1)
                m.d.sync += [byte_index.eq(0), worst.eq(0), idle_cycles.eq(0)]
                with m.If(rx.valid & ((rx.payload == Opcode.WRITE) | (rx.payload == Opcode.READ))):
                    m.d.sync += writing.eq(rx.payload == Opcode.WRITE)
                    m.next = "ADDRESS"
            with m.State("ADDRESS"):
                shift_in_word(address, "COUNT")
            with m.State("COUNT"):
                frame_byte()
                with m.If(rx.valid):
                    m.d.sync += [words_left.eq(rx.payload), byte_index.eq(0)]
                    with m.If(writing):
                        m.next = "DATA"
                    with m.Else():
                        m.next = "READ"
            with m.State("DATA"):
                m.d.sync += [address_sent.eq(0), data_sent.eq(0)]
                shift_in_word(word, "WRITE")
            with m.State("WRITE"):
                m.d.comb += [bus.awvalid.eq(~address_sent), bus.wvalid.eq(~data_sent),
                             bus.bready.eq(address_sent & data_sent)]
                with m.If(bus.awvalid & bus.awready):
                    m.d.sync += address_sent.eq(1)
                with m.If(bus.wvalid & bus.wready):
                    m.d.sync += data_sent.eq(1)
                with m.If(bus.bvalid & bus.bready):
                    take_response(bus.bresp)
                    next_word("DATA")
            with m.State("READ"):
                m.d.comb += bus.arvalid.eq(1)
                with m.If(bus.arready):
                    m.next = "READ_WAIT"
            with m.State("READ_WAIT"):
                m.d.comb += bus.rready.eq(1)
                with m.If(bus.rvalid):
                    take_response(bus.rresp)
                    m.d.sync += [word.eq(bus.rdata), byte_index.eq(0)]
                    m.next = "SEND"
            with m.State("SEND"):
                m.d.comb += [tx.valid.eq(1), tx.payload.eq(word[:8])]
                with m.If(tx.ready):
                    m.d.sync += [word.eq(word >> 8), byte_index.eq(byte_index + 1)]
                    with m.If(byte_index == WORD_BYTES - 1):
                        next_word("READ")
            with m.State("STATUS"):
                m.d.comb += [tx.valid.eq(1), tx.payload.eq(STATUS_BASE | worst)]
                with m.If(tx.ready):
                    m.next = "OPCODE"
        return m
