"""The DMA's load unit: 2D strided DRAM tiles -> scratchpad or accumulator lines (see `dma`)."""

from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from tensorforge.config import AcceleratorConfig
from tensorforge.hw.axi import (
    ADDR_BITS,
    BurstPlanner,
    ReadId,
    axi_read_signature,
    drive_fixed_fields,
)
from tensorforge.hw.dma_rows import (
    HeldQueue,
    Queue,
    RegisteredQueue,
    RowGeometry,
    RunGeometry,
    accept_command,
    beat_aligned,
    beat_lane,
    byte_mask,
    expand_bytes,
    log2,
    span_beats,
)
from tensorforge.hw.load_gather import gather_lines, take_beat
from tensorforge.hw.ports import acc_write_port, instruction_layout, spad_write_port
from tensorforge.hw.skid import SkidBuffer
from tensorforge.hw.targets import Target, parse_target
from tensorforge.isa import Buffer, Opcode


class AddressSlice(wiring.Component):
    """The ``ecp5`` load unit's AR register slice: a `SkidBuffer` of (ARADDR, ARLEN) in front
    of ``bus``, offering ``araddr``, ``arlen``, ``arvalid`` and ``arready`` as the unit's side
    of the channel. A burst is on ``bus`` the cycle after the slice takes it."""

    def __init__(self, bus) -> None:
        self.bus = bus
        self.layout = data.StructLayout({"addr": unsigned(len(bus.araddr)),
                                         "len": unsigned(len(bus.arlen))})
        super().__init__({"araddr": In(len(bus.araddr)), "arlen": In(len(bus.arlen)),
                          "arvalid": In(1), "arready": Out(1)})

    def elaborate(self, platform) -> Module:
        m = Module()
        m.submodules.skid = skid = SkidBuffer(self.layout)
        bus = self.bus
        m.d.comb += [
            skid.i.valid.eq(self.arvalid),
            skid.i.payload.addr.eq(self.araddr),
            skid.i.payload.len.eq(self.arlen),
            self.arready.eq(skid.i.ready),
            bus.arvalid.eq(skid.o.valid),
            bus.araddr.eq(skid.o.payload.addr),
            bus.arlen.eq(skid.o.payload.len),
            skid.o.ready.eq(bus.arready),
        ]
        return m


