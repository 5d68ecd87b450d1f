"""The DMA's load unit: 2D strided DRAM tiles -> scratchpad or accumulator lines (see `dma`)."""

from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal, unsigned
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
    drive_fixed_fields,
)
from tensorforge.hw.dma_rows import RowGeometry, accept_command, byte_mask, expand_bytes, log2
from tensorforge.hw.ports import acc_write_port, instruction_layout, spad_write_port
from tensorforge.isa import Buffer, Opcode


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
            to_acc, log2(config.precision.acc_bytes), log2(config.precision.in_bytes)
        )
        line_elems = Mux(to_acc, config.acc_line_elems, config.spad_line_elems)
        # Rows are cut to the target buffer's line, not the wider of the two.
        clipped_len = Mux(insn.row_len > line_elems, line_elems, insn.row_len)
        row = RowGeometry(
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

        # --- address half: descriptors and AR bursts ------------------------------------------
        planner = BurstPlanner(bus_bytes, config.dma.max_burst, "load", row.max_beats)
        axi = self.axi
        drive_fixed_fields(m, axi, "ar", config.dma.bus_bits)
        m.d.comb += [
            axi.arid.eq(ReadId.LOAD),
            axi.araddr.eq(planner.address),
            axi.arlen.eq(planner.beats - 1),
        ]
        address_sent = axi.arvalid & axi.arready
        # The current row has no bursts left after this cycle: the next row may be planned now.
        row_planned = planner.empty | (address_sent & planner.last)

        def zero_lines(then: str) -> None:
            with m.If(pads_left == 0):
                m.next = then
            with m.Elif(rows.w_rdy):
                m.d.comb += rows.w_en.eq(1)  # a zero line: ``pushed`` stays 0
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
        m.d.comb += position.eq(((beat + 1) << log2(bus_bytes)) - head.offset)
        shifted = axi.rdata << Cat(Const(0, 3), position)
        merged = buffer | shifted[bus_bytes * 8 : (bus_bytes + line_bytes) * 8]
        keep = expand_bytes(byte_mask(m, head.bytes, line_bytes, "load_keep"))
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
                with m.If(accept_command(m, self, insn, line, rows_left, row_addr)):
                    m.d.sync += pads_left.eq(self.cmd.payload.pad_before)
                    with m.If(self.cmd.payload.pad_before == 0):
                        m.next = "ROWS"
                    with m.Else():
                        m.next = "PAD_BEFORE"
            with m.State("PAD_BEFORE"):
                zero_lines("ROWS")
            with m.State("ROWS"):
                # the descriptor does not wait for the handshake logic that pushes it
                m.d.comb += [
                    axi.arvalid.eq(~planner.empty),
                    pushed.bytes.eq(row.bytes),
                    pushed.offset.eq(row.offset),
                    pushed.beats.eq(row.beats),
                ]
                with m.If(address_sent):
                    planner.advance(m)
                # Plan the next row in the cycle the current one's last burst goes out.
                with m.If(row_planned):
                    with m.If(rows_left == 0):
                        m.d.sync += pads_left.eq(insn.pad_after)
                        m.next = "PAD_AFTER"
                    with m.Elif(rows.w_rdy):
                        m.d.comb += rows.w_en.eq(1)
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
