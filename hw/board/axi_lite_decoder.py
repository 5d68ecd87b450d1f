"""An AXI4-Lite address decoder for one manager that keeps one access in flight.

Such a manager (the host bridge) holds its address from the request until the response, so
every channel, responses included, can be routed combinationally by that address: no
transaction tracking, no added latency. Addresses in no window answer DECERR.
"""

from __future__ import annotations

from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from tensorforge.hw.axi import ADDR_BITS, Response, axi_lite_signature


class AxiLiteDecoder(wiring.Component):
    """Routes ``bus`` to one port per window.

    ``windows`` maps a port name to ``(base, bits)``: the window holds ``base`` up to
    ``base + 2**bits`` (``base`` aligned to it), and its port sees ``bits``-bit offsets.
    Contract: the manager changes ``awaddr``/``araddr`` only after the response of the access
    they address (see the module docstring). A miss is answered the cycle after its request.
    """

    def __init__(self, windows: dict[str, tuple[int, int]]) -> None:
        for name, (base, bits) in windows.items():
            if base % (1 << bits):
                raise ValueError(f"window {name}: base {base:#x} is not aligned to 2**{bits}")
        self.windows = dict(windows)
        members = {"bus": In(axi_lite_signature(ADDR_BITS))}
        members.update({name: Out(axi_lite_signature(bits))
                        for name, (_, bits) in self.windows.items()})
        super().__init__(members)

    def elaborate(self, platform) -> Module:
        m = Module()
        bus = self.bus
        write_hits, read_hits = [], []
        for name, (base, bits) in self.windows.items():
            port = getattr(self, name)
            write_hit = bus.awaddr[bits:] == base >> bits
            read_hit = bus.araddr[bits:] == base >> bits
            write_hits.append(write_hit)
            read_hits.append(read_hit)
            m.d.comb += [
                port.awaddr.eq(bus.awaddr[:bits]), port.awprot.eq(bus.awprot),
                port.wdata.eq(bus.wdata), port.wstrb.eq(bus.wstrb),
                port.araddr.eq(bus.araddr[:bits]), port.arprot.eq(bus.arprot),
            ]
            with m.If(write_hit):
                m.d.comb += [
                    port.awvalid.eq(bus.awvalid), bus.awready.eq(port.awready),
                    port.wvalid.eq(bus.wvalid), bus.wready.eq(port.wready),
                    bus.bvalid.eq(port.bvalid), bus.bresp.eq(port.bresp),
                    port.bready.eq(bus.bready),
                ]
            with m.If(read_hit):
                m.d.comb += [
                    port.arvalid.eq(bus.arvalid), bus.arready.eq(port.arready),
                    bus.rvalid.eq(port.rvalid), bus.rdata.eq(port.rdata),
                    bus.rresp.eq(port.rresp), port.rready.eq(bus.rready),
                ]

        # the error responder for addresses in no window
        miss_bvalid = Signal()
        miss_rvalid = Signal()
        write_miss = ~_any(write_hits)
        read_miss = ~_any(read_hits)
        with m.If(write_miss):
            accept = bus.awvalid & bus.wvalid & ~miss_bvalid
            m.d.comb += [bus.awready.eq(accept), bus.wready.eq(accept),
                         bus.bvalid.eq(miss_bvalid), bus.bresp.eq(Response.DECERR)]
            with m.If(accept):
                m.d.sync += miss_bvalid.eq(1)
            with m.If(miss_bvalid & bus.bready):
                m.d.sync += miss_bvalid.eq(0)
        with m.If(read_miss):
            accept = bus.arvalid & ~miss_rvalid
            m.d.comb += [bus.arready.eq(accept), bus.rvalid.eq(miss_rvalid),
                         bus.rresp.eq(Response.DECERR)]
            with m.If(accept):
                m.d.sync += miss_rvalid.eq(1)
            with m.If(miss_rvalid & bus.rready):
                m.d.sync += miss_rvalid.eq(0)
        return m


def _any(hits: list) -> Signal | int:
    result = 0
    for hit in hits:
        result = result | hit
    return result
