"""A stream register slice with a registered ``ready``: the ECP5 target's request registers.

Between a requester and a memory port it cuts both ways: the memory's arbitration starts from
registers (``o.valid``, ``o.payload``), and the requester's handshake from a register
(``i.ready``), where both were one combinational path through the other block.
"""

from __future__ import annotations

from amaranth import Module, Signal
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
