"""A signed multiplier on one Lattice ECP5 MULT18X18D, with the slice's own registers.

Yosys' ``synth_ecp5`` maps ``a * b`` onto a MULT18X18D but leaves the fabric flip-flops around
it in the fabric, so the operand and product registers of a PE sit in slices and the routing to
and from the DSP column adds twice to the clock period. Here the operands go into the slice's
input registers and the product comes out of its output register: the same two register stages
as the generic PE (`tensorforge.hw.pe`), inside the DSP.

A simulation model of the primitive with these register semantics is
``sim/mult18x18d.v`` (`ecp5_simulation_models`; Verilator reads it with the design).
"""

from __future__ import annotations

from amaranth import ClockSignal, Instance, Module, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from tensorforge.errors import ConfigError

#: Operand bits one MULT18X18D takes.
DSP_OPERAND_BITS = 18
#: MULT18X18D slices of the largest ECP5 (LFE5U-85F): the ``ecp5`` target's PE array puts at
#: most this many PEs on DSPs; the ECP5 flow builds the other PEs' multipliers from LUTs.
MAX_DSPS = 156


def check_operand_bits(in_bits: int) -> None:
    """A `ConfigError` unless one MULT18X18D multiplies ``in_bits``-bit operands."""
    if not 2 <= in_bits <= DSP_OPERAND_BITS:
        raise ConfigError(f"a MULT18X18D multiplies operands of 2..{DSP_OPERAND_BITS} bits, "
                          f"not {in_bits}; use the generic target for wider operands")


class DspMultiplier(wiring.Component):
    """``p = a * b`` (signed), two cycles later: operands and product registered in the DSP.

    Contract: ``a`` and ``b`` presented in a cycle with ``advance`` high give ``p`` two advancing
    cycles later; a cycle with ``advance`` low changes no register (the slice's clock enable),
    so a frozen array freezes its multipliers too. The slice's registers are not reset: the
    PE's valid flags, which are, keep a product from before reset out of the sum, and the
    domain may have no reset at all (the board's).
    """

    latency = 2

    def __init__(self, in_bits: int) -> None:
        check_operand_bits(in_bits)
        self.in_bits = in_bits
        super().__init__({
            "a": In(signed(in_bits)),
            "b": In(signed(in_bits)),
            "advance": In(1),
            "p": Out(signed(2 * in_bits)),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        a = Signal(DSP_OPERAND_BITS, name="a_ext")
        b = Signal(DSP_OPERAND_BITS, name="b_ext")
        product = Signal(2 * DSP_OPERAND_BITS, name="p_full")
        m.d.comb += [a.eq(self.a), b.eq(self.b),  # signed: sign-extended to 18 bits
                     self.p.eq(product[:2 * self.in_bits])]
        registers = {}
        for register in ("INPUTA", "INPUTB", "OUTPUT"):
            registers.update({f"p_REG_{register}_CLK": "CLK0", f"p_REG_{register}_CE": "CE0",
                              f"p_REG_{register}_RST": "RST0"})
        ports = {f"i_A{i}": a[i] for i in range(DSP_OPERAND_BITS)}
        ports |= {f"i_B{i}": b[i] for i in range(DSP_OPERAND_BITS)}
        ports |= {f"i_C{i}": 0 for i in range(DSP_OPERAND_BITS)}
        ports |= {f"o_P{i}": product[i] for i in range(2 * DSP_OPERAND_BITS)}
        m.submodules.mult = Instance(
            "MULT18X18D",
            **registers,
            p_REG_PIPELINE_CLK="NONE",
            p_RESETMODE="SYNC",
            p_GSR="DISABLED",
            i_SIGNEDA=1, i_SIGNEDB=1, i_SOURCEA=0, i_SOURCEB=0,
            i_CLK0=ClockSignal("sync"), i_CE0=self.advance, i_RST0=0,
            **ports,
        )
        return m
