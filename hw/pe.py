"""The processing element: a multiply-accumulate with a local store for the stationary operand.

The local store is HASCO's distributeCache: ``banks`` copies of ``slots`` operands, so the
compute unit can fill one bank with the next stationary block while beats compute on another
(Gemmini's double-buffered weights), and keep more blocks resident when ``local_bytes`` allows.

The PE is a three-stage pipeline so that no clock period holds more than one of the slow parts:
the store read (a ``banks x slots`` mux) and the operand land in registers, the multiplier's
product lands in a register, the accumulate adder updates ``acc``. The ``ecp5`` PE has a fourth:
its product leaves the DSP's output register for a fabric register beside the adder.
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
#: Fabric registers the ``ecp5`` PE puts between the DSP's output register and its adder.
ECP5_PRODUCT_STAGES = 1


class ProcessingElement(wiring.Component):
    """One PE: ``acc`` accumulates ``operand * store[bank][slot]`` on each enabled beat.

    Contract: a write on ``load_*`` lands in the store at the next clock edge. A beat presented
    with ``enable`` reads the store in that cycle and updates ``acc`` ``latency`` (3) cycles
    later (``first`` restarts the sum from this product). ``done`` rises in the cycle ``acc``
    holds the sum of a group whose last beat had ``last``; one beat per cycle.

    ``target`` ``ecp5`` puts the operand and product registers inside a MULT18X18D
    (`DspMultiplier`) and registers the product once more in the fabric, so ``latency`` is 4:
    the DSP's output pins sit in its column, and the net from them to a 32-bit adder the placer
    puts elsewhere (beside the array's drain) took 5 ns of an 8 ns period; now it ends at a
    flip-flop. It adds an ``advance`` input, the array's clock enable, which the DSP's
    registers need because ``EnableInserter`` does not reach into an instance. ``dsp=False``
    (an ``ecp5`` array's PEs beyond the part's DSPs) keeps the generic multiplier and takes the
    extra cycle as a second operand register, so every PE of an array has the same latency.
    """

    @staticmethod
    def latency_of(target: Target | str = Target.GENERIC) -> int:
        """Cycles from a beat's ``enable`` to ``acc`` holding its product."""
        generic = OPERAND_STAGES + MultiplyAccumulate.latency_of(product_register=True)
        return generic + (ECP5_PRODUCT_STAGES if parse_target(target) is Target.ECP5 else 0)

    def __init__(self, in_bits: int, acc_bits: int, slots: int, banks: int,
                 target: Target | str = Target.GENERIC, dsp: bool | None = None) -> None:
        self.in_bits, self.acc_bits = in_bits, acc_bits
        self.slots, self.banks = slots, banks
        self.target = parse_target(target)
        self.dsp = self.target is Target.ECP5 if dsp is None else dsp
        if self.dsp and self.target is not Target.ECP5:
            raise ValueError("only the ecp5 target's PEs multiply on a DSP")
        self.latency = self.latency_of(self.target)
        advance = {"advance": In(1)} if self.dsp else {}
        super().__init__(
            {
                **advance,
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
        if self.dsp:
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
        for stage in range(self.latency - self.latency_of(Target.GENERIC)):  # as the DSP PEs
            staged = [Signal.like(value, name=f"{value.name}_d{stage}")
                      for value in (stationary_q, operand_q, enable_q, first_q)]
            m.d.sync += [new.eq(old) for new, old in
                         zip(staged, (stationary_q, operand_q, enable_q, first_q), strict=True)]
            stationary_q, operand_q, enable_q, first_q = staged
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
        """The operand and product registers in a MULT18X18D, then the product registered in
        the fabric (``product_q``, where the placer puts the adder) before the accumulate."""
        m.submodules.mult = mult = DspMultiplier(self.in_bits)
        m.d.comb += [mult.a.eq(self.operand), mult.b.eq(stationary),
                     mult.advance.eq(self.advance)]
        product = mult.p
        for stage in range(ECP5_PRODUCT_STAGES):
            # not reset, like the DSP's registers: the valid flags keep stale products out
            product_q = Signal.like(product, name=f"product_q{stage}", reset_less=True)
            m.d.sync += product_q.eq(product)
            product = product_q
        valid, clear = self.enable, self.enable & self.first  # never clear without a product
        for stage in range(DspMultiplier.latency + ECP5_PRODUCT_STAGES):
            valid_q, clear_q = Signal(name=f"valid_d{stage}"), Signal(name=f"clear_d{stage}")
            m.d.sync += [valid_q.eq(valid), clear_q.eq(clear)]
            valid, clear = valid_q, clear_q
        accumulate(m, self.acc, product, valid, clear)
        self._delay_last(m)

    def _delay_last(self, m: Module) -> None:
        last = self.last
        for stage in range(self.latency):
            last_q = Signal(name=f"last_d{stage}")
            m.d.sync += last_q.eq(last)
            last = last_q
        m.d.comb += self.done.eq(last)
