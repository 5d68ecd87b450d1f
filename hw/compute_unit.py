"""The COMPUTE unit: walks a COMPUTE instruction's micro-loop over the PE array.

Three walkers go over the same ``for o < outer: for i < inner:`` steps, each at its own pace:

* the *stationary* walker reads the stationary block (`ArrayPlan.stationary`) into a bank of the
  PE stores, unless a bank already holds that block (so weights stay put while ``b_inner == 0``
  under ``ws``); loading one bank overlaps the beats that compute on another;
* the *stream* walker reads the streamed lines and feeds one beat per cycle into the array once
  the step's stationary block is in;
* the *accumulator* walker reads the C lines the array will produce (for the read-modify-write),
  never a line that is still waiting for its write (read-after-write across steps), except on
  the steps the instruction's ``overwrite`` bit picks (`isa.Compute.overwrites`), which read
  nothing.

The writer adds each output line of the array to its old C line and writes it back (or writes
it as is, on an overwriting step); when it cannot (old line not back, write port stalled, a
ZERO writing) it freezes the whole array. ZERO instructions only write zero lines. With
``output_pipeline`` the writer also takes the max (`isa.Reduction.MAX`): it writes the larger
of each lane and its old value instead of their sum, a comparator beside the adder; nothing
else changes, since every dataflow whose PEs hand out each step's outputs sees each product
there once (``os`` sums steps inside the PEs: the compiler rejects it for a max).

Each walker keeps its own copy of the instruction and takes the next one as soon as it is done
with its part of the current one, so back-to-back COMPUTE instructions do not drain the array
between them: the next one's stationary block loads while the last one's beats stream, and its
beats follow the last one's without a gap. Instructions retire in order (``retired``).
"""

from __future__ import annotations

from amaranth import Array, Module, Mux, Signal
from amaranth.hdl import EnableInserter
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFO, SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from tensorforge import isa
from tensorforge.config import AcceleratorConfig
from tensorforge.hw.dataflow_plan import Operand, plan_for
from tensorforge.hw.dma_rows import held_head, ready_register, ring_next
from tensorforge.hw.pe_array import PEArray, array_latency, bank_reuse_gap
from tensorforge.hw.ports import (
    ACC_ADDR_BITS,
    SPAD_ADDR_BITS,
    acc_read_port,
    acc_write_port,
    instruction_layout,
    spad_read_port,
)
from tensorforge.hw.skid import SkidBuffer
from tensorforge.hw.targets import Target, parse_target

#: Read requests each walker keeps in flight: enough for one beat per cycle from a memory that
#: answers up to ``OUTSTANDING - 1`` cycles after the request.
OUTSTANDING = 4
SEQ_BITS = 16
#: Step counters, compared modulo 2**STEP_BITS: a load never waits for more than the few steps
#: queued ahead of it.
STEP_BITS = 8


#: The decoded micro-loop, latched with the instruction so that decode (subtractions, compares)
#: never shares a clock period with the walkers' address arithmetic.
LOOP_LAYOUT = data.StructLayout({"zero": 1, "empty": 1, "last_outer": 11, "last_inner": 11})


def decode_loop(loop, fields) -> list:
    """Assignments of the `LOOP_LAYOUT` view ``loop`` from the COMPUTE instruction ``fields``."""
    return [loop.zero.eq(fields.mode == isa.ComputeMode.ZERO),
            loop.empty.eq((fields.outer == 0) | (fields.inner == 0)),
            loop.last_outer.eq(fields.outer - 1), loop.last_inner.eq(fields.inner - 1)]


class _Walk:
    """One pass over the micro-loop: step counters and the addresses each step names.

    ``lookahead`` (with ``registered``): ``next_addr`` is a register too, kept equal to the
    next step's address (it is the address the walk takes on ``advance``), so a compare on it
    starts from flip-flops instead of from an adder and a multiplexer; the loop-end flags are
    computed from count-down registers (`_loop_ends_ahead`), not from an adder and a compare.
    """

    def __init__(self, m: Module, name: str, loop, operands: dict[str, tuple], bits: int,
                 registered: bool = False, lookahead: bool = False):
        self.advance = Signal(name=f"{name}_advance")
        self.done = Signal(name=f"{name}_done", init=1)
        self.start = Signal(name=f"{name}_start")
        outer_index = Signal(11, name=f"{name}_o")
        inner_index = Signal(11, name=f"{name}_i")
        if registered:  # the compares a step ahead, in registers
            self.last_inner = last_inner = Signal(name=f"{name}_last_i")
            last_outer = Signal(name=f"{name}_last_o")
            # the values last_inner and (with last_inner) last_outer take on advance
            if lookahead:
                self.last_inner_after, last_outer_after = _loop_ends_ahead(
                    m, name, loop, self.start, self.advance, last_inner)
            else:
                self.last_inner_after = Mux(last_inner, loop.last_inner == 0,
                                            inner_index + 1 == loop.last_inner)
                last_outer_after = outer_index + 1 == loop.last_outer
            with m.If(self.start):
                m.d.sync += [last_inner.eq(loop.last_inner == 0),
                             last_outer.eq(loop.last_outer == 0)]
            with m.Elif(self.advance):
                m.d.sync += last_inner.eq(self.last_inner_after)
                with m.If(last_inner):
                    m.d.sync += last_outer.eq(last_outer_after)
            self.last_step = last_inner & last_outer
        else:
            self.last_inner = last_inner = inner_index == loop.last_inner
            self.last_step = last_inner & (outer_index == loop.last_outer)
        self.first_outer = outer_index == 0
        self.first_step = self.first_outer & (inner_index == 0)
        self.addr, self.next_addr = {}, {}
        for operand, (base, outer, inner) in operands.items():
            row = Signal(bits, name=f"{name}_{operand}_row")
            addr = Signal(bits, name=f"{name}_{operand}_addr")
            following = Signal(bits, name=f"{name}_{operand}_next")
            if lookahead:  # ``following`` a register: the sums of the step after it
                with m.If(self.start):
                    m.d.sync += following.eq(Mux(loop.last_inner == 0, base + outer,
                                                 base + inner))
                with m.Elif(self.advance):  # the new row is ``following`` when last_inner
                    m.d.sync += following.eq(Mux(self.last_inner_after,
                                                 Mux(last_inner, following, row) + outer,
                                                 following + inner))
            else:
                m.d.comb += following.eq(Mux(last_inner, row + outer, addr + inner))
            with m.If(self.start):
                m.d.sync += [row.eq(base), addr.eq(base)]
            with m.Elif(self.advance):
                m.d.sync += addr.eq(following)
                with m.If(last_inner):
                    m.d.sync += row.eq(row + outer)
            self.addr[operand], self.next_addr[operand] = addr, following
        with m.If(self.start):
            m.d.sync += [outer_index.eq(0), inner_index.eq(0),
                         self.done.eq(loop.empty)]
        with m.Elif(self.advance):
            m.d.sync += inner_index.eq(Mux(last_inner, 0, inner_index + 1))
            with m.If(last_inner):
                m.d.sync += outer_index.eq(outer_index + 1)
            with m.If(self.last_step):
                m.d.sync += self.done.eq(1)


