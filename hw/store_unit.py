"""The DMA's store unit: accumulator lines -> 2D strided DRAM tiles (see `dma`)."""

from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal
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
from tensorforge.hw.dma_rows import (
    HeldQueue,
    Queue,
    RegisteredQueue,
    RowGeometry,
    RunGeometry,
    accept_command,
    byte_mask,
    expand_bytes,
    log2,
)
from tensorforge.hw.output_pipeline import PipelinedRequantizer, StoreRequantPath
from tensorforge.hw.ports import acc_read_port, instruction_layout
from tensorforge.hw.scratchpad import RegisteredReadBuffer
from tensorforge.hw.store_pack import pack_beats
from tensorforge.hw.targets import Target, parse_target
from tensorforge.isa import Opcode


class StoreUnit(wiring.Component):
    """Executes STORE: accumulator lines -> 2D strided DRAM tile, partial beats by ``wstrb``.

    Three stages joined by queues, so lines stream instead of taking turns. A *run* (see
    `dma_rows`) is the whole tile when its rows lie back to back in DRAM (``stride`` equal to
    ``row_len``, rows not cut at the line), else one row. The row walker reads one accumulator
    line per cycle into a queue of ``lines_ahead`` lines (with its run's start lane, and
    whether it starts or ends its run) and hands each run's aligned address and beat count to
    the address stage, which issues the run's AW bursts (`BurstPlanner`: up to
    ``dma.max_burst`` beats, never across 4 KiB, one per cycle) ahead of their data, up to
    ``dma.outstanding`` without a B response. The data stage packs the lines of a run into
    bus beats (a beat may hold the end of one line and the start of the next) and sends the W
    beats of the bursts already addressed; B responses are counted as they come.

    Contract: ``idle`` falls in the cycle after ``cmd`` is accepted and rises only when every
    burst of every STORE taken has its B response. The unit takes its next STORE as soon as
    the last one's lines are all read (a STORE ends with a marker in the span queue), up to
    ``stores_in_flight`` STOREs not yet retired, and pulses ``retired`` once per STORE, in
    order, when its last burst's B response is in: a later LOAD of the same bytes (ordered by
    tokens) reads the stored data, and a stream of STOREs pays the B latency about once. W
    beats go out at ``beats_per_cycle`` = 1 with no gap between lines or bursts, so on a
    DRAM that takes a beat per cycle an isolated STORE of ``beats`` beats is busy for at most
    ``fixed_cycles + beats`` cycles: three cycles before the first beat (line read, line and
    run queued, line packed and AW sent), the DRAM's B turnaround after the last beat (two
    cycles on cocotbext-axi's slave) and one for ``idle`` to rise; a DRAM latency ``L`` adds
    ``L`` once while ``dma.outstanding`` bursts cover it (once per burst on a DRAM that
    answers one burst at a time). ``error`` is sticky: a B response other than OKAY. On the
    ``ecp5`` target the packer decides from byte counts and registers only (the burst being
    filled, its beats left, the beat queue's room, the line queue's head fields: `HeldQueue`)
    and moves the data three cycles later (the line shifted to its lane in two steps), and W
    comes from a queue's registers (`store_pack`): each beat goes out five cycles later, still
    one per cycle; AWVALID waits on a register for room under ``dma.outstanding``
    (`_aw_room`). Also on ``ecp5``: a
    STORE's shape (one run or not), its elements (two additions, not a multiplier) and its
    row's and run's bytes are registered in three cycles (``SHAPE``, ``ELEMS``, ``BYTES``)
    after it is taken, before its first row; without ``output_pipeline`` the walker's line
    request is a register (`_registered_walker`); the planner starts each run from registers
    (`_staged_span`: the spans queue's head, its distance to the 4 KiB boundary and the first
    burst's limit there), so a run's first AW goes out a cycle later, and works out each next
    burst of a run two cycles ahead (`BurstPlanner` ``prepared``, ``staged_limit``): a run's
    bursts go out at most one every three cycles; without ``output_pipeline`` the spans
    queue's head is a register (`RegisteredQueue`: a run reaches the planner a cycle later)
    and the accumulator's read port is
    registered (``registered_acc_reads``: a line comes two cycles after its request, up to
    three owned) and each request's row fields (with its byte mask) wait in a queue beside
    it (`_collect_registered_line`), one line per cycle as before.

    With ``output_pipeline``, a STORE with ``requant`` first reads its three parameter lines
    (three more cycles, before its first row; a ``per_row`` STORE again before every
    ``acc_line_elems`` rows) and its lines go through the `Requantizer` on their way into the
    line queue, as ``in_bits`` elements (`StoreRequantPath`): its rows are ``in_bytes`` per
    element in DRAM, so its beats are a quarter as many at int8/int32.
    """

    beats_per_cycle = 1
    fixed_cycles = 6
    lines_ahead = 4
    stores_in_flight = 4  # STOREs taken and not yet retired (awaiting B responses)

    def __init__(self, config: AcceleratorConfig, target: Target | str = Target.GENERIC) -> None:
        self.config = config
        self.target = parse_target(target)
        # ``ecp5``: the requantizer's register stages (their lines need room in the queue)
        self.staged = config.output_pipeline and self.target is Target.ECP5
        # ``ecp5`` without the requantizer (whose tags need one line owned at a time): the
        # accumulator registers this port's data (`AccumulatorBuffer.registered_dma_reads`)
        self.registered_acc_reads = self.target is Target.ECP5 and not config.output_pipeline
        self.outstanding = config.dma.outstanding
        super().__init__(
            {
                "cmd": In(stream.Signature(
                    instruction_layout(Opcode.STORE, config.output_pipeline))),
                "idle": Out(1),
                "retired": Out(1),
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
        pipeline = config.output_pipeline
        insn = Signal(instruction_layout(Opcode.STORE, pipeline))
        elem_shift = log2(config.precision.acc_bytes)
        if pipeline:  # a requantizing STORE writes in_bits elements
            elem_shift = Mux(insn.requant, log2(config.precision.in_bytes), elem_shift)
        line = Signal.like(insn.line)
        rows_left = Signal.like(insn.rows)
        row_addr = Signal(ADDR_BITS)
        ecp5 = self.target is Target.ECP5
        # ecp5: a row's and a run's bytes, registered in the two cycles after the command
        row_bytes = Signal(range(line_bytes + 1), name="store_row_bytes") if ecp5 else None
        run_bytes = Signal(range(((1 << len(insn.rows)) - 1) * line_bytes + 1),
                           name="store_run_bytes") if ecp5 else None
        row = RowGeometry(
            m, bus_bytes, row_addr, insn.row_len, config.acc_line_elems, elem_shift, line_bytes,
            row_bytes,
        )
        # Worked out as the command is taken (registered): is the tile one run, its elements.
        whole = Signal()
        whole_elems = Signal(len(insn.rows) + len(insn.row_len))
        first_row = Signal()
        run = RunGeometry(m, bus_bytes, row, whole, whole_elems << elem_shift, line_bytes,
                          run_bytes)

        # Walker -> address stage: each run's span; walker -> data stage: each line.
        # A STORE's spans end with a marker (no beats, ``closes``): its bursts are all issued.
        span = data.StructLayout(
            {"aligned": ADDR_BITS, "beats": len(run.beats), "closes": 1}
        )
        # registered_acc_reads: the span is staged (`_staged_span`) from the head's registers
        queue = RegisteredQueue if self.registered_acc_reads else Queue
        m.submodules.spans = spans = queue(span, self.lines_ahead)
        lined = data.StructLayout(
            {
                "data": line_bytes * 8,
                "bytes": len(row.bytes),
                "offset": len(row.offset),
                "first": 1,
                "last": 1,
            }
        )
        depth = self.lines_ahead + (PipelinedRequantizer.latency if self.staged else 0)
        # ecp5: the packer decides from the head line's byte count, lane and flags held in
        # registers (`HeldQueue`); its data stays in LUT RAM, registered whatever the decision
        m.submodules.lines = lines = (
            HeldQueue(lined, depth, ("bytes", "offset", "first", "last")) if ecp5
            else Queue(lined, depth))
        # Address stage -> data stage: the beats of each burst whose AW has gone out.
        burst_beats = range(config.dma.max_burst + 1)
        m.submodules.bursts = bursts = Queue(burst_beats, max(2, self.outstanding))
        outstanding = Signal(range(self.outstanding + 1))  # AW sent, B not yet back
        planner = BurstPlanner(bus_bytes, config.dma.max_burst, "store", run.max_beats,
                               prepared=ecp5, staged_limit=ecp5)
        if ecp5:
            planner.prepare(m)

        walking = Signal()
        starts_rows = Signal()  # registered_acc_reads: the cycle before a STORE's first row
        more = None
        if self.registered_acc_reads:
            more = self._registered_walker(m, row, whole, first_row, rows_left, spans,
                                           starts_rows)
            self._walk_row(m, row, run, whole, first_row, line, rows_left, row_addr,
                           insn.stride << elem_shift, spans, registered=True)
        else:
            with m.If(walking):
                self._walk_row(m, row, run, whole, first_row, line, rows_left, row_addr,
                               insn.stride << elem_shift, spans)
        requant = None
        if pipeline:
            tag_bits = len(row.bytes) + len(row.offset) + 2 if self.staged else None
            requant = StoreRequantPath(m, config, insn, self.acc_read, self.cmd, tag_bits)
        self._collect_line(m, row, whole, first_row, rows_left, lines, requant)
        sent, closes, spans_waiting = self._issue_addresses(m, planner, spans, bursts,
                                                            outstanding)
        if self.target is Target.ECP5:
            pack_beats(self, m, lines, bursts)
        else:
            self._send_beats(m, lines, bursts)

        response = self.axi.bvalid & self.axi.bready
        m.d.comb += self.axi.bready.eq(1)
        m.d.sync += outstanding.eq(outstanding + sent - response)
        with m.If(response & (self.axi.bresp != Response.OKAY)):
            m.d.sync += self.error.eq(1)
        unanswered, retire = self._retire(m, sent, closes, response)

        settled = Signal()
        taken = Signal(range(self.stores_in_flight + 1))  # STOREs taken, not yet retired
        accepted = Signal()
        m.d.comb += settled.eq(~spans_waiting & planner.empty & ~unanswered)
        m.d.sync += taken.eq(taken + accepted - retire)

        def tile_shape(tile) -> list:
            """Is the tile one run, its elements: worked out from the command's fields."""
            back_to_back = (tile.stride == tile.row_len) & (
                tile.row_len <= config.acc_line_elems
            )
            return [whole.eq(back_to_back), whole_elems.eq(tile.rows * tile.row_len)]

        def start_rows(tile) -> None:
            if pipeline:
                with m.If(tile.requant):
                    m.next = "PARAMS"
                with m.Else():
                    m.next = "ROWS"
            else:
                m.next = "ROWS"

        with m.FSM():
            with m.State("IDLE"):
                room = taken != self.stores_in_flight
                with m.If(accept_command(m, self, insn, line, rows_left, row_addr, settled,
                                         room)):
                    m.d.comb += accepted.eq(1)
                    if ecp5:
                        m.d.sync += first_row.eq(1)
                        m.next = "SHAPE"
                    else:
                        m.d.sync += [*tile_shape(self.cmd.payload), first_row.eq(1)]
                        start_rows(self.cmd.payload)
            if ecp5:
                # the tile's shape from the registered command, then the bytes from it
                partials = self._row_products(insn.rows, insn.row_len, config.acc_line_elems)
                with m.State("SHAPE"):
                    clipped = Mux(insn.row_len > config.acc_line_elems, config.acc_line_elems,
                                  insn.row_len)
                    m.d.sync += [tile_shape(insn)[0], row_bytes.eq(clipped << elem_shift),
                                 *(partial.eq(value) for partial, value in partials)]
                    m.next = "ELEMS"
                with m.State("ELEMS"):
                    m.d.sync += whole_elems.eq(sum(partial for partial, _ in partials))
                    m.next = "BYTES"
                with m.State("BYTES"):
                    m.d.sync += run_bytes.eq(Mux(whole, whole_elems << elem_shift, row_bytes))
                    m.d.comb += starts_rows.eq(1)
                    start_rows(insn)
            if pipeline:
                with m.State("PARAMS"):
                    all_read = requant.read_all(m)
                    with m.If(all_read):
                        m.next = "ROWS"
            with m.State("ROWS"):
                if pipeline:  # a per-row STORE reads the next block every line_elems rows
                    ends = (rows_left == 0) | (row.bytes == 0)
                    next_block = requant.block_used_up(m, ends)
                    with m.If(ends):
                        m.next = "CLOSE"
                    with m.Elif(next_block):
                        m.next = "PARAMS"
                    with m.Else():
                        m.d.comb += walking.eq(1)
                else:
                    m.d.comb += walking.eq(1)
                    with m.If(~more if more is not None else (rows_left == 0) | (row.bytes == 0)):
                        m.next = "CLOSE"
            with m.State("CLOSE"):
                # every line is read: the next STORE may start while this one's bursts finish
                m.d.comb += spans.pushed.closes.eq(1)
                if self.registered_acc_reads:  # the walker drives the span in every state
                    m.d.comb += [spans.pushed.aligned.eq(0), spans.pushed.beats.eq(0)]
                with m.If(spans.w_rdy):
                    m.d.comb += spans.w_en.eq(1)
                    m.next = "IDLE"
        return m

    @staticmethod
    def _row_products(rows, row_len, line_elems) -> list:
        """``rows`` times ``row_len`` as (register, value) pairs whose registers sum to it, for
        a ``row_len`` of at most ``line_elems`` (only a tile that is one run, whose rows are no
        longer than a line, uses the product): each register adds two of the shifted copies of
        ``rows`` that ``row_len``'s bits select, so the product takes two additions in two
        cycles instead of a multiplier (an unregistered DSP, ~7 ns on ECP5) in one."""
        bits = line_elems.bit_length()
        terms = [Mux(row_len[b], rows, 0) << b for b in range(min(bits, len(row_len)))]
        width = len(rows) + bits
        pairs = []
        for k in range(0, len(terms), 2):
            partial = Signal(width, name=f"store_row_product_{k // 2}")
            pairs.append((partial, sum(terms[k:k + 2])))
        return pairs

    def _retire(self, m, sent, closes, response):
        """Pulse ``retired`` once a closed STORE's last burst has its B response. Returns
        (whether any STORE has bursts unanswered or is not yet retired, the retire pulse).

        B responses come in issue order, so one counter per STORE in flight suffices: ``tail``
        counts the bursts of the STORE issuing, ``head`` those of the oldest unretired one.
        There are ``stores_in_flight`` of them, and the unit takes no more STOREs than that
        before the oldest retires, so the ``tail`` slot is always free. A response that comes
        while the head has none left unanswered (it retires that cycle) answers the next
        STORE's first burst: back-to-back B responses across a STORE boundary.

        On ``ecp5`` whether each counter is zero is a register kept beside it (from the
        counter and this cycle's changes), so the head's comes from a register, not from a
        compare behind the choice of counter.
        """
        slots = self.stores_in_flight
        count = [Signal(range(self.outstanding + 1), name=f"store_unanswered_{k}")
                 for k in range(slots)]
        closed = [Signal(name=f"store_closed_{k}") for k in range(slots)]
        head, tail = Signal(range(slots)), Signal(range(slots))
        head_count = Signal.like(count[0])
        head_closed = Signal()
        none = None  # ecp5: count[k] == 0, registered
        if self.target is Target.ECP5:
            none = [Signal(name=f"store_none_unanswered_{k}", init=1) for k in range(slots)]
            head_none = Signal(name="store_head_none_unanswered")
        for k in range(slots):
            with m.If(head == k):
                m.d.comb += [head_count.eq(count[k]), head_closed.eq(closed[k])]
                if none is not None:
                    m.d.comb += head_none.eq(none[k])
        retire = Signal()
        m.d.comb += [
            retire.eq(head_closed & ((head_count == 0) if none is None else head_none)),
            self.retired.eq(retire),
        ]
        following = Mux(head == slots - 1, 0, head + 1)
        # whose burst this B response ends
        answered = Mux((head_count == 0) if none is None else head_none, following, head)
        for k in range(slots):
            grows = sent & (tail == k)
            shrinks = response & (answered == k)
            m.d.sync += count[k].eq(count[k] + grows - shrinks)
            if none is not None:  # zero after this cycle: unchanged at zero, or 1 answered
                m.d.sync += none[k].eq((none[k] & (grows == shrinks))
                                       | ((count[k] == 1) & shrinks & ~grows))
            with m.If(retire & (head == k)):
                m.d.sync += closed[k].eq(0)
            with m.If(closes & (tail == k)):
                m.d.sync += closed[k].eq(1)
        with m.If(retire):
            m.d.sync += head.eq(following)
        with m.If(closes):
            m.d.sync += tail.eq(Mux(tail == slots - 1, 0, tail + 1))
        unanswered = Signal()
        m.d.comb += unanswered.eq(Cat(closed).any() | Cat(c != 0 for c in count).any())
        return unanswered, retire

    def _registered_walker(self, m, row, whole, first_row, rows_left, spans, starts_rows):
        """``registered_acc_reads``: whether the walker requests a line in a cycle is a register
        (``store_may_read``, the read request's valid), worked out in the cycle before from
        next-cycle values: rows are left (``store_rows_more``, a register too, set as the
        STORE's rows start, cleared as its last row's line is requested) and, for a row that
        opens a run, the spans queue has room (its level and this cycle's push, not counting
        this cycle's pop). Returns ``store_rows_more``; it is high only in ``ROWS``."""
        read = self.acc_read
        more = Signal(name="store_rows_more")
        may_read = Signal(name="store_may_read")
        accepted = read.req.valid & read.req.ready
        more_next = Mux(starts_rows, (rows_left != 0) & (row.bytes != 0),
                        Mux(accepted, rows_left != 1, more))
        first_next = first_row & ~accepted  # set as the STORE is taken, before its rows
        room_next = Mux(spans.w_en, spans.level < spans.depth - 1, spans.level < spans.depth)
        m.d.sync += [
            more.eq(more_next),
            may_read.eq(more_next & (room_next | (whole & ~first_next))),
        ]
        self._may_read = may_read
        return more

    def _walk_row(self, m, row, run, whole, first_row, line, rows_left, row_addr, stride_bytes,
                  spans, registered=False) -> None:
        """One row per cycle: request its accumulator line; a run's first queues its span.
        ``registered``: the request's valid is `_registered_walker`'s register."""
        read = self.acc_read
        opens_run = ~whole | first_row
        valid = ((rows_left != 0) & (row.bytes != 0) & (spans.w_rdy | ~opens_run)
                 if not registered else self._may_read)
        m.d.comb += [
            read.req.payload.eq(line),
            read.req.valid.eq(valid),
            spans.pushed.aligned.eq(row.aligned),
            spans.pushed.beats.eq(run.beats),
        ]
        with m.If(read.req.valid & read.req.ready):
            m.d.comb += spans.w_en.eq(opens_run)
            m.d.sync += [
                line.eq(line + 1),
                rows_left.eq(rows_left - 1),
                row_addr.eq(row_addr + stride_bytes),
                first_row.eq(0),
            ]

    def _collect_line(self, m, row, whole, first_row, rows_left, lines, requant=None) -> None:
        """Queue each line the accumulator returns with its row's bytes, its run's start lane
        and whether it starts or ends its run (with ``requant``: a parameter line goes to its
        register instead, and a requantizing STORE's line through the `Requantizer`)."""
        read = self.acc_read
        if self.registered_acc_reads:
            self._collect_registered_line(m, row, whole, first_row, rows_left, lines)
            return
        # The read slot holds one line at a time (it takes a request only as its line is
        # taken), so what is latched with the request still belongs to the line it returns,
        # even if the next STORE has been taken meanwhile.
        start_lane = Signal.like(row.offset)
        row_bytes = Signal.like(row.bytes)
        first = Signal()
        last = Signal()
        with m.If(read.req.valid & read.req.ready):
            m.d.sync += [
                first.eq(~whole | first_row),
                last.eq(~whole | (rows_left == 1)),
                row_bytes.eq(row.bytes),
            ]
            with m.If(~whole | first_row):
                m.d.sync += start_lane.eq(row.offset)
        if self.staged:
            line_data, (row_bytes, start_lane, first, last) = self._through_stages(
                m, lines, requant, (row_bytes, start_lane, first, last))
        mask = expand_bytes(byte_mask(m, row_bytes, self.config.acc_line_bytes, "store_row_mask"))
        if requant is not None and not self.staged:
            line_data = requant.route_response(m, lines)
        elif requant is None:
            line_data = read.resp.payload.as_value()
            m.d.comb += [read.resp.ready.eq(lines.w_rdy), lines.w_en.eq(read.resp.valid)]
        m.d.comb += [
            # bytes past the row are cleared: the packer ORs the next line in behind them
            lines.pushed.data.eq(line_data & mask),
            lines.pushed.bytes.eq(row_bytes),
            lines.pushed.offset.eq(start_lane),
            lines.pushed.first.eq(first),
            lines.pushed.last.eq(last),
        ]

    def _collect_registered_line(self, m, row, whole, first_row, rows_left, lines) -> None:
        """`_collect_line` for a registered read port (``registered_acc_reads``): it owns up to
        `RegisteredReadBuffer.LINES` lines, so each request's fields go into a queue whose head
        (a register) is the oldest line's; a response pops it as the line is queued. The
        fields carry the row's byte mask, worked out as the request goes, so the line is
        masked by flip-flops on its way into the line queue."""
        read = self.acc_read
        line_bytes = self.config.acc_line_bytes
        fields = data.StructLayout({"bytes": len(row.bytes), "offset": len(row.offset),
                                    "first": 1, "last": 1, "mask": line_bytes})
        m.submodules.line_fields = queued = RegisteredQueue(fields, RegisteredReadBuffer.LINES)
        start_lane = Signal.like(row.offset, name="store_start_lane")  # the open run's
        opens_run = ~whole | first_row
        lane = Mux(opens_run, row.offset, start_lane)
        accepted = read.req.valid & read.req.ready
        with m.If(accepted):
            m.d.sync += start_lane.eq(lane)
        taken = read.resp.valid & lines.w_rdy
        head = queued.head
        mask = expand_bytes(head.mask)
        m.d.comb += [
            queued.w_en.eq(accepted),
            queued.pushed.mask.eq(byte_mask(m, row.bytes, line_bytes, "store_row_mask")),
            queued.pushed.bytes.eq(row.bytes),
            queued.pushed.offset.eq(lane),
            queued.pushed.first.eq(opens_run),
            queued.pushed.last.eq(~whole | (rows_left == 1)),
            queued.r_en.eq(taken),
            read.resp.ready.eq(lines.w_rdy),
            lines.w_en.eq(read.resp.valid),
            lines.pushed.data.eq(read.resp.payload.as_value() & mask),
            lines.pushed.bytes.eq(head.bytes),
            lines.pushed.offset.eq(head.offset),
            lines.pushed.first.eq(head.first),
            lines.pushed.last.eq(head.last),
        ]

    @staticmethod
    def _through_stages(m, lines, requant, fields):
        """The ``ecp5`` target's line path: each line and its ``fields`` through the
        requantizer's register stages into ``lines``, taken while the queue has room for it
        and for every line in the stages; returns the line data and the fields, delayed."""
        in_flight = Signal(range(PipelinedRequantizer.latency + 1), name="store_lines_staged")
        room = lines.level + in_flight < lines.depth
        valid, line_data, tag = requant.route_through_stages(m, room, Cat(*fields))
        m.d.sync += in_flight.eq(in_flight + requant.unit.valid - valid)
        m.d.comb += lines.w_en.eq(valid)
        delayed, at = [], 0
        for field in fields:
            delayed.append(tag[at:at + len(field)])
            at += len(field)
        return line_data, delayed

    def _issue_addresses(self, m, planner, spans, bursts, outstanding):
        """AW bursts of queued runs, one per cycle, the next run planned as one's last goes;
        returns (a burst was sent, a STORE's closing marker was taken, a span waits).

        On ``ecp5`` the planner starts from `_staged_span` (registers) instead of the spans
        queue's head (a LUT RAM read): each run's first AW goes out a cycle later."""
        config = self.config
        axi = self.axi
        drive_fixed_fields(m, axi, "aw", config.dma.bus_bits)
        # Each term only rises without a handshake, so AWVALID never drops early (AXI A3.2.1).
        # ecp5: a run's next burst is loaded from the planner's prepared registers (`ready`).
        if self.target is Target.ECP5:
            awvalid = ~planner.empty & self._aw_room(m, outstanding) & planner.may_offer
        else:
            awvalid = ~planner.empty & bursts.w_rdy & (outstanding != self.outstanding)
        m.d.comb += [
            axi.awid.eq(0),
            axi.awaddr.eq(planner.address),
            axi.awlen.eq(planner.beats - 1),
            axi.awvalid.eq(awvalid),
        ]
        if self.target is Target.ECP5:  # its packer compares beats sent with AWLEN (`store_pack`)
            m.d.comb += bursts.pushed.eq(axi.awlen)
        else:
            m.d.comb += bursts.pushed.eq(planner.beats)
        sent = Signal()
        m.d.comb += sent.eq(axi.awvalid & axi.awready)
        with m.If(sent):
            m.d.comb += bursts.w_en.eq(1)
            planner.advance(m)
        closes = Signal()
        if self.target is Target.ECP5:
            waiting, head, to_boundary, limit, take = self._staged_span(m, planner, spans)
        else:
            waiting, head, to_boundary, limit, take = (spans.r_rdy, spans.head, None, None,
                                                       spans.r_en)
        with m.If((planner.empty | (sent & planner.last)) & waiting):
            m.d.comb += [take.eq(1), closes.eq(head.closes)]
            planner.start(m, head.aligned, head.beats, to_boundary, limit)
        if self.target is Target.ECP5:
            # the marker reaches `_retire` a cycle later (the next STORE's first AW is two
            # cycles behind it, through the staged span) and counts as waiting meanwhile; a
            # span pushed into a RegisteredQueue counts in its level before it reaches the head
            closed = Signal(name="store_span_closed")
            m.d.sync += closed.eq(closes)
            return sent, closed, waiting | (spans.level != 0) | closed
        return sent, closes, waiting

    def _aw_room(self, m, outstanding):
        """``ecp5``: ``outstanding`` below ``dma.outstanding`` after this cycle, a register kept
        beside the counter (from its value and this cycle's AW and B handshakes). It also
        bounds the bursts queue (``dma.outstanding`` deep or more): a burst leaves that queue
        as its last beat is decided, before its B response can come."""
        room = Signal(name="store_aw_room", init=1)
        sent = self.axi.awvalid & self.axi.awready
        response = self.axi.bvalid & self.axi.bready
        with m.If(sent & ~response):
            m.d.sync += room.eq(outstanding < self.outstanding - 1)
        with m.Elif(response & ~sent):
            m.d.sync += room.eq(1)
        return room

    @staticmethod
    def _staged_span(m, planner, spans):
        """The spans queue's head moved into registers with its distance to the 4 KiB boundary
        (`BurstPlanner.beats_to_boundary`) and the first burst's limit there, so the planner's
        compare starts from flip-flops. Returns (a span is staged, the span, its distance, its
        limit, the planner takes it (to drive))."""
        staged = Signal(spans.head.shape(), name="store_span")
        full = Signal(name="store_span_full")
        to_boundary = Signal.like(planner.to_boundary, name="store_span_to_boundary")
        limit = Signal.like(planner.beats, name="store_span_limit")
        take = Signal(name="store_span_taken")
        with m.If(spans.r_rdy & (~full | take)):
            m.d.comb += spans.r_en.eq(1)
            m.d.sync += [
                staged.eq(spans.head),
                to_boundary.eq(planner.beats_to_boundary(spans.head.aligned)),
                limit.eq(planner.limit_at(spans.head.aligned)),
                full.eq(1),
            ]
        with m.Elif(take):
            m.d.sync += full.eq(0)
        return full, staged, to_boundary, limit, take

    def _send_beats(self, m, lines, bursts) -> None:
        """Pack the lines of a run into W beats and send them back to back.

        The packer holds ``have`` bytes (bytes before a run's start lane count, with their
        strobes off), its first at bit 0; it sends a beat once it holds a full one, or the rest
        once its run's last line is in (``flushing``). A line joins in the cycle there is
        room for it behind what remains after that cycle's beat; a run's first line waits for
        the packer to be empty.
        """
        config = self.config
        bus_bytes = config.dma.bus_bytes
        line_bytes = config.acc_line_bytes
        width = line_bytes + bus_bytes  # bytes the packer can hold
        axi = self.axi
        head = lines.head
        row_strobes = byte_mask(m, head.bytes, line_bytes, "store_row_strobes")

        packed = Signal(width * 8)
        strobes = Signal(width)
        have = Signal(range(width + 1))
        flushing = Signal()  # the run's last line is in: send what is left, then take the next
        burst_beat = Signal(range(config.dma.max_burst + 1))
        m.d.comb += [
            axi.wvalid.eq(((have >= bus_bytes) | (flushing & (have != 0))) & bursts.r_rdy),
            axi.wdata.eq(packed[: bus_bytes * 8]),
            axi.wstrb.eq(strobes[:bus_bytes]),
            axi.wlast.eq(burst_beat == bursts.head - 1),
        ]
        beat_sent = axi.wvalid & axi.wready
        with m.If(beat_sent):
            m.d.sync += burst_beat.eq(burst_beat + 1)
            with m.If(axi.wlast):
                m.d.comb += bursts.r_en.eq(1)
                m.d.sync += burst_beat.eq(0)

        # What stays after this cycle's beat, moved down a beat if one went.
        rest = Signal.like(packed)
        rest_strobes = Signal.like(strobes)
        rest_have = Signal.like(have)
        with m.If(beat_sent):
            m.d.comb += [
                rest.eq(packed >> (bus_bytes * 8)),
                rest_strobes.eq(strobes >> bus_bytes),
                rest_have.eq(Mux(have > bus_bytes, have - bus_bytes, 0)),
            ]
        with m.Else():
            m.d.comb += [rest.eq(packed), rest_strobes.eq(strobes), rest_have.eq(have)]

        # A run's first line starts at its lane in an empty packer; the others right behind.
        at = Mux(head.first, head.offset, rest_have)
        room = Mux(head.first, rest_have == 0, ~flushing & (rest_have + head.bytes <= width))
        joins = lines.r_rdy & room
        with m.If(joins):
            m.d.comb += lines.r_en.eq(1)
            m.d.sync += [
                packed.eq(rest | (head.data << Cat(Const(0, 3), at))),
                strobes.eq(rest_strobes | (row_strobes << at)),
                have.eq(at + head.bytes),
                flushing.eq(head.last),
            ]
        with m.Else():
            m.d.sync += [packed.eq(rest), strobes.eq(rest_strobes), have.eq(rest_have)]
            with m.If(rest_have == 0):
                m.d.sync += flushing.eq(0)
