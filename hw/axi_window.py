"""An AXI4 address decoder: one manager's bursts go to DRAM or to an on-chip window.

The accelerator's activation memory (`AcceleratorConfig.activation_window`) is a window of the
DMA's address space: bursts from ``base`` up go to it, the rest to DRAM. The accelerator puts
one decoder on the load unit's read channels, before `AxiReadArbiter` (the instruction fetch
never reads the window, so it and the arbiter's routing of R by ID stay as they are), and one
on the store unit's write channels, before ``m_axi``. Each unit is the only manager of its
channels and uses one ID, so each decoder keeps that unit's order alone.
"""

from __future__ import annotations

import enum

from amaranth import Module, Mux, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from tensorforge.hw.axi import ADDR_BITS, axi_read_members, axi_write_members


class Channels(enum.Enum):
    """Which half of an AXI4 port a decoder routes."""

    READ = "ar"  # AR and R
    WRITE = "aw"  # AW, W and B


class AxiWindowDecoder(wiring.Component):
    """Routes the bursts of ``bus`` (the manager's ``channels``) to ``window`` when their
    address is at least ``base`` (the address less ``base``) and to ``dram`` otherwise
    (unchanged).

    Contract: no latency, no added cycle: every channel passes combinationally. A burst
    for one subordinate waits on its address channel while bursts sent to the other are
    outstanding (read: AR taken, last R beat not yet; write: AW taken, B not yet), so the
    responses come back in request order as AXI requires for one ID (the decoder keeps this
    order for all IDs together: the DMA units use one each). W beats go where the
    outstanding bursts went: a burst's W beats must come with or after its AW handshake
    (the store unit's do), or, while nothing is outstanding, before it. At most
    ``max_outstanding`` bursts are outstanding; a further one waits. The decoder checks no
    end: the window answers beats past its end (SLVERR in `AxiMemory`).
    """

    def __init__(self, data_bits: int, channels: Channels, base: int,
                 max_outstanding: int) -> None:
        if base <= 0 or base >= 1 << ADDR_BITS:
            raise ValueError(f"window base must be a positive {ADDR_BITS}-bit address, "
                             f"not {base:#x}")
        if max_outstanding < 1:
            raise ValueError(f"max_outstanding must be positive, not {max_outstanding}")
        self.channels = channels
        self.base = base
        self.max_outstanding = max_outstanding
        members = (axi_read_members if channels is Channels.READ else axi_write_members)(data_bits)
        signature = wiring.Signature(members)
        self.members = signature.members  # the manager's view: Out from it, In to it
        super().__init__({"bus": In(signature), "dram": Out(signature),
                          "window": Out(signature)})

    def elaborate(self, platform) -> Module:
        m = Module()
        bus, dram, window = self.bus, self.dram, self.window
        prefix = self.channels.value
        address = getattr(bus, f"{prefix}addr")
        valid = getattr(bus, f"{prefix}valid")
        if self.channels is Channels.READ:
            done = bus.rvalid & bus.rready & bus.rlast
        else:
            done = bus.bvalid & bus.bready

        outstanding = Signal(range(self.max_outstanding + 1))
        at_window = Signal()  # where the outstanding bursts went
        to_window = Signal()  # where the offered burst goes
        route = Signal()  # which subordinate the data and response channels are joined to
        m.d.comb += [
            to_window.eq(address >= self.base),
            route.eq(Mux(outstanding == 0, to_window, at_window)),
        ]
        # ``allowed`` only rises while a burst waits (outstanding bursts only drain), so the
        # subordinate's VALID never drops before its handshake (AXI A3.2.1).
        allowed = (route == to_window) & (outstanding != self.max_outstanding)
        sent = valid & getattr(bus, f"{prefix}ready")
        m.d.sync += outstanding.eq(outstanding + sent - done)
        with m.If(sent):
            m.d.sync += at_window.eq(to_window)

        # the manager's signals go to both subordinates, its handshakes' VALID and READY only to
        # the routed one
        handshakes = {f"{prefix}valid": valid & allowed}
        handshakes.update({name: getattr(bus, name) for name in ("wvalid", "rready", "bready")
                           if name in self.members})
        for target, chosen in ((dram, ~route), (window, route)):
            for name, member in self.members.items():
                if member.flow != Out:
                    continue
                value = getattr(bus, name)
                if name in handshakes:
                    value = handshakes[name] & chosen
                elif target is window and name == f"{prefix}addr":
                    value = (address - self.base)[:ADDR_BITS]
                m.d.comb += getattr(target, name).eq(value)
        for name, member in self.members.items():
            if member.flow == In:
                selected = Mux(route, Value.cast(getattr(window, name)),
                               Value.cast(getattr(dram, name)))
                if name == f"{prefix}ready":
                    selected = selected & allowed
                m.d.comb += getattr(bus, name).eq(selected)
        return m