def _loop_ends_ahead(m: Module, name: str, loop, start, advance, last_inner) -> tuple:
    """`_Walk` ``lookahead``: (the value ``last_inner`` takes on ``advance``, the value
    ``last_outer`` takes on an ``advance`` that ends an inner loop), each from registers:
    steps left in each loop count down, and whether one step is left is itself a register,
    so no adder or 11-bit compare lies before the walk's registers."""
    inner_left = Signal(11, name=f"{name}_i_left")
    outer_left = Signal(11, name=f"{name}_o_left")
    inner_penult = Signal(name=f"{name}_i_penult")  # inner_left == 1
    outer_penult = Signal(name=f"{name}_o_penult")  # outer_left == 1
    single_inner = Signal(name=f"{name}_single_i")  # loop.last_inner == 0
    with m.If(start):
        m.d.sync += [inner_left.eq(loop.last_inner), outer_left.eq(loop.last_outer),
                     inner_penult.eq(loop.last_inner == 1),
                     outer_penult.eq(loop.last_outer == 1),
                     single_inner.eq(loop.last_inner == 0)]
    with m.Elif(advance):
        m.d.sync += [inner_left.eq(Mux(last_inner, loop.last_inner, inner_left - 1)),
                     inner_penult.eq(Mux(last_inner, loop.last_inner == 1, inner_left == 2))]
        with m.If(last_inner):
            m.d.sync += [outer_left.eq(outer_left - 1), outer_penult.eq(outer_left == 2)]
    return Mux(last_inner, single_inner, inner_penult), outer_penult


class _LineCounts:
    """C lines read for the writer (``issued``) and written back, counted modulo a power of two
    above the writer's depth (never more lines than that are in between)."""

    def __init__(self, m: Module, push, pop, depth: int, enabled: bool = False) -> None:
        bits = depth.bit_length() + 1
        self.issued = Signal(bits, name="lines_issued")
        self.written = Signal(bits, name="lines_written")
        if enabled:  # push and pop as clock enables: the handshakes reach no adder
            with m.If(push):
                m.d.sync += self.issued.eq(self.issued + 1)
            with m.If(pop):
                m.d.sync += self.written.eq(self.written + 1)
        else:
            m.d.sync += [self.issued.eq(self.issued + push), self.written.eq(self.written + pop)]


class _IssueRegister:
    """The ``registered_control`` accumulator walker's two-deep queue: the C line it requests
    next, in registers with whether it must wait for a pending write (``hazard``) and whether
    the pending queue is full, so the request and the walker's advance start from flip-flops
    instead of from the compare of the walker's line against every pending entry.

    The walker moves its line (``line``) in (``load``) whenever the skid entry is free
    (``room``, a register), so its advance never waits on the request's handshake: the line goes
    straight into the issue register when that is free or frees in that cycle (``takes``), else
    into the skid entry, which moves on first when the register next takes. A line's hazard is
    decided as it enters the register, against the pending entries that stay after that cycle
    (the entry at ``head`` leaves on a ``pop``) plus the line pushed in it, so a read goes in
    the cycle after the write it waited for, as without the register.

    Lines are compared on their low ``line_bits`` only, the bits the accumulator's memory
    decodes (`AcceleratorConfig.acc_address_bits`): two addresses equal there are the same
    line.
    """

    def __init__(self, m: Module, line, overwrites, pending: list, pending_valid, head, push,
                 pop, line_bits: int) -> None:
        depth = len(pending)
        self.load = Signal(name="issue_load")
        self.fire = Signal(name="issue_fire")  # the line leaves: read, pushed or zeroed
        self.valid = Signal(name="issue_valid")
        self.addr = Signal(len(line), name="issue_addr")
        self.overwrites = Signal(name="issue_overwrites")
        self.hazard = Signal(name="issue_hazard")
        self.full = Signal(name="pending_full")
        self.push = push
        self.takes = ~self.valid | self.fire
        skid_valid = Signal(name="issue_skid_valid")
        skid_addr = Signal(len(line), name="issue_skid_addr")
        skid_overwrites = Signal(name="issue_skid_overwrites")
        self.room = ~skid_valid
        self.busy = self.valid | skid_valid

        def same(one, other):
            return one[:line_bits] == other[:line_bits]

        def matches(address):
            """A pending entry that stays holds ``address``: the compares start from registers
            and the late ``pop`` only picks between the matches with and without ``head``."""
            hits = [pending_valid[i] & same(pending[i], address) for i in range(depth)]
            staying = [hit & (head != i) for i, hit in enumerate(hits)]
            return Mux(pop, any_of(staying), any_of(hits))

        entering = Mux(skid_valid, skid_addr, line)  # the skid entry's line goes first
        # each candidate compared on its own, so no multiplexer precedes the compares
        entering_hazard = Mux(skid_valid, matches(skid_addr) | (push & same(skid_addr, self.addr)),
                              matches(line) | (push & same(line, self.addr)))
        with m.If(self.takes & (skid_valid | self.load)):
            m.d.sync += [self.valid.eq(1), self.addr.eq(entering),
                         self.overwrites.eq(Mux(skid_valid, skid_overwrites, overwrites)),
                         self.hazard.eq(entering_hazard)]
        with m.Else():
            m.d.sync += self.hazard.eq(matches(self.addr))
            with m.If(self.fire):
                m.d.sync += self.valid.eq(0)
        with m.If(skid_valid & self.takes):
            m.d.sync += skid_valid.eq(0)
        with m.Elif(self.load & ~self.takes):  # ``load`` only while the skid entry is free
            m.d.sync += [skid_valid.eq(1), skid_addr.eq(line), skid_overwrites.eq(overwrites)]
        used = Signal(range(depth + 1), name="pending_used")
        self.empty = Signal(init=1, name="pending_empty")
        with m.If(push & ~pop):
            m.d.sync += [used.eq(used + 1), self.full.eq(used == depth - 1), self.empty.eq(0)]
        with m.Elif(pop & ~push):
            m.d.sync += [used.eq(used - 1), self.full.eq(0), self.empty.eq(used == 1)]

    def request(self, m: Module, zero_mode, read, write) -> None:
        """Drives the line's request: a ZERO write on ``write``, a push of an overwriting
        line, or an old-line read on ``read`` (a stream)."""
        with m.If(self.valid & zero_mode):
            m.d.comb += [write.valid.eq(1), write.payload.addr.eq(self.addr),
                         write.payload.mask.eq(-1), self.fire.eq(write.ready)]
        with m.Elif(self.valid & self.overwrites):  # no old line to read (nor to wait for)
            m.d.comb += [self.push.eq(~self.full), self.fire.eq(~self.full)]
        with m.Elif(self.valid):
            m.d.comb += [read.valid.eq(~self.hazard & ~self.full), read.payload.eq(self.addr)]
            with m.If(read.valid & read.ready):
                m.d.comb += [self.push.eq(1), self.fire.eq(1)]


