"""The DMA: a load unit (DRAM -> scratchpad/accumulator) and a store unit (accumulator -> DRAM).

Both are AXI4 managers moving one tile row (one buffer line) at a time: a row's bytes are
covered by bus-aligned INCR bursts of at most ``dma.max_burst`` beats that never cross a 4 KiB
boundary (`tensorforge.hw.axi.plan_bursts` is the reference plan). Element addresses need not
be bus-aligned: the load unit shifts each beat into place in a line buffer, the store unit
shifts the line into beats and marks the valid bytes with ``wstrb``. Rows longer than a buffer
line are cut to the line (the ISA's ``row_len`` cannot usefully exceed it).

The load unit reads on its own AR/R channels and the store unit writes on AW/W/B, so a LOAD
and a STORE run at the same time on one AXI port; the top level shares the read channels with
the instruction fetch through `AxiReadArbiter`.
"""

from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Shape, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from tensorforge.config import AcceleratorConfig
from tensorforge.hw.axi import (
    ADDR_BITS,
    BurstPlanner,
    ReadId,
    Response,
    axi_read_signature,
    axi_write_signature,
    drive_fixed_fields,
)
from tensorforge.hw.ports import (
    acc_read_port,
    acc_write_port,
    instruction_layout,
    spad_write_port,
)
from tensorforge.isa import Buffer, Opcode


def _log2(value: int) -> int:
    return value.bit_length() - 1


