"""A stream register slice with a registered ``ready``: the ECP5 target's request registers.

Between a requester and a memory port it cuts both ways: the memory's arbitration starts from
registers (``o.valid``, ``o.payload``), and the requester's handshake from a register
(``i.ready``), where both were one combinational path through the other block.
"""

from __future__ import annotations

from amaranth import Array, Module, Shape, Signal
from amaranth.hdl import ShapeCastable
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out


class SkidBuffer(wiring.Component):
    """Two registers between ``i`` and ``o``; in order, one item per cycle.

    Contract: an item accepted on ``i`` in cycle t is offered on ``o`` from cycle t+1
    (``latency`` = 1). ``o.valid``, ``o.payload`` and ``i.ready`` are registers (``i.ready`` one
    of its own, not the skid register's enable). Up to two items are held: the one offered on
    ``o`` and, while ``o`` is not taken, one in the skid register; ``i.ready`` is low while the
    skid register is full.

    Neither register's enable depends on ``i.valid``: the skid register takes ``i.payload``
    in every cycle it is empty, and the output register takes its next item in every cycle it
    frees, so only the valid bits follow the requester's handshake.
    """

    latency = 1

    def __init__(self, shape: ShapeCastable) -> None:
        self.shape = shape
        super().__init__({
            "i": In(stream.Signature(shape)),
            "o": Out(stream.Signature(shape)),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        skid = Signal(self.shape)
        skid_valid = Signal()
        # ``~skid_valid`` in a flip-flop of its own: ``skid_valid`` enables the wide skid
        # register, and the requester's handshake should not hang on that net
        ready = Signal(init=1)
        frees = ~self.o.valid | self.o.ready  # the output register may take its next item
        m.d.comb += self.i.ready.eq(ready)
        with m.If(~skid_valid):
            m.d.sync += skid.eq(self.i.payload)
        with m.If(frees):
            m.d.sync += [self.o.valid.eq(skid_valid | self.i.valid), skid_valid.eq(0),
                         ready.eq(1)]
            with m.If(skid_valid):
                m.d.sync += self.o.payload.eq(skid)
            with m.Else():
                m.d.sync += self.o.payload.eq(self.i.payload)
        with m.Else():
            m.d.sync += [skid_valid.eq(skid_valid | self.i.valid),
                         ready.eq(ready & ~self.i.valid)]
        return m


class ElasticBuffer(wiring.Component):
    """``depth`` registers between ``i`` and ``o``, written on ``i``'s side only; in order, one
    item per cycle.

    Contract: an item accepted on ``i`` in cycle t is offered on ``o`` from cycle t+1
    (``latency`` = 1). ``i.ready`` and ``o.valid`` are registers and ``o.payload`` is the entry
    at a registered read pointer (a ``depth``-way mux on registers). ``i.ready`` is worked out a
    cycle ahead without ``o``'s handshake: it is high while the items held, counting the one
    accepted in the last cycle, are fewer than ``depth``, so a take frees room a cycle later
    than in a `SkidBuffer` and one item a cycle streams from a depth of three (``depth`` is a
    power of two, at least four).

    Unlike `SkidBuffer`, ``o.ready`` enables no payload register: a take only moves the read
    pointer and the count of items held (a few bits), and the entries' enables come from
    ``i``'s side (each entry takes ``i.payload`` in every cycle it is the write pointer's and
    ``i.ready`` is high; the write pointer moves when ``i.valid`` is high too).
    """

    latency = 1

    def __init__(self, shape: ShapeCastable, depth: int = 4) -> None:
        assert depth >= 4 and depth & (depth - 1) == 0, depth
        self.shape = shape
        self.depth = depth
        super().__init__({
            "i": In(stream.Signature(shape)),
            "o": Out(stream.Signature(shape)),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        depth = self.depth
        width = Shape.cast(self.shape).width
        entries = Array(Signal(width, name=f"entry{k}") for k in range(depth))
        write_at = Signal(range(depth))
        read_at = Signal(range(depth))
        held = Signal(range(depth + 1))  # items accepted and not taken
        room = Signal(init=1)  # ``i.ready``
        pushed = Signal()
        popped = Signal()
        m.d.comb += [
            self.i.ready.eq(room),
            pushed.eq(self.i.valid & self.i.ready),
            popped.eq(self.o.valid & self.o.ready),
            self.o.payload.eq(entries[read_at]),
        ]
        with m.If(self.i.ready):
            m.d.sync += entries[write_at].eq(self.i.payload)
        with m.If(pushed):
            m.d.sync += write_at.eq(write_at + 1)
        with m.If(popped):
            m.d.sync += read_at.eq(read_at + 1)
        m.d.sync += [
            held.eq(held + pushed - popped),
            # items next cycle: held + pushed - popped, nonzero if one came or another stays
            self.o.valid.eq(pushed | (held > 1) | (self.o.valid & ~popped)),
            # room next cycle whatever is taken now: held + pushed < depth
            room.eq(held + pushed < depth),
        ]
        return m
