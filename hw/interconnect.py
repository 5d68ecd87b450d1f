"""Building blocks of the PE interconnects: delay lines (systolic skew) and adder trees (full).

Each helper adds registers to the ``sync`` domain of the module it is given, so a caller that
wraps the whole array in an ``EnableInserter`` freezes them together with the PEs.
"""

from __future__ import annotations

from amaranth import Module, Signal, signed
from amaranth.hdl import Value


def delayed(m: Module, value: Value, cycles: int, name: str) -> Value:
    """``value`` as it was ``cycles`` clock edges ago (a chain of registers; 0 is a wire)."""
    for stage in range(cycles):
        register = Signal.like(value, name=f"{name}_d{stage}")
        m.d.sync += register.eq(value)
        value = register
    return value


def adder_tree(m: Module, values: list[Value], bits: int, name: str) -> tuple[Value, int]:
    """The sum of ``values`` through a binary tree with a register after every level.

    Returns the sum (wrapped to ``bits``, like the accumulators) and the tree depth in cycles,
    ``ceil(log2(len(values)))``; a single value passes through unregistered.
    """
    level, depth = list(values), 0
    while len(level) > 1:
        pairs = [level[i : i + 2] for i in range(0, len(level), 2)]
        next_level = []
        for index, pair in enumerate(pairs):
            register = Signal(signed(bits), name=f"{name}_l{depth}_{index}")
            m.d.sync += register.eq(sum(pair[1:], pair[0]))
            next_level.append(register)
        level, depth = next_level, depth + 1
    return level[0], depth


def flat_sum(values: list[Value]) -> Value:
    """One combinational sum of every value (the "separate adder" of an unlinked array)."""
    return sum(values[1:], values[0])
