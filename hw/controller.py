"""The controller: instruction fetch, dispatch, and VTA's dependency tokens between three units.

Fetch reads the program from DRAM one *chunk* at a time (``max(16, bus bytes)`` bytes, aligned,
so a chunk never crosses 4 KiB) and only when the instruction it is working on has been taken,
so fetch never leaves read data waiting on the shared R channel (the load unit's reads queue
behind it there; stalling them while dispatch waits for the load unit would deadlock).

Dispatch sends LOAD, COMPUTE and STORE to one queue per unit. Each unit has a *gate* that takes
its next instruction, waits until the tokens it pops are there (``pop_prev``/``pop_next``),
hands it to the unit, waits until the unit is idle again and then pushes its tokens. The four
token queues carry no data, so each is a counter with one producer and one consumer:

========  =====================  ====================
counter   pushed by              popped by
========  =====================  ====================
l2c       LOAD ``push_next``     COMPUTE ``pop_prev``
c2l       COMPUTE ``push_prev``  LOAD ``pop_next``
c2s       COMPUTE ``push_next``  STORE ``pop_prev``
s2c       STORE ``push_prev``    COMPUTE ``pop_next``
========  =====================  ====================

FINISH (or the end of the program) stops fetch; ``done`` rises once every queue is empty and
every unit is idle. A pop that nothing will ever push hangs the program (VTA has no deadlock
detection either; the testbench timeout catches it). A push onto a full counter sets ``error``.
"""

from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from tensorforge import isa
from tensorforge.config import AcceleratorConfig
from tensorforge.hw.axi import (
    ADDR_BITS,
    BurstPlanner,
    ReadId,
    axi_read_signature,
    drive_fixed_fields,
)
from tensorforge.hw.ports import instruction_layout
from tensorforge.hw.skid import SkidBuffer
from tensorforge.isa import INSTRUCTION_BITS, INSTRUCTION_BYTES, Opcode

TOKEN_BITS = 8  # a counter holds up to 255 tokens
UNITS = ("load", "compute", "store")
# (counter, producer unit, producer flag, consumer unit, consumer flag)
TOKEN_QUEUES = (
    ("l2c", "load", "push_next", "compute", "pop_prev"),
    ("c2l", "compute", "push_prev", "load", "pop_next"),
    ("c2s", "compute", "push_next", "store", "pop_prev"),
    ("s2c", "store", "push_prev", "compute", "pop_next"),
)
UNIT_OPCODES = {"load": Opcode.LOAD, "compute": Opcode.COMPUTE, "store": Opcode.STORE}
REPEATING = ("load", "store")  # units whose instructions carry `isa.REPEAT_FIELDS`


