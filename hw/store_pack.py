"""The ``ecp5`` store unit's W packer: lines -> W beats, control and data in separate cycles.

The generic packer (`StoreUnit._send_beats`) decides, in one cycle, from the bursts queue's
level and the line queue's head, whether a beat goes out, how many bytes stay and whether a line
joins, and that decision selects the packer's bytes and the W data; on ECP5 that cycle was
the whole accelerator's critical path (docs/ecp5_target.md). Here, as in the load unit's data
half (`load_gather`), the decisions come first and the wide data follows them a cycle later:

* cycle t (control): from byte counts only (``have``, the head line's ``bytes``: the line
  queue is a `HeldQueue`, its head's counts and flags registers), decide whether a beat is
  sent and whether the head line joins the packer, and where; the head line (from LUT RAM),
  its strobes and the decisions are registered. Nothing wide depends on them here.
  Whether a beat goes out is one LUT of registers: the burst being filled is held in
  registers (`_current_burst`), and ``have``'s compares with a beat and with zero, the beat
  queue's room and the room behind ``have`` (``space``, for whether the head line fits) are
  registers kept beside their counts, each worked out for every outcome before the choice.
  Whether the head line joins does not wait for whether a beat goes out: it joins when it
  fits behind what the packer holds now (a run's first line: when the packer is empty now),
  so the line queue's pop starts from registers and one compare. The packer holds a line
  and two beats, so a line still joins in the cycle its predecessor's last whole beat goes
  (one line and one beat per cycle, as before).
* cycles t+1 and t+2 (shift): the head line and its strobes, registered in cycle t, are
  shifted to their byte lane into registers in two steps, by the lane within a beat
  (``at`` mod ``bus_bytes``) and then by whole beats, a register between them, so neither
  step is a 40-way choice; the decisions wait two cycles beside them.
* cycle t+3 (data): the packer's bytes move as decided: the beat decided in cycle t is its
  low bytes, pushed with its WLAST into a queue of beats; what stays moves down a beat, and
  a joining line, already at its lane, is ORed in.
* W comes from the beat queue's output register (`RegisteredQueue`): WVALID, WDATA, WSTRB
  and WLAST are flops, held until WREADY.

A beat is decided only while its burst's AW has gone out and the beat queue has room for it
and for every beat decided and not yet sent (``reserved``, a register): it is never pushed full,
and WREADY reaches no decision in the cycle it comes. Each beat goes out five cycles later
than on the generic target; one beat per cycle, back to back, as before.
"""

from __future__ import annotations

from amaranth import Cat, Const, Mux, Signal
from amaranth.lib import data

from tensorforge.hw.dma_rows import RegisteredQueue, byte_mask

# Beats decided and not yet sent: one a cycle from the decision to WREADY takes five (the
# decision's and the two shifts' registers, then two in the queue), so six keep W busy.
BEAT_QUEUE_DEPTH = 6


def _current_burst(m, max_burst: int, bursts, emit, last):
    """The burst whose beats are being decided, moved out of ``bursts`` (AWLEN) into registers:
    whether one is open, its beats after the one being decided, and ``last`` (to drive: that
    beat is its last), so no queue level or compare lies before ``emit``. The next burst is
    loaded as the last beat of one is decided, or while none is open. Returns whether one is
    open."""
    burst_open = Signal(name="pack_burst_open")
    left = Signal(range(max_burst), name="pack_burst_left")
    at_last = Signal(name="pack_burst_at_last")
    load = bursts.r_rdy & (~burst_open | (emit & at_last))
    m.d.comb += [bursts.r_en.eq(load), last.eq(at_last)]
    with m.If(load):
        m.d.sync += [burst_open.eq(1), left.eq(bursts.head), at_last.eq(bursts.head == 0)]
    with m.Elif(emit):
        with m.If(at_last):
            m.d.sync += burst_open.eq(0)
        with m.Else():
            m.d.sync += [left.eq(left - 1), at_last.eq(left == 1)]
    return burst_open