class _Latch:
    """One walker's copy of the instruction it walks, so each walker can start the next
    instruction as soon as it is done with its part of the last one (``kick``: the cycle after
    it took it; ``kick_mac``: the same for MAC, which the operand walkers skip ZERO for)."""

    def __init__(self, name: str, output_pipeline: bool) -> None:
        self.instr = Signal(instruction_layout(isa.Opcode.COMPUTE, output_pipeline),
                            name=f"{name}_instr")
        self.loop = Signal(LOOP_LAYOUT, name=f"{name}_loop")
        self.kick = Signal(name=f"{name}_kick")
        self.kick_mac = self.kick & ~self.loop.zero


def _at_last(m: Module, index, count, moves, name: str, restart=None) -> Signal:
    """Whether ``index`` is at ``count - 1``, as a register worked out a move ahead, so the
    decisions on it start from a flip-flop instead of an adder and a compare. ``index`` moves
    on ``moves`` only, by one and to 0 after ``count - 1``, and is 0 after ``restart``."""
    last = Signal(init=isinstance(count, int) and count == 1, name=name)
    following = Mux(last, count == 1, index + 1 == count - 1)
    if restart is None:
        with m.If(moves):
            m.d.sync += last.eq(following)
    else:
        with m.If(restart):
            m.d.sync += last.eq(count == 1)
        with m.Elif(moves):
            m.d.sync += last.eq(following)
    return last


def _issue_flags(m: Module, line, meta: SyncFIFO, steps: SyncFIFO, lines: int) -> tuple:
    """The ``registered_control`` stationary walker's request conditions, each a register:
    (``line`` is the block's last, ``meta`` has room, ``steps`` has room).

    Room is decided a cycle early from the levels alone: a FIFO below ``depth - 1`` entries
    still has room after any one write, so the flag never says room that is not there (each
    FIFO takes at most one write a cycle) and gives up one entry, which the caller adds.
    ``last_line`` follows ``line``, which moves only on a request (``meta.w_en``) and wraps
    to 0 after the block's last line.
    """
    meta_room, steps_room = Signal(name="load_meta_room"), Signal(name="load_steps_room")
    m.d.sync += [meta_room.eq(meta.level < meta.depth - 1),
                 steps_room.eq(steps.level < steps.depth - 1)]
    last_line = _at_last(m, line, lines, meta.w_en, "load_last_line")
    return last_line, meta_room, steps_room


def _tag_match(m: Module, tags: list, tag_valid: list, address) -> tuple:
    """(a bank holds ``address``, the last such bank) from the PE store banks' tags."""
    hit, bank = Signal(), Signal(range(len(tags)))
    for b in range(len(tags)):
        with m.If(tag_valid[b] & (tags[b] == address)):
            m.d.comb += [hit.eq(1), bank.eq(b)]
    return hit, bank


def all_of(values: list):
    result = values[0]
    for value in values[1:]:
        result = result & value
    return result


def any_of(values: list):
    result = values[0]
    for value in values[1:]:
        result = result | value
    return result


def step_latency(config: AcceleratorConfig, read_latency: int = 1) -> int:
    """Cycles from the edge that accepts a one-step MAC COMPUTE (outer = inner = 1) to the
    first cycle with ``idle`` high again.

    Assumes memories that never stall and answer ``read_latency`` cycles after a request
    (``read_latency <= OUTSTANDING - 1``): the stationary lines stream in one per cycle, then
    the beats one per cycle, then the array drains the last group and the writer writes its
    lines one per cycle.
    """
    plan = plan_for(config)
    return (
        1  # the instruction waits, decoded, for the walkers
        + 1  # each walker latches its own copy and starts from it
        + 1  # the stationary walker picks a bank
        + plan.stationary_lines  # stationary lines requested one per cycle
        + 1  # the step, queued with its last request, reaches the stream walker
        + read_latency  # its first streamed line comes back (the block is in by then)
        + len(plan.beats)  # one beat per cycle
        + array_latency(config) - 1  # the last group's first line leaves the array
        + plan.lines_per_group  # its lines are written one per cycle
        + 1  # idle is a register
    )


