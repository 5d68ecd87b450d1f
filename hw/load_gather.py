"""The ``ecp5`` load unit's data half: R beats -> lines, control and data in separate cycles.

The generic data half (`LoadUnit._cut_lines`) decides, in one cycle, whether to take a beat and
cut a line, shifts the beat into a byte gatherer and shifts the cut line out of it; on ECP5 that
cycle was the whole accelerator's critical path (docs/ecp5_target.md). Here the decisions come
first and the wide data follows them in later cycles:

* before: R beats come through an `ElasticBuffer` (`registered_r`), so RREADY is a register
  and the beats the decisions see come from registers (each a cycle later than on the bus);
  the decision to take one moves only the buffer's read pointer and count.
* cycle t (control): take a beat and cut lines from byte counts only (``have``, the head run's
  queued fields). A line is cut once the bytes gathered before this cycle make one, so the
  cut does not wait for this cycle's beat; a beat is taken while they do not, or alongside a
  cut while they make less than two lines. The compares these rules need (``taken`` with
  the run's beats, ``have`` with one and two lines' bytes) are registers set a cycle ahead
  from per-case compares (``have`` or ``have`` and the beat against one, two or three
  lines' bytes, queued with the run: a cut is a line more to compare with, not a
  subtraction; ``have`` and a whole beat is a register kept with ``have``, and a run's first
  beat finds nothing gathered, so its kept bytes, queued too, are the sum); after a run
  ends, bits queued with the next stand in for them.
  Register the beat as it came, where its first kept byte goes, how many bytes it keeps and
  which buffer bytes it lands on (``lands``). Nothing wide depends on the decisions in this
  cycle. Whether the line queue has room for a cut is a register set a cycle ahead (one
  entry short of the depth, which is one deeper for it).
* cycle t+1: the beat is written into the circular buffer (``N`` bytes, a power of two at least
  a line, a beat and the smaller of the two: the bytes held, up to a line and a beat, and a
  beat taken alongside a cut), each byte from the beat's byte at its lane (a mux on
  registers) under its own enable (``lands``, a register): no shift of the buffer, no clearing.
* cycle t+2: a line cut in cycle t is read from the buffer: the bytes from its start, rounded
  down to 8 bytes, to 7 bytes past its end, are registered.
* cycle t+3: they are moved down the rest of the way and go, masked to the row's bytes, into
  a small queue of lines that write the scratchpad or accumulator.

A line is read two cycles after it is cut and a beat lands two cycles after it is taken, so the
beats taken before the cut are in the buffer when the line is read, the one taken with it
lands past the line's bytes (the buffer's size), and later beats, which may wrap onto them,
land only after it is read. Each line takes three more cycles than
on the generic target, four counting the R slice; one beat and one line per cycle as before.
``settled`` (the unit's ``idle``) is a register: nothing queued, cut or in flight in the last
cycle, and the address half idle in it, so it rises a cycle after the last line is written.
"""

from __future__ import annotations

from amaranth import Cat, Const, Mux, Signal, unsigned
from amaranth.lib import data

from tensorforge.hw.axi import Response
from tensorforge.hw.dma_rows import Queue, byte_mask, expand_bytes, log2
from tensorforge.hw.skid import ElasticBuffer

# lines cut and not yet written: three in the pipeline, one queued, one more because the room
# for the next cut is a register worked out a cycle ahead (`gather_lines`)
LINE_QUEUE_DEPTH = 6
FINE_BYTES = 8  # a line is read from the buffer in steps of this many bytes, then moved down


