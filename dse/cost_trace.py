"""The cost model's instruction-level timeline: one compiled program, instruction by instruction.

The batch model (`cost_model.evaluate`) prices thousands of mappings at once from their tile
geometry, with the controller and the DMA folded into a few mean terms. A figure a user reads
(`evaluate_mapping`, and so `simulate --json`, `validate` and a sweep's chosen mappings) is
for one program, so it can afford what the batch model cannot: walk the program the code
generator emits, as the controller runs it (`hw.controller`), and time every instruction by
the mechanism that bounds it:

* **fetch**: the program streams in chunks behind the DRAM latency, at most
  `Controller.fetch_chunks` chunks ahead of dispatch;
* **dispatch**: in order, one instruction a cycle, into a queue of ``controller.queue_depth``
  per unit; a full queue stops dispatch for every unit;
* **gates**: a unit's gate takes, checks the tokens of and issues one command per
  `TraceTerms.gate_cycles`, and holds a retiring unit's next command while
  `Controller.retire_windows` commands await their retire pulse;
* **tokens**: a pop waits for the matching push (the k-th pop of a queue for its k-th push),
  pushed when the producing instruction retires;
* **LOAD / STORE**: burst by burst (`hw.dma_rows.transfer_runs`, `hw.axi.plan_bursts`): an
  address a cycle, at most ``dma.outstanding`` bursts in flight, data in order a beat per
  `CostParameters.beat_cycles` and a line per cycle, the DRAM latency between a read
  burst's address and its data and between a write burst's last beat and its response;
* **COMPUTE**: the micro-loop's steps stream back to back across instructions
  (`hw.compute_unit`); an instruction that starts after the array went idle refills it.
* **the activation window** (``scratchpad.activations``): a LOAD or STORE there goes to the
  on-chip memory (`hw.axi_memory.AxiMemory`), not DRAM nor the read channel the fetch
  shares: a burst at a time, a beat a cycle, the first `cost_dma.WINDOW_READ_DELAY` after
  the address and a write's response `cost_dma.WINDOW_WRITE_RESPONSE` after its last beat
  (both read off the memory's logic); the unit's decoder (`hw.axi_window`) holds a burst
  for the other target until the outstanding ones are answered. On a small CNN and a ResNet
  basic block (4x4 pipeline, 16 KiB window) the timeline is within 2% of the RTL (-0.8%,
  -1.9%).

It is a recurrence over instructions and bursts, not a cycle simulation: each start is the
latest of the times it waits for. Its terms are the batch model's `CostParameters` plus the
few offsets of `TraceTerms`, each read off RTL waveforms of a calibration program and of
diagnostic programs outside both fidelity sets (one mechanism, a gate held while its command
awaits tokens, was first seen on a held-out program's waveform). A least-squares fit on the
calibration programs (`benchmarks/check_cost_model_rtl.py --trace`) lowers their error but
raises the held-out one, so it is a check, not the source of the numbers.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

from tensorforge.config import AcceleratorConfig
from tensorforge.dse.cost_dma import WINDOW_WRITE_RESPONSE, Dma, window_load_time
from tensorforge.dse.cost_transfers import TransferShape, transfer_shape
from tensorforge.hw.controller import TOKEN_QUEUES, Controller
from tensorforge.hw.store_unit import StoreUnit
from tensorforge.isa import (
    INSTRUCTION_BYTES,
    Compute,
    ComputeMode,
    Finish,
    Load,
    Store,
    expand,
)
from tensorforge.requant import PARAM_LINES


@dataclass(frozen=True)
class TraceTerms:
    """Offsets of the instruction-level timeline, in cycles (read off RTL waveforms)."""

    gate_cycles: int = 4  # one command per gate pass: TAKE, TOKENS, ISSUE, RUN (the last
    # two after the command is taken, so the gate is back this less 2 after its ISSUE)
    fetch_to_dispatch: int = 2  # a chunk's last beat to its first instruction's dispatch
    dispatch_to_gate: int = 2  # a dispatched instruction reaches its gate's TAKE
    load_address: int = 2  # a LOAD's command to its first AR (decode, plan)
    load_next: int = 2  # a LOAD's last AR to the unit taking its next command
    slot_reuse: int = 2  # a burst's last beat (or response) to the AR (AW) reusing its slot
    read_return: int = 2  # cycles beyond the DRAM latency from AR to the first R beat
    load_tail: int = 2  # the last R beat's last line to the retire pulse (line register,
    # write)
    load_run_gap: int = 1  # cycles the load unit's gatherer skips before a LOAD's first
    # data, after the last LOAD's
    store_lead: int = 3  # a STORE's command to its first AW
    write_response: int = 2  # cycles beyond the DRAM latency from the last W beat to B
    store_tail: int = 1  # the last B response to the retire pulse
    compute_fill: int = 0  # an instruction that starts an idle array waits this much more
    compute_drain_trim: int = 1  # a step alone (`StepPlan.isolated_step`) less its beats,
    # the instruction's fill and issue, and this: its last beat to its retire pulse
    done_cycles: int = 2  # the last retire to ``done``


class _ReadChannel:
    """The AXI read data channel the fetch and the load unit share: the DRAM answers bursts
    in the order their addresses came, a beat at a time."""

    def __init__(self, latency: float, terms: TraceTerms) -> None:
        self.delay = latency + terms.read_return
        self.free = 0.0  # the data channel: when the next burst's first beat may come
        self.address = 0.0  # the address channel, shared too: when the next AR may go

    def book(self, address: float, beats: int, per_beat: float, earliest: float = 0.0
             ) -> tuple[float, float]:
        """(first beat, last beat) of a burst whose address went out at ``address``, taken
        a beat per ``per_beat`` cycles from ``earliest`` on."""
        first = max(address + self.delay, self.free, earliest)
        last = first + (beats - 1) * per_beat
        self.free = last + 1
        return first, last


class _Fetch:
    """The controller's fetch: the program in bursts, at most `Controller.fetch_chunks`
    chunks requested ahead of dispatch, each burst's data on the shared read channel."""

    def __init__(self, config: AcceleratorConfig, count: int, channel: _ReadChannel,
                 dispatched: list, hint: list, p, terms: TraceTerms) -> None:
        bus = config.dma.bus_bytes
        chunk = max(INSTRUCTION_BYTES, bus)
        self.per_chunk = chunk // INSTRUCTION_BYTES
        self.chunk_beats = chunk // bus
        self.capacity = Controller.fetch_chunks * self.chunk_beats
        self.beats = -(-count * INSTRUCTION_BYTES // bus)
        self.burst = min(config.dma.max_burst, self.capacity)
        self.count, self.channel, self.dispatched = count, channel, dispatched
        self.hint = hint  # dispatch times of a previous pass, for those not yet known
        self.p, self.terms = p, terms
        self.requested = 0  # beats requested so far
        self.address = 0.0  # the last AR
        self.arrived: list[float] = []  # per beat received
        self._next: tuple = (None, None)  # (what it depends on, the next request)

    def _next_request(self) -> float | None:
        """When the next burst's AR may go out (a chunk may have to leave the queue first:
        where its dispatch is not known yet, the latest of one instruction a cycle from the
        last dispatched and the last pass's time stands in), or None before any dispatch."""
        n = min(self.burst, self.beats - self.requested)
        room = self.requested + n - self.capacity  # beats that must have left the queue
        at = max(self.address + 1, 1.0)
        if room > 0:
            chunk = -(-room // self.chunk_beats) - 1
            last = min((chunk + 1) * self.per_chunk, self.count) - 1
            if last < len(self.dispatched):
                at = max(at, self.dispatched[last] + 1)
            elif self.dispatched:
                # not dispatched yet: no earlier than one instruction a cycle from the last,
                # nor than the last pass had it
                guess = self.dispatched[-1] + (last - len(self.dispatched) + 1)
                if last < len(self.hint):
                    guess = max(guess, self.hint[last])
                at = max(at, guess + 1)
            else:
                return None
        return at

    def next_request(self) -> float:
        """When the next burst's AR may go out (infinity when fetch is done or must wait)."""
        if self.requested >= self.beats:
            return math.inf
        known = (self.requested, len(self.dispatched))
        if self._next[0] != known:  # the next request moves only with these
            self._next = (known, self._next_request())
        at = self._next[1]
        return math.inf if at is None else at

    def book_until(self, time: float, beats_needed: int = 0) -> None:
        """Book the fetch bursts whose addresses go out before ``time``, and at least until
        ``beats_needed`` beats are requested."""
        while self.requested < self.beats:
            at = self.next_request()
            if at == math.inf or (at >= time and self.requested >= beats_needed):
                return
            n = min(self.burst, self.beats - self.requested)
            at = max(at, self.channel.address)
            self.address, self.channel.address = at, at + 1
            first, _ = self.channel.book(at, n, self.p.beat_cycles)
            self.arrived += [first + b * self.p.beat_cycles for b in range(n)]
            self.requested += n

    def available(self, k: int) -> float:
        """When instruction ``k`` can be dispatched: its chunk is in."""
        chunk = k // self.per_chunk
        last_beat = min((chunk + 1) * self.chunk_beats, self.beats) - 1
        self.book_until(float("-inf"), last_beat + 1)
        return self.arrived[last_beat] + self.terms.fetch_to_dispatch


def _load_time(dma: Dma, channel: _ReadChannel, fetch: _Fetch, t: TransferShape, start: float,
               p, terms: TraceTerms) -> tuple[float, float]:
    """(when the unit may take its next LOAD, when this one retires)."""
    beats = sum(t.bursts)
    per_beat = max(p.beat_cycles, t.rows / beats) if beats else 0.0
    at = start + terms.load_address
    last = at
    freed, outstanding, delay = dma.freed, dma.outstanding, channel.delay
    gap = terms.load_run_gap  # before this LOAD's first data only
    fetching = fetch.next_request()  # the fetch's next AR, booked first where it comes first
    for count in t.bursts:  # the hot loop of the timeline: `Dma.slot`, `_ReadChannel.book`
        k = len(freed) - outstanding
        at = max(at, dma.address + 1, freed[k] + terms.slot_reuse if k >= 0 else 0.0)
        if dma.on_chip:
            at = dma.switch(at, False)
        if fetching < at:
            fetch.book_until(at)
            fetching = fetch.next_request()
        at = max(at, channel.address)
        dma.address, channel.address = at, at + 1
        earliest = dma.data + dma.pace + gap if freed else 0.0
        gap = 0.0
        first = max(at + delay, channel.free, earliest)
        last = first + (count - 1) * per_beat
        channel.free = last + 1
        freed.append(last)
        dma.data, dma.pace = last, per_beat
    # the last beat's lines are written one a cycle: its last one ``per_beat - 1`` after
    retire = max(last + max(per_beat - 1, 0) + terms.load_tail, start + 1) + t.zero_lines
    return (dma.address + terms.load_next if t.bursts else start + 1), retire


def _store_time(dma: Dma, t: TransferShape, start: float, p, terms: TraceTerms
                ) -> tuple[float, float]:
    """(when the unit may take its next STORE, when this one retires); one to the
    activation window is answered `AxiMemory.read_latency` after its last beat, not the
    DRAM latency, and its beats go a cycle each."""
    beats = sum(t.bursts)
    pace = 1.0 if t.on_chip else p.beat_cycles
    latency = (WINDOW_WRITE_RESPONSE - terms.write_response if t.on_chip
               else p.dram_latency_cycles)
    per_beat = max(pace, t.rows / beats) if beats else 0.0
    at = start + terms.store_lead
    response = start + 1
    for count in t.bursts:
        at = max(at, dma.address + 1, dma.slot(terms.slot_reuse))
        if t.on_chip or dma.on_chip:
            at = dma.switch(at, t.on_chip)
        dma.address = at
        begin = max(at + 1, dma.data)
        dma.data = begin + count * per_beat
        response = dma.data - per_beat + latency + terms.write_response
        dma.freed.append(response)
    return start + max(t.rows, 1), response + terms.store_tail


class _Computes:
    """The compute unit: steps stream back to back across instructions."""

    def __init__(self, step, p, terms: TraceTerms) -> None:
        self.step, self.p, self.terms = step, p, terms
        self.end = 0.0

    def run(self, instruction: Compute, start: float) -> tuple[float, float]:
        step, p = self.step, self.p
        steps = instruction.outer * instruction.inner
        if instruction.mode is ComputeMode.ZERO:
            cycles = steps * step.output_lines
        else:
            cycles = steps * _mac_step_cycles(step, instruction) + p.instruction_fill_cycles
        cycles += p.issue_cycles
        idle = start > self.end
        begin = max(start, self.end) + (self.terms.compute_fill if idle else 0)
        self.end = begin + cycles
        drain = max(step.isolated_step - max(step.beats, step.stationary_lines)
                    - p.instruction_fill_cycles - p.issue_cycles - self.terms.compute_drain_trim, 0)
        return begin + 1, self.end + drain


def _mac_step_cycles(step, c: Compute) -> float:
    """Mean cycles of one step of ``c``'s micro-loop: `cost_micro_loop.step_cycles` on the run of
    steps each stationary block serves and the steps between two writes of one C line, read
    off the instruction's strides (as `cost_micro_loop.micro_loops` derives them from a tiling)."""
    from tensorforge.dse.cost_micro_loop import MicroLoops, step_cycles

    run = stationary_run(step, c)
    c_moves_inner, c_moves_outer = c.acc_inner != 0, c.acc_outer != 0
    per_pass = c.inner if c_moves_inner and not c_moves_outer and c.outer > 1 else 0
    same_c = not c_moves_inner and (c.inner > 1 or (not c_moves_outer and c.outer > 1))
    revisit = per_pass if step.groups_span_steps or not same_c else 1
    loops = MicroLoops(instructions=1, inner=c.inner, run=run, revisit=revisit)
    return float(step_cycles(step, loops, max(step.beats, step.stationary_lines)))


def stationary_run(step, c: Compute) -> int:
    """Steps of ``c``'s micro-loop that keep one stationary block (the PEs reload it between
    runs): 1 where the inner loop moves it, the inner loop where only the outer does, else
    every step."""
    stationary = (c.a_outer, c.a_inner) if step.stationary_role == "A" else (c.b_outer, c.b_inner)
    if c.inner > 1 and stationary[1] != 0:
        return 1
    if c.outer > 1 and stationary[0] != 0:
        return c.inner
    return c.outer * c.inner


#: Passes of `trace_cycles` at most: each runs the program with the dispatch times of the
#: last, so the fetch's requests interleave with the LOADs' as in time; it stops early once
#: two passes agree.
PASSES = 5
#: Two passes whose cycles differ by at most this share have settled.
SETTLED = 0.002


def trace_cycles(instructions, config: AcceleratorConfig, step, p,
                 terms: TraceTerms = TraceTerms(), log: list | None = None) -> float:
    """Cycles from ``start`` to ``done`` of ``instructions`` (a compiled program) on
    ``config`` under the batch model's parameters ``p`` and the timeline's ``terms``;
    ``step`` is the layer space's `cost_space.StepPlan`; ``log`` (a list) receives
    ``(index, unit, dispatched, taken, issued, retired)`` per instruction.

    Fetch requests wait on dispatch, which comes later in program order than the LOADs
    whose data shares the read channel with them; so the timeline runs again with the last
    pass's dispatch times until its cycles settle (`SETTLED`, `PASSES`)."""
    program = [i for i in instructions if not isinstance(i, Finish)]
    precision = config.precision
    runs = [expand([i], precision.in_bytes, precision.acc_bytes) for i in program]
    transfers = {(k, n): transfer_shape(config, run) for k, i in enumerate(program)
                 if isinstance(i, (Load, Store)) for n, run in enumerate(runs[k])}
    hint: list[float] = []
    cycles = None
    for _ in range(PASSES):
        events: list = []
        last, (cycles, hint) = cycles, _pass(program, runs, transfers, config, step, p, terms,
                                             hint, events)
        if last is not None and abs(cycles - last) <= SETTLED * last:
            break
    if log is not None:
        log.extend(events)
    return cycles


def _pass(program, runs, transfers, config, step, p, terms, hint, log):
    """One run of the timeline: (cycles, dispatch time per instruction). ``runs[k]`` are
    the commands the gate issues for instruction ``k`` (one, or a repeated LOAD's or
    STORE's runs, `isa.expand`): the gate issues the next run two cycles after the last
    (RUN, then ISSUE again), without taking or popping anything."""
    units = {Load: "load", Compute: "compute", Store: "store"}
    depth = config.controller.queue_depth
    windows = Controller.retire_windows
    pushes = defaultdict(list)  # queue -> push times, in order
    popped = defaultdict(int)  # queue -> pops so far
    produces = {(unit, flag): name for name, unit, flag, _, _ in TOKEN_QUEUES}
    consumes = {(unit, flag): name for name, _, _, unit, flag in TOKEN_QUEUES}
    dispatch = []  # per instruction
    taken = defaultdict(list)  # unit -> when its gate took each instruction
    retired = defaultdict(list)  # unit -> retire times, in order
    gate_back = defaultdict(float)  # unit -> when its gate is back in TAKE
    unit_ready = defaultdict(float)  # unit -> when the unit accepts its next command
    # bursts in flight: the DMA's, or fewer where the memory accepts fewer (`rtl_parameters`)
    in_flight = max(min(config.dma.outstanding, int(p.bursts_in_flight)), 1)
    dmas = {"load": Dma(in_flight, reading=True), "store": Dma(in_flight)}
    computes = _Computes(step, p, terms)
    channel = _ReadChannel(p.dram_latency_cycles, terms)
    fetch = _Fetch(config, len(program), channel, dispatch, hint, p, terms)
    for k, instruction in enumerate(program):
        unit = units[type(instruction)]
        mine = taken[unit]
        at = max(dispatch[-1] + 1 if dispatch else 1.0, fetch.available(k))
        if len(mine) >= depth:  # the queue has room once its oldest was taken
            at = max(at, mine[-depth] + 1)
        dispatch.append(at)
        take = max(at + terms.dispatch_to_gate, gate_back[unit])
        mine.append(take)
        ready = take + 1
        for flag in ("pop_prev", "pop_next"):
            name = consumes.get((unit, flag))
            if name and getattr(instruction, flag):
                index = popped[name]
                popped[name] += 1
                ready = max(ready, pushes[name][index] + 1)
        issue, room = ready - 1, 0.0
        for n, run in enumerate(runs[k]):
            # the next run waits in RUN for a free retire slot, as the gate's TAKE does
            issue = max(issue + 2, room + 1, unit_ready[unit])
            if unit == "load" and transfers[k, n].on_chip:
                unit_ready[unit], retire = window_load_time(dmas[unit], transfers[k, n],
                                                             issue, terms)
            elif unit == "load":
                unit_ready[unit], retire = _load_time(dmas[unit], channel, fetch,
                                                      transfers[k, n], issue, p, terms)
            elif unit == "store":
                # the unit itself takes no more than `StoreUnit.stores_in_flight` STOREs (runs)
                # that have not retired: one more waits for the oldest's last B response
                done = retired[unit]
                if len(done) >= StoreUnit.stores_in_flight:
                    issue = max(issue, done[-StoreUnit.stores_in_flight] + 1)
                # a requantizing STORE reads its parameter lines first, a cycle each
                extra = PARAM_LINES if instruction.requant else 0
                unit_ready[unit], retire = _store_time(dmas[unit], transfers[k, n],
                                                       issue + extra, p, terms)
            else:
                unit_ready[unit], retire = computes.run(run, issue)
            done = retired[unit]
            retire = max(retire, done[-1] if done else 0.0)
            done.append(retire)
            window = windows[unit]
            room = done[-1 - window] if len(done) > window else 0.0
            gate_back[unit] = max(issue + terms.gate_cycles - 2, room + 1)
            log.append((k, unit, at, take, issue, retire))
        for flag in ("push_prev", "push_next"):
            name = produces.get((unit, flag))
            if name and getattr(instruction, flag):
                pushes[name].append(retire)
    last = max((times[-1] for times in retired.values() if times), default=0.0)
    return max(last, dispatch[-1] if dispatch else 0.0) + terms.done_cycles, dispatch
