"""Free AXI4 subordinates for formal harnesses: any data, any delays, in-order answers.

Each model keeps the bursts its manager has addressed in a small shift register of lengths,
answers them in order (one ID, as the DMA units use), and lets the solver choose every ready,
valid and data bit it may legally choose. What it sees the manager do is checked on the way:
beats only for addressed bursts, ``WLAST`` on a burst's last beat and nowhere else, never more
bursts unanswered than the manager's ``outstanding``.
"""

from __future__ import annotations

from amaranth.hdl import Assert, Assume, Cat, Mux, Signal
from formal_properties import Past, held_until_ready, never_wraps


class _BurstLengths:
    """AxLEN of the addressed bursts, oldest first, in ``capacity`` registers."""

    def __init__(self, m, capacity: int, name: str) -> None:
        self.slots = [Signal(8, name=f"{name}_len_{k}") for k in range(capacity)]
        self.count = Signal(range(capacity + 1), name=f"{name}_count")
        self.m, self.name = m, name

    def update(self, push, length, pop) -> None:
        m, slots = self.m, self.slots
        with m.If(pop):
            m.d.sync += [slots[k].eq(slots[k + 1]) for k in range(len(slots) - 1)]
        at = self.count - pop
        with m.If(push):
            for k, slot in enumerate(slots):
                with m.If(at == k):
                    m.d.sync += slot.eq(length)
        m.d.sync += self.count.eq(self.count + push - pop)


def read_subordinate(m, past: Past, bus, *, outstanding: int, free: list, name: str,
                     data_matters: bool = False):
    """Answer ``bus``'s AR bursts with R beats; returns the count of bursts unanswered.

    The data is 0 unless ``data_matters``: where it steers no control, a constant keeps the
    solver fast; where it does (fetched instructions), the solver picks it.
    """
    arready, rvalid = Signal(name=f"{name}_arready"), Signal(name=f"{name}_rvalid")
    rresp = Signal(2, name=f"{name}_rresp")
    rdata = Signal(len(bus.rdata), name=f"{name}_rdata")
    free += [arready, rvalid, rresp] + ([rdata] if data_matters else [])
    bursts = _BurstLengths(m, outstanding + 1, name)  # one more: room to see an over-issue
    beat = Signal(8, name=f"{name}_beat")
    last = beat == bursts.slots[0]
    m.d.comb += [
        bus.arready.eq(arready),
        bus.rvalid.eq(rvalid),
        bus.rdata.eq(rdata),
        bus.rresp.eq(rresp),
        bus.rlast.eq(last),
        bus.rid.eq(bus.arid),
        Assume(~rvalid | (bursts.count != 0)),
    ]
    held_until_ready(m, past, valid=rvalid, ready=bus.rready, payload=Cat(rresp, rdata),
                     name=f"{name}_r", promise=Assume)
    taken = rvalid & bus.rready
    with m.If(taken):
        m.d.sync += beat.eq(Mux(last, 0, beat + 1))
    bursts.update(bus.arvalid & arready, bus.arlen, taken & last)
    never_wraps(m, bursts.count, limit=outstanding, name=f"{name}: read bursts in flight")
    return bursts.count


def write_subordinate(m, past: Past, bus, *, outstanding: int, free: list, name: str):
    """Take ``bus``'s AW bursts and W beats, answer on B; returns the bursts unanswered."""
    awready, wready = Signal(name=f"{name}_awready"), Signal(name=f"{name}_wready")
    bvalid, bresp = Signal(name=f"{name}_bvalid"), Signal(2, name=f"{name}_bresp")
    free += [awready, wready, bvalid, bresp]
    addressed = _BurstLengths(m, outstanding + 1, f"{name}_aw")  # AW taken, W beats to come
    written = Signal(range(outstanding + 2), name=f"{name}_written")  # W done, B to come
    beat = Signal(8, name=f"{name}_beat")
    last = beat == addressed.slots[0]
    m.d.comb += [
        bus.awready.eq(awready),
        bus.wready.eq(wready),
        bus.bvalid.eq(bvalid),
        bus.bresp.eq(bresp),
        bus.bid.eq(bus.awid),
        Assume(~bvalid | (written != 0)),
    ]
    held_until_ready(m, past, valid=bvalid, ready=bus.bready, payload=bresp,
                     name=f"{name}_b", promise=Assume)
    beat_in = bus.wvalid & wready
    answered = bvalid & bus.bready
    with m.If(beat_in):
        m.d.comb += [
            Assert(addressed.count != 0, f"{name}: W beat for a burst not addressed"),
            Assert(bus.wlast == last, f"{name}: WLAST not on the burst's last beat"),
        ]
        m.d.sync += beat.eq(Mux(last, 0, beat + 1))
    addressed.update(bus.awvalid & awready, bus.awlen, beat_in & last)
    m.d.sync += written.eq(written + (beat_in & last) - answered)
    unanswered = addressed.count + written
    never_wraps(m, unanswered, limit=outstanding, name=f"{name}: write bursts without B")
    return unanswered
