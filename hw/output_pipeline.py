"""The output pipeline: an accumulator line -> requantized, clamped ``in_bits`` elements.

Built into the store unit on an accelerator with ``output_pipeline`` (a STORE with
``requant``), after Gemmini, which scales and clamps results on their way out of the
accumulator, rather than as VTA's ALU instruction: the STORE reads every accumulator line
anyway, so requantizing there costs no accumulator pass and no compute-unit cycles, needs no
new opcode (the ISA's 2-bit opcode is full) and sends ``in_bits`` elements, 4x fewer bytes at
int8/int32, to DRAM. What an ALU would add (pooling, residual adds) is not here.

Each lane is one copy of `tensorforge.requant`'s formula: a signed ``acc_bits`` x ``acc_bits``
multiplier (the gemmlowp doubling high multiply, rounded and saturated), a rounding right
shift, the zero-point add and the clamp. ``params`` are the three parameter lines (bias,
multiplier, packed shift/zero point/low/high) the STORE read before its rows.
"""

from __future__ import annotations

from amaranth import Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from tensorforge.config import AcceleratorConfig
from tensorforge.hw.ports import acc_line_layout
from tensorforge.requant import PARAM_LINES, SHIFT_BITS


class Requantizer(wiring.Component):
    """Combinational: ``narrow`` holds lane ``e``'s result in bits ``e*in_bits`` upwards.

    Contract: no latency (the store unit registers the result in its line queue); one line per
    cycle. Bit-exact with `tensorforge.requant.requantize_lines` for shifts below ``acc_bits``.
    """

    latency = 0

    def __init__(self, config: AcceleratorConfig) -> None:
        self.config = config
        line = acc_line_layout(config)
        lanes, in_bits = config.acc_line_elems, config.precision.in_bits
        super().__init__({
            "line": In(line),
            **{f"param_{k}": In(line) for k in range(PARAM_LINES)},
            "narrow": Out(unsigned(lanes * in_bits)),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        lanes = self.config.acc_line_elems
        in_bits = self.config.precision.in_bits
        for e in range(lanes):
            result = self._lane(m, e, self.line[e], self.param_0[e], self.param_1[e],
                                self.param_2[e])
            m.d.comb += self.narrow[e * in_bits:(e + 1) * in_bits].eq(result)
        return m

    def _lane(self, m, e, x, bias, multiplier, packed):
        acc_bits = self.config.precision.acc_bits
        in_bits = self.config.precision.in_bits
        shift_width = (acc_bits - 1).bit_length()
        packed = packed.as_unsigned()
        shift = packed[:shift_width]
        zero_point = packed[SHIFT_BITS:SHIFT_BITS + in_bits].as_signed()
        low = packed[SHIFT_BITS + in_bits:SHIFT_BITS + 2 * in_bits].as_signed()
        high = packed[SHIFT_BITS + 2 * in_bits:SHIFT_BITS + 3 * in_bits].as_signed()

        def sig(shape, name):
            return Signal(shape, name=f"lane{e}_{name}")

        biased = sig(signed(acc_bits), "biased")
        product = sig(signed(2 * acc_bits), "product")
        doubled = sig(signed(acc_bits), "doubled")
        m.d.comb += [
            biased.eq(x + bias),
            product.eq(biased * multiplier),
        ]
        most_negative = -(1 << (acc_bits - 1))
        saturates = (biased == most_negative) & (multiplier == most_negative)
        rounded = (product + (1 << (acc_bits - 2))) >> (acc_bits - 1)
        m.d.comb += doubled.eq(Mux(saturates, (1 << (acc_bits - 1)) - 1, rounded[:acc_bits]))

        # rounding divide by 2**shift, half away from zero (gemmlowp RoundingDivideByPOT)
        ones = Const((1 << acc_bits) - 1, acc_bits)
        mask = sig(acc_bits, "mask")
        m.d.comb += mask.eq(~(ones << shift)[:acc_bits])
        remainder = doubled.as_unsigned() & mask
        threshold = sig(acc_bits + 1, "threshold")
        m.d.comb += threshold.eq((mask >> 1) + (doubled < 0))
        divided = sig(signed(acc_bits), "divided")
        m.d.comb += divided.eq((doubled >> shift) + (remainder > threshold))

        offset = sig(signed(acc_bits), "offset")
        floored = sig(signed(acc_bits), "floored")
        clamped = sig(signed(in_bits), "clamped")
        m.d.comb += [
            offset.eq(divided + zero_point),
            floored.eq(Mux(offset < low, low, offset)),
            clamped.eq(Mux(floored > high, high, floored)),
        ]
        return clamped
