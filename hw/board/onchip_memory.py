"""Block RAM that stands in for DRAM on a board: an AXI4 subordinate for the accelerator and
an AXI4-Lite subordinate for the host.

The accelerator's side is `tensorforge.hw.axi_memory.AxiMemory`'s (the accelerator's own
activation memory is one too). The host's single words take a port when the accelerator
leaves it free. That is enough: the host loads memory before a run and reads it after, and
polls the control registers, not memory, while the program runs.
"""

from __future__ import annotations

from amaranth import Module, Mux, Signal
from amaranth.lib.wiring import In

from tensorforge.errors import ConfigError
from tensorforge.hw.axi import ADDR_BITS, Response, axi_lite_signature
from tensorforge.hw.axi_memory import AxiMemory
from tensorforge.hw.board.host_protocol import WORD_BYTES


class OnChipMemory(AxiMemory):
    """``size_bytes`` of memory behind ``axi`` (accelerator, ``bus_bits``, `AxiMemory`'s
    contract) and ``host`` (AXI4-Lite, 32-bit words, ``host_address_bits``-bit addresses).

    Contract, ``host``: one access at a time, answered 1-2 cycles after the port is free;
    addresses past the end answer SLVERR.
    """

    def __init__(self, size_bytes: int, bus_bits: int, host_address_bits: int = ADDR_BITS) -> None:
        if bus_bits < 8 * WORD_BYTES or bus_bits & (bus_bits - 1):
            raise ConfigError(f"on-chip memory bus must be a power of two of at least 32 bits, "
                              f"not {bus_bits}")
        super().__init__(size_bytes, bus_bits,
                         {"host": In(axi_lite_signature(host_address_bits))})

    def elaborate(self, platform) -> Module:
        m = Module()
        read, write = self._ports(m)
        axi, host = self.axi, self.host
        host_reading = Signal()
        reading = self._serve_reads(m, read, held=host_reading)
        writing = self._serve_writes(m, write)

        # --- host words: a 32-bit lane of a bus word, when the accelerator leaves the port
        lanes = self.bus_bytes // WORD_BYTES
        lane_bits = max(lanes.bit_length() - 1, 0)

        def lane(address):
            return address[2 : 2 + lane_bits] if lane_bits else 0

        host_write_free = ~writing & ~axi.awvalid & ~axi.bvalid
        host_writes = host.awvalid & host.wvalid & ~host.bvalid & host_write_free
        m.d.comb += [host.awready.eq(host_writes), host.wready.eq(host_writes)]
        with m.If(host_writes):
            fits = self.in_range(host.awaddr)
            m.d.comb += [write.addr.eq(self.word(host.awaddr)),
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
            m.d.comb += [read.en.eq(1), read.addr.eq(self.word(host.araddr))]
            m.d.sync += [host_reading.eq(1), host_read_lane.eq(lane(host.araddr)),
                         host_read_fits.eq(self.in_range(host.araddr))]
        with m.If(host_reading):
            m.d.sync += [host_reading.eq(0), host.rvalid.eq(1),
                         host.rdata.eq(read.data.word_select(host_read_lane, 32)
                                       if lanes > 1 else read.data),
                         host.rresp.eq(Mux(host_read_fits, Response.OKAY, Response.SLVERR))]
        with m.If(host.rvalid & host.rready):
            m.d.sync += host.rvalid.eq(0)
        return m
