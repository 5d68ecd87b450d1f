"""The performance counters behind the register map's read-only registers (`COUNTERS`).

Each counter restarts from 0 when a program starts and adds its increment in every cycle the
controller is busy. With ``registered`` (the ECP5 target) the increment, taken as 0 outside
busy cycles, is registered before the adder: its enable comes from a unit's handshake in
another part of the die (the load unit's R channel for ``bytes_read``, the compute unit's
state for ``compute_busy``) and would otherwise share a cycle with the 32-bit carry chain.
The count then ends a cycle after the controller stops being busy, with the same total; a
host reads it over AXI4-Lite several cycles after it sees STATUS.done.
"""

from __future__ import annotations

from amaranth import Module, Mux, Signal, Value

from tensorforge.hw.registers import COUNTERS, REGISTER_BITS


def add_counters(m: Module, registers, increments: dict, *, starting, busy,
                 registered: bool = False) -> None:
    """A counter per name of ``increments`` (value: what to add in a busy cycle), driving the
    register of that name in ``registers``; ``starting`` clears every counter."""
    if set(increments) != set(COUNTERS):  # a register added to REGISTERS but not here
        raise RuntimeError(f"counters {sorted(increments)} do not match {sorted(COUNTERS)}")
    for name, increment in increments.items():
        counter = Signal(REGISTER_BITS, name=f"count_{name}")
        m.d.comb += getattr(registers, name).eq(counter)
        if registered:
            step = Signal(Value.cast(increment).shape(), name=f"count_{name}_step")
            m.d.sync += step.eq(Mux(busy, increment, 0))
            with m.If(starting):
                m.d.sync += counter.eq(0)
            with m.Else():
                m.d.sync += counter.eq(counter + step)
            continue
        with m.If(starting):
            m.d.sync += counter.eq(0)
        with m.Elif(busy):
            m.d.sync += counter.eq(counter + increment)