class Controller(wiring.Component):
    """Fetch, dispatch and token synchronisation of the load, compute and store units.

    Contract: ``start`` (one cycle, while not busy) runs ``insn_count`` instructions from byte
    ``insn_addr`` (16-byte aligned; low bits ignored). ``busy`` is high from the cycle after
    ``start`` until ``done`` rises; ``done`` stays high until the next ``start``. Each unit must
    lower ``<unit>_idle`` in the cycle after it accepts a command and raise it when finished.
    ``config.controller.queue_depth`` instructions wait per unit; a gate takes
    ``gate_latency`` = 3 cycles from a unit going idle to offering its next command (push
    tokens, take, check the pops).
    ``dep_wait`` is the number of gates that hold an instruction whose tokens are missing.

    ``pipelined`` (the ``ecp5`` target) takes the controller's decisions from registers, for
    timing closure, in a few more cycles:

    * fetch decides whether the queue has room for a burst a cycle early, for the longest
      burst, from a count of the beats requested and not yet dispatched (chunks dispatched
      count a cycle late), so no adder sits between the queue and ARVALID;
    * fetched instructions reach dispatch through a `SkidBuffer`, so the queue's read and the
      opcode's decode into the gates' queues are in different cycles;
    * after a FINISH, fetch stops by emptying its burst planner (``empty`` only, where the
      generic controller starts it on no beats), so the burst's registers (address, beats, 4
      KiB distance) are loaded only from the next burst or the program's start;
    * whether a repeated instruction's run is its last is a register, set with the count, and
      the next run's fields move on in a state of their own (a cycle per run), so their
      enables come from the state register, not from the unit's idle or retire handshake;
    * a repeated LOAD's or STORE's DRAM step is worked out by shift-and-add, a bit of
      ``repeat_stride`` per cycle from the cycle the gate takes the instruction, instead of by
      a multiplier in one cycle: the second run waits until the step is ready,
      ``repeat_stride``'s width + 2 cycles after the take;
    * ``done`` rises a cycle later: whether everything has settled is a register, so no unit's
      ``idle`` reaches ``done``'s enable in the cycle.

    A unit named in ``retiring`` may take its next command before it is idle: it pulses
    ``<unit>_retired`` once per command, in order, when that command's effects are complete.
    Its gate then offers the next command at once and pushes each command's tokens on its
    retire pulse (up to ``retire_windows[unit]`` commands may wait for theirs), so the unit can
    overlap the tail of one command with the start of the next, e.g. a DMA unit the DRAM
    latency of one LOAD with the next LOADs.
    """

    gate_latency = 3
    fetch_chunks = 16  # fetched chunks (max(16, bus bytes) each) held ahead of dispatch
    # commands awaiting their retire pulse, per retiring unit: the DMA units keep several
    # LOADs (STOREs) in flight; the compute unit overlaps one instruction with the next
    retire_windows = {"load": 4, "compute": 1, "store": 4}

    def __init__(self, config: AcceleratorConfig, retiring: tuple[str, ...] = (),
                 pipelined: bool = False) -> None:
        self.config = config
        self.pipelined = pipelined
        self.queue_depth = config.controller.queue_depth
        self.retiring = tuple(retiring)
        members = {
            "start": In(1),
            "insn_addr": In(ADDR_BITS),
            "insn_count": In(32),
            "done": Out(1),
            "busy": Out(1),
            "error": Out(1),
            "dep_wait": Out(2),
            "fetch": Out(axi_read_signature(config.dma.bus_bits)),
        }
        for unit, opcode in UNIT_OPCODES.items():
            members[f"{unit}_cmd"] = Out(stream.Signature(
                instruction_layout(opcode, config.output_pipeline)))
            members[f"{unit}_idle"] = In(1)
            if unit in self.retiring:
                members[f"{unit}_retired"] = In(1)
        super().__init__(members)

    def elaborate(self, platform) -> Module:
        m = Module()
        insn = stream.Signature(INSTRUCTION_BITS).create()  # fetched words, to dispatch
        finished = self._fetch(m, insn)
        fetched_valid = insn.valid  # an instruction fetched and not yet dispatched
        if self.pipelined:
            m.submodules.dispatch_register = skid = SkidBuffer(INSTRUCTION_BITS)
            wiring.connect(m, insn, skid.i)
            insn = skid.o
            fetched_valid = skid.i.valid | skid.o.valid | ~skid.i.ready

        queues = {}
        for unit in UNITS:
            queues[unit] = m.submodules[f"{unit}_queue"] = SyncFIFOBuffered(
                width=INSTRUCTION_BITS, depth=self.queue_depth
            )
        opcode = insn.payload[:2]
        for unit, fifo in queues.items():
            m.d.comb += fifo.w_data.eq(insn.payload)
            with m.If(opcode == UNIT_OPCODES[unit]):
                m.d.comb += [fifo.w_en.eq(insn.valid), insn.ready.eq(fifo.w_rdy)]
        with m.If(opcode == Opcode.FINISH):
            m.d.comb += insn.ready.eq(1)

        counters = {name: Signal(TOKEN_BITS, name=f"tokens_{name}") for name, *_ in TOKEN_QUEUES}
        pushes = {name: Signal(name=f"push_{name}") for name in counters}
        pops = {name: Signal(name=f"pop_{name}") for name in counters}
        waiting, gates_empty = [], []
        for unit in UNITS:
            consumes = {flag: name for name, _, _, who, flag in TOKEN_QUEUES if who == unit}
            produces = {flag: name for name, who, flag, _, _ in TOKEN_QUEUES if who == unit}
            wait, empty = self._gate(
                m,
                unit,
                queues[unit],
                {flag: (counters[name], pops[name]) for flag, name in consumes.items()},
                {flag: pushes[name] for flag, name in produces.items()},
            )
            waiting.append(wait)
            gates_empty.append(empty)
        for name, counter in counters.items():
            m.d.sync += counter.eq(counter + pushes[name] - pops[name])
            with m.If(pushes[name] & ~pops[name] & (counter == (1 << TOKEN_BITS) - 1)):
                m.d.sync += self.error.eq(1)
        m.d.comb += self.dep_wait.eq(sum(waiting))

        all_idle = Signal()
        queued = Signal(range(3 * self.queue_depth + 1))
        m.d.comb += [
            queued.eq(sum(fifo.r_level for fifo in queues.values())),
            all_idle.eq(
                finished
                & ~fetched_valid
                & (queued == 0)
                & self.load_idle
                & self.compute_idle
                & self.store_idle
            ),
        ]
        settled = all_idle
        for empty in gates_empty:
            settled = settled & empty
        if self.pipelined:  # registered (``done`` a cycle later): no unit's idle reaches it
            settled_now, settled = settled, Signal(name="settled")
            m.d.sync += settled.eq(settled_now & ~(self.start & ~self.busy))
        with m.If(self.start & ~self.busy):
            m.d.sync += [self.busy.eq(1), self.done.eq(0), self.error.eq(0)]
            for counter in counters.values():
                m.d.sync += counter.eq(0)
        with m.Elif(self.busy & settled):
            m.d.sync += [self.busy.eq(0), self.done.eq(1)]
        return m

    def _fetch(self, m: Module, out) -> Signal:
        """Fetch the program into ``out``; returns a signal that is high once fetch has stopped.

        The program's bytes are read as long bursts (`BurstPlanner`) ahead of dispatch, into a
        queue of ``fetch_chunks`` chunks. A burst is requested only when the queue has room
        for every beat already requested and for it, so R beats never wait for dispatch (the
        load unit's reads share the channel: they must not queue behind fetch data that waits
        for the load unit). So a DRAM latency is paid once per ``fetch_chunks`` chunks, not
        per chunk. Fetch reads exactly the program (whole beats); after a FINISH it drains
        what is still in flight before it reports stopped.
        """
        config = self.config
        bus_bytes = config.dma.bus_bytes
        chunk_bytes = max(INSTRUCTION_BYTES, bus_bytes)
        per_chunk = chunk_bytes // INSTRUCTION_BYTES
        beats_per_chunk = chunk_bytes // bus_bytes
        capacity = self.fetch_chunks * beats_per_chunk  # beats the queue can hold
        # a burst is requested only when the queue has room for all of it, so none may be
        # longer than the queue (a 64-beat burst into 16 beats of room was never requested)
        longest = min(config.dma.max_burst, capacity)
        axi = self.fetch
        max_beats = ((1 << 32) * INSTRUCTION_BYTES + chunk_bytes) // bus_bytes
        planner = BurstPlanner(bus_bytes, longest, "fetch", max_beats, prepared=self.pipelined)
        if self.pipelined:
            planner.prepare(m)
        drive_fixed_fields(m, axi, "ar", config.dma.bus_bits)
        m.submodules.fetched = fetched = SyncFIFOBuffered(
            width=chunk_bytes * 8, depth=self.fetch_chunks
        )

        remaining = Signal(32)  # instructions still to dispatch
        chunk = Signal(chunk_bytes * 8)  # beats of the chunk being received
        assembling = Signal(range(beats_per_chunk + 1))
        in_flight = Signal(range(capacity + 1))  # beats requested, not yet received
        index = Signal(range(per_chunk))  # the next instruction's place in the head chunk
        finished = Signal(init=1)
        draining = Signal()
        stop = Signal()

        ar_waiting = Signal()  # ARVALID was offered and not yet taken
        if self.pipelined:
            # registered a cycle early: room for the longest burst after this cycle's request,
            # from a count of the beats requested and not yet taken out of the queue (chunks
            # taken out count a cycle late): never below the queue's occupancy, and the same
            # outside the drain after a FINISH, where no burst is requested
            fits = Signal(name="fetch_room")
            reserved = Signal(range(capacity + 1), name="fetch_reserved")
            popped = Signal(name="fetch_popped")
            requested_beats = Mux(axi.arvalid & axi.arready, planner.beats, 0)
            m.d.sync += [
                popped.eq(fetched.r_en & fetched.r_rdy),
                reserved.eq(reserved + requested_beats - Mux(popped, beats_per_chunk, 0)),
                # as if an offered burst were taken (it is offered until it is): the handshake
                # only picks one of two sums of registers
                fits.eq(Mux(axi.arvalid, reserved + planner.beats + longest <= capacity,
                            reserved + longest <= capacity)),
            ]
            with m.If(self.start & ~self.busy):
                m.d.sync += reserved.eq(0)
        else:  # room for the next burst from the queue's occupancy, in the cycle
            occupied = Signal(range(capacity + longest + 1))
            fits = occupied + planner.beats <= capacity
            m.d.comb += occupied.eq(fetched.r_level * beats_per_chunk + assembling + in_flight)
        m.d.comb += [
            axi.arid.eq(ReadId.FETCH),
            axi.araddr.eq(planner.address),
            axi.arlen.eq(planner.beats - 1),
            # occupied only falls while ARVALID waits, so ARVALID never drops early; after a
            # FINISH no new burst is offered
            axi.arvalid.eq(
                self._offer(planner, ~planner.empty & (ar_waiting | (~draining & fits)))
            ),
            axi.rready.eq(1),
        ]
        requested = axi.arvalid & axi.arready
        m.d.sync += ar_waiting.eq(axi.arvalid & ~axi.arready)
        received = axi.rvalid & axi.rready
        with m.If(requested):
            planner.advance(m)
        m.d.sync += in_flight.eq(in_flight + Mux(requested, planner.beats, 0) - received)
        with m.If(received):
            if beats_per_chunk == 1:
                m.d.comb += [fetched.w_data.eq(axi.rdata), fetched.w_en.eq(~draining)]
            else:  # beats arrive low address first: shift them in from the top
                whole = Cat(chunk[bus_bytes * 8 :], axi.rdata)
                with m.If(assembling == beats_per_chunk - 1):
                    m.d.comb += [fetched.w_data.eq(whole), fetched.w_en.eq(~draining)]
                    m.d.sync += assembling.eq(0)
                with m.Else():
                    m.d.sync += [chunk.eq(whole), assembling.eq(assembling + 1)]

        starting = self.start & ~self.busy
        address = self.insn_addr & ~(INSTRUCTION_BYTES - 1)
        base = address & ~(chunk_bytes - 1)
        end = address + (self.insn_count << (INSTRUCTION_BYTES.bit_length() - 1))
        if self.pipelined:
            self._staged_start(m, planner, starting, base, end)
        with m.If(starting):
            if not self.pipelined:
                planner.start(m, base, (end - base + bus_bytes - 1) >> (bus_bytes.bit_length() - 1))
            m.d.sync += [
                remaining.eq(self.insn_count),
                finished.eq(self.insn_count == 0),
                index.eq(address[4 : 4 + (per_chunk - 1).bit_length()] if per_chunk > 1 else 0),
            ]

        with m.If(~finished & ~draining):
            m.d.comb += [
                out.valid.eq(fetched.r_rdy),
                out.payload.eq(fetched.r_data.word_select(index, INSTRUCTION_BITS)),
                stop.eq((out.payload[:2] == Opcode.FINISH) | (remaining == 1)),
            ]
            with m.If(out.valid & out.ready):
                m.d.sync += [
                    remaining.eq(remaining - 1),
                    index.eq(Mux(index == per_chunk - 1, 0, index + 1)),
                ]
                with m.If((index == per_chunk - 1) | stop):
                    m.d.comb += fetched.r_en.eq(1)
                with m.If(stop):
                    m.d.sync += draining.eq(1)
        with m.If(draining):
            # what was read past a FINISH: requested bursts come in, nothing is kept
            m.d.comb += fetched.r_en.eq(1)
            with m.If(~axi.arvalid):  # the rest of the program is not needed
                if self.pipelined:  # only ``empty``: the burst's registers keep one load path
                    m.d.sync += planner.empty.eq(1)
                else:
                    planner.start(m, Const(0, ADDR_BITS), 0)
            with m.If(~fetched.r_rdy & (in_flight == 0) & (assembling == 0) & planner.empty):
                m.d.sync += [draining.eq(0), finished.eq(1)]
        return finished

    def _offer(self, planner: BurstPlanner, offer):
        """``offer``, and with ``pipelined`` only once the planner holds the burst after this
        one (`BurstPlanner` ``prepared``), unless this is the program's last."""
        return offer & planner.may_offer if self.pipelined else offer

    def _staged_start(self, m: Module, planner: BurstPlanner, starting, base, end) -> None:
        """``pipelined``: the fetch planner started three cycles after ``starting``, from
        registers: the program's first and end byte, then its beats and 4 KiB distance, then
        that distance's burst limit, so no path runs from the program's address through the
        subtractions into the planner's compares."""
        bus_bytes = self.config.dma.bus_bytes
        first = Signal(Value.cast(base).shape(), name="fetch_first_byte")
        stop = Signal(Value.cast(end).shape(), name="fetch_end_byte")
        beats = Signal.like(planner.remaining, name="fetch_start_beats")
        to_boundary = Signal.like(planner.to_boundary, name="fetch_start_to_boundary")
        limit = Signal.like(planner.beats, name="fetch_start_limit")
        stages = [Signal(name=f"fetch_start_{k}") for k in range(3)]
        with m.If(starting):
            m.d.sync += [first.eq(base), stop.eq(end)]
        m.d.sync += [
            stages[0].eq(starting), stages[1].eq(stages[0]), stages[2].eq(stages[1]),
            beats.eq((stop - first + bus_bytes - 1) >> (bus_bytes.bit_length() - 1)),
            to_boundary.eq(planner.beats_to_boundary(first)),
            limit.eq(planner.limit(to_boundary)),
        ]
        with m.If(stages[2]):
            planner.start(m, first, beats, to_boundary, limit)

    def _gate(self, m: Module, unit: str, queue, pops: dict, pushes: dict):
        """The token gate in front of one unit; returns (waiting for tokens, holds nothing)."""
        cmd = getattr(self, f"{unit}_cmd")
        idle = getattr(self, f"{unit}_idle")
        header = instruction_layout(Opcode.FINISH)
        held = Signal(INSTRUCTION_BITS, name=f"{unit}_instruction")
        flags = header(held[: header.size])
        waiting = Signal(name=f"{unit}_waits_for_token")
        empty = Signal(name=f"{unit}_gate_empty")
        ready = Signal(name=f"{unit}_tokens_ready")
        m.d.comb += ready.eq(1)
        for flag, (counter, _) in pops.items():
            with m.If(getattr(flags, flag) & (counter == 0)):
                m.d.comb += ready.eq(0)

        if unit in self.retiring:
            deferred = self._deferred_pushes(m, unit, pushes)
        repeats = self.config.controller.repeat and unit in REPEATING
        step_ready = None  # pipelined: the repeat step is worked out (None: at once)
        def pushed(flag: str):  # a repeated instruction pushes only after its last run
            return getattr(flags, flag) & last_run if repeats else getattr(flags, flag)

        taking = Signal(name=f"{unit}_taking")  # the gate takes an instruction this cycle
        if repeats:
            runs_left, advance, step_ready = self._repeat(m, unit, held, queue.r_data, taking)
            last_run = runs_left == 0
            if self.pipelined:  # ``runs_left == 0`` as a register, set as runs_left is
                last_run = Signal(name=f"{unit}_last_run", init=1)
                count_down = advance

                def advance():
                    count_down()
                    m.d.sync += last_run.eq(runs_left == 1)

        def after_step(condition):  # pipelined: a run but the last waits for its DRAM step
            return condition if step_ready is None else condition & (last_run | step_ready)

        def next_run():
            """The run is done: take the next instruction, or issue the next run. Pipelined,
            the next run's fields move on in a state of their own (``NEXT``, a cycle), so
            their ~70 enables come from the state register, not from the unit's handshake."""
            m.next = "TAKE"
            if repeats:
                with m.If(~last_run):
                    if self.pipelined:
                        m.next = "NEXT"
                    else:
                        advance()
                        m.next = "ISSUE"

        with m.FSM(name=f"{unit}_gate"):
            with m.State("TAKE"):
                m.d.comb += [empty.eq(1), queue.r_en.eq(1)]
                if repeats and self.pipelined:
                    m.d.comb += taking.eq(queue.r_rdy)
                with m.If(queue.r_rdy):
                    m.d.sync += held.eq(queue.r_data)
                    if repeats:
                        lsb, bits = isa.field_offsets(UNIT_OPCODES[unit])["repeat"]
                        m.d.sync += runs_left.eq(queue.r_data[lsb : lsb + bits])
                        if self.pipelined:
                            m.d.sync += last_run.eq(queue.r_data[lsb : lsb + bits] == 0)
                    m.next = "TOKENS"
            with m.State("TOKENS"):
                m.d.comb += waiting.eq(~ready)
                with m.If(ready):
                    for flag, (_, pop) in pops.items():
                        m.d.comb += pop.eq(getattr(flags, flag))
                    m.next = "ISSUE"
            with m.State("ISSUE"):
                m.d.comb += [cmd.valid.eq(1), cmd.payload.eq(held[: len(cmd.payload.as_value())])]
                with m.If(cmd.ready):
                    m.next = "RUN"
            with m.State("RUN"):
                if unit in self.retiring:  # the tokens wait for the retire pulse: take the next
                    deferred_room, defer = deferred
                    with m.If(after_step(deferred_room)):
                        defer(Cat(pushed(flag) for flag in pushes))
                        next_run()
                else:
                    with m.If(after_step(idle)):
                        for flag, push in pushes.items():
                            m.d.comb += push.eq(pushed(flag))
                        next_run()
            if repeats and self.pipelined:
                with m.State("NEXT"):
                    advance()
                    m.next = "ISSUE"
        return waiting, empty

    def _repeat(self, m: Module, unit: str, held: Signal, taken, taking):
        """The run counter of a LOAD or STORE gate (``controller.repeat``). Returns
        ``(runs_left, advance, step_ready)``: the runs still to issue after the current one,
        the action that turns ``held`` into the next run (its line and DRAM address moved on,
        `isa.expand`), and (``pipelined``; else None) whether the DRAM step is ready.
        The DRAM step is a product of two fields, registered while the gate waits for
        tokens, so no multiplier sits on the way to the unit; with ``pipelined`` it is
        worked out from ``taken`` (the instruction ``held`` takes while ``taking``) a bit
        per cycle, and no multiplier sits anywhere."""
        config = self.config
        opcode = UNIT_OPCODES[unit]
        offsets = isa.field_offsets(opcode)

        def field(name: str, word=held):
            lsb, bits = offsets[name]
            return word[lsb : lsb + bits]

        in_shift = (config.precision.in_bits // 8).bit_length() - 1
        acc_shift = (config.precision.acc_bits // 8).bit_length() - 1
        if opcode is Opcode.LOAD:
            wide = field("buffer") == isa.Buffer.ACC
            run_lines = field("pad_before") + field("rows") + field("pad_after")
        else:
            wide = ~field("requant") if config.output_pipeline else Const(1)
            run_lines = field("rows")
        runs_left = Signal(offsets["repeat"][1], name=f"{unit}_runs_left")
        step = Signal(ADDR_BITS, name=f"{unit}_run_step")
        step_ready = None
        if self.pipelined:
            rows, step_ready = self._shift_add(m, unit, field("repeat_stride", taken),
                                               field("stride", taken), taking)
            lines = Signal(run_lines.shape(), name=f"{unit}_run_lines")  # constant over the runs
            m.d.sync += lines.eq(run_lines)
            run_lines = lines
        else:
            rows = field("repeat_stride") * field("stride")
        m.d.sync += step.eq(Mux(wide, rows << acc_shift, rows << in_shift))

        def advance() -> None:
            m.d.sync += [
                field("line").eq(field("line") + run_lines),
                field("dram_addr").eq(field("dram_addr") + step),
                runs_left.eq(runs_left - 1),
            ]

        return runs_left, advance, step_ready

    @staticmethod
    def _shift_add(m: Module, unit: str, multiplier, multiplicand, start):
        """``multiplier * multiplicand`` (mod 2^32) by shift-and-add, the multiplier's top
        bit first, from operands taken while ``start``. Returns ``(product, ready)``:
        ``ready`` (a register) rises the cycle after the product is complete, once the
        registered step made from it is too: ``len(multiplier) + 2`` cycles after ``start``."""
        bits = len(multiplier)
        left = Signal(range(bits + 1), name=f"{unit}_step_bits_left")
        pending = Signal(bits, name=f"{unit}_step_multiplier")
        operand = Signal(ADDR_BITS, name=f"{unit}_step_multiplicand")
        product = Signal(ADDR_BITS, name=f"{unit}_step_product")
        ready = Signal(name=f"{unit}_step_ready")
        with m.If(start):
            m.d.sync += [left.eq(bits), pending.eq(multiplier), operand.eq(multiplicand),
                         product.eq(0), ready.eq(0)]
        with m.Else():
            m.d.sync += ready.eq(left == 0)
            with m.If(left != 0):
                addend = Mux(pending[-1], operand, 0)
                m.d.sync += [product.eq((product << 1) + addend), pending.eq(pending << 1),
                             left.eq(left - 1)]
        return product, ready

    def _deferred_pushes(self, m: Module, unit: str, pushes: dict):
        """A retiring unit's deferred pushes: the push flags of each command it took and has
        not retired, oldest first, pushed on its retire pulses. Returns ``(room, defer)``:
        whether RUN may add a command's flags this cycle (a slot is free or frees now), and
        the action that adds them."""
        retired = getattr(self, f"{unit}_retired")
        window = self.retire_windows[unit]
        slots = [Signal(len(pushes), name=f"{unit}_deferred_{k}") for k in range(window)]
        count = Signal(range(window + 1), name=f"{unit}_deferred_count")
        retire = Signal(name=f"{unit}_retire")
        added = Signal(name=f"{unit}_deferred_added")
        m.d.comb += retire.eq(retired & (count != 0))
        with m.If(retire):
            m.d.comb += [push.eq(slots[0][k]) for k, push in enumerate(pushes.values())]
            m.d.sync += [slots[k].eq(slots[k + 1]) for k in range(window - 1)]
        m.d.sync += count.eq(count + added - retire)
        room = (count != window) | retire

        def defer(flags) -> None:
            m.d.comb += added.eq(1)
            at = count - retire  # where the flags land once the oldest has left
            for k in range(window):
                with m.If(at == k):
                    m.d.sync += slots[k].eq(flags)

        return room, defer
