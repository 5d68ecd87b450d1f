"""A signed multiply-accumulate with clear: the arithmetic core of every PE.

Contract: one operand pair per cycle; ``acc`` shows the sum ``latency`` cycles after the pair
is presented with ``valid`` high (throughput 1). ``clear`` with ``valid`` starts a new sum from
this product; ``clear`` alone zeroes the sum. The sum wraps at ``acc_bits`` like the int32
arithmetic of the golden models.

``product_register`` puts a register between the multiplier and the accumulate adder
(latency 2): the multiplier (an ECP5 MULT18X18D, a DSP slice) and the carry chain of the adder
then each get a whole clock period, which is what lets the PE array close timing at 100 MHz.
"""

from __future__ import annotations

from amaranth import Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from tensorforge.errors import ConfigError


class MultiplyAccumulate(wiring.Component):
    """``acc <= (clear ? 0 : acc) + a * b`` when ``valid``; ``acc <= 0`` on ``clear`` alone."""

    latency = 1  # without the product register; see `latency_of`

    def __init__(self, in_bits: int = 8, acc_bits: int = 32, product_register: bool = False
                 ) -> None:
        if in_bits < 2 or acc_bits < 2 * in_bits:
            raise ConfigError(
                f"MultiplyAccumulate needs in_bits >= 2 and acc_bits >= 2 * in_bits, "
                f"not in_bits={in_bits}, acc_bits={acc_bits}"
            )
        self.in_bits = in_bits
        self.acc_bits = acc_bits
        self.product_register = product_register
        self.latency = self.latency_of(product_register)
        super().__init__(
            {
                "a": In(signed(in_bits)),
                "b": In(signed(in_bits)),
                "valid": In(1),
                "clear": In(1),
                "acc": Out(signed(acc_bits)),
            }
        )

    @staticmethod
    def latency_of(product_register: bool) -> int:
        return 2 if product_register else 1

    def elaborate(self, platform) -> Module:
        m = Module()
        product, valid, clear = self.a * self.b, self.valid, self.clear
        if self.product_register:
            product_q = Signal(signed(2 * self.in_bits), name="product_q")
            valid_q, clear_q = Signal(name="valid_q"), Signal(name="clear_q")
            m.d.sync += [product_q.eq(product), valid_q.eq(valid), clear_q.eq(clear)]
            product, valid, clear = product_q, valid_q, clear_q
        accumulate(m, self.acc, product, valid, clear)
        return m


def accumulate(m: Module, acc, product, valid, clear) -> None:
    """``acc <= (clear ? 0 : acc) + product`` when ``valid``; ``acc <= 0`` on ``clear`` alone."""
    base = Mux(clear, 0, acc)
    with m.If(valid):
        m.d.sync += acc.eq(base + product)  # .eq truncates: wrap-around like int32
    with m.Elif(clear):
        m.d.sync += acc.eq(0)


def mac_reference(a, b, valid, clear, acc_bits: int = 32):
    """numpy golden model: the ``acc`` output after each cycle for the given input sequences
    (latency 1; with the product register the same values come one cycle later)."""
    import numpy as np

    acc = 0
    out = np.zeros(len(a), dtype=np.int64)
    mask = (1 << acc_bits) - 1
    for i in range(len(a)):
        if valid[i]:
            acc = (0 if clear[i] else acc) + int(a[i]) * int(b[i])
        elif clear[i]:
            acc = 0
        acc &= mask
        if acc >= 1 << (acc_bits - 1):
            acc -= 1 << acc_bits
        out[i] = acc
    return out