def gather_lines(unit, m, runs, settled, resting, line_bytes: int, spad_bits: int,
                 acc_bits: int) -> None:
    """`LoadUnit`'s data half for the ``ecp5`` target (see the module docstring): takes R beats
    of the head run of ``runs`` and writes its lines; drives ``settled`` and the unit's
    ``retired``, ``error``, ``axi.rready`` and write ports. ``resting`` is high only in cycles
    that queue no run (the address half's IDLE state)."""
    bus_bytes = unit.config.dma.bus_bytes
    head = runs.head
    # circular buffer bytes: the uncut ones, a line cut in this cycle and the beat taken with it
    size = 1 << (line_bytes + bus_bytes + min(line_bytes, bus_bytes) - 1).bit_length()
    pointer_bits = log2(size)
    buffer = [Signal(8, name=f"gather_byte{j}") for j in range(size)]
    beat = registered_r(m, unit)
    have = Signal(range(line_bytes + bus_bytes + 1))  # bytes of the head run gathered, uncut
    # have + bus_bytes, kept with it: ``have`` and a beat without adding them in the decisions
    have_and_bus = Signal(range(line_bytes + 2 * bus_bytes + 1), init=bus_bytes)
    read_at = Signal(pointer_bits)  # the next line's first byte
    write_at = Signal(pointer_bits)  # where the next beat's first kept byte goes
    taken = Signal.like(head.beats)
    lines_cut = Signal.like(head.lines)
    first = Signal(name="first_beat", init=1)  # the next beat is the head run's first

    meta = data.StructLayout({"line": unsigned(len(head.line)), "acc": unsigned(1),
                              "writes": unsigned(1), "retires": unsigned(1)})
    cut_layout = data.StructLayout({"valid": unsigned(1), "at": unsigned(pointer_bits),
                                    "keep": unsigned(line_bytes), "meta": meta})
    cut_d = Signal(cut_layout)  # a line cut in the last cycle, and where it starts
    cut_e = Signal(cut_layout)  # ... two cycles ago: read now
    cut_f = Signal(cut_layout)  # ... three cycles ago: its bytes moved down and queued now
    m.submodules.lines = lines = Queue(
        data.StructLayout({"data": unsigned(line_bytes * 8), "meta": meta}), LINE_QUEUE_DEPTH)
    beat_d = Signal()
    beat_data = Signal(bus_bytes * 8)  # the beat taken in the last cycle, as it came
    beat_at = Signal(pointer_bits)  # where its first kept byte goes
    lane_bits = log2(bus_bytes)
    beat_lane = Signal(max(1, lane_bits))  # the lane its byte 0 goes to: (beat_at - skip) mod bus
    beat_keeps = Signal(range(bus_bytes + 1))  # how many bytes it keeps (from its ``skip``)
    lands = Signal(size)  # the buffer bytes it is written to: the enables of cycle t+1

    # --- cycle t: decisions on byte counts -----------------------------------------------
    in_flight = Signal(range(LINE_QUEUE_DEPTH + 1))
    m.d.comb += in_flight.eq(lines.level + cut_d.valid + cut_e.valid + cut_f.valid)
    # the line queue has room when this cut arrives: at most one line joined since the
    # register was set, so one below the depth then leaves room now
    free = Signal(init=1)
    m.d.sync += free.eq(in_flight < LINE_QUEUE_DEPTH - 1)
    # The compares the decisions need are registers, set in the last cycle for this one:
    # ``more`` (taken != beats), ``short`` (have < bytes), ``twice`` (have < 2 * bytes). While
    # ``fresh`` the head run may be new (the last one ended, or none was queued): then
    # ``have`` and ``taken`` are 0 and the head's queued bits stand in for them.
    fresh = Signal(init=1)
    more, short, twice = Signal(), Signal(), Signal()
    at_last = Signal()  # lines_cut == last_line: the next cut is the run's last line
    short_now = Mux(fresh, head.has_bytes, short)
    # a line is cut from the bytes gathered before this cycle (this cycle's beat counts from the
    # next), so no decision waits for the beat's handshake; a beat is also taken alongside a cut
    # while fewer than two lines' bytes are held, so one line a cycle still streams
    cut = Signal()
    m.d.comb += cut.eq(runs.r_rdy & ~short_now & free)
    beat_in = take_beat(m, unit, runs, taken, have, beat, ready=runs.r_rdy & Mux(
        fresh, head.has_beats, more) & (short_now | (cut & Mux(fresh, head.has_bytes, twice))))
    skip = Mux(first, head.offset, 0)  # a run's first beat starts ``offset`` bytes in
    keeps = Mux(first, head.first_keeps, bus_bytes)  # bus_bytes - skip, queued with the run
    m.d.sync += [
        beat_d.eq(beat_in),
        beat_data.eq(beat.payload.data),
        beat_at.eq(write_at),
        beat_lane.eq((write_at - skip)[:lane_bits] if lane_bits else 0),
        beat_keeps.eq(keeps),
        lands.eq(Cat(((Const(j, pointer_bits) - write_at)[:pointer_bits]) < keeps
                     for j in range(size))),
    ]

    run_done = cut & (head.no_lines | Mux(fresh, head.single, at_last))
    # the next ``have`` of each case, from registers, chosen by the handshakes
    # ``have`` + ``keeps`` from registers: no beat of the run is in yet while ``first``, so
    # nothing is gathered (a line of no bytes is all a run cuts before its first beat)
    have_beat = Mux(first, head.first_keeps, have_and_bus)
    have_cut, have_both = have - head.bytes, have_beat - head.bytes

    def chosen(lines):
        """Whether the next ``have`` is below ``lines`` lines' bytes, each case worked out from
        registers: a cut leaves a line fewer, so it compares ``have`` (or ``have`` and the
        beat) with a line more, and no subtraction precedes a compare."""
        bytes_of = {1: head.bytes, 2: head.bytes << 1, 3: head.thrice}
        return Mux(cut, Mux(beat_in, have_beat < bytes_of[lines + 1], have < bytes_of[lines + 1]),
                   Mux(beat_in, have_beat < bytes_of[lines], have < bytes_of[lines]))
    m.d.sync += [
        fresh.eq(run_done | ~runs.r_rdy),
        more.eq(Mux(beat_in, taken + 1 != head.beats, taken != head.beats)),
        at_last.eq(Mux(cut, lines_cut + 1 == head.last_line, lines_cut == head.last_line)),
        short.eq(chosen(1)),
        twice.eq(chosen(2)),
    ]
    next_read = (read_at + head.bytes)[:pointer_bits]
    # the cut line's fields are registered in every cycle (no enable): only a valid one is used
    m.d.sync += [
        cut_d.valid.eq(cut),
        cut_d.at.eq(read_at),
        cut_d.keep.eq(byte_mask(m, head.bytes, line_bytes, "load_keep")),
        cut_d.meta.line.eq(head.line + lines_cut),
        cut_d.meta.acc.eq(head.to_acc),
        cut_d.meta.writes.eq(~head.no_lines),
        cut_d.meta.retires.eq(head.retires & run_done),
    ]
    with m.If(run_done):
        # the run's last line: whatever else its last beat held is not ours
        m.d.comb += runs.r_en.eq(1)
        m.d.sync += [have.eq(0), have_and_bus.eq(bus_bytes), taken.eq(0), lines_cut.eq(0),
                     first.eq(1),
                     read_at.eq(next_read), write_at.eq(next_read)]
    with m.Else():
        with m.If(beat_in):
            m.d.sync += [taken.eq(taken + 1), first.eq(0),
                         write_at.eq(write_at + bus_bytes - skip)]
        with m.If(cut):
            after_cut = Mux(beat_in, have_both, have_cut)
            m.d.sync += [have.eq(after_cut), have_and_bus.eq(after_cut + bus_bytes),
                         read_at.eq(next_read), lines_cut.eq(lines_cut + 1)]
        with m.Elif(beat_in):
            m.d.sync += [have.eq(have_beat), have_and_bus.eq(have_beat + bus_bytes)]

    # --- cycle t+1: the beat lands ---------------------------------------------------------
    # buffer byte j takes the beat's byte (j - beat_lane) mod bus_bytes when it is one of the
    # ``beat_keeps`` bytes from ``beat_at`` on (``lands``, worked out in cycle t)
    for j, byte in enumerate(buffer):
        with m.If(beat_d & lands[j]):
            if lane_bits:
                lane = (Const(j % bus_bytes, lane_bits) - beat_lane)[:lane_bits]
                m.d.sync += byte.eq(beat_data.word_select(lane, 8))
            else:
                m.d.sync += byte.eq(beat_data)
    m.d.sync += cut_e.eq(cut_d)

    # --- cycle t+2: the line's bytes are read, from its start rounded down to FINE_BYTES -------
    fine = min(FINE_BYTES, size)
    fine_bits = log2(fine)
    window = Signal((line_bytes + fine - 1) * 8)
    whole = Cat(*buffer, *buffer)
    coarse_at = cut_e.at[fine_bits:] if fine_bits < pointer_bits else Const(0, 1)
    m.d.sync += [
        window.eq((whole >> Cat(Const(0, 3 + fine_bits), coarse_at))[: len(window)]),
        cut_f.eq(cut_e),
    ]

    # --- cycle t+3: the rest of the move, the mask, the queue; the queue's head is written -------
    fine_at = cut_f.at[:fine_bits] if fine_bits else Const(0, 1)
    line = (window >> Cat(Const(0, 3), fine_at))[: line_bytes * 8]
    m.d.comb += [
        lines.w_en.eq(cut_f.valid),
        lines.pushed.data.eq(line & expand_bytes(cut_f.keep)),
        lines.pushed.meta.eq(cut_f.meta),
    ]
    out = lines.head
    written = Signal()
    with m.If(lines.r_rdy & ~out.meta.writes):
        m.d.comb += written.eq(1)
    with m.Elif(lines.r_rdy & out.meta.acc):
        m.d.comb += [unit.acc_write.req.valid.eq(1), written.eq(unit.acc_write.req.ready)]
    with m.Elif(lines.r_rdy):
        m.d.comb += [unit.spad_write.req.valid.eq(1), written.eq(unit.spad_write.req.ready)]
    m.d.comb += [
        lines.r_en.eq(written),
        unit.retired.eq(written & out.meta.retires),
        unit.spad_write.req.payload.addr.eq(out.meta.line),
        unit.spad_write.req.payload.data.eq(out.data[:spad_bits]),
        unit.spad_write.req.payload.mask.eq(-1),
        unit.acc_write.req.payload.addr.eq(out.meta.line),
        unit.acc_write.req.payload.data.eq(out.data[:acc_bits]),
        unit.acc_write.req.payload.mask.eq(-1),
    ]
    # registered: nothing was queued, cut or in flight in the last cycle, so nothing is now
    # (a run pushed in that cycle would be in ``runs.level`` now, a line cut then in ``cut_d``)
    m.d.sync += settled.eq((runs.level == 0) & resting & (in_flight == 0))