def pack_beats(unit, m, lines, bursts) -> None:
    """`StoreUnit`'s data stage for the ``ecp5`` target (see the module docstring): packs the
    lines of ``lines`` into the W beats of the bursts queued in ``bursts`` (each entry a
    burst's AWLEN, its beats minus one) and drives the unit's W channel."""
    config = unit.config
    bus_bytes = config.dma.bus_bytes
    line_bytes = config.acc_line_bytes
    width = line_bytes + 2 * bus_bytes  # bytes the packer can hold
    axi = unit.axi
    head = lines.head
    beat_layout = data.StructLayout(
        {"data": bus_bytes * 8, "strobes": bus_bytes, "last": 1})
    m.submodules.beats = beats = RegisteredQueue(beat_layout, BEAT_QUEUE_DEPTH)
    sent = Signal()
    m.d.comb += [
        axi.wvalid.eq(beats.r_rdy),
        axi.wdata.eq(beats.head.data),
        axi.wstrb.eq(beats.head.strobes),
        axi.wlast.eq(beats.head.last),
        sent.eq(beats.r_rdy & axi.wready),
        beats.r_en.eq(sent),
    ]

    # --- cycle t: decisions on byte counts ----------------------------------------------------
    have = Signal(range(width + 1), name="pack_have")  # bytes held once the data catches up
    flushing = Signal(name="pack_flushing")  # the run's last line is in: send what is left
    reserved = Signal(range(BEAT_QUEUE_DEPTH + 1), name="pack_reserved")  # decided, not sent
    beat_room = Signal(name="pack_beat_room", init=1)  # reserved != BEAT_QUEUE_DEPTH
    # have >= bus_bytes, have != 0: registers kept beside ``have``, worked out with it
    have_beat = Signal(name="pack_have_beat")
    have_any = Signal(name="pack_have_any")
    emit = Signal()  # a beat is sent, the packer's low bytes in the next cycle
    last = Signal()
    burst_open = _current_burst(m, config.dma.max_burst, bursts, emit, last)
    m.d.comb += emit.eq((have_beat | (flushing & have_any)) & burst_open & beat_room)
    m.d.sync += reserved.eq(reserved + emit - sent)
    with m.If(emit & ~sent):
        m.d.sync += beat_room.eq(reserved < BEAT_QUEUE_DEPTH - 1)
    with m.Elif(sent & ~emit):
        m.d.sync += beat_room.eq(1)

    # What stays after this cycle's beat, and whether the head line fits behind it, both
    # worked out for either outcome of ``emit`` from registers (``have``, the queue's head),
    # so ``emit`` (the bursts queue's level) only chooses at the end.
    after = Signal.like(have, name="pack_after_beat")  # what stays if a beat goes
    total = Signal(range(2 * width + 1), name="pack_with_line")  # ``have`` and the head line
    m.d.comb += [
        after.eq(Mux(have > bus_bytes, have - bus_bytes, 0)),
        total.eq(have + head.bytes),
    ]
    rest_have = Mux(emit, after, have)
    # Room left behind ``have`` (width - have), a register kept beside ``have``, so whether the
    # head line fits is one compare; and behind what stays after a beat (width + bus - have),
    # so ``space``'s next value after a beat is one subtraction.
    space = Signal(range(width + 1), name="pack_space", init=width)
    space_after = Signal(range(width + bus_bytes + 1), name="pack_space_after_beat",
                         init=width + bus_bytes)
    # have + bytes <= width: then rest_have + bytes <= width whether a beat goes or not
    fits = head.bytes <= space
    emptied = Mux(emit, have <= bus_bytes, have == 0)  # rest_have == 0
    behind = Mux(emit, Mux(have > bus_bytes, total - bus_bytes, head.bytes), total)
    started = head.offset + head.bytes  # ``have`` once a run's first line joins
    # ``have_beat`` and ``have_any`` of each outcome, each compared before the choice
    behind_beat = Mux(emit, Mux(have > bus_bytes, total >= 2 * bus_bytes,
                                head.bytes >= bus_bytes), total >= bus_bytes)
    behind_any = Mux(emit, Mux(have > bus_bytes, total != bus_bytes, head.bytes != 0),
                     total != 0)
    # A run's first line starts at its lane in an empty packer; the others right behind.
    at = Mux(head.first, head.offset, rest_have)
    room = Mux(head.first, ~have_any, ~flushing & fits)  # have_any: have != 0
    joins = lines.r_rdy & room
    # width - have and width + bus - have of each outcome, each worked out before the choice
    # (space + bus is space_after; what stays after a beat from have > bus is have - bus)
    def spaces(extra):
        return (width + extra - started,
                Mux(emit, Mux(have > bus_bytes, space_after + extra - head.bytes,
                              width + extra - head.bytes),
                    (space_after if extra else space) - head.bytes),
                Mux(emit, Mux(have > bus_bytes, space_after + extra, width + extra),
                    (space_after if extra else space)))

    for register, extra in ((space, 0), (space_after, bus_bytes)):
        started_space, behind_space, rest_space = spaces(extra)
        with m.If(joins):
            m.d.sync += register.eq(Mux(head.first, started_space, behind_space))
        with m.Else():
            m.d.sync += register.eq(rest_space)
    with m.If(joins):
        m.d.comb += lines.r_en.eq(1)
        m.d.sync += [have.eq(Mux(head.first, started, behind)),
                     have_beat.eq(Mux(head.first, started >= bus_bytes, behind_beat)),
                     have_any.eq(Mux(head.first, started != 0, behind_any)),
                     flushing.eq(head.last)]
    with m.Else():
        m.d.sync += [have.eq(rest_have),
                     have_beat.eq(Mux(emit, have >= 2 * bus_bytes, have_beat)),
                     have_any.eq(Mux(emit, have > bus_bytes, have_any))]
        with m.If(emptied):
            m.d.sync += flushing.eq(0)

    emit_d, last_d, join_d = Signal(), Signal(), Signal()
    at_d = Signal(range(width))
    line_d = Signal(line_bytes * 8)  # the head line, whether it joined or not
    line_strobes_d = Signal(line_bytes)
    m.d.sync += [
        emit_d.eq(emit),
        last_d.eq(last),
        join_d.eq(joins),
        at_d.eq(at),
        line_d.eq(head.data),
        line_strobes_d.eq(byte_mask(m, head.bytes, line_bytes, "store_row_strobes")),
    ]

    # --- cycles t+1, t+2: the line moves to its lane, within the beat, then by whole beats ---
    lane_bits = (bus_bytes - 1).bit_length()  # at_d's lane within a beat
    emit_l, last_l, join_l = Signal(), Signal(), Signal()
    line_l = Signal((line_bytes + bus_bytes - 1) * 8, name="pack_line_in_beat")
    line_strobes_l = Signal(line_bytes + bus_bytes - 1, name="pack_line_strobes_in_beat")
    beat_l = Signal(max(1, len(at_d) - lane_bits), name="pack_line_beat")  # whole beats to go
    m.d.sync += [
        emit_l.eq(emit_d),
        last_l.eq(last_d),
        join_l.eq(join_d),
        line_l.eq(line_d << Cat(Const(0, 3), at_d[:lane_bits])),
        line_strobes_l.eq(line_strobes_d << at_d[:lane_bits]),
        beat_l.eq(at_d[lane_bits:]),
    ]
    emit_s, last_s, join_s = Signal(), Signal(), Signal()
    line_s = Signal(width * 8, name="pack_line_at_lane")
    line_strobes_s = Signal(width, name="pack_line_strobes_at_lane")
    m.d.sync += [
        emit_s.eq(emit_l),
        last_s.eq(last_l),
        join_s.eq(join_l),
        line_s.eq(line_l << Cat(Const(0, 3 + lane_bits), beat_l)),
        line_strobes_s.eq(line_strobes_l << Cat(Const(0, lane_bits), beat_l)),
    ]

    # --- cycle t+3: the bytes move as decided -------------------------------------------------
    # Bytes past ``have`` are zero (lines come masked to their row), so a line ORs in behind.
    packed = Signal(width * 8)
    strobes = Signal(width)
    rest = Mux(emit_s, packed >> (bus_bytes * 8), packed)
    rest_strobes = Mux(emit_s, strobes >> bus_bytes, strobes)
    m.d.comb += [
        beats.w_en.eq(emit_s),
        beats.pushed.data.eq(packed[: bus_bytes * 8]),
        beats.pushed.strobes.eq(strobes[:bus_bytes]),
        beats.pushed.last.eq(last_s),
    ]
    with m.If(join_s):
        m.d.sync += [packed.eq(rest | line_s), strobes.eq(rest_strobes | line_strobes_s)]
    with m.Else():
        m.d.sync += [packed.eq(rest), strobes.eq(rest_strobes)]
