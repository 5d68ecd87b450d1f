"""What the DMA's load and store units share: a row's and a run's byte geometry, byte masks,
taking a command, and typed queues (one whose head's narrow fields are registers, `HeldQueue`).

A *run* is what one burst plan covers: the whole tile when its rows lie back to back in DRAM
(`contiguous`), else one row. `transfer_runs` is the reference both units follow and the
benches check their bursts against.
"""

from __future__ import annotations

from amaranth import Array, Cat, Const, Elaboratable, Module, Mux, Shape, Signal, Value
from amaranth.lib import data
from amaranth.lib.fifo import SyncFIFO, SyncFIFOBuffered

from tensorforge.hw.axi import ADDR_BITS
from tensorforge.isa import FORMATS, Opcode

ROWS_BITS = next(f.bits for f in FORMATS[Opcode.LOAD] if f.name == "rows")


def log2(value: int) -> int:
    return value.bit_length() - 1


def beat_lane(address, bus_bytes: int):
    """The byte lane of ``address`` within its bus beat (0 on a one-byte bus)."""
    return address[: log2(bus_bytes)] if bus_bytes > 1 else 0


def beat_aligned(address, bus_bytes: int) -> Value:
    """``address`` rounded down to the start of its bus beat."""
    return address & ~Const(bus_bytes - 1, ADDR_BITS)


def span_beats(offset, byte_count, bus_bytes: int) -> Value:
    """Bus beats a span of ``byte_count`` bytes covers when it starts at byte lane ``offset`` of
    a beat (one beat for an empty span at a nonzero lane: callers that may see empty spans
    choose 0 for them)."""
    return (offset + byte_count + bus_bytes - 1) >> log2(bus_bytes)


class RowGeometry:
    """Byte geometry of one row: where it starts in DRAM, how many bytes, how many beats.

    ``row_bytes``, when given, is the row's byte count worked out ahead (a register), used
    instead of ``row_len`` cut to ``line_elems`` and shifted by ``elem_shift``."""

    def __init__(
        self, m: Module, bus_bytes: int, start, row_len, line_elems, elem_shift, line_bytes: int,
        row_bytes=None,
    ) -> None:
        if row_bytes is None:
            elems = Signal(range(line_elems + 1))
            m.d.comb += elems.eq(Mux(row_len > line_elems, line_elems, row_len))
            row_bytes = elems << elem_shift
        self.start = start
        self.bytes = Signal(range(line_bytes + 1))
        self.offset = Signal(range(bus_bytes))  # start's byte lane in its beat
        self.max_beats = line_bytes // bus_bytes + 2
        self.beats = Signal(range(self.max_beats + 1))
        self.aligned = Signal(ADDR_BITS)
        m.d.comb += [
            self.bytes.eq(row_bytes),
            self.offset.eq(beat_lane(start, bus_bytes)),
            self.aligned.eq(beat_aligned(start, bus_bytes)),
            self.beats.eq(span_beats(self.offset, self.bytes, bus_bytes)),
        ]