class _RowGeometry:
    """Byte geometry of one row: where it starts in DRAM, how many bytes, how many beats."""

    def __init__(
        self, m: Module, bus_bytes: int, start, row_len, line_elems, elem_shift, line_bytes: int
    ) -> None:
        elems = Signal(range(line_elems + 1))
        m.d.comb += elems.eq(Mux(row_len > line_elems, line_elems, row_len))
        self.start = start
        self.bytes = Signal(range(line_bytes + 1))
        self.offset = Signal(range(bus_bytes))  # start's byte lane in its beat
        self.beats = Signal(range(line_bytes // bus_bytes + 3))
        self.aligned = Signal(ADDR_BITS)
        m.d.comb += [
            self.bytes.eq(elems << elem_shift),
            self.offset.eq(start[: _log2(bus_bytes)] if bus_bytes > 1 else 0),
            self.aligned.eq(start & ~Const(bus_bytes - 1, ADDR_BITS)),
            self.beats.eq((self.offset + self.bytes + bus_bytes - 1) >> _log2(bus_bytes)),
        ]


def _byte_mask(m: Module, count, total: int, name: str) -> Signal:
    """``total`` bits, the low ``count`` of them set."""
    mask = Signal(total, name=name)
    m.d.comb += mask.eq(Cat(count > index for index in range(total)))
    return mask


def _accept_command(m: Module, unit, insn, line, rows_left, row_addr):
    """In a unit's IDLE state: take ``cmd`` and latch its tile fields; returns the handshake."""
    payload = unit.cmd.payload
    m.d.comb += [unit.idle.eq(1), unit.cmd.ready.eq(1)]
    with m.If(unit.cmd.valid):
        m.d.sync += [
            insn.eq(payload),
            line.eq(payload.line),
            rows_left.eq(payload.rows),
            row_addr.eq(payload.dram_addr),
        ]
    return unit.cmd.valid


def _expand_bytes(mask) -> Cat:
    """Each mask bit widened to a byte of ones."""
    return Cat(bit.replicate(8) for bit in mask)


class _Queue(SyncFIFO):
    """A `SyncFIFO` of one shape: ``pushed`` views ``w_data`` and ``head`` views ``r_data``."""

    def __init__(self, shape, depth: int) -> None:
        super().__init__(width=Shape.cast(shape).width, depth=depth)
        if isinstance(shape, data.Layout):
            self.pushed, self.head = shape(self.w_data), shape(self.r_data)
        else:
            self.pushed, self.head = self.w_data, self.r_data


class LoadUnit(wiring.Component):
    """Executes LOAD: 2D strided DRAM tile -> scratchpad or accumulator lines, with padding.

    Two halves joined by a queue of row descriptors. The address half walks the rows and issues
    each row's read bursts on AR, one burst per cycle, without waiting for data; the data half
    takes R beats in order (one AXI ID, so bursts return in issue order), shifts them into a
    line and hands each finished line to a one-line output register that writes it.

    Contract: one LOAD at a time; ``idle`` falls in the cycle after ``cmd`` is accepted and rises
    once the last line is written. Up to ``outstanding_rows`` rows are in flight (planned but
    not yet assembled), so with that many rows covering the DRAM latency, R beats are taken at
    ``beats_per_cycle`` = 1 and a row of one beat costs one cycle; zero lines (padding,
    ``row_len`` 0) take one cycle each. ``error`` is sticky: an R beat came back with a
    response other than OKAY.
    """

    beats_per_cycle = 1
    outstanding_rows = 16

    def __init__(self, config: AcceleratorConfig) -> None:
        self.config = config
        super().__init__(
            {
                "cmd": In(stream.Signature(instruction_layout(Opcode.LOAD))),
                "idle": Out(1),
                "error": Out(1),
                "axi": Out(axi_read_signature(config.dma.bus_bits)),
                "spad_write": Out(spad_write_port(config)),
                "acc_write": Out(acc_write_port(config)),
            }
        )

    def elaborate(self, platform) -> Module:
        m = Module()
        config = self.config
        bus_bytes = config.dma.bus_bytes
        spad_bits = config.spad_line_bytes * 8
        acc_bits = config.acc_line_bytes * 8
        line_bytes = max(config.spad_line_bytes, config.acc_line_bytes)

        insn = Signal(instruction_layout(Opcode.LOAD))
        line = Signal.like(insn.line)
        rows_left = Signal.like(insn.rows)
        pads_left = Signal.like(insn.pad_before)
        row_addr = Signal(ADDR_BITS)
        to_acc = insn.buffer == Buffer.ACC
        elem_shift = Mux(
            to_acc, _log2(config.precision.acc_bytes), _log2(config.precision.in_bytes)
        )
        line_elems = Mux(to_acc, config.acc_line_elems, config.spad_line_elems)
        # Rows are cut to the target buffer's line, not the wider of the two.
        clipped_len = Mux(insn.row_len > line_elems, line_elems, insn.row_len)
        row = _RowGeometry(
            m,
            bus_bytes,
            row_addr,
            clipped_len,
            max(config.acc_line_elems, config.spad_line_elems),
            elem_shift,
            line_bytes,
        )

        # One descriptor per line, in line order; ``bytes`` 0 is a zero line (no beats).
        descriptor = data.StructLayout(
            {
                "bytes": unsigned(len(row.bytes)),
                "offset": unsigned(len(row.offset)),
                "beats": unsigned(len(row.beats)),
            }
        )
        m.submodules.rows = rows = SyncFIFO(width=descriptor.size, depth=self.outstanding_rows)
        pushed = Signal(descriptor)
        head = Signal(descriptor)
        m.d.comb += [rows.w_data.eq(pushed), head.eq(rows.r_data)]

        def push(bytes_, offset, beats) -> None:
            m.d.comb += [
                rows.w_en.eq(1),
                pushed.bytes.eq(bytes_),
                pushed.offset.eq(offset),
                pushed.beats.eq(beats),
            ]

        # --- address half: descriptors and AR bursts ------------------------------------------
        planner = BurstPlanner(bus_bytes, config.dma.max_burst, "load")
        planner.elaborate_into(m)
        axi = self.axi
        drive_fixed_fields(m, axi, "ar", config.dma.bus_bits)
        m.d.comb += [
            axi.arid.eq(ReadId.LOAD),
            axi.araddr.eq(planner.address),
            axi.arlen.eq(planner.beats - 1),
        ]
        address_sent = axi.arvalid & axi.arready
        # The current row has no bursts left after this cycle: the next row may be planned now.
        row_planned = planner.empty | (address_sent & (planner.remaining == planner.beats))

        def zero_lines(then: str) -> None:
            with m.If(pads_left == 0):
                m.next = then
            with m.Elif(rows.w_rdy):
                push(0, 0, 0)
                m.d.sync += pads_left.eq(pads_left - 1)

        # --- data half: R beats -> line buffer -> output register -----------------------------
        beat = Signal.like(row.beats)  # index of the next beat within the head row
        buffer = Signal(line_bytes * 8)
        out_valid = Signal()
        out_data = Signal(line_bytes * 8)
        written = Signal()
        free = ~out_valid | written  # the output register can take a line this cycle
        # Byte j of the line is DRAM byte start + j: beat byte j - (position - B).
        position = Signal(range(line_bytes + 2 * bus_bytes))
        m.d.comb += position.eq(((beat + 1) << _log2(bus_bytes)) - head.offset)
        shifted = axi.rdata << Cat(Const(0, 3), position)
        merged = buffer | shifted[bus_bytes * 8 : (bus_bytes + line_bytes) * 8]
        keep = _expand_bytes(_byte_mask(m, head.bytes, line_bytes, "load_keep"))
        row_last = beat == head.beats - 1
        beats_wanted = rows.r_rdy & (head.bytes != 0)

        m.d.comb += axi.rready.eq(beats_wanted & (~row_last | free))
        with m.If(axi.rvalid & axi.rready & (axi.rresp != Response.OKAY)):
            m.d.sync += self.error.eq(1)

        def hand_over(line_data) -> None:
            m.d.comb += rows.r_en.eq(1)
            m.d.sync += [out_valid.eq(1), out_data.eq(line_data)]

        with m.If(written):
            m.d.sync += [out_valid.eq(0), line.eq(line + 1)]
        with m.If(beats_wanted & axi.rvalid & axi.rready):
            with m.If(row_last):
                hand_over(merged & keep)
                m.d.sync += [buffer.eq(0), beat.eq(0)]
            with m.Else():
                m.d.sync += [buffer.eq(merged), beat.eq(beat + 1)]
        with m.If(rows.r_rdy & (head.bytes == 0) & free):
            hand_over(0)

        with m.If(out_valid):
            with m.If(to_acc):
                m.d.comb += [self.acc_write.req.valid.eq(1), written.eq(self.acc_write.req.ready)]
            with m.Else():
                m.d.comb += [
                    self.spad_write.req.valid.eq(1),
                    written.eq(self.spad_write.req.ready),
                ]
        m.d.comb += [
            self.spad_write.req.payload.addr.eq(line),
            self.spad_write.req.payload.data.eq(out_data[:spad_bits]),
            self.spad_write.req.payload.mask.eq(-1),
            self.acc_write.req.payload.addr.eq(line),
            self.acc_write.req.payload.data.eq(out_data[:acc_bits]),
            self.acc_write.req.payload.mask.eq(-1),
        ]

        with m.FSM():
            with m.State("IDLE"):
                with m.If(_accept_command(m, self, insn, line, rows_left, row_addr)):
                    m.d.sync += pads_left.eq(self.cmd.payload.pad_before)
                    with m.If(self.cmd.payload.pad_before == 0):
                        m.next = "ROWS"
                    with m.Else():
                        m.next = "PAD_BEFORE"
            with m.State("PAD_BEFORE"):
                zero_lines("ROWS")
            with m.State("ROWS"):
                m.d.comb += axi.arvalid.eq(~planner.empty)
                with m.If(address_sent):
                    planner.advance(m)
                # Plan the next row in the cycle the current one's last burst goes out.
                with m.If(row_planned):
                    with m.If(rows_left == 0):
                        m.d.sync += pads_left.eq(insn.pad_after)
                        m.next = "PAD_AFTER"
                    with m.Elif(rows.w_rdy):
                        push(row.bytes, row.offset, row.beats)
                        planner.start(m, row.aligned, Mux(row.bytes == 0, 0, row.beats))
                        m.d.sync += [
                            rows_left.eq(rows_left - 1),
                            row_addr.eq(row_addr + (insn.stride << elem_shift)),
                        ]
            with m.State("PAD_AFTER"):
                zero_lines("DRAIN")
            with m.State("DRAIN"):
                with m.If(~rows.r_rdy & ~out_valid):
                    m.next = "IDLE"
        return m


class StoreUnit(wiring.Component):
    """Executes STORE: accumulator lines -> 2D strided DRAM tile, partial beats by ``wstrb``.

    Three stages joined by queues, so rows stream instead of taking turns. The row walker reads
    one accumulator line per cycle into a queue of ``lines_ahead`` lines (with its start lane)
    and hands each row's aligned address and beat count to the address stage, which issues the
    row's AW bursts (`BurstPlanner`, one per cycle) ahead of their data, up to
    ``outstanding_bursts`` without a B response. The data stage shifts each line into its byte
    lanes and sends the W beats of the bursts already addressed; B responses are counted as
    they come.

    Contract: one STORE at a time; ``idle`` falls in the cycle after ``cmd`` is accepted and
    rises only when every burst has its B response, so a later LOAD of the same bytes (ordered
    by tokens) reads the stored data. W beats go out at ``beats_per_cycle`` = 1 with no gap
    between rows or bursts, so on a DRAM that takes a beat per cycle a STORE of ``rows`` rows
    of ``beats`` beats each is busy for at most ``fixed_cycles + rows * beats`` cycles: three
    cycles before the first beat (line read, line and span queued, line shifted in and AW
    sent), the DRAM's B turnaround after the last beat (two cycles on cocotbext-axi's slave)
    and one for ``idle`` to rise. A DRAM's B latency is paid once while it keeps up to
    ``outstanding_bursts`` responses pending (once per burst on a DRAM that answers one burst
    at a time). ``error`` is sticky: a B response other than OKAY.
    """

    beats_per_cycle = 1
    fixed_cycles = 6
    lines_ahead = 4
    outstanding_bursts = 16

    def __init__(self, config: AcceleratorConfig) -> None:
        self.config = config
        super().__init__(
            {
                "cmd": In(stream.Signature(instruction_layout(Opcode.STORE))),
                "idle": Out(1),
                "error": Out(1),
                "axi": Out(axi_write_signature(config.dma.bus_bits)),
                "acc_read": Out(acc_read_port(config)),
            }
        )

    def elaborate(self, platform) -> Module:
        m = Module()
        config = self.config
        bus_bytes = config.dma.bus_bytes
        line_bytes = config.acc_line_bytes
        elem_shift = _log2(config.precision.acc_bytes)

        insn = Signal(instruction_layout(Opcode.STORE))
        line = Signal.like(insn.line)
        rows_left = Signal.like(insn.rows)
        row_addr = Signal(ADDR_BITS)
        row = _RowGeometry(
            m, bus_bytes, row_addr, insn.row_len, config.acc_line_elems, elem_shift, line_bytes
        )

        # Walker -> address stage: each row's span; walker -> data stage: each row's line.
        span = data.StructLayout({"aligned": ADDR_BITS, "beats": len(row.beats)})
        m.submodules.spans = spans = _Queue(span, self.lines_ahead)
        lined = data.StructLayout({"data": line_bytes * 8, "offset": len(row.offset)})
        m.submodules.lines = lines = _Queue(lined, self.lines_ahead)
        # Address stage -> data stage: the beats of each burst whose AW has gone out.
        burst_beats = range(config.dma.max_burst + 1)
        m.submodules.bursts = bursts = _Queue(burst_beats, self.outstanding_bursts)
        outstanding = Signal(range(self.outstanding_bursts + 1))  # AW sent, B not yet back
        planner = BurstPlanner(bus_bytes, config.dma.max_burst, "store")
        planner.elaborate_into(m)

        walking = Signal()
        with m.If(walking):
            self._walk_row(m, row, line, rows_left, row_addr, insn.stride << elem_shift, spans)
        self._collect_line(m, row, lines)
        sent = self._issue_addresses(m, planner, spans, bursts, outstanding)
        self._send_beats(m, row, lines, bursts)

        response = self.axi.bvalid & self.axi.bready
        m.d.comb += self.axi.bready.eq(1)
        m.d.sync += outstanding.eq(outstanding + sent - response)
        with m.If(response & (self.axi.bresp != Response.OKAY)):
            m.d.sync += self.error.eq(1)

        with m.FSM():
            with m.State("IDLE"):
                with m.If(_accept_command(m, self, insn, line, rows_left, row_addr)):
                    m.next = "ROWS"
            with m.State("ROWS"):
                m.d.comb += walking.eq(1)
                with m.If((rows_left == 0) | (row.bytes == 0)):
                    m.next = "DRAIN"
            with m.State("DRAIN"):
                # Every row's span was taken and every burst answered, so every beat went out.
                with m.If(~spans.r_rdy & planner.empty & (outstanding == 0)):
                    m.next = "IDLE"
        return m

    def _walk_row(self, m, row, line, rows_left, row_addr, stride_bytes, spans) -> None:
        """One row per cycle: request its accumulator line, queue its span for the AW stage."""
        read = self.acc_read
        m.d.comb += [
            read.req.payload.eq(line),
            read.req.valid.eq((rows_left != 0) & (row.bytes != 0) & spans.w_rdy),
            spans.pushed.aligned.eq(row.aligned),
            spans.pushed.beats.eq(row.beats),
        ]
        with m.If(read.req.valid & read.req.ready):
            m.d.comb += spans.w_en.eq(1)
            m.d.sync += [
                line.eq(line + 1),
                rows_left.eq(rows_left - 1),
                row_addr.eq(row_addr + stride_bytes),
            ]

    def _collect_line(self, m, row, lines) -> None:
        """Queue each line the accumulator returns with its row's start lane."""
        read = self.acc_read
        # The read slot holds one line at a time (it takes a request only as its line is
        # taken), so the lane latched with the request still belongs to the line it returns.
        start_lane = Signal.like(row.offset)
        with m.If(read.req.valid & read.req.ready):
            m.d.sync += start_lane.eq(row.offset)
        m.d.comb += [
            read.resp.ready.eq(lines.w_rdy),
            lines.w_en.eq(read.resp.valid),
            lines.pushed.data.eq(read.resp.payload.as_value()),
            lines.pushed.offset.eq(start_lane),
        ]

    def _issue_addresses(self, m, planner, spans, bursts, outstanding) -> Signal:
        """AW bursts of queued rows, one per cycle, the next row planned as one's last goes."""
        config = self.config
        axi = self.axi
        drive_fixed_fields(m, axi, "aw", config.dma.bus_bits)
        # Each term only rises without a handshake, so AWVALID never drops early (AXI A3.2.1).
        m.d.comb += [
            axi.awid.eq(0),
            axi.awaddr.eq(planner.address),
            axi.awlen.eq(planner.beats - 1),
            axi.awvalid.eq(
                ~planner.empty & bursts.w_rdy & (outstanding != self.outstanding_bursts)
            ),
            bursts.pushed.eq(planner.beats),
        ]
        sent = Signal()
        m.d.comb += sent.eq(axi.awvalid & axi.awready)
        with m.If(sent):
            m.d.comb += bursts.w_en.eq(1)
            planner.advance(m)
        with m.If((planner.empty | (sent & (planner.remaining == planner.beats))) & spans.r_rdy):
            m.d.comb += spans.r_en.eq(1)
            planner.start(m, spans.head.aligned, spans.head.beats)
        return sent

    def _send_beats(self, m, row, lines, bursts) -> None:
        """W beats of the current line back to back; the next line is shifted in as one ends."""
        config = self.config
        bus_bytes = config.dma.bus_bytes
        line_bytes = config.acc_line_bytes
        beats_max = -(-line_bytes // bus_bytes) + 1
        axi = self.axi
        head = lines.head
        row_mask = _byte_mask(m, row.bytes, line_bytes, "store_row_mask")

        # The current line, shifted to its byte lanes, which bytes are valid, where we are.
        lanes = Signal(beats_max * bus_bytes * 8)
        strobes = Signal(beats_max * bus_bytes)
        active = Signal()
        beat = Signal(range(beats_max + 1))
        last_beat = Signal(range(beats_max))
        burst_beat = Signal(range(config.dma.max_burst + 1))
        m.d.comb += [
            axi.wvalid.eq(active & bursts.r_rdy),
            axi.wdata.eq(lanes.word_select(beat, bus_bytes * 8)),
            axi.wstrb.eq(strobes.word_select(beat, bus_bytes)),
            axi.wlast.eq(burst_beat == bursts.head - 1),
        ]
        beat_sent = axi.wvalid & axi.wready
        with m.If(beat_sent):
            m.d.sync += [beat.eq(beat + 1), burst_beat.eq(burst_beat + 1)]
            with m.If(axi.wlast):
                m.d.comb += bursts.r_en.eq(1)
                m.d.sync += burst_beat.eq(0)
        with m.If(~active | (beat_sent & (beat == last_beat))):
            m.d.sync += active.eq(lines.r_rdy)
            with m.If(lines.r_rdy):
                m.d.comb += lines.r_en.eq(1)
                m.d.sync += [
                    lanes.eq(head.data << Cat(Const(0, 3), head.offset)),
                    strobes.eq(row_mask << head.offset),
                    beat.eq(0),
                    last_beat.eq(
                        ((head.offset + row.bytes + bus_bytes - 1) >> _log2(bus_bytes)) - 1
                    ),
                ]
