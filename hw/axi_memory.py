"""Block RAM behind an AXI4 subordinate: the accelerator's activation memory, and the part of
the board's on-chip memory (`tensorforge.hw.board.onchip_memory`) that serves the accelerator.

The memory has one read and one write port, ``bus_bits`` wide (a simple dual-port block RAM on
an FPGA, an SRAM macro on an ASIC): a read burst and a write burst run at the same time.
"""

from __future__ import annotations

from amaranth import C, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In

from tensorforge.errors import ConfigError
from tensorforge.hw.axi import ADDR_BITS, Response, axi_signature


class AxiMemory(wiring.Component):
    """``size_bytes`` of memory behind ``axi`` (an AXI4 subordinate, ``bus_bits`` data).

    Contract: INCR bursts of full-width beats; one read burst and one write burst at a time
    (AR/AW wait while one is active); read beats stream at one per cycle from the cycle after
    AR (``read_latency`` = 1), write beats are taken one per cycle and B follows the last.
    Beats past ``size_bytes`` (a burst that starts or runs past the end) answer SLVERR and
    write nothing. The memory has no initial contents.

    In cycles, with a manager that never waits: a read burst's first R beat comes
    ``first_read_beat`` = 2 cycles after its AR handshake, and the next burst's AR is taken
    with the last beat, so back-to-back read bursts of ``n`` beats take ``n + 1`` cycles each.
    A write burst's W beats are taken from the cycle after its AW, B comes the cycle after the
    last, and the next AW the cycle after B: ``n + 2`` cycles per burst.

    ``members`` adds ports for a subclass, which builds on `_ports`, `_serve_reads` and
    `_serve_writes` in its own ``elaborate``.
    """

    read_latency = 1
    first_read_beat = 2  # cycles from an AR handshake to its first R beat
    read_burst_cycles = 1  # per streamed read burst, beyond its beats
    write_burst_cycles = 2  # per streamed write burst, beyond its beats

    def __init__(self, size_bytes: int, bus_bits: int, members: dict | None = None) -> None:
        bus_bytes = bus_bits // 8
        if bus_bits < 8 or bus_bits & (bus_bits - 1):
            raise ConfigError(f"on-chip memory bus must be a power of two of bytes, not "
                              f"{bus_bits} bits")
        if size_bytes < bus_bytes or size_bytes & (size_bytes - 1):
            raise ConfigError(f"on-chip memory size must be a power of two of at least "
                              f"{bus_bytes} bytes, not {size_bytes}")
        self.size_bytes = size_bytes
        self.bus_bits = bus_bits
        super().__init__({"axi": In(axi_signature(bus_bits)), **(members or {})})

    @property
    def bus_bytes(self) -> int:
        return self.bus_bits // 8

    def word(self, address):
        """The memory row (bus word) of byte ``address``."""
        return address[self.bus_bytes.bit_length() - 1:]

    def in_range(self, address):
        return address < self.size_bytes

    def elaborate(self, platform) -> Module:
        m = Module()
        read, write = self._ports(m)
        self._serve_reads(m, read, held=C(0))
        self._serve_writes(m, write)
        return m

    def _ports(self, m: Module):
        """The block RAM (submodule ``memory``) and its (read, write) ports."""
        depth = self.size_bytes // self.bus_bytes
        m.submodules.memory = memory = Memory(shape=self.bus_bits, depth=depth, init=[])
        read = memory.read_port()  # named here: the port's Verilog names follow the variable
        write = memory.write_port(granularity=8)
        return read, write

    def _serve_reads(self, m: Module, read, held) -> Signal:
        """Stream read bursts through ``read``, stalled with its enable; AR waits while
        ``held``. Returns the signal that is high while a burst is being read."""
        axi = self.axi
        bus_bytes = self.bus_bytes
        reading = Signal()
        read_address = Signal(ADDR_BITS)
        beats_left = Signal(8)
        burst_id = Signal.like(axi.arid)
        issue = reading & (~axi.rvalid | axi.rready)
        m.d.comb += [axi.arready.eq(~reading & ~held), axi.rdata.eq(read.data),
                     read.en.eq(0)]  # a read port's enable starts high; held data is the stall
        with m.If(axi.arvalid & axi.arready):
            # the ID goes out with each beat: the last beat of the previous burst may still
            # be waiting on R when the next burst is accepted
            m.d.sync += [reading.eq(1), read_address.eq(axi.araddr), beats_left.eq(axi.arlen),
                         burst_id.eq(axi.arid)]
        with m.If(issue):
            m.d.comb += [read.en.eq(1), read.addr.eq(self.word(read_address))]
            m.d.sync += [
                axi.rvalid.eq(1),
                axi.rid.eq(burst_id),
                axi.rlast.eq(beats_left == 0),
                axi.rresp.eq(Mux(self.in_range(read_address), Response.OKAY, Response.SLVERR)),
                read_address.eq(read_address + bus_bytes),
                beats_left.eq(beats_left - 1),
            ]
            with m.If(beats_left == 0):
                m.d.sync += reading.eq(0)
        with m.Elif(axi.rready):
            m.d.sync += axi.rvalid.eq(0)
        return reading

    def _serve_writes(self, m: Module, write) -> Signal:
        """Take write bursts into ``write``; returns the signal that is high while a burst's
        W beats are being taken."""
        axi = self.axi
        writing = Signal()
        write_address = Signal(ADDR_BITS)
        write_error = Signal()
        m.d.comb += [axi.awready.eq(~writing & ~axi.bvalid), axi.wready.eq(writing)]
        with m.If(axi.awvalid & axi.awready):
            m.d.sync += [writing.eq(1), write_address.eq(axi.awaddr), write_error.eq(0),
                         axi.bid.eq(axi.awid)]
        with m.If(axi.wvalid & axi.wready):
            fits = self.in_range(write_address)
            m.d.comb += [write.addr.eq(self.word(write_address)), write.data.eq(axi.wdata),
                         write.en.eq(Mux(fits, axi.wstrb, 0))]
            m.d.sync += [write_address.eq(write_address + self.bus_bytes),
                         write_error.eq(write_error | ~fits)]
            with m.If(axi.wlast):
                m.d.sync += [writing.eq(0), axi.bvalid.eq(1),
                             axi.bresp.eq(Mux(write_error | ~fits, Response.SLVERR,
                                              Response.OKAY))]
        with m.If(axi.bvalid & axi.bready):
            m.d.sync += axi.bvalid.eq(0)
        return writing
