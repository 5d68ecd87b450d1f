"""Registers between the controller's gate and one unit: the ECP5 target's command link.

A unit's ``cmd.ready``, ``idle`` and ``retired`` come from deep in its own logic (the load
unit's retire pulse from the accumulator's write arbitration, which follows the compute unit's
writes), and the controller's gate decided its next state from them in the same cycle: paths of
9-10 routed nets across four units (docs/ecp5_target.md). Here the controller sees only
registers.
"""

from __future__ import annotations

from amaranth import Module, Signal
from amaranth.hdl import ShapeCastable
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from tensorforge.hw.skid import SkidBuffer


class RegisteredUnitLink(wiring.Component):
    """The controller's side (``gate_cmd``, ``gate_idle``, ``gate_retired``) and the unit's
    side (``unit_cmd``, ``unit_idle``, ``unit_retired``) of one unit, all through registers.

    Contract: a command taken on ``gate_cmd`` is offered on ``unit_cmd`` a cycle later
    (`SkidBuffer`, ``gate_cmd.ready`` a register). ``gate_retired`` is ``unit_retired`` a
    cycle later. ``gate_idle`` is a register that keeps the controller's contract for the
    pair: it falls in the cycle after ``gate_cmd`` takes a command, and is high only while
    the link held no command and the unit was idle in the last cycle, and no retire pulse is
    on its way (a register's with ``gate_retired``'s), so the controller never sees the pair
    idle before the last command's tokens are pushed.
    """

    def __init__(self, command: ShapeCastable) -> None:
        self.command = command
        super().__init__({
            "gate_cmd": In(stream.Signature(command)),
            "gate_idle": Out(1),
            "gate_retired": Out(1),
            "unit_cmd": Out(stream.Signature(command)),
            "unit_idle": In(1),
            "unit_retired": In(1),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        m.submodules.command = skid = SkidBuffer(self.command)
        wiring.connect(m, wiring.flipped(self.gate_cmd), skid.i)
        wiring.connect(m, skid.o, wiring.flipped(self.unit_cmd))
        holds_nothing = skid.i.ready & ~skid.o.valid & ~skid.i.valid
        idle = Signal(init=1)  # an idle unit after reset, as the controller expects
        m.d.sync += [
            self.gate_retired.eq(self.unit_retired),
            idle.eq(holds_nothing & self.unit_idle),
        ]
        # not idle in a retire pulse's cycle: the pulse is registered already, so the unit's
        # retire logic (which may follow other units' handshakes) ends at that register only
        m.d.comb += self.gate_idle.eq(idle & ~self.gate_retired)
        return m
