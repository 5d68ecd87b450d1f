"""Block RAM that stands in for DRAM on a board: an AXI4 subordinate for the accelerator and
an AXI4-Lite subordinate for the host.

The memory has one read and one write port, ``bus_bits`` wide (a simple dual-port block RAM on
an FPGA). The accelerator owns both while it moves a burst; the host's single words take a
port when the accelerator leaves it free. That is enough: the host loads memory before a run
and reads it after, and polls the control registers, not memory, while the program runs.
"""

from __future__ import annotations

from amaranth import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In

from tensorforge.errors import ConfigError
from tensorforge.hw.axi import ADDR_BITS, Response, axi_lite_signature, axi_signature
from tensorforge.hw.board.host_protocol import WORD_BYTES


class OnChipMemory(wiring.Component):
    """``size_bytes`` of memory behind ``axi`` (accelerator, ``bus_bits``) and ``host``
    (AXI4-Lite, 32-bit words, ``host_address_bits``-bit addresses).

    Contract, ``axi``: INCR bursts of full-width beats; one read burst and one write burst at a
    time (AR/AW wait while one is active); read beats stream at one per cycle from the cycle
    after AR (``read_latency`` = 1), write beats are taken one per cycle and B follows the last.
    Beats past ``size_bytes`` answer SLVERR and write nothing. ``host``: one access at a time,
    answered 1-2 cycles after the port is free; addresses past the end answer SLVERR.
    """

    read_latency = 1

    def __init__(self, size_bytes: int, bus_bits: int, host_address_bits: int = ADDR_BITS) -> None:
        bus_bytes = bus_bits // 8
        if bus_bits < 8 * WORD_BYTES or bus_bits & (bus_bits - 1):
            raise ConfigError(f"on-chip memory bus must be a power of two of at least 32 bits, "
                              f"not {bus_bits}")
        if size_bytes < bus_bytes or size_bytes & (size_bytes - 1):
            raise ConfigError(f"on-chip memory size must be a power of two of at least "
                              f"{bus_bytes} bytes, not {size_bytes}")
        self.size_bytes = size_bytes
        self.bus_bits = bus_bits
        super().__init__({"axi": In(axi_signature(bus_bits)),
                          "host": In(axi_lite_signature(host_address_bits))})

    def elaborate(self, platform) -> Module:
        m = Module()
        bus_bytes = self.bus_bits // 8
        depth = self.size_bytes // bus_bytes
        beat_shift = bus_bytes.bit_length() - 1
        m.submodules.memory = memory = Memory(shape=self.bus_bits, depth=depth, init=[])
        read = memory.read_port()
        write = memory.write_port(granularity=8)
        axi, host = self.axi, self.host

        def word(address):
            return address[beat_shift:]

        def in_range(address):
            return address < self.size_bytes

        # --- accelerator reads: a burst streams through the read port, stalled with its enable
        reading = Signal()
        read_address = Signal(ADDR_BITS)
        beats_left = Signal(8)
        burst_id = Signal.like(axi.arid)
        host_reading = Signal()
        issue = reading & (~axi.rvalid | axi.rready)
        m.d.comb += [axi.arready.eq(~reading & ~host_reading), axi.rdata.eq(read.data),
                     read.en.eq(0)]  # a read port's enable starts high; held data is the stall
        with m.If(axi.arvalid & axi.arready):
            # the ID goes out with each beat: the last beat of the previous burst may still
            # be waiting on R when the next burst is accepted
            m.d.sync += [reading.eq(1), read_address.eq(axi.araddr), beats_left.eq(axi.arlen),
                         burst_id.eq(axi.arid)]
        with m.If(issue):
            m.d.comb += [read.en.eq(1), read.addr.eq(word(read_address))]
            m.d.sync += [
                axi.rvalid.eq(1),
                axi.rid.eq(burst_id),
                axi.rlast.eq(beats_left == 0),
                axi.rresp.eq(Mux(in_range(read_address), Response.OKAY, Response.SLVERR)),
                read_address.eq(read_address + bus_bytes),
                beats_left.eq(beats_left - 1),
            ]
            with m.If(beats_left == 0):
                m.d.sync += reading.eq(0)
        with m.Elif(axi.rready):
            m.d.sync += axi.rvalid.eq(0)

        # --- accelerator writes
        writing = Signal()
        write_address = Signal(ADDR_BITS)
        write_error = Signal()
        m.d.comb += [axi.awready.eq(~writing & ~axi.bvalid), axi.wready.eq(writing)]
        with m.If(axi.awvalid & axi.awready):
            m.d.sync += [writing.eq(1), write_address.eq(axi.awaddr), write_error.eq(0),
                         axi.bid.eq(axi.awid)]
        with m.If(axi.wvalid & axi.wready):
            fits = in_range(write_address)
            m.d.comb += [write.addr.eq(word(write_address)), write.data.eq(axi.wdata),
                         write.en.eq(Mux(fits, axi.wstrb, 0))]
            m.d.sync += [write_address.eq(write_address + bus_bytes),
                         write_error.eq(write_error | ~fits)]
            with m.If(axi.wlast):
                m.d.sync += [writing.eq(0), axi.bvalid.eq(1),
                             axi.bresp.eq(Mux(write_error | ~fits, Response.SLVERR,
                                              Response.OKAY))]
        with m.If(axi.bvalid & axi.bready):
            m.d.sync += axi.bvalid.eq(0)

        # --- host words: a 32-bit lane of a bus word, when the accelerator leaves the port
        lanes = bus_bytes // WORD_BYTES
        lane_bits = max(lanes.bit_length() - 1, 0)

        def lane(address):
            return address[2 : 2 + lane_bits] if lane_bits else 0

        host_write_free = ~writing & ~axi.awvalid & ~axi.bvalid
        host_writes = host.awvalid & host.wvalid & ~host.bvalid & host_write_free
        m.d.comb += [host.awready.eq(host_writes), host.wready.eq(host_writes)]
        with m.If(host_writes):
            fits = in_range(host.awaddr)
            m.d.comb += [write.addr.eq(word(host.awaddr)),
                         write.data.eq(host.wdata.replicate(lanes)),
                         write.en.eq(Mux(fits, host.wstrb << (lane(host.awaddr) * WORD_BYTES),
                                         0))]
            m.d.sync += [host.bvalid.eq(1), host.bresp.eq(Mux(fits, Response.OKAY,
                                                                Response.SLVERR))]
        with m.If(host.bvalid & host.bready):
            m.d.sync += host.bvalid.eq(0)

        host_read_lane = Signal(range(max(lanes, 2)))
        host_read_fits = Signal()
        host_read_free = ~reading & ~axi.rvalid & ~axi.arvalid
        m.d.comb += host.arready.eq(host.arvalid & ~host.rvalid & ~host_reading & host_read_free)
        with m.If(host.arready):
            m.d.comb += [read.en.eq(1), read.addr.eq(word(host.araddr))]
            m.d.sync += [host_reading.eq(1), host_read_lane.eq(lane(host.araddr)),
                         host_read_fits.eq(in_range(host.araddr))]
        with m.If(host_reading):
            m.d.sync += [host_reading.eq(0), host.rvalid.eq(1),
                         host.rdata.eq(read.data.word_select(host_read_lane, 32)
                                       if lanes > 1 else read.data),
                         host.rresp.eq(Mux(host_read_fits, Response.OKAY, Response.SLVERR))]
        with m.If(host.rvalid & host.rready):
            m.d.sync += host.rvalid.eq(0)
        return m
