"""The processing element: a multiply-accumulate with a local store for the stationary operand.

The local store is HASCO's distributeCache: ``banks`` copies of ``slots`` operands, so the
compute unit can fill one bank with the next stationary block while beats compute on another
(Gemmini's double-buffered weights), and keep more blocks resident when ``local_bytes`` allows.

The PE is a three-stage pipeline so that no clock period holds more than one of the slow parts:
the store read (a ``banks x slots`` mux) and the operand land in registers, the multiplier's
product lands in a register, the accumulate adder updates ``acc``.
"""

from __future__ import annotations

from amaranth import Module, Signal, signed
from amaranth.hdl import Array
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from tensorforge.hw.dsp import DspMultiplier
from tensorforge.hw.mac import MultiplyAccumulate, accumulate
from tensorforge.hw.targets import Target, parse_target

#: The operand register stage in front of the MAC (store read and streamed operand).
OPERAND_STAGES = 1


class ProcessingElement(wiring.Component):
    """One PE: ``acc`` accumulates ``operand * store[bank][slot]`` on each enabled beat.

    Contract: a write on ``load_*`` lands in the store at the next clock edge. A beat presented
    with ``enable`` reads the store in that cycle and updates ``acc`` ``latency`` (3) cycles
    later (``first`` restarts the sum from this product). ``done`` rises in the cycle ``acc``
    holds the sum of a group whose last beat had ``last``; one beat per cycle.

    ``target`` ``ecp5`` puts the operand and product registers inside a MULT18X18D
    (`DspMultiplier`), same cycles; it adds an ``advance`` input, the array's clock enable,
    which the DSP's registers need because ``EnableInserter`` does not reach into an instance.
    """

    latency = OPERAND_STAGES + MultiplyAccumulate.latency_of(product_register=True)

    def __init__(self, in_bits: int, acc_bits: int, slots: int, banks: int,
                 target: Target | str = Target.GENERIC) -> None:
        self.in_bits, self.acc_bits = in_bits, acc_bits
        self.slots, self.banks = slots, banks
        self.target = parse_target(target)
        dsp = {"advance": In(1)} if self.target is Target.ECP5 else {}
        super().__init__(
            {
                **dsp,
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
        if self.target is Target.ECP5:
            store = self._store(m)
            self._dsp_pipeline(m, store[self.bank][self.slot])
            return m
        mac = MultiplyAccumulate(self.in_bits, self.acc_bits, product_register=True)
        m.submodules.mac = mac
        store = self._store(m)
        # operand stage: the store read and the streamed operand, registered
        stationary_q = Signal(signed(self.in_bits))
        operand_q = Signal(signed(self.in_bits))
        enable_q, first_q = Signal(), Signal()
        m.d.sync += [
            stationary_q.eq(store[self.bank][self.slot]),
            operand_q.eq(self.operand),
            enable_q.eq(self.enable),
            first_q.eq(self.enable & self.first),  # never clear without a product
        ]
        m.d.comb += [
            mac.a.eq(operand_q),
            mac.b.eq(stationary_q),
            mac.valid.eq(enable_q),
            mac.clear.eq(first_q),
            self.acc.eq(mac.acc),
        ]
        self._delay_last(m)
        return m

    def _store(self, m: Module) -> Array:
        """The local store, ``banks x slots`` operands, written by ``load_*``."""
        store = Array(
            Array(Signal(signed(self.in_bits), name=f"store_b{b}_s{s}") for s in range(self.slots))
            for b in range(self.banks)
        )
        for bank in range(self.banks):
            for slot in range(self.slots):
                with m.If(self.load_valid & (self.load_bank == bank) & self.load_mask[slot]):
                    m.d.sync += store[bank][slot].eq(self.load_data[slot])
        return store

    def _dsp_pipeline(self, m: Module, stationary) -> None:
        """The same three stages with the operand and product registers in a MULT18X18D."""
        m.submodules.mult = mult = DspMultiplier(self.in_bits)
        m.d.comb += [mult.a.eq(self.operand), mult.b.eq(stationary),
                     mult.advance.eq(self.advance)]
        valid, clear = self.enable, self.enable & self.first  # never clear without a product
        for stage in range(DspMultiplier.latency):
            valid_q, clear_q = Signal(name=f"valid_d{stage}"), Signal(name=f"clear_d{stage}")
            m.d.sync += [valid_q.eq(valid), clear_q.eq(clear)]
            valid, clear = valid_q, clear_q
        accumulate(m, self.acc, mult.p, valid, clear)
        self._delay_last(m)

    def _delay_last(self, m: Module) -> None:
        last = self.last
        for stage in range(self.latency):
            last_q = Signal(name=f"last_d{stage}")
            m.d.sync += last_q.eq(last)
            last = last_q
        m.d.comb += self.done.eq(last)
