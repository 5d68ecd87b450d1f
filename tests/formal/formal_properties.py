"""Reusable formal contracts: stream handshakes, AXI4 address channels, bounded counters.

Each helper adds `Assert` (what the design promises) or `Assume` (what its environment
promises) statements to a harness module. Amaranth 0.5 has no ``Past`` or ``AnyConst``, so a
value's previous cycle is a register here (`Past`), and a free input held for the whole run
is an input the harness assumes stable.
"""

from __future__ import annotations

from amaranth.hdl import Assert, Assume, Cat, Module, Signal, Value

from tensorforge.hw.axi import BOUNDARY_BYTES


class Past:
    """Registered copies of values, and whether a previous cycle exists yet."""

    def __init__(self, m: Module) -> None:
        self.m = m
        self.exists = Signal(name="past_exists")
        m.d.sync += self.exists.eq(1)

    def __call__(self, value, name: str) -> Signal:
        value = Value.cast(value)
        previous = Signal(len(value), name=f"past_{name}")
        self.m.d.sync += previous.eq(value)
        return previous


def held_until_ready(m, past: Past, *, valid, ready, payload, name: str, promise=Assert):
    """A handshake offered is kept, unchanged, until it is taken (AXI4 A3.2.1, lib.stream).

    ``promise`` is `Assert` for a design's output and `Assume` for its environment's.
    """
    payload = Value.cast(payload)
    stalled = past(valid & ~ready, f"{name}_stalled")
    before = past(payload, f"{name}_payload")
    with m.If(past.exists & stalled):
        m.d.comb += [
            promise(valid, f"{name}: valid dropped before ready"),
            promise(payload == before, f"{name}: payload changed while stalled"),
        ]


def legal_incr_burst(m, *, valid, address, length, max_burst: int, bus_bytes: int, name: str):
    """An INCR burst: bus-aligned start, 1..max_burst beats, no 4 KiB crossing (A3.4.1)."""
    beats = length + 1
    last_byte = address[:12] + beats * bus_bytes  # page offset one past the burst's end
    with m.If(valid):
        m.d.comb += [
            Assert(address[: (bus_bytes - 1).bit_length()] == 0, f"{name}: unaligned address"),
            Assert(beats <= max_burst, f"{name}: burst longer than max_burst"),
            Assert(last_byte <= BOUNDARY_BYTES, f"{name}: burst crosses 4 KiB"),
        ]


def address_channel(m, past: Past, bus, prefix: str, *, max_burst: int, bus_bytes: int):
    """An AXI4 manager's AR or AW (``prefix`` "ar" or "aw"): held and stable until ready, and
    a legal INCR burst."""
    field = lambda name: getattr(bus, f"{prefix}{name}")  # noqa: E731
    name = prefix.upper()
    held_until_ready(
        m, past, valid=field("valid"), ready=field("ready"),
        payload=Cat(field("addr"), field("len"), field("size"), field("burst"), field("id")),
        name=name,
    )  # fmt: skip
    legal_incr_burst(m, valid=field("valid"), address=field("addr"), length=field("len"),
                     max_burst=max_burst, bus_bytes=bus_bytes, name=name)


def never_wraps(m, counter, *, limit: int, name: str):
    """A counter stays within 0..limit: a wrap below 0 shows as a value above ``limit``."""
    m.d.comb += Assert(counter <= limit, f"{name} left 0..{limit}")


def counted(m, event, *, bits: int, name: str) -> Signal:
    """How many cycles ``event`` has been high so far."""
    count = Signal(bits, name=f"{name}_count")
    m.d.sync += count.eq(count + event)
    return count


def stream_source(m, past: Past, stream_port, *, name: str):
    """An environment that offers commands on ``stream_port`` by the stream rules."""
    held_until_ready(
        m,
        past,
        valid=stream_port.valid,
        ready=stream_port.ready,
        payload=stream_port.payload.as_value(),
        name=name,
        promise=Assume,
    )


def retires_each_once(m, *, cmd, retired, idle, unanswered, what: str):
    """Every command taken retires once, in a later or the same cycle, and ``idle`` means all
    have, with no bus request left unanswered."""
    taken = counted(m, cmd.valid & cmd.ready, bits=8, name=f"{what}_taken")
    done = counted(m, retired, bits=8, name=f"{what}_retired")
    m.d.comb += Assert(done <= taken, f"a {what} retired that was never taken")
    with m.If(idle):
        m.d.comb += [
            Assert(done == taken, f"idle with a {what} not retired"),
            Assert(unanswered == 0, f"idle with a {what} burst unanswered"),
        ]


def queues_never_overflow(m, queues, *, pops_checked: bool = True):
    """No FIFO is pushed while full or popped while empty (SyncFIFO would drop or repeat).

    ``pops_checked`` False leaves pops alone, for a design that pops to flush: a pop of an
    empty SyncFIFO does nothing.
    """
    for fifo in queues:
        m.d.comb += Assert(~fifo.w_en | fifo.w_rdy, "a queue was pushed while full")
        if pops_checked:
            m.d.comb += Assert(~fifo.r_en | fifo.r_rdy, "a queue was popped while empty")