class RunGeometry:
    """Beats of the current run: the whole tile (``whole``, ``whole_bytes``) or ``row``.

    ``chosen_bytes``, when given, is that choice worked out ahead (a register): the run's bytes.
    """

    def __init__(
        self, m: Module, bus_bytes: int, row: RowGeometry, whole, whole_bytes, line_bytes: int,
        chosen_bytes=None,
    ) -> None:
        max_bytes = ((1 << ROWS_BITS) - 1) * line_bytes
        self.max_beats = -(-max_bytes // bus_bytes) + 1
        run_bytes = Signal(range(max_bytes + 1))
        self.beats = Signal(range(self.max_beats + 1))
        m.d.comb += [
            run_bytes.eq(Mux(whole, whole_bytes, row.bytes) if chosen_bytes is None
                         else chosen_bytes),
            self.beats.eq(Mux(run_bytes == 0, 0, span_beats(row.offset, run_bytes, bus_bytes))),
        ]


def contiguous(rows: int, row_len: int, stride: int, line_elems: int) -> bool:
    """Whether a tile's rows lie back to back in DRAM, so one burst plan covers them all."""
    return rows > 1 and 0 < row_len <= line_elems and stride == row_len


def transfer_runs(
    dram_addr: int, rows: int, row_len: int, stride: int, line_elems: int, elem_bytes: int
) -> list[tuple[int, int]]:
    """``(start, bytes)`` of each run of a LOAD or STORE that touches DRAM, in order: one for a
    `contiguous` tile, else one per row (cut to the line), none for empty rows."""
    length = min(row_len, line_elems) * elem_bytes
    if not length or not rows:
        return []
    if contiguous(rows, row_len, stride, line_elems):
        return [(dram_addr, rows * length)]
    return [(dram_addr + r * stride * elem_bytes, length) for r in range(rows)]


def byte_mask(m: Module, count, total: int, name: str) -> Signal:
    """``total`` bits, the low ``count`` of them set."""
    mask = Signal(total, name=name)
    m.d.comb += mask.eq(Cat(count > index for index in range(total)))
    return mask


def accept_command(m: Module, unit, insn, line, rows_left, row_addr, settled=1, room=1):
    """In a unit's IDLE state: take ``cmd`` (when there is ``room``) and latch its tile
    fields; returns the handshake.

    ``idle`` is ``settled``: a unit that takes its next command while the last one finishes
    is idle only once nothing is left in flight."""
    payload = unit.cmd.payload
    m.d.comb += [unit.idle.eq(settled), unit.cmd.ready.eq(room)]
    with m.If(unit.cmd.valid & room):
        m.d.sync += [
            insn.eq(payload),
            line.eq(payload.line),
            rows_left.eq(payload.rows),
            row_addr.eq(payload.dram_addr),
        ]
    return unit.cmd.valid & room


def expand_bytes(mask) -> Cat:
    """Each mask bit widened to a byte of ones."""
    return Cat(bit.replicate(8) for bit in mask)


def _typed_views(fifo, shape) -> None:
    if isinstance(shape, data.Layout):
        fifo.pushed, fifo.head = shape(fifo.w_data), shape(fifo.r_data)
    else:
        fifo.pushed, fifo.head = fifo.w_data, fifo.r_data


class Queue(SyncFIFO):
    """A `SyncFIFO` of one shape: ``pushed`` views ``w_data`` and ``head`` views ``r_data``."""

    def __init__(self, shape, depth: int) -> None:
        super().__init__(width=Shape.cast(shape).width, depth=depth)
        _typed_views(self, shape)


class RegisteredQueue(SyncFIFOBuffered):
    """`Queue` whose ``head`` is a register (one more cycle from push to head): no memory read
    sits between the read pointer and the logic that consumes the head."""

    def __init__(self, shape, depth: int) -> None:
        super().__init__(width=Shape.cast(shape).width, depth=depth)
        _typed_views(self, shape)


def ready_register(m: Module, fifo: SyncFIFO, name: str) -> Signal:
    """``fifo.r_rdy`` (it holds an entry) as a register, set from this cycle's level and
    handshakes, so logic deciding on it starts from a flip-flop, not from a compare of the
    level. The consumer reads (``r_en``) only while it is high; the read picks last, between
    two values worked out from the level beside it."""
    ready = Signal(name=name)
    wrote = fifo.w_en & fifo.w_rdy
    m.d.sync += ready.eq(Mux(fifo.r_en, (fifo.level > 1) | wrote, (fifo.level != 0) | wrote))
    return ready


def ring_next(pointer, depth: int):
    """The entry after ``pointer`` in a ring of ``depth`` entries (any depth, not only powers
    of two)."""
    return Mux(pointer == depth - 1, 0, pointer + 1)


def held_head(m: Module, head, tail, push, pop, entries: dict, empty=None) -> dict:
    """A queue's head entry in registers: each field in a register that always holds the entry
    ``head`` names, so what reads the head starts from flip-flops instead of from a
    ``depth``-way multiplexer (or a memory read) on ``head``.

    ``entries`` maps a field name to (its values per entry, the value a push writes). On a pop
    the registers take the entry after ``head`` (``head_after``, a register too); a push that
    lands on the entry they will hold gives them the pushed value instead. With ``empty``
    (the queue holds nothing, a register), the registers take the value offered at ``tail``
    whenever the entry they will hold is ``tail``'s, pushed or not (a free entry's value is
    never read), so ``push`` reaches none of them.
    """
    depth = len(next(iter(entries.values()))[0])
    after = Signal(range(depth), init=1 % depth, name="head_after")
    with m.If(pop):
        m.d.sync += after.eq(ring_next(after, depth))
    if empty is None:
        lands = push & (tail == Mux(pop, after, head))
    else:
        lands = Mux(pop, tail == after, empty)
    held = {}
    for name, (values, pushed) in entries.items():
        register = Signal(Value.cast(values[0]).shape(), name=f"head_{name}")
        following = Array(values)[after]
        m.d.sync += register.eq(Mux(lands, pushed, Mux(pop, following, register)))
        held[name] = register
    return held


class HeldQueue(Elaboratable):
    """`Queue` of a struct whose ``held`` fields (narrow: counts, flags) are read from
    registers: entries in flip-flops, and the head's in `held_head` registers, always the
    entry at the read pointer, with ``r_rdy`` a register too. The other fields (wide data)
    stay in a `Queue` (LUT RAM, asynchronous read) and come as before, in the same cycle: no
    latency is added, and logic that decides from the held fields whether to pop starts from
    flip-flops, not from the read pointer and a memory read. Same ports as `Queue`.

    The entry at the write pointer is free (the head's fields are in the held registers once
    it is the head, even when the queue is full), so it takes ``pushed`` in every cycle,
    pushed or not, as the held registers do when they would hold it: ``w_en`` enables none of
    them, only the pointers and the wide queue."""

    def __init__(self, shape: data.StructLayout, depth: int, held) -> None:
        self.depth, self.width = depth, shape.size
        self._held = tuple(held)
        self.w_data, self.w_en, self.w_rdy = Signal(shape.size), Signal(), Signal()
        self.r_en, self.r_rdy = Signal(), Signal()
        self.level = Signal(range(depth + 1))
        self.pushed, self.head = shape(self.w_data), Signal(shape)
        self.wide = Queue(data.StructLayout(
            {name: field.shape for name, field in shape if name not in self._held}), depth)

    def elaborate(self, platform) -> Module:
        m = Module()
        m.submodules.wide = wide = self.wide
        depth = self.depth
        push, pop = self.w_en & self.w_rdy, self.r_en & self.r_rdy
        m.d.comb += [wide.w_en.eq(self.w_en), wide.r_en.eq(self.r_en),
                     self.w_rdy.eq(wide.w_rdy), self.level.eq(wide.level)]
        for name, _ in wide.head.shape():
            m.d.comb += [wide.pushed[name].eq(self.pushed[name]),
                         self.head[name].eq(wide.head[name])]
        m.d.sync += self.r_rdy.eq(Mux(push, 1, Mux(pop, wide.level != 1, self.r_rdy)))

        head, tail = Signal(range(depth), name="head_at"), Signal(range(depth), name="tail")
        with m.If(push):
            m.d.sync += tail.eq(ring_next(tail, depth))
        with m.If(pop):
            m.d.sync += head.eq(ring_next(head, depth))
        entries = {}
        for name in self._held:
            values = [Signal.like(self.pushed[name], name=f"entry{i}_{name}")
                      for i in range(depth)]
            for i, value in enumerate(values):
                with m.If(tail == i):
                    m.d.sync += value.eq(self.pushed[name])
            entries[name] = (values, self.pushed[name])
        held = held_head(m, head, tail, push, pop, entries, empty=~self.r_rdy)
        for name, register in held.items():
            m.d.comb += self.head[name].eq(register)
        return m
