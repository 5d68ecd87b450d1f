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
multiplier, packed shift/zero point/low/high) the STORE read before its rows: lane ``e``'s
parameters for lane ``e`` when the channel runs along the accumulator line, or one lane's
for the whole row (``per_row``) when it runs across lines.

On the generic target the multiply-add chain is one combinational path from the accumulator's
read data into the line queue; the ``ecp5`` target builds `PipelinedRequantizer` instead, the
same formula over `PipelinedRequantizer.latency` register stages. Not done: pooling and
residual adds.
"""

from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal, signed, unsigned
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


class PipelinedRequantizer(wiring.Component):
    """`Requantizer`'s formula over ``latency`` register stages (the ``ecp5`` target): each
    multiplier is split into four half-width products (one MULT18X18D each at 32 bits) and
    every adder, shift and clamp gets its own stage.

    Contract: a line presented with ``valid`` (and any ``tag`` bits) comes out of ``narrow``,
    ``line_out`` (the line as it came in) and ``tag_out`` with ``valid_out`` ``latency``
    cycles later; one line per cycle, no stall (the caller makes room for what is in flight).
    The parameters are taken with the line. Bit-exact with `Requantizer`.
    """

    latency = 7

    def __init__(self, config: AcceleratorConfig, tag_bits: int) -> None:
        self.config = config
        line = acc_line_layout(config)
        lanes, in_bits = config.acc_line_elems, config.precision.in_bits
        super().__init__({
            "valid": In(1),
            "tag": In(max(1, tag_bits)),
            "line": In(line),
            **{f"param_{k}": In(line) for k in range(PARAM_LINES)},
            "valid_out": Out(1),
            "tag_out": Out(max(1, tag_bits)),
            "line_out": Out(line),
            "narrow": Out(unsigned(lanes * in_bits)),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        in_bits = self.config.precision.in_bits
        valid, tag = self.valid, self.tag
        for stage in range(self.latency):
            valid, tag = _register(m, valid, f"valid_{stage}"), _register(m, tag, f"tag_{stage}")
        m.d.comb += [self.valid_out.eq(valid), self.tag_out.eq(tag)]
        for e in range(self.config.acc_line_elems):
            result, x = self._lane(m, e, self.line[e], self.param_0[e], self.param_1[e],
                                   self.param_2[e])
            m.d.comb += [self.narrow[e * in_bits:(e + 1) * in_bits].eq(result),
                         self.line_out[e].eq(x)]
        return m

    def _lane(self, m, e, x, bias, multiplier, packed):
        acc_bits = self.config.precision.acc_bits
        in_bits = self.config.precision.in_bits
        half = acc_bits // 2
        shift_width = (acc_bits - 1).bit_length()
        packed = packed.as_unsigned()
        fields = Cat(packed[:shift_width], packed[SHIFT_BITS:SHIFT_BITS + 3 * in_bits])

        def reg(value, name):
            return _register(m, value, f"lane{e}_{name}")

        def carry(stage, *values):
            return [reg(v, f"{stage}_{k}") for k, v in enumerate(values)]

        # 1: the bias; the parameters and the line are taken
        biased = reg((x + bias)[:acc_bits].as_signed(), "biased")
        multiplier = reg(multiplier, "multiplier")
        x1, fields = carry("s1", x, fields)
        # 2: four half-width products
        a_high, a_low = biased[half:].as_signed(), biased[:half]
        b_high, b_low = multiplier[half:].as_signed(), multiplier[:half]
        most_negative = -(1 << (acc_bits - 1))
        high = reg(a_high * b_high, "high")
        cross = [reg(a_high * b_low, "cross_a"), reg(a_low * b_high, "cross_b")]
        low = reg(a_low * b_low, "low")
        saturates = reg((biased == most_negative) & (multiplier == most_negative), "saturates")
        x2, fields = carry("s2", x1, fields)
        # 3: the outer products side by side plus the rounding constant; the cross sum
        outer = reg(Cat(low[:acc_bits], high).as_signed() + (1 << (acc_bits - 2)), "outer")
        middle = reg(cross[0] + cross[1], "middle")
        x3, fields, saturates = carry("s3", x2, fields, saturates)
        # 4: the doubling high multiply, rounded and saturated; the shift's remainder mask
        rounded = (outer + (middle << half)) >> (acc_bits - 1)
        doubled = reg(Mux(saturates, (1 << (acc_bits - 1)) - 1, rounded[:acc_bits]).as_signed(),
                      "doubled")
        ones = Const((1 << acc_bits) - 1, acc_bits)
        mask = reg(~(ones << fields[:shift_width])[:acc_bits], "mask")
        x4, fields = carry("s4", x3, fields)
        # 5: rounding divide by 2**shift, half away from zero (gemmlowp RoundingDivideByPOT)
        shift = fields[:shift_width]
        remainder = doubled.as_unsigned() & mask
        round_up = reg(remainder > (mask >> 1) + (doubled < 0), "round_up")
        shifted = reg((doubled >> shift)[:acc_bits].as_signed(), "shifted")
        x5, fields = carry("s5", x4, fields)
        zero_point = fields[shift_width:shift_width + in_bits].as_signed()
        low_bound = fields[shift_width + in_bits:shift_width + 2 * in_bits].as_signed()
        high_bound = fields[shift_width + 2 * in_bits:shift_width + 3 * in_bits].as_signed()
        # 6: the zero point
        offset = reg((shifted + zero_point + round_up)[:acc_bits].as_signed(), "offset")
        x6, low_bound, high_bound = carry("s6", x5, low_bound, high_bound)
        # 7: the clamp, its two compares side by side: max(offset, low), then min with high
        below, above = offset < low_bound, offset > high_bound
        to_high = (low_bound > high_bound) | (above & ~below)
        clamped = reg(Mux(to_high, high_bound, Mux(below, low_bound, offset))[:in_bits],
                      "clamped")
        x7 = reg(x6, "s7_0")
        return clamped, x7


def _register(m: Module, value, name: str) -> Signal:
    """``value`` one cycle later."""
    register = Signal.like(value, name=name) if isinstance(value, Signal) else Signal(
        value.shape(), name=name)
    m.d.sync += register.eq(value)
    return register


class StoreRequantPath:
    """The store unit's side of the pipeline: the parameter registers, the reads that fill
    them and the routing of each read's response (built into the store unit's module).

    A requantizing STORE starts in the store unit's PARAMS state, where `read_all` requests
    lines ``params``, ``params + 1``, ``params + 2``; a ``per_row`` STORE goes back there
    (`block_used_up`) every ``acc_line_elems`` rows for the next block, and row ``r`` takes
    lane ``r mod acc_line_elems`` of the block for every element. Each request is tagged
    (parameter line, requantize, per row, lane) as it is taken: the accumulator's read slot
    holds one line, so the tags still belong to the line it returns, and the registers change
    only after the lines read before them have gone through.
    """

    def __init__(self, m: Module, config: AcceleratorConfig, insn, read, cmd,
                 tag_bits: int | None = None) -> None:
        self.config, self.insn, self.read = config, insn, read
        self.lanes = config.acc_line_elems
        if tag_bits is None:
            m.submodules.requantizer = self.unit = Requantizer(config)
        else:  # `route_through_stages`: one more tag bit, whether the line is requantized
            m.submodules.requantizer = self.unit = PipelinedRequantizer(config, tag_bits + 1)
        self.params = [Signal(acc_line_layout(config), name=f"store_param_{k}")
                       for k in range(PARAM_LINES)]
        self.reading = Signal(range(PARAM_LINES + 1), name="store_params_read")
        self.read_params = Signal(name="store_read_params")
        self.address = Signal.like(insn.params, name="store_params_addr")
        self.row_lane = Signal(range(self.lanes + 1), name="store_row_lane")
        with m.If(cmd.valid & cmd.ready):
            m.d.sync += [self.reading.eq(0), self.address.eq(cmd.payload.params)]
        with m.If(self.read_params):
            m.d.comb += [read.req.payload.eq(self.address + self.reading),
                         read.req.valid.eq(1)]
            with m.If(read.req.ready):
                m.d.sync += self.reading.eq(self.reading + 1)
        with m.If(read.req.valid & read.req.ready & ~self.read_params):
            m.d.sync += self.row_lane.eq(self.row_lane + 1)

    def read_all(self, m: Module):
        """In PARAMS: request the block's lines; whether all three are requested (call it
        before the state's If chain: it adds its own If)."""
        done = self.reading == PARAM_LINES
        with m.If(done):
            m.d.sync += self.row_lane.eq(0)
        with m.Else():
            m.d.comb += self.read_params.eq(1)
        return done

    def block_used_up(self, m: Module, ends):
        """In ROWS: whether a per-row STORE has used every lane of its block and has rows
        left (``ends`` low); then the next block, three lines on, is read before the next row.
        Call it before the state's If chain: it adds its own If."""
        used = Signal(name="store_block_used_up")
        m.d.comb += used.eq(self.insn.requant & self.insn.per_row & ~ends
                            & (self.row_lane == self.lanes))
        with m.If(used):
            m.d.sync += [self.reading.eq(0), self.address.eq(self.address + PARAM_LINES)]
        return used

    def route_through_stages(self, m: Module, room, tag):
        """`route_response` for the `PipelinedRequantizer` (built with ``tag_bits``): every
        line, requantized or not, goes through its stages with its ``tag``; a line is taken
        only while there is ``room``. Returns the ``(valid, data, tag)`` of the line leaving
        the stages."""
        read, unit = self.read, self.unit

        def take() -> None:
            m.d.comb += [read.resp.ready.eq(room), unit.valid.eq(read.resp.valid & room)]

        narrow = self._latch_and_fill_params(m, take)
        m.d.comb += [unit.line.eq(read.resp.payload), unit.tag.eq(Cat(tag, narrow))]
        leaving = unit.tag_out[:len(tag)]
        data = Mux(unit.tag_out[len(tag)], unit.narrow, unit.line_out.as_value())
        return unit.valid_out, data, leaving

    def route_response(self, m: Module, lines):
        """A parameter line into its register, a requantizing STORE's line through the
        `Requantizer`, any other line as it is; returns the line data to queue."""
        read = self.read

        def take() -> None:
            m.d.comb += [read.resp.ready.eq(lines.w_rdy), lines.w_en.eq(read.resp.valid)]

        narrow = self._latch_and_fill_params(m, take)
        m.d.comb += self.unit.line.eq(read.resp.payload)
        return Mux(narrow, self.unit.narrow, read.resp.payload.as_value())

    def _latch_and_fill_params(self, m: Module, take):
        """Latches each request's tags, fills the parameter registers from their lines (and
        calls ``take`` to add the statements that take any other line) and drives the unit's
        parameters; returns whether the response is requantized."""
        read, insn = self.read, self.insn
        param_slot = Signal(range(PARAM_LINES), name="store_resp_param_slot")
        is_param = Signal(name="store_resp_is_param")
        narrow = Signal(name="store_resp_narrow")
        per_row = Signal(name="store_resp_per_row")
        lane = Signal(range(self.lanes), name="store_resp_lane")
        with m.If(read.req.valid & read.req.ready):
            m.d.sync += [
                is_param.eq(self.read_params),
                param_slot.eq(self.reading),
                narrow.eq(insn.requant),
                per_row.eq(insn.per_row),
                lane.eq(self.row_lane),
            ]
        with m.If(is_param):
            m.d.comb += read.resp.ready.eq(1)
            with m.If(read.resp.valid):
                for k, line in enumerate(self.params):
                    with m.If(param_slot == k):
                        m.d.sync += line.eq(read.resp.payload)
        with m.Else():
            take()
        unit = self.unit
        for k, line in enumerate(self.params):
            port = getattr(unit, f"param_{k}")
            for e in range(self.lanes):  # per row: the row's lane for every element
                m.d.comb += port[e].eq(Mux(per_row, line[lane], line[e]))
        return narrow