def registered_r(m, unit):
    """The ``ecp5`` target's R channel: an `ElasticBuffer` between the bus and the data half,
    so ``axi.rready`` is a register and the data half's decisions start from registered beats
    (one cycle later). The data half's take only moves the buffer's read pointer and count: no
    wide register's enable waits for its decision. Returns the buffer's output stream
    (``data``, ``resp``)."""
    axi = unit.axi
    layout = data.StructLayout({"data": unsigned(len(axi.rdata)), "resp": Response})
    m.submodules.r_slice = r_slice = ElasticBuffer(layout)
    m.d.comb += [
        r_slice.i.valid.eq(axi.rvalid),
        r_slice.i.payload.data.eq(axi.rdata),
        r_slice.i.payload.resp.eq(axi.rresp),
        axi.rready.eq(r_slice.i.ready),
    ]
    return r_slice.o


def take_beat(m, unit, runs, taken, have, beat=None, ready=None):
    """Both targets' R handshake: a beat of the head run is taken while the run has beats left
    and the bytes held do not make a line; a response other than OKAY sets ``error``. On
    ``ecp5`` the beat comes from ``beat`` (`registered_r`'s stream) and ``ready`` is the
    caller's (`gather_lines`: that rule from registers, and a beat alongside a cut)."""
    axi, head = unit.axi, runs.head
    valid, rready, resp = axi.rvalid, axi.rready, axi.rresp
    if beat is None:
        ready = runs.r_rdy & (taken != head.beats) & (have < head.bytes)
    else:
        valid, rready, resp = beat.valid, beat.ready, beat.payload.resp
    beat_in = Signal()
    m.d.comb += [
        rready.eq(ready),
        beat_in.eq(valid & rready),
    ]
    with m.If(beat_in & (resp != Response.OKAY)):
        m.d.sync += unit.error.eq(1)
    return beat_in

