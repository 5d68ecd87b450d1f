"""The DMA's store unit: accumulator lines -> 2D strided DRAM tiles (see `dma`)."""

from __future__ import annotations

from amaranth import Cat, Const, Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from tensorforge.config import AcceleratorConfig
from tensorforge.hw.axi import (
    ADDR_BITS,
    BurstPlanner,
    Response,
    axi_write_signature,
    drive_fixed_fields,
)
from tensorforge.hw.dma_rows import Queue, RowGeometry, accept_command, byte_mask, log2
from tensorforge.hw.ports import acc_read_port, instruction_layout
from tensorforge.isa import Opcode


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
        elem_shift = log2(config.precision.acc_bytes)

        insn = Signal(instruction_layout(Opcode.STORE))
        line = Signal.like(insn.line)
        rows_left = Signal.like(insn.rows)
        row_addr = Signal(ADDR_BITS)
        row = RowGeometry(
            m, bus_bytes, row_addr, insn.row_len, config.acc_line_elems, elem_shift, line_bytes
        )

        # Walker -> address stage: each row's span; walker -> data stage: each row's line.
        span = data.StructLayout({"aligned": ADDR_BITS, "beats": len(row.beats)})
        m.submodules.spans = spans = Queue(span, self.lines_ahead)
        lined = data.StructLayout({"data": line_bytes * 8, "offset": len(row.offset)})
        m.submodules.lines = lines = Queue(lined, self.lines_ahead)
        # Address stage -> data stage: the beats of each burst whose AW has gone out.
        burst_beats = range(config.dma.max_burst + 1)
        m.submodules.bursts = bursts = Queue(burst_beats, self.outstanding_bursts)
        outstanding = Signal(range(self.outstanding_bursts + 1))  # AW sent, B not yet back
        planner = BurstPlanner(bus_bytes, config.dma.max_burst, "store", row.max_beats)

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
                with m.If(accept_command(m, self, insn, line, rows_left, row_addr)):
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
        with m.If((planner.empty | (sent & planner.last)) & spans.r_rdy):
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
        row_mask = byte_mask(m, row.bytes, line_bytes, "store_row_mask")

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
                        ((head.offset + row.bytes + bus_bytes - 1) >> log2(bus_bytes)) - 1
                    ),
                ]