class LoadUnit(wiring.Component):
    """Executes LOAD: 2D strided DRAM tile -> scratchpad or accumulator lines, with padding.

    Two halves joined by a queue of *runs*. A run is a stretch of DRAM bytes that fills whole
    lines one after the other: a LOAD whose rows are contiguous in DRAM (``stride`` equal to
    ``row_len``, rows not cut at the line) is one run of ``rows`` lines, read as long bursts of
    up to ``dma.max_burst`` beats that never cross 4 KiB (`plan_bursts` of the whole run); any
    other LOAD is one run per row. Padding and empty rows are runs of zero lines without
    beats. The address half plans each run's bursts and issues them on AR, one per cycle,
    without waiting for data; the data half takes R beats in order (one AXI ID, so bursts
    return in issue order), gathers their bytes and cuts them into lines, which a one-line
    output register writes.

    Contract: ``idle`` falls in the cycle after ``cmd`` is accepted and rises once every line
    of every LOAD taken is written. The unit takes its next LOAD as soon as the last one's
    runs are all planned (its bursts issued), while that one's data still comes in, and
    pulses ``retired`` once per LOAD, in order, in the cycle its last line is written (a LOAD
    ends with a run of its ``pad_after`` lines, maybe none, that carries the pulse). So a
    stream of LOADs pays the DRAM latency about once, not once per LOAD, as far as the
    controller's retire window lets it run ahead. At most ``dma.outstanding`` read bursts are
    in flight (AR sent, last R beat not yet taken), and the queue holds as many runs. R beats
    are taken at ``beats_per_cycle`` = 1 and lines written at one per cycle: behind a DRAM of
    latency ``L``, an isolated LOAD is busy for about ``fixed_cycles + L`` plus the larger of
    its beats and its lines, as long as ``outstanding`` bursts hold at least ``L`` beats
    (``outstanding * max_burst`` for a contiguous run, ``outstanding`` rows' bursts for a
    strided tile; fewer, and each ``outstanding`` bursts pay it again). Zero lines take one
    cycle each. ``error`` is sticky: an R beat came back with a response other than OKAY.

    ``target`` ``ecp5`` works out, as each run is queued, the line counts the data half compares
    against, keeps the runs queue's head in a register, and takes R beats and cuts lines with
    `load_gather.gather_lines`, which moves the wide data in the cycles after the decisions:
    each run reaches the data half a cycle later and each line three cycles later. It also
    starts the unit's paths from registers where the generic unit has long ones: each LOAD
    spends two more cycles before its first run (``SHAPE``: from the registered command,
    whether it is one run, ``rows * row_len`` in shift-and-add parts (no multiplier), the row's
    bytes, the stride in bytes, whether no rows are left and the first row's beats to the
    next 4 KiB boundary; ``BYTES``: the run's bytes, the parts summed), so the runs' byte counts
    and the burst planner start from registers, and each queued row works out the next row's
    address, boundary distance and "no rows left" as registers; ARVALID's "fewer than
    ``outstanding`` bursts in flight" is a register set from the last cycle's handshakes (the
    same value, a cycle ahead); R passes through an `ElasticBuffer` (RREADY a register, each
    beat a cycle later; the data half's take moves only its read pointer), and AR through a
    `SkidBuffer` (`AddressSlice`: ARVALID, ARADDR, ARLEN registers; a
    burst counts as in flight from the cycle the slice takes it); ``idle`` rises a cycle later
    (``settled`` registered). Whether a run is queued depends on registers only, not on the
    AR handshake: a row's run goes on the runs queue and its burst plan on a plans queue
    (`_plans`) in the same cycle, whenever both have room, and the planner takes the plans
    in turn, so a run is queued a cycle or more ahead of its first burst and the unit takes
    its next LOAD once the last one's runs are queued (bursts maybe still to issue). Each
    row's beats are a register, set with the previous row's push. The run each state queues
    (PAD_BEFORE's, the row's in ROWS, PAD_AFTER's) is on the runs queue's input in all its
    cycles, so only the queue's write enable follows the push (the fields, the queue's write
    data, come from registers and the state); with it go the bytes of three lines
    (``thrice``) and the bytes the run's first beat keeps (``first_keeps``), so the data
    half's compares need no adder first.
    """

    beats_per_cycle = 1
    fixed_cycles = 5

    def __init__(self, config: AcceleratorConfig, target: Target | str = Target.GENERIC) -> None:
        self.config = config
        self.target = parse_target(target)
        self.outstanding = config.dma.outstanding
        super().__init__(
            {
                "cmd": In(stream.Signature(instruction_layout(Opcode.LOAD))),
                "idle": Out(1),
                "retired": Out(1),
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
        max_elems = max(config.acc_line_elems, config.spad_line_elems)
        ecp5 = self.target is Target.ECP5

        insn = Signal(instruction_layout(Opcode.LOAD))
        line = Signal.like(insn.line)  # the next run's first line
        rows_left = Signal.like(insn.rows)
        row_addr = Signal(ADDR_BITS)
        to_acc = insn.buffer == Buffer.ACC
        elem_shift = Mux(
            to_acc, log2(config.precision.acc_bytes), log2(config.precision.in_bytes)
        )
        line_elems = Mux(to_acc, config.acc_line_elems, config.spad_line_elems)
        # Rows are cut to the target buffer's line, not the wider of the two.
        clipped_len = Mux(insn.row_len > line_elems, line_elems, insn.row_len)
        # ecp5: a row's and a run's bytes, registered in the two cycles after the command
        row_bytes = Signal(range(line_bytes + 1)) if ecp5 else None
        run_bytes = Signal(range(((1 << len(insn.rows)) - 1) * line_bytes + 1)) if ecp5 else None
        row = RowGeometry(m, bus_bytes, row_addr, clipped_len, max_elems, elem_shift, line_bytes,
                          row_bytes)
        # Worked out as the command is taken (registered): is the tile one run, its elements.
        whole = Signal()
        whole_elems = Signal(len(insn.rows) + len(insn.row_len))
        run = RunGeometry(m, bus_bytes, row, whole, whole_elems << elem_shift, line_bytes,
                          run_bytes)

        runs_layout = data.StructLayout(
            {
                "line": unsigned(len(insn.line)),
                "to_acc": unsigned(1),
                "retires": unsigned(1),  # the LOAD's last run: it retires with its last line
                "lines": unsigned(len(insn.rows)),  # 0: none (a LOAD's final marker)
                "bytes": unsigned(len(row.bytes)),  # per line; 0: zero lines, no beats
                "offset": unsigned(len(row.offset)),
                "beats": unsigned(len(run.beats)),
                **self._cut_fields(len(insn.rows), line_bytes, bus_bytes),
            }
        )
        queue = RegisteredQueue if self.target is Target.ECP5 else Queue
        m.submodules.runs = runs = queue(runs_layout, max(2, self.outstanding))

        # --- address half: runs and AR bursts ---------------------------------------------------
        planner = BurstPlanner(bus_bytes, config.dma.max_burst, "load", run.max_beats,
                               prepared=ecp5)
        if ecp5:  # each next burst worked out a cycle ahead: offered once it is (or last)
            planner.prepare(m)
        axi = self.axi
        in_flight = Signal(range(self.outstanding + 1))  # AR sent, last R beat not yet taken
        # ecp5: ``in_flight != outstanding`` as a register, set from this cycle's handshakes
        below_limit = Signal(init=1) if ecp5 else in_flight != self.outstanding
        drive_fixed_fields(m, axi, "ar", config.dma.bus_bits)
        ar = axi
        if ecp5:  # AR through a SkidBuffer: ARVALID, ARADDR and ARLEN are registers
            m.submodules.ar_slice = ar = AddressSlice(axi)
        m.d.comb += [
            axi.arid.eq(ReadId.LOAD),
            ar.araddr.eq(planner.address),
            ar.arlen.eq(planner.beats - 1),
            # in_flight only falls while ARVALID waits, so ARVALID never drops early
            ar.arvalid.eq(~planner.empty & below_limit & planner.may_offer
                          if ecp5 else ~planner.empty & below_limit),
        ]
        address_sent = ar.arvalid & ar.arready  # ecp5: taken into the slice (counted early)
        burst_done = axi.rvalid & axi.rready & axi.rlast
        m.d.sync += in_flight.eq(in_flight + address_sent - burst_done)
        if ecp5:
            rises, falls = address_sent & ~burst_done, burst_done & ~address_sent
            m.d.sync += below_limit.eq(Mux(rises, in_flight != self.outstanding - 1,
                                           falls | (in_flight != self.outstanding)))
        # The current run has no bursts left after this cycle: the next run may be planned now.
        run_planned = planner.empty | (address_sent & planner.last)
        with m.If(address_sent):
            planner.advance(m)
        if ecp5:  # the planner takes each run's plan from a queue the row states fill
            plans = self._plans(m, planner, run.beats)
            m.d.comb += plans.r_en.eq(plans.r_rdy & run_planned)
            with m.If(plans.r_en):
                head = plans.head
                planner.start(m, head.address, head.remaining, head.to_boundary,
                              first=(head.first_beats, head.first_last, 0))

        def offer(lines, **fields) -> None:
            """ecp5: the run this state queues, on the queue's input in each of its cycles."""
            m.d.comb += [
                runs.pushed.line.eq(line),
                runs.pushed.to_acc.eq(to_acc),
                runs.pushed.lines.eq(lines),
            ]
            m.d.comb += [getattr(runs.pushed, name).eq(value) for name, value in fields.items()]
            self._push_cut_fields(m, runs.pushed, lines)

        def push(lines, **fields) -> None:
            if ecp5:  # the fields are the state's (`offer`); only the enable is the handshake's
                m.d.comb += runs.w_en.eq(1)
                m.d.sync += line.eq(line + lines)
                return
            m.d.comb += [
                runs.w_en.eq(1),
                runs.pushed.line.eq(line),
                runs.pushed.to_acc.eq(to_acc),
                runs.pushed.lines.eq(lines),
            ]
            m.d.comb += [getattr(runs.pushed, name).eq(value) for name, value in fields.items()]
            m.d.sync += line.eq(line + lines)

        settled = Signal(init=ecp5)  # ecp5: a register (`gather_lines`)
        if ecp5:
            resting = Signal()  # in IDLE: no run is queued this cycle
            gather_lines(self, m, runs, settled, resting, line_bytes, spad_bits, acc_bits)
        else:
            self._cut_lines(m, runs, settled, line_bytes, spad_bits, acc_bits)

        def one_run(tile, buffer_line_elems):
            """Is the tile one run: worked out from the command's fields."""
            back_to_back = (tile.stride == tile.row_len) & (tile.row_len <= buffer_line_elems)
            return (tile.row_len == 0) | back_to_back

        if ecp5:
            # ``rows * row_len`` matters only for one run, whose row_len is at most a line's
            # elements: shift-and-add, two bits a part in SHAPE, the parts summed in BYTES
            elem_bits = max_elems.bit_length()
            parts = [Signal(len(insn.rows) + elem_bits, name=f"whole_part{i}")
                     for i in range(0, elem_bits, 2)]
            rows_done = Signal()  # rows_left == 0, a register
            whole_nonzero = Signal()  # rows * row_len != 0, a register
            stride_bytes = Signal(ADDR_BITS)
            row_to_boundary = Signal.like(planner.to_boundary)  # of row.aligned, a register
            # its burst limit, a register beside it, so one compare precedes the first burst
            row_limit = Signal(range(config.dma.max_burst + 1))

            def row_boundary(aligned):
                """Set ``row_to_boundary`` and ``row_limit`` for the row at ``aligned``."""
                return [row_to_boundary.eq(planner.beats_to_boundary(aligned)),
                        row_limit.eq(planner.limit_at(aligned))]
            # the next row's address, a register: set in BYTES, then as each row is queued
            next_row = Signal(ADDR_BITS)
            # the run's beats and whether it has any, registers: set in BYTES and, for the
            # next row, as each row's run is queued (its byte lane from ``next_row``)
            run_beats = Signal.like(run.beats)
            run_has_beats = Signal()

        def start_tile(tile) -> None:
            with m.If(tile.pad_before == 0):
                m.next = "ROWS"
            with m.Else():
                m.next = "PAD_BEFORE"

        with m.FSM():
            with m.State("IDLE"):
                if ecp5:
                    m.d.comb += resting.eq(1)
                with m.If(accept_command(m, self, insn, line, rows_left, row_addr, settled)):
                    if ecp5:
                        m.next = "SHAPE"
                    else:
                        payload = self.cmd.payload
                        payload_acc = payload.buffer == Buffer.ACC
                        payload_line = Mux(payload_acc, config.acc_line_elems,
                                           config.spad_line_elems)
                        m.d.sync += [whole.eq(one_run(payload, payload_line)),
                                     whole_elems.eq(payload.rows * payload.row_len)]
                        start_tile(payload)
            if ecp5:
                # the tile's shape from the registered command, then the bytes from it
                with m.State("SHAPE"):
                    m.d.sync += [
                        whole.eq(one_run(insn, line_elems)),
                        row_bytes.eq(clipped_len << elem_shift),
                        rows_done.eq(insn.rows == 0),
                        whole_nonzero.eq((insn.rows != 0) & (insn.row_len != 0)),
                        stride_bytes.eq(insn.stride << elem_shift),
                        *row_boundary(row.aligned),
                    ]
                    for part, low in zip(parts, range(0, elem_bits, 2), strict=True):
                        m.d.sync += part.eq(sum(Mux(insn.row_len[bit], insn.rows << bit, 0)
                                                for bit in range(low, min(low + 2, elem_bits))))
                    m.next = "BYTES"
                with m.State("BYTES"):
                    # each case's beats from its own adder, chosen after; whether the run has
                    # any bytes from registers (a whole tile's: rows and row_len nonzero)
                    whole_bytes = sum(parts) << elem_shift
                    has_bytes = Mux(whole, whole_nonzero, row_bytes != 0)
                    beats = Mux(whole, span_beats(row.offset, whole_bytes, bus_bytes),
                                span_beats(row.offset, row_bytes, bus_bytes))
                    m.d.sync += [run_bytes.eq(Mux(whole, whole_bytes, row_bytes)),
                                 run_has_beats.eq(has_bytes),
                                 run_beats.eq(Mux(has_bytes, beats, 0)),
                                 next_row.eq(row_addr + stride_bytes)]
                    start_tile(insn)
            with m.State("PAD_BEFORE"):
                if ecp5:
                    offer(insn.pad_before)
                with m.If(runs.w_rdy):
                    push(insn.pad_before)
                    m.next = "ROWS"
            with m.State("ROWS"):
                # ecp5: the row's run, whether it is queued in this cycle or not
                row_run = {"bytes": row.bytes, "offset": row.offset,
                           "beats": run_beats if ecp5 else run.beats}
                if ecp5:  # the data half's compares with 0, from the registered bytes
                    offer(Mux(whole, rows_left, 1), **row_run, has_bytes=row_bytes != 0,
                          has_beats=run_has_beats, thrice=row_bytes + (row_bytes << 1),
                          first_keeps=bus_bytes - row.offset)
                    # the run's burst plan, queued with it when it has beats; whether a run is
                    # queued depends on registers only, not on the AR handshake
                    first = planner.first_burst(run_beats, row_limit)
                    m.d.comb += [
                        plans.pushed.address.eq(row.aligned),
                        plans.pushed.remaining.eq(run_beats),
                        plans.pushed.to_boundary.eq(row_to_boundary),
                        plans.pushed.first_beats.eq(first[0]),
                        plans.pushed.first_last.eq(first[1]),
                    ]
                    with m.If(rows_done):
                        m.next = "PAD_AFTER"
                    with m.Elif(runs.w_rdy & plans.w_rdy):
                        push(Mux(whole, rows_left, 1), **row_run)
                        m.d.comb += plans.w_en.eq(run_has_beats)
                        aligned = beat_aligned(next_row, bus_bytes)
                        m.d.sync += [
                            rows_left.eq(Mux(whole, 0, rows_left - 1)),
                            rows_done.eq(whole | (rows_left == 1)),
                            row_addr.eq(next_row),
                            next_row.eq(next_row + stride_bytes),
                            *row_boundary(aligned),
                            run_beats.eq(Mux(run_has_beats,
                                             span_beats(beat_lane(next_row, bus_bytes),
                                                        run_bytes, bus_bytes), 0)),
                        ]
                else:  # plan the next run in the cycle the current one's last burst goes out
                    with m.If(run_planned):
                        with m.If(rows_left == 0):
                            m.next = "PAD_AFTER"
                        with m.Elif(runs.w_rdy):
                            push(Mux(whole, rows_left, 1), **row_run)
                            planner.start(m, row.aligned, run.beats)
                            m.d.sync += [
                                rows_left.eq(Mux(whole, 0, rows_left - 1)),
                                row_addr.eq(row_addr + (insn.stride << elem_shift)),
                            ]
            with m.State("PAD_AFTER"):
                # every LOAD ends with this run (maybe of no lines): it retires the LOAD
                if ecp5:
                    offer(insn.pad_after, retires=1)
                with m.If(runs.w_rdy):
                    push(insn.pad_after, retires=1)
                    m.next = "IDLE"
        return m

    def _cut_fields(self, lines_bits: int, line_bytes: int, bus_bytes: int) -> dict:
        """The queue fields the ``ecp5`` target adds to a run (see `_push_cut_fields`): what the
        data half compares its counts with, worked out as the run is queued (``thrice``: three
        lines' bytes; ``first_keeps``: the bytes the run's first beat keeps)."""
        if self.target is not Target.ECP5:
            return {}
        return {"no_lines": unsigned(1), "last_line": unsigned(lines_bits), "single": unsigned(1),
                "has_bytes": unsigned(1), "has_beats": unsigned(1),
                "thrice": unsigned((3 * line_bytes).bit_length()),
                "first_keeps": unsigned(bus_bytes.bit_length())}

    def _plans(self, m, planner, beats) -> HeldQueue:
        """``ecp5``: the queue of the runs' burst plans between the row states and the burst
        planner (`HeldQueue`, two entries, so one run a cycle; the counts in flip-flops, the
        address in LUT RAM). A run is queued here and on the runs queue in the same cycle, when
        both have room, so that decision comes from registers, not from the AR handshake. The
        planner takes the head as its current run's last burst goes out (or when it has none),
        its first burst worked out as the run was queued (`BurstPlanner.first_burst`), so only
        registers and the queue's memory feed its load."""
        layout = data.StructLayout({
            "address": unsigned(ADDR_BITS),
            "remaining": unsigned(len(beats)),
            "to_boundary": unsigned(len(planner.to_boundary)),
            "first_beats": unsigned(len(planner.beats)),
            "first_last": unsigned(1),
        })
        held = ("remaining", "to_boundary", "first_beats", "first_last")  # the address: LUT RAM
        m.submodules.plans = plans = HeldQueue(layout, 2, held)
        return plans

    @staticmethod
    def _push_cut_fields(m, pushed, lines) -> None:
        """Whether the run has no lines or one and its last line's index, for the data half's
        compares on registers (``has_bytes`` and ``has_beats``, 0 in runs without beats, come
        with the row's fields)."""
        m.d.comb += [pushed.no_lines.eq(lines == 0), pushed.last_line.eq(lines - 1),
                     pushed.single.eq(lines == 1)]

    def _cut_lines(self, m, runs, settled, line_bytes, spad_bits, acc_bits) -> None:
        """R beats -> a byte gatherer -> lines of the head run -> the output register.

        The gatherer holds ``have`` bytes of the head run, its first at bit 0. A beat is taken
        only while they do not yet make a line, so there is always room for one more beat; a
        line is handed over as soon as the bytes make one (in the cycle its last beat comes
        in), and the bytes after it move down.
        """
        config = self.config
        bus_bytes = config.dma.bus_bytes
        axi = self.axi
        head = runs.head
        width = line_bytes + bus_bytes  # bytes the gatherer can hold
        gathered = Signal(width * 8)
        have = Signal(range(width + 1))
        taken = Signal.like(head.beats)  # beats of the head run taken so far
        lines_cut = Signal.like(head.lines)  # lines of the head run handed over so far
        out_valid = Signal()
        out_data = Signal(line_bytes * 8)
        out_line = Signal.like(head.line)
        out_acc = Signal()
        out_writes = Signal()  # 0: a LOAD's final marker, nothing to write
        out_retires = Signal()
        written = Signal()
        free = ~out_valid | written  # the output register can take a line this cycle
        m.d.comb += [
            settled.eq(~runs.r_rdy & ~out_valid),
            self.retired.eq(written & out_retires),
        ]

        beat_in = take_beat(m, self, runs, taken, have)
        # A run's first beat starts ``offset`` bytes in: shift the beat so its byte ``offset``
        # lands on byte ``have`` (the shift is taken ``bus_bytes`` high to stay non-negative).
        skip = Mux(taken == 0, head.offset, 0)
        position = Signal(range(width + bus_bytes + 1))
        m.d.comb += position.eq(have + bus_bytes - skip)
        shifted = (axi.rdata << Cat(Const(0, 3), position))[bus_bytes * 8 : (bus_bytes + width) * 8]
        merged = Signal(width * 8)
        merged_have = Signal(range(width + bus_bytes + 1))
        with m.If(beat_in):
            m.d.comb += [
                merged.eq(gathered | shifted),
                merged_have.eq(have + bus_bytes - skip),
            ]
        with m.Else():
            m.d.comb += [merged.eq(gathered), merged_have.eq(have)]

        keep = expand_bytes(byte_mask(m, head.bytes, line_bytes, "load_keep"))
        cut = Signal()
        m.d.comb += cut.eq(runs.r_rdy & (merged_have >= head.bytes) & free)
        run_done = cut & ((head.lines == 0) | (lines_cut == head.lines - 1))
        with m.If(written):
            m.d.sync += out_valid.eq(0)
        with m.If(cut):
            m.d.sync += [
                out_valid.eq(1),
                out_data.eq(merged[: line_bytes * 8] & keep),
                out_line.eq(head.line + lines_cut),
                out_acc.eq(head.to_acc),
                out_writes.eq(head.lines != 0),
                out_retires.eq(head.retires & run_done),
            ]
        with m.If(run_done):
            # the run's last line: whatever else its last beat held is not ours
            m.d.comb += runs.r_en.eq(1)
            m.d.sync += [gathered.eq(0), have.eq(0), taken.eq(0), lines_cut.eq(0)]
        with m.Else():
            with m.If(beat_in):
                m.d.sync += taken.eq(taken + 1)
            with m.If(cut):
                m.d.sync += [
                    gathered.eq(merged >> Cat(Const(0, 3), head.bytes)),
                    have.eq(merged_have - head.bytes),
                    lines_cut.eq(lines_cut + 1),
                ]
            with m.Else():
                m.d.sync += [gathered.eq(merged), have.eq(merged_have)]

        with m.If(out_valid & ~out_writes):
            m.d.comb += written.eq(1)
        with m.Elif(out_valid & out_acc):
            m.d.comb += [self.acc_write.req.valid.eq(1), written.eq(self.acc_write.req.ready)]
        with m.Elif(out_valid):
            m.d.comb += [self.spad_write.req.valid.eq(1), written.eq(self.spad_write.req.ready)]
        m.d.comb += [
            self.spad_write.req.payload.addr.eq(out_line),
            self.spad_write.req.payload.data.eq(out_data[:spad_bits]),
            self.spad_write.req.payload.mask.eq(-1),
            self.acc_write.req.payload.addr.eq(out_line),
            self.acc_write.req.payload.data.eq(out_data[:acc_bits]),
            self.acc_write.req.payload.mask.eq(-1),
        ]
