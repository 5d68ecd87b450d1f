"""The processing element: a multiply-accumulate with a local store for the stationary operand.

The local store is HASCO's distributeCache: ``banks`` copies of ``slots`` operands, so the
compute unit can fill one bank with the next stationary block while beats compute on another
(Gemmini's double-buffered weights), and keep more blocks resident when ``local_bytes`` allows.
"""

from __future__ import annotations

from amaranth import Module, Signal, signed
from amaranth.hdl import Array
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from tensorforge.hw.mac import MultiplyAccumulate


class ProcessingElement(wiring.Component):
    """One PE: ``acc`` accumulates ``operand * store[bank][slot]`` on each enabled beat.

    Contract: a write on ``load_*`` lands in the store at the next clock edge. A beat presented
    with ``enable`` updates ``acc`` one cycle later (``first`` restarts the sum from this
    product). ``done`` rises ``latency`` cycles after a beat with ``last``, in the cycle ``acc``
    holds the group's sum; one beat per cycle.
    """

    latency = MultiplyAccumulate.latency

    def __init__(self, in_bits: int, acc_bits: int, slots: int, banks: int) -> None:
        self.in_bits, self.acc_bits = in_bits, acc_bits
        self.slots, self.banks = slots, banks
        super().__init__(
            {
                "load_valid": In(1),
                "load_bank": In(range(banks)),
                "load_mask": In(slots),
                "load_data": In(data.ArrayLayout(signed(in_bits), slots)),
                "enable": In(1),
                "first": In(1),
                "last": In(1),
                "slot": In(range(slots)),
                "bank": In(range(banks)),
                "operand": In(signed(in_bits)),
                "acc": Out(signed(acc_bits)),
                "done": Out(1),
            }
        )

    def elaborate(self, platform) -> Module:
        m = Module()
        m.submodules.mac = mac = MultiplyAccumulate(self.in_bits, self.acc_bits)
        store = Array(
            Array(Signal(signed(self.in_bits), name=f"store_b{b}_s{s}") for s in range(self.slots))
            for b in range(self.banks)
        )
        for bank in range(self.banks):
            for slot in range(self.slots):
                with m.If(self.load_valid & (self.load_bank == bank) & self.load_mask[slot]):
                    m.d.sync += store[bank][slot].eq(self.load_data[slot])
        m.d.comb += [
            mac.a.eq(self.operand),
            mac.b.eq(store[self.bank][self.slot]),
            mac.valid.eq(self.enable),
            mac.clear.eq(self.enable & self.first),  # never clear without a product
            self.acc.eq(mac.acc),
        ]
        m.d.sync += self.done.eq(self.last)
        return m