class ComputeUnit(wiring.Component):
    """Executes COMPUTE instructions on the PE array of ``config``.

    Contract: ``cmd`` is accepted whenever no earlier instruction still waits for a walker (one
    instruction is held, decoded, until all three have taken it), so the next instruction can
    be accepted while the last one computes. ``retired`` pulses once per instruction, in order,
    in the cycle after its last C line was written; ``idle`` is high when every accepted
    instruction has retired. Steady state: one beat per cycle, i.e. one MAC step every
    ``len(plan.beats)`` cycles, across steps and instructions, while the memories keep up (the
    stationary block of the next step is written behind the last beat of the step before, so
    two PE store banks suffice). One isolated step takes `step_latency` cycles (``step_latency``
    attribute: with 1-cycle reads). Reads are answered in order, one response per request
    (``ports`` module contract).

    ``registered_control`` (default: the ``ecp5`` target) keeps the control's decisions a
    few nets from the flip-flops they start from, for timing closure; same results:

    * the array's lines queue for the writer (`_queued_array_lines`: a cycle later);
    * the writer's pending-queue head entry (valid, overwrite, MAX, address) is held in
      registers, so ``acc_write.req`` and the sum start from flip-flops, not from a
      ``depth``-way multiplexer on the head pointer;
    * ``acc_read.req`` leaves through a `SkidBuffer` (a cycle later; valid, payload and the
      walker's ``ready`` are registers);
    * the stationary walker decides from registers: the tag match of the step it holds next
      cycle (both the current and the next address matched in parallel, the next address a
      register of `_Walk`'s ``lookahead``), so it still reuses a held block every cycle, and
      while a block loads, whether the step after it needs a block of its own, so the next
      load starts at the last line's request (a cycle later when a block has a single line).
      It requests a line from registers too: whether the line is the block's last, and
      whether its two queues have room, known a cycle early (`_issue_flags`; each queue one
      entry deeper, so as many lines stay in flight);
    * the stream walker requests from registers (`_stream_flags`: the step's last beat, the
      steps queue not empty, room in its queue a cycle early, one entry deeper);
    * both walkers' queues of reads in flight hand out their head from a register
      (`_meta_queue`), so an answer is taken a cycle later at the earliest: an isolated step
      takes one cycle more (28 cycles on a 4x4 ws);
    * ``idle`` rises a cycle late (it still falls in the cycle after an accept);
    * the accumulator walker requests each C line from a one-deep queue (`_IssueRegister`):
      the line, its overwrite flag, its hazard against the pending writes (decided a cycle
      early) and whether the pending queue is full are registers, so the read, the push and
      the walker's advance never follow the compare of a line against the pending entries (a
      C read leaves one cycle later again; the walker takes its next instruction once its
      last line has left the queue). Whether a line ends its step and whether the pending
      queue is empty are registers too, and ``acc_read.resp.ready`` is always high (the old
      lines never outnumber the pending entries, so they always have room).

    An isolated step takes a few cycles more than `step_latency` (28 against 25 on a 4x4 ws).
    """

    def __init__(self, config: AcceleratorConfig, target: Target | str = Target.GENERIC,
                 registered_control: bool | None = None) -> None:
        self.config = config
        self.target = parse_target(target)
        self.registered_control = (self.target is Target.ECP5 if registered_control is None
                                   else registered_control)
        # scratchpad reads kept in flight per walker: the ECP5 scratchpad answers a cycle later
        # than OUTSTANDING covers (its request register, registered row and registered data)
        self.spad_outstanding = OUTSTANDING + int(self.registered_control)
        self.step_latency = step_latency(config)
        super().__init__(
            {
                "cmd": In(stream.Signature(
                    instruction_layout(isa.Opcode.COMPUTE, config.output_pipeline))),
                "idle": Out(1, init=1),
                "busy": Out(1),
                "retired": Out(1),
                "stall": Out(1),
                "a_read": Out(spad_read_port(config)),
                "b_read": Out(spad_read_port(config)),
                "acc_read": Out(acc_read_port(config)),
                "acc_write": Out(acc_write_port(config)),
            }
        )

    def elaborate(self, platform) -> Module:
        m = Module()
        config = self.config
        self.array = array = PEArray(config, self.target)
        self.plan, self.banks = array.plan, array.banks
        self.freeze = freeze = Signal()
        m.submodules.array = EnableInserter(~freeze)(array)
        if self.target is Target.ECP5:  # the DSPs' clock enable: the inserter stops at them
            m.d.comb += array.advance.eq(~freeze)

        self.latches = latches = {name: _Latch(name, config.output_pipeline)
                                  for name in ("load", "stream", "acc")}
        load_free = self._stationary_walker(m, latches["load"])
        stream_free, stream_drained = self._stream_walker(m, latches["stream"])
        acc_free, pending_empty, lines = self._accumulator_walker_and_writer(m, latches["acc"])
        marks_empty = self._retirement(m, latches["acc"], acc_free, lines)

        # the next instruction, decoded, until each walker has taken it
        upcoming = Signal(instruction_layout(isa.Opcode.COMPUTE, config.output_pipeline))
        upcoming_loop = Signal(LOOP_LAYOUT)
        upcoming_valid = Signal()
        free = {"load": load_free, "stream": stream_free,
                "acc": acc_free & self.marks.w_rdy & (~upcoming_loop.zero | pending_empty)}
        taken = {name: Signal(name=f"{name}_took") for name in latches}
        takes = {name: upcoming_valid & ~taken[name] & free[name] for name in latches}
        accept = self.cmd.valid & ~upcoming_valid
        m.d.comb += self.cmd.ready.eq(~upcoming_valid)
        with m.If(accept):
            m.d.sync += [upcoming.eq(self.cmd.payload), upcoming_valid.eq(1),
                         *decode_loop(upcoming_loop, self.cmd.payload),
                         *[flag.eq(0) for flag in taken.values()]]
        with m.Elif(upcoming_valid & all_of([taken[n] | takes[n] for n in latches])):
            m.d.sync += upcoming_valid.eq(0)
        for name, latch in latches.items():
            m.d.sync += latch.kick.eq(takes[name])
            with m.If(takes[name]):
                m.d.sync += [latch.instr.eq(upcoming), latch.loop.eq(upcoming_loop),
                             taken[name].eq(1)]

        kicking = any_of([latch.kick for latch in latches.values()])
        settled = ~upcoming_valid & ~kicking & load_free & stream_drained & acc_free & marks_empty
        if self.registered_control:  # a cycle late, except that it falls with an accept
            was_settled = Signal(init=1)
            m.d.sync += was_settled.eq(settled)
            settled = was_settled & ~upcoming_valid
        m.d.comb += self.idle.eq(settled)
        m.d.comb += self.busy.eq(~self.idle)
        waiting = [port.req.valid & ~port.req.ready
                   for port in (self.a_read, self.b_read, self.acc_read)]
        m.d.comb += self.stall.eq(self.busy & (freeze | waiting[0] | waiting[1] | waiting[2]))
        return m

    def _queued_array_lines(self, m: Module):
        """The ``ecp5`` target's array output: lines queue for the writer, and the array
        freezes on a register (the queue may not have room next cycle) instead of on the
        writer's decision in the same cycle, which reached every register of the array in
        one clock period. Each line reaches the writer a cycle later. Returns the queue's
        read side as a stream (``valid``, ``payload``, ``ready``)."""
        array, depth = self.array, 4
        layout = array.out.payload.shape()
        queue = m.submodules.array_lines = SyncFIFO(width=layout.size, depth=depth)
        entering = array.out.valid & ~self.freeze
        m.d.comb += [queue.w_en.eq(entering), queue.w_data.eq(array.out.payload)]
        # room for a line now unless the queue may fill: ``level`` falls by at most one
        m.d.sync += self.freeze.eq(queue.level + entering >= depth - 1)
        lines = stream.Signature(layout).create()
        # ``valid`` a register (`ready_register`): the writer's request starts from flip-flops
        m.d.comb += [lines.valid.eq(ready_register(m, queue, "array_lines_ready")),
                     lines.payload.eq(queue.r_data),
                     queue.r_en.eq(lines.ready)]
        return lines

    def _retirement(self, m: Module, latch, acc_free, lines):
        """Pulses ``retired`` once per instruction, in order, when its last C line is written.

        When the accumulator walker has issued an instruction's last read it records how many
        lines the writer must then have written (a *mark*); the instruction retires when the
        writer's count reaches its mark. Returns ``no instruction waits to retire``.
        """
        self.marks = marks = SyncFIFO(width=len(lines.issued), depth=4)
        m.submodules.retire_marks = marks
        marked = Signal(init=1)  # the walker's instruction has its mark
        with m.If(latch.kick):
            m.d.sync += marked.eq(0)
        with m.Elif(acc_free & ~marked):
            m.d.sync += marked.eq(1)
            m.d.comb += [marks.w_en.eq(1), marks.w_data.eq(lines.issued)]
        m.d.comb += [self.retired.eq(marks.r_rdy & (lines.written == marks.r_data)),
                     marks.r_en.eq(self.retired)]
        return ~marks.r_rdy & marked

    def _meta_queue(self, width: int, depth: int):
        """A walker's queue of what each read in flight is for. Under ``registered_control``
        its head is a register (`SyncFIFOBuffered`: readable a cycle later, well before the
        read's answer), so the response side decides from flip-flops, not a LUT RAM read."""
        if self.registered_control:
            return SyncFIFOBuffered(width=width, depth=depth)
        return SyncFIFO(width=width, depth=depth)

    @staticmethod
    def _operand_fields(instr, operand: Operand) -> tuple:
        if operand is Operand.A:
            return instr.a_base, instr.a_outer, instr.a_inner
        return instr.b_base, instr.b_outer, instr.b_inner

    def _stationary_walker(self, m: Module, latch):
        """Reads each step's stationary block into a bank, unless a bank already holds it.

        Banks are taken round robin. A block's lines are requested at once, but each line is
        written into its bank only after every step queued on that bank before has taken its
        last beat (``after`` against ``finished_steps``), and `bank_reuse_gap` later: two banks
        then keep one beat per cycle even when the block changes every step. The next block is
        chosen in the cycle the current one's last line is requested, so loads go back to back.
        """
        plan, banks, array, freeze = self.plan, self.banks, self.array, self.freeze
        port = {Operand.A: self.a_read, Operand.B: self.b_read}[plan.stationary]
        walk = _Walk(m, "load", latch.loop,
                     {"s": self._operand_fields(latch.instr, plan.stationary)}, SPAD_ADDR_BITS,
                     self.registered_control, lookahead=self.registered_control)
        tags = [Signal(SPAD_ADDR_BITS, name=f"tag_{b}") for b in range(banks)]
        tag_valid = [Signal(name=f"tag_valid_{b}") for b in range(banks)]
        ready_seq = [Signal(SEQ_BITS, name=f"ready_seq_{b}") for b in range(banks)]
        self.cooling_cycles = max(0, bank_reuse_gap(self.config) - 1)
        self.cooling = [Signal(range(self.cooling_cycles + 1), name=f"cooling_{b}")
                        for b in range(banks)]
        enqueued_steps = Signal(STEP_BITS)  # steps handed to the stream walker
        self.finished_steps = Signal(STEP_BITS)  # ... whose last beat entered the array
        last_use = [Signal(STEP_BITS, name=f"last_use_{b}") for b in range(banks)]
        in_use = [Signal(name=f"in_use_{b}") for b in range(banks)]  # last_use not finished
        load_after = Signal(STEP_BITS)  # steps that must finish before this block is written
        load_waits = Signal()
        victim = Signal(range(banks))
        issued_seq = Signal(SEQ_BITS)  # stationary lines requested so far
        self.loaded_seq = loaded_seq = Signal(SEQ_BITS)  # ... and written into the PE stores
        line = Signal(range(max(plan.stationary_lines, 2)))
        # the line to request, a register (block address + line): no adder before the bank decode
        line_addr = Signal(SPAD_ADDR_BITS)
        loading = Signal()
        bank = Signal(range(banks))
        entry = data.StructLayout({"bank": range(banks), "ready": SEQ_BITS})
        # registered_control: room is known a cycle early, for one entry less: one more each
        spare = int(self.registered_control)
        self.steps = steps = SyncFIFO(width=entry.size, depth=4 + spare)
        meta_layout = data.StructLayout({"bank": range(banks), "index": range(max(
            plan.stationary_lines, 2)), "after": STEP_BITS, "waits": 1})
        meta = self._meta_queue(meta_layout.size, self.spad_outstanding + spare)
        m.submodules.steps, m.submodules.load_meta = steps, meta
        self.step_entry = entry
        step_in = Signal(entry)
        meta_in, meta_out = Signal(meta_layout), data.View(meta_layout, meta.r_data)
        m.d.comb += [steps.w_data.eq(step_in), meta.w_data.eq(meta_in),
                     walk.start.eq(latch.kick_mac)]

        # this cycle's line request, and whether it is the block's last
        if self.registered_control:
            last_line, meta_room, steps_room = _issue_flags(m, line, meta, steps,
                                                            plan.stationary_lines)
        else:
            last_line = line == plan.stationary_lines - 1
            meta_room, steps_room = meta.w_rdy, steps.w_rdy
        requested, finishing = Signal(), Signal()
        with m.If(loading):
            m.d.comb += [port.req.valid.eq(meta_room & (~last_line | steps_room)),
                         port.req.payload.eq(line_addr),
                         meta_in.bank.eq(bank), meta_in.index.eq(line),
                         meta_in.after.eq(load_after), meta_in.waits.eq(load_waits),
                         requested.eq(port.req.valid & port.req.ready),
                         meta.w_en.eq(requested), finishing.eq(requested & last_line)]
        with m.If(requested):
            m.d.sync += [issued_seq.eq(issued_seq + 1), line.eq(line + 1),
                         line_addr.eq(line_addr + 1)]
        with m.If(finishing):
            m.d.sync += [loading.eq(0), line.eq(0)]
            m.d.comb += [steps.w_en.eq(1), walk.advance.eq(1), step_in.bank.eq(bank),
                         step_in.ready.eq(issued_seq + 1)]

        def load_block(address, ready):
            """Starts loading the block at ``address`` into the next bank (``victim``), whose
            lines are all requested once ``issued_seq`` reaches ``ready``."""
            m.d.sync += [loading.eq(1), line.eq(0), line_addr.eq(address), bank.eq(victim),
                         victim.eq(ring_next(victim, banks))]
            for b in range(banks):
                with m.If(victim == b):
                    m.d.sync += [tags[b].eq(address), tag_valid[b].eq(1),
                                 load_after.eq(last_use[b]), load_waits.eq(in_use[b]),
                                 ready_seq[b].eq(ready)]

        if self.registered_control:
            # every decision from registers (no compare, adder or FIFO level between them):
            # the tag match of the step the walk holds next cycle, registered (``held_hit`` /
            # ``held_miss``; both candidates matched in parallel, ``next_addr`` a register;
            # neither is set in the cycle after a load was decided, whose tag it misses), and
            # while a block loads, whether the step after it needs a block of its own (``chain``)
            stay_hit, stay_bank = _tag_match(m, tags, tag_valid, walk.addr["s"])
            move_hit, move_bank = _tag_match(m, tags, tag_valid, walk.next_addr["s"])
            held_hit, held_bank = Signal(name="held_hit"), Signal(range(banks), name="held_bank")
            held_miss = Signal(name="held_miss")
            chain = Signal(name="load_chain")  # at the block's last request: load the next
            new_load, reuse = Signal(name="load_new"), Signal(name="load_reuse")
            deciding = ~loading & ~walk.done  # (done is high while kicked)
            m.d.comb += [reuse.eq(deciding & held_hit & steps_room),
                         new_load.eq(Mux(loading, finishing & chain, deciding & held_miss))]
            matched = Mux(walk.advance, move_hit, stay_hit)
            # after a kick every tag is invalid: a miss, known at once
            m.d.sync += [held_hit.eq(~new_load & ~latch.kick_mac & matched),
                         held_miss.eq(~new_load & (latch.kick_mac | ~matched)),
                         held_bank.eq(Mux(walk.advance, move_bank, stay_bank)),
                         chain.eq(loading & ~new_load & ~move_hit & ~walk.last_step)]
            candidate = Mux(loading, walk.next_addr["s"], walk.addr["s"])
            with m.If(latch.kick_mac):
                m.d.sync += [valid.eq(0) for valid in tag_valid]
            with m.Elif(reuse):  # held (or being loaded): reuse
                m.d.comb += [steps.w_en.eq(1), walk.advance.eq(1), step_in.bank.eq(held_bank)]
                m.d.comb += step_in.ready.eq(Array(ready_seq)[held_bank])
            with m.Elif(new_load):  # load it into the next bank, once that bank is free
                # a load decided while loading is at a last request: one more line before it
                load_block(candidate, issued_seq + Mux(loading, plan.stationary_lines + 1,
                                                       plan.stationary_lines))
            # the step queued: the loaded block's while loading, else the held one's (the
            # write data from registers, whichever of the two writes)
            m.d.comb += [step_in.bank.eq(Mux(loading, bank, held_bank)),
                         step_in.ready.eq(Mux(loading, issued_seq + 1,
                                              Array(ready_seq)[held_bank]))]
        else:
            # the step to decide on: the current one when idle, the next one while finishing
            candidate = Signal(SPAD_ADDR_BITS)
            deciding = Signal()
            m.d.comb += candidate.eq(Mux(loading, walk.next_addr["s"], walk.addr["s"]))
            hit, hit_bank = Signal(), Signal(range(banks))
            m.d.comb += deciding.eq(Mux(loading, finishing & ~walk.last_step, ~walk.done)
                                    & ~latch.kick_mac)
            for b in range(banks):
                with m.If(tag_valid[b] & (tags[b] == candidate)):
                    m.d.comb += [hit.eq(1), hit_bank.eq(b)]

            with m.If(latch.kick_mac):
                m.d.sync += [valid.eq(0) for valid in tag_valid]
            with m.Elif(deciding & ~loading & hit & steps.w_rdy):  # held (or being loaded): reuse
                m.d.comb += [steps.w_en.eq(1), walk.advance.eq(1), step_in.bank.eq(hit_bank)]
                m.d.comb += step_in.ready.eq(Mux(hit_bank == 0, ready_seq[0], 0))
                for b in range(1, banks):
                    with m.If(hit_bank == b):
                        m.d.comb += step_in.ready.eq(ready_seq[b])
            with m.Elif(deciding & ~hit):  # load it into the next bank, once that bank is free
                load_block(candidate, issued_seq + requested + plan.stationary_lines)
        # steps enqueued so far, and the last of them each bank serves
        with m.If(steps.w_en):
            m.d.sync += enqueued_steps.eq(enqueued_steps + 1)
        for b in range(banks):
            with m.If(steps.w_en & (step_in.bank == b)):
                m.d.sync += [last_use[b].eq(enqueued_steps + 1), in_use[b].eq(1)]
            with m.Elif(self.finished_steps == last_use[b]):
                m.d.sync += in_use[b].eq(0)

        # a line is written into its bank only once the bank's earlier steps are through
        unfinished = Signal(STEP_BITS)
        m.d.comb += unfinished.eq(meta_out.after - self.finished_steps)
        cool = Signal()
        for b in range(banks):
            with m.If(meta_out.bank == b):
                m.d.comb += cool.eq(self.cooling[b] == 0)
        released = (~meta_out.waits | unfinished[-1] | (unfinished == 0)) & cool
        take = port.resp.valid & meta.r_rdy & released & ~freeze  # straight into the PE stores
        m.d.comb += [array.load.valid.eq(take), array.load.payload.bank.eq(meta_out.bank),
                     array.load.payload.index.eq(meta_out.index),
                     array.load.payload.line.eq(port.resp.payload),
                     port.resp.ready.eq(take), meta.r_en.eq(take)]
        with m.If(take):
            m.d.sync += loaded_seq.eq(loaded_seq + 1)
        return walk.done & ~loading & ~latch.kick

    def _stream_walker(self, m: Module, latch):
        """Reads the streamed lines and feeds them to the array as beats, one per cycle."""
        plan, banks, array, freeze = self.plan, self.banks, self.array, self.freeze
        port = {Operand.A: self.a_read, Operand.B: self.b_read}[plan.streamed]
        instr = latch.instr
        walk = _Walk(m, "stream", latch.loop,
                     {"t": self._operand_fields(instr, plan.streamed),
                      "c": (instr.acc_base, instr.acc_outer, instr.acc_inner)},
                     SPAD_ADDR_BITS, self.registered_control, lookahead=self.registered_control)
        m.d.comb += walk.start.eq(latch.kick_mac)
        # never 0 bits wide: a Switch on a 0-bit value never matches in the Verilog
        beat_index = Signal(range(max(len(plan.beats), 2)))
        step = data.View(self.step_entry, self.steps.r_data)
        meta_layout = data.StructLayout({
            "first": 1, "last": 1, "slot": range(plan.slots), "columns": plan.cols,
            "bank": range(banks), "ready": SEQ_BITS, "step_end": 1})
        spare = int(self.registered_control)  # room known a cycle early: one entry more
        meta = self._meta_queue(meta_layout.size, self.spad_outstanding + spare)
        m.submodules.beat_meta = meta
        meta_in, meta_out = Signal(meta_layout), data.View(meta_layout, meta.r_data)
        m.d.comb += meta.w_data.eq(meta_in)

        line_offset = Signal(range(max(beat.line for beat in plan.beats) + 1))
        with m.Switch(beat_index):
            for index, beat in enumerate(plan.beats):
                with m.Case(index):
                    m.d.comb += [line_offset.eq(beat.line), meta_in.first.eq(beat.first),
                                 meta_in.last.eq(beat.last), meta_in.slot.eq(beat.slot),
                                 meta_in.columns.eq(beat.columns)]
        step_end = beat_index == len(plan.beats) - 1
        if plan.groups_span_steps:  # os: the outputs stay in the PEs while C does not move
            previous_acc = Signal(ACC_ADDR_BITS)
            continues = ~walk.first_step & (previous_acc == walk.addr["c"])
            continued = ~walk.last_step & (walk.next_addr["c"] == walk.addr["c"])
            with m.If(continues):
                m.d.comb += meta_in.first.eq(0)
            with m.If(continued):
                m.d.comb += meta_in.last.eq(0)
            with m.If(walk.advance):
                m.d.sync += previous_acc.eq(walk.addr["c"])
        m.d.comb += [meta_in.bank.eq(step.bank), meta_in.ready.eq(step.ready),
                     meta_in.step_end.eq(step_end)]
        if self.registered_control:  # the request and the step's end from registers only
            step_end, has_step, room = self._stream_flags(m, beat_index, meta)
            requesting = ~walk.done & has_step  # (``done`` is still high in a kick's cycle)
        else:
            requesting, room = ~walk.done & self.steps.r_rdy & ~latch.kick_mac, meta.w_rdy
        with m.If(requesting):
            m.d.comb += [port.req.valid.eq(room),
                         port.req.payload.eq(walk.addr["t"] + line_offset),
                         meta.w_en.eq(port.req.valid & port.req.ready)]
            with m.If(port.req.valid & port.req.ready):
                m.d.sync += beat_index.eq(Mux(step_end, 0, beat_index + 1))
                with m.If(step_end):
                    m.d.comb += [walk.advance.eq(1), self.steps.r_en.eq(1)]

        lead = Signal(SEQ_BITS)  # stationary lines loaded beyond what this beat needs
        m.d.comb += lead.eq(self.loaded_seq - meta_out.ready)
        ahead = ~lead[-1]
        take = port.resp.valid & meta.r_rdy & ahead & ~freeze
        m.d.comb += [
            port.resp.ready.eq(take), meta.r_en.eq(take),
            array.beat.valid.eq(take),
            array.beat.payload.first.eq(meta_out.first), array.beat.payload.last.eq(meta_out.last),
            array.beat.payload.slot.eq(meta_out.slot), array.beat.payload.bank.eq(meta_out.bank),
            array.beat.payload.columns.eq(meta_out.columns),
            array.beat.payload.line.eq(port.resp.payload),
        ]
        with m.If(take & meta_out.step_end):
            m.d.sync += self.finished_steps.eq(self.finished_steps + 1)
        for b in range(banks):
            with m.If(take & (meta_out.bank == b)):
                m.d.sync += self.cooling[b].eq(self.cooling_cycles)
            with m.Elif(~freeze & (self.cooling[b] != 0)):
                m.d.sync += self.cooling[b].eq(self.cooling[b] - 1)
        free = walk.done & ~latch.kick
        return free, free & ~meta.r_rdy

    def _stream_flags(self, m: Module, beat_index, meta: SyncFIFO) -> tuple:
        """The ``registered_control`` stream walker's request conditions, each a register:
        (this request ends its step, the steps queue has an entry, ``meta`` has room).

        ``has_step`` is whether an entry stays in the steps queue after this cycle's read
        (from its level and the read alone): a step queued into an empty queue is seen a cycle
        later than its ``r_rdy``, so the stationary walker's write decision, which ends a long
        path, does not reach the flag. Room is decided a cycle early from ``meta``'s level
        alone, for one entry less (`_issue_flags`). ``step_end`` follows ``beat_index``, which
        moves only on a request (``meta.w_en``) and wraps to 0 after the step's last beat.
        """
        beats, steps = len(self.plan.beats), self.steps
        has_step, room = Signal(name="stream_has_step"), Signal(name="stream_meta_room")
        m.d.sync += [has_step.eq(steps.level > steps.r_en),
                     room.eq(meta.level < meta.depth - 1)]
        step_end = _at_last(m, beat_index, beats, meta.w_en, "stream_step_end")
        return step_end, has_step, room

    def _overwrite_flag(self, m: Module, latch, walk, produces):
        """Whether the walker's current step writes its C lines without their old values.

        The ISA's ``overwrite`` rule (`isa.Compute.overwrites`), kept in a register computed a
        step ahead, so no compare lies between the step counters and the read request. Under
        ``os`` a step that does not end its group writes nothing: the group's lines take the
        flag of its first step (the only one the rule may pick, as the ISA requires).
        """
        instr = latch.instr
        outer_moves, inner_moves = instr.acc_outer != 0, instr.acc_inner != 0
        step_overwrites = Signal()
        next_overwrites = instr.overwrite & Mux(walk.last_inner, outer_moves,
                                                inner_moves & (walk.first_outer | outer_moves))
        with m.If(latch.kick):
            m.d.sync += step_overwrites.eq(instr.overwrite)
        with m.Elif(walk.advance):
            m.d.sync += step_overwrites.eq(next_overwrites)
        if not self.plan.groups_span_steps:
            return step_overwrites
        starts_group = Signal(init=1)  # the current step is the first of its group
        group_overwrites = Signal()
        with m.If(latch.kick):
            m.d.sync += starts_group.eq(1)
        with m.Elif(walk.advance):
            m.d.sync += starts_group.eq(produces)
            with m.If(starts_group):
                m.d.sync += group_overwrites.eq(step_overwrites)
        return Mux(starts_group, step_overwrites, group_overwrites)

    def _accumulator_walker_and_writer(self, m: Module, latch):
        """Reads old C lines (never one still waiting for its write); writes the sums back.

        Overwriting steps queue their lines without reading them, and the writer writes the
        array's lines alone. ZERO instructions use the same walker to write zero lines instead.
        With ``registered_control`` each line is requested from `_IssueRegister`, a line or two
        behind the walker.
        """
        plan, array, freeze = self.plan, self.array, self.freeze
        config = self.config
        kick, zero_mode = latch.kick, latch.loop.zero
        walk = _Walk(m, "acc", latch.loop,
                     {"c": (latch.instr.acc_base, latch.instr.acc_outer, latch.instr.acc_inner)},
                     ACC_ADDR_BITS, self.registered_control)
        m.d.comb += walk.start.eq(kick)
        address = walk.addr["c"]
        produces = Signal()  # this step ends its groups (os: the next step moves C)
        continued = ~walk.last_step & (walk.next_addr["c"] == address)
        m.d.comb += produces.eq(~continued if plan.groups_span_steps else 1)
        zero_lines = config.blocks["C"].lines
        count = max(len(plan.output_lines), zero_lines)
        index = Signal(range(count + 1))
        lines_in_step = Mux(zero_mode, zero_lines, len(plan.output_lines))
        advance_line = Signal()
        last_line = index == lines_in_step - 1
        if self.registered_control:  # known a line ahead, in a register
            last_line = _at_last(m, index, lines_in_step, advance_line, "acc_last_line",
                                 restart=kick)
        with m.If(advance_line):
            with m.If(last_line):
                m.d.sync += index.eq(0)
                m.d.comb += walk.advance.eq(1)
            with m.Else():
                m.d.sync += index.eq(index + 1)
        with m.If(kick):
            m.d.sync += index.eq(0)

        overwrites = self._overwrite_flag(m, latch, walk, produces)

        # lines read (or to overwrite) but not yet written back: their addresses, oldest first
        depth = max(4, 2 * plan.lines_per_group) + OUTSTANDING
        pending = [Signal(ACC_ADDR_BITS, name=f"pending_{i}") for i in range(depth)]
        pending_valid = Signal(depth)
        pending_overwrite = Signal(depth)  # the line is written without its old value
        # the line keeps the larger of its values, not their sum (only the pipeline's writer)
        pending_max = Signal(depth) if config.output_pipeline else None
        head, tail = Signal(range(depth)), Signal(range(depth))
        old = SyncFIFO(width=len(self.acc_read.resp.payload.as_value()), depth=depth)
        m.submodules.old_lines = old

        # the line to read, a register: its successors are summed from registers in parallel and
        # the handshake only picks one, so no adder follows the hazard compare
        target = Signal(ACC_ADDR_BITS)
        next_offset = Signal(range(count + 1))
        with m.Switch(index):
            for i, line in enumerate(plan.output_lines[1:]):
                with m.Case(i):
                    m.d.comb += next_offset.eq(line)
        first_offset = Mux(zero_mode, 0, plan.output_lines[0])
        line_target = address + Mux(zero_mode, index + 1, next_offset)
        step_target = walk.next_addr["c"] + first_offset
        with m.If(kick):
            m.d.sync += target.eq(latch.instr.acc_base + first_offset)
        with m.Elif(walk.advance):
            m.d.sync += target.eq(step_target)
        with m.Elif(advance_line):
            m.d.sync += target.eq(line_target)
        push, pop = Signal(), Signal()
        active = ~walk.done & ~kick
        read = self.acc_read.req
        # the line pushed into the pending queue, and whether it overwrites
        pushed, pushed_overwrites = target, overwrites
        if self.registered_control:  # the walker's handshake from a register, not the buffer's
            skid = m.submodules.acc_read_request = SkidBuffer(read.payload.shape())
            m.d.comb += [read.valid.eq(skid.o.valid), read.payload.eq(skid.o.payload),
                         skid.o.ready.eq(read.ready)]
            issue = _IssueRegister(m, target, overwrites, pending, pending_valid, head, push,
                                   pop, config.acc_address_bits)
            walking = ~walk.done  # done in the kick cycle: the walker took the instruction
            with m.If(walking & (zero_mode | produces)):
                m.d.comb += advance_line.eq(issue.room)
            with m.Elif(walking):
                m.d.comb += walk.advance.eq(1)  # os: the group goes on in the next step
            m.d.comb += issue.load.eq(advance_line)
            issue.request(m, zero_mode, skid.i, self.acc_write.req)
            pushed, pushed_overwrites = issue.addr, issue.overwrites
        else:
            hazard = Signal()
            for i in range(depth):
                with m.If(pending_valid[i] & (pending[i] == target)):
                    m.d.comb += hazard.eq(1)
            full = pending_valid.bit_select(tail, 1)
            with m.If(active & zero_mode):
                m.d.comb += [self.acc_write.req.valid.eq(1),
                             self.acc_write.req.payload.addr.eq(target),
                             self.acc_write.req.payload.mask.eq(-1),
                             advance_line.eq(self.acc_write.req.ready)]
            with m.Elif(active & ~produces):
                m.d.comb += walk.advance.eq(1)  # os: the group goes on in the next step
            with m.Elif(active & overwrites):  # no old line to read (nor to wait for)
                m.d.comb += [push.eq(~full), advance_line.eq(~full)]
            with m.Elif(active):
                m.d.comb += [read.valid.eq(~hazard & ~full), read.payload.eq(target)]
                with m.If(read.valid & read.ready):
                    m.d.comb += [push.eq(1), advance_line.eq(1)]
        m.d.comb += [old.w_data.eq(self.acc_read.resp.payload),
                     old.w_en.eq(self.acc_read.resp.valid),
                     # registered_control: the old lines never overflow (at most ``depth``
                     # pending), so their room need not reach the accumulator
                     self.acc_read.resp.ready.eq(1 if self.registered_control else old.w_rdy)]

        # the writer: array line + old line (or nothing, to overwrite) -> accumulator
        array_out = array.out
        if self.registered_control:
            array_out = self._queued_array_lines(m)
        old_line = data.View(self.acc_read.resp.payload.shape(), old.r_data)
        held = None  # registered_control: the head entry's fields in registers
        if self.registered_control:
            entries = {"valid": ([pending_valid[i] for i in range(depth)], 1),
                       "overwrite": ([pending_overwrite[i] for i in range(depth)],
                                     pushed_overwrites),
                       "addr": (pending, pushed)}
            if pending_max is not None:
                entries["max"] = ([pending_max[i] for i in range(depth)],
                                  latch.instr.reduce == isa.Reduction.MAX)
            held = held_head(m, head, tail, push, pop, entries)
            head_overwrites = held["overwrite"]
        else:
            head_overwrites = pending_overwrite.bit_select(head, 1)
        # an overwriting line needs no old line, but its entry must be queued: an array line
        # can come out before the walker has queued it (it waited on a hazard), and then
        # ``head`` still holds a finished entry's stale flag and address
        head_valid = held["valid"] if held else pending_valid.bit_select(head, 1)
        old_back = ready_register(m, old, "old_lines_ready") if held else old.r_rdy
        old_ready = head_valid & (head_overwrites | old_back)
        with m.If(~zero_mode):
            m.d.comb += [
                self.acc_write.req.valid.eq(array_out.valid & old_ready),
                self.acc_write.req.payload.addr.eq(
                    held["addr"] if held else Mux(head == 0, pending[0], 0)),
                self.acc_write.req.payload.mask.eq(-1),
            ]
            for i in range(1, 1 if held else depth):
                with m.If(head == i):
                    m.d.comb += self.acc_write.req.payload.addr.eq(pending[i])
            for e in range(config.acc_line_elems):
                new, old_value = array_out.payload[e], old_line[e]
                result = new + Mux(head_overwrites, 0, old_value)
                if pending_max is not None:  # MAX: the larger, a signed compare
                    head_max = (held["max"] if held else pending_max.bit_select(head, 1)
                                ) & ~head_overwrites
                    result = Mux(head_max, Mux(new > old_value, new, old_value), result)
                m.d.comb += self.acc_write.req.payload.data[e].eq(result)
            with m.If(self.acc_write.req.valid & self.acc_write.req.ready):
                m.d.comb += [pop.eq(1), old.r_en.eq(~head_overwrites)]
                if array_out is not array.out:
                    m.d.comb += array_out.ready.eq(1)
        # a line the writer cannot take (old line not back, port busy, a ZERO writing) waits
        writable = ~zero_mode & old_ready & self.acc_write.req.ready
        if array_out is array.out:
            m.d.comb += freeze.eq(array.out.valid & ~writable)

        with m.If(push):
            m.d.sync += [tail.eq(ring_next(tail, depth))]
            for i in range(depth):
                with m.If(tail == i):
                    m.d.sync += pending[i].eq(pushed)
        set_bits = Mux(push, 1 << tail, 0)
        clear_bits = Mux(pop, 1 << head, 0)
        m.d.sync += pending_valid.eq((pending_valid | set_bits) & ~clear_bits)
        with m.If(push):
            m.d.sync += pending_overwrite.bit_select(tail, 1).eq(pushed_overwrites)
            if pending_max is not None:
                m.d.sync += pending_max.bit_select(tail, 1).eq(
                    latch.instr.reduce == isa.Reduction.MAX)
        with m.If(pop):
            m.d.sync += head.eq(ring_next(head, depth))
        free = walk.done & ~kick
        if self.registered_control:  # and its last line left the issue queue
            free = free & ~issue.busy
        empty = issue.empty if self.registered_control else pending_valid == 0
        return free, empty, _LineCounts(m, push, pop, depth, self.registered_control)
