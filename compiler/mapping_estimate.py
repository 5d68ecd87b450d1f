"""The pipelined cycle estimate the default mapper ranks tilings with (`estimate_cycles`).

Not a cycle model (that is `dse.cost_trace`, checked against the RTL): a formula cheap enough
to score every tiling of a layer, which must still order them as the hardware does. The
program double-buffers, so LOAD, COMPUTE and STORE overlap and the busiest unit sets the pace,
plus the first LOADs and the last STORE. Compute counts COMPUTE instructions, stationary-block
changes and the wait of each C tile, so few long instructions win; loads count an operand's
reloads from the loop order (an operand is reloaded whenever a tile loop it depends on
advances).

The DRAM behind the bus (`tensorforge.memory.MemorySystem`) enters each transfer twice: its
latency delays a transfer's first data (which whoever waits for the tile sees), and a DMA
unit keeps at most ``in_flight`` bursts waiting on it, so bursts cannot go faster than one per
``(latency + round trip + beats) / in_flight`` cycles. A tile of short strips moves many short
bursts and, at high latency with few bursts in flight, pays the latency per burst; a tile of
long strips moves the same bytes in fewer, full bursts.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from tensorforge.compiler.field_limits import MAX_EXTENT
from tensorforge.compiler.mac_plan import micro_loop
from tensorforge.compiler.matching import TensorizeChoice
from tensorforge.compiler.tiling import Tiling
from tensorforge.compiler.workload import Workload
from tensorforge.config import AcceleratorConfig
from tensorforge.hw.dataflow_plan import plan_for
from tensorforge.isa import INSTRUCTION_BYTES
from tensorforge.memory import DEFAULT_MEMORY, MemorySystem

INSTRUCTION_FILL = 2  # cycles; the next MAC instruction starts while the last one drains
STATIONARY_SWITCH = 0  # cycles; the PEs load the next block behind the current one's beats
ZERO_DRAIN = 24  # cycles per C tile; ~ the array latency plus a group's output lines
LOAD_ISSUE = 8  # cycles of one LOAD's command decode and address set-up
ROW_SLACK = 0.1  # cycles per row lost to beats that straddle a bus word
# The mapper's score adds this many cycles per DRAM bus beat to the estimate (`Estimate.score`):
# on a compute-bound layer mappings within a few percent of each other differ up to tenfold in
# DRAM traffic (a convolution's direct mapping against its im2col matrix), which costs energy
# the cycle count does not see; an eighth of a cycle per beat ranks such near-ties by
# traffic and leaves memory-bound rankings to the cycles.
DRAM_BEAT_SCORE = 1 / 8
BURST_ROUND_TRIP = 4  # cycles a burst holds its slot beyond the latency and its beats (the
# first beat's return and the slot's reuse; `dse.cost_parameters.RTL_FITTED_TERMS`)


@dataclass(frozen=True)
class Transfer:
    """One tile's LOADs or STOREs: ``busy`` cycles of its DMA unit, and ``duration`` from
    its first command to its last data (the busy time and the DRAM latency)."""

    busy: float
    duration: float


@dataclass(frozen=True)
class UnitCosts:
    """Cycle costs of the accelerator's units on a memory, for ranking mappings.

    Measured on the generated RTL of an 8x8 GEMM accelerator (docs/rtl_utilization.md): a
    MAC step streams one beat per cycle; a COMPUTE instruction adds its pipeline fill and
    drain; a change of stationary block costs its lines where the PEs cannot load it behind
    the current one; the pipelined load unit takes about one cycle per buffer line, the store
    unit about one per bus beat of an accumulator line; a ZERO clears one accumulator line
    a cycle, after the array has drained. The DRAM's bandwidth slows each beat
    (``beat``), its latency and burst limit are ``latency`` and ``in_flight``.
    """

    step: int  # cycles of one intrinsic step (streamed beats)
    stationary_operand: str  # "A" or "B": the operand the PEs hold
    instruction: int  # fill and drain of one COMPUTE instruction
    stationary: int  # cycles per change of stationary block
    load_row: float  # per LOAD row (one buffer line)
    load_instruction: int  # issue of one LOAD
    store_row: float  # per STORE row (one accumulator line)
    zero_line: int  # per accumulator line a ZERO clears (0: the MAC overwrite bit clears it)
    zero: int  # per C tile: its first MAC waits for the previous tile's results to be written
    latency: int = 0  # DRAM cycles from a burst's address to its data (or last beat to B)
    in_flight: int = 16  # bursts a DMA unit keeps waiting on the DRAM
    beat: float = 1.0  # cycles per bus beat (above 1 where the DRAM is slower than the bus)
    bus_bytes: int = 8
    max_burst: int = 16  # beats per AXI burst at most

    @classmethod
    @functools.cache  # read for every tiling the mapping search scores
    def of(cls, config: AcceleratorConfig, memory: MemorySystem = DEFAULT_MEMORY) -> UnitCosts:
        plan = plan_for(config)
        bus = config.dma.bus_bytes
        beat = 1.0 / memory.beats_per_cycle(bus)
        in_flight = config.dma.outstanding
        if memory.outstanding is not None:
            in_flight = min(in_flight, memory.outstanding)
        return cls(step=len(plan.beats), stationary_operand=plan.stationary.value,
                   instruction=INSTRUCTION_FILL,
                   stationary=STATIONARY_SWITCH, zero=ZERO_DRAIN,
                   load_row=max(1.0, config.spad_line_bytes / bus * beat) + ROW_SLACK,
                   load_instruction=LOAD_ISSUE,
                   store_row=-(-config.acc_line_bytes // bus) * beat + ROW_SLACK, zero_line=0,
                   latency=memory.latency, in_flight=in_flight, beat=beat, bus_bytes=bus,
                   max_burst=config.dma.max_burst)

    def transfer(self, lines: int, row: float, fixed: float, bursts: int, beats: int
                 ) -> Transfer:
        """``lines`` buffer lines at ``row`` cycles a line plus ``fixed``, moved in ``bursts``
        AXI bursts of ``beats`` in all: the stream, or the bursts the slots in flight let
        through if that is slower."""
        stream = lines * row + fixed
        if not bursts:
            return Transfer(stream, stream)
        slot = (self.latency + BURST_ROUND_TRIP + beats / bursts * self.beat) / self.in_flight
        busy = max(stream, bursts * slot + fixed)
        return Transfer(busy, busy + self.latency)

    def contiguous_transfer(self, lines: int, strips: int, line_bytes: int
                            ) -> tuple[int, int, int]:
        """(instructions, bursts, beats) of ``lines`` in ``strips`` runs each contiguous in
        DRAM and moved by one instruction (the tile-major layouts of `codegen`, where they
        are granted)."""
        if not lines:
            return strips, 0, 0
        beats = -(-(lines // strips) * line_bytes // self.bus_bytes)
        return strips, strips * -(-beats // self.max_burst), strips * beats


class TileBursts:
    """(instructions, bursts, beats) of one operand tile's transfer as the code generator
    emits it: whether a tile's rows are one run or a burst each, and how many LOADs or STOREs
    move them, depends on the DRAM layout it picks, coalescing, padding and gathers, so it is
    counted, not guessed (`dse.cost_transfers.TransferCounter` runs the
    code generator's own LOAD/STORE emission), once per distinct operand tile."""

    def __init__(self, device: Workload, choice: TensorizeChoice,
                 config: AcceleratorConfig) -> None:
        from tensorforge.dse.cost_transfers import TransferCounter  # imports the compiler

        self.counter = TransferCounter(device, choice, (), config)
        self.cache: dict[tuple, tuple[int, int, int]] = {}

    def __call__(self, role: str, tiling: Tiling) -> tuple[int, int, int]:
        tiles = dict(tiling.tiles)
        held = tiling.held(role)
        key = (role, held, *(tiles[n] for n in tiling.operand(role).access.indices))
        if key not in self.cache:
            counts = self.counter.count(role, tiles, tiles, tiling.holds)
            self.cache[key] = (counts.instructions, counts.bursts, counts.beats)
        return self.cache[key]


def estimate_cycles(device: Workload, tiling: Tiling, order: tuple[str, ...],
                    config: AcceleratorConfig, memory: MemorySystem = DEFAULT_MEMORY,
                    choice: TensorizeChoice | None = None) -> float:
    """Pipelined estimate of a tiling under a loop order on ``memory`` (for ranking only);
    with the tiling's tensorize ``choice`` its bursts are counted (`TileBursts`), without
    it each strip of a tile is taken to be one run in DRAM."""
    bursts = TileBursts(device, choice, config) if choice is not None else None
    return Estimate(device, tiling, config, memory, bursts)(order)


class Estimate:
    """`estimate_cycles` of one tiling, with what does not depend on the order computed once.

    The program double-buffers: an operand tile loads while the previous tile of that operand
    is in use, and a C tile stores while the next one computes. So the three units run side by
    side as a pipeline whose slowest path sets the time: the compute, after a prologue (the
    LOADs of the first step's first chunk) and before an epilogue (the last chunk's STORE),
    stalled where a transfer (with its DRAM latency) outlasts the steps that use the previous
    tile; or a DMA unit's work with what must precede and follow it. Each C tile's first MAC
    waits for the last one's. An operand is (re)loaded when a tile loop it depends on
    advances: every ``period`` steps, the product of the counts of the loops inside its
    innermost one. ``bursts`` counts each tile's transfers (`TileBursts`); without it each
    strip of a tile is one contiguous LOAD.
    """

    def __init__(self, device: Workload, tiling: Tiling, config: AcceleratorConfig,
                 memory: MemorySystem = DEFAULT_MEMORY, bursts: TileBursts | None = None
                 ) -> None:
        costs = UnitCosts.of(config, memory)
        self.latency = costs.latency
        self.queue_depth = config.controller.queue_depth
        # a held operand's program dispatches STOREs a step late (`tile_walk.TileWalker._pipelined`)
        self.pipelined = bool(tiling.holds)
        sizes, block, tiles = device.sizes, dict(tiling.block), dict(tiling.tiles)
        self.counts = counts = {n: tiling.count(n) for n in sizes}
        self.steps = math.prod(counts.values())
        mac_steps = math.prod(-(-sizes[n] // block[n]) for n in sizes)
        blocks = {n: -(-tiles[n] // block[n]) for n in sizes}
        instructions, switches = _compute_shape(tiling, blocks, costs.stationary_operand)
        self.fetch_beats = self.steps * instructions * INSTRUCTION_BYTES // costs.bus_bytes
        self.compute = (mac_steps * costs.step / self.steps + instructions * costs.instruction
                        + switches * costs.stationary)
        self.transfers: dict[str, tuple[set[str], Transfer]] = {}  # role -> (looping, cost)
        self.beats: dict[str, int] = {}  # role -> bus beats of one tile transfer
        self.instructions: dict[str, int] = {}  # role -> LOADs or STOREs of one transfer
        for role in ("A", "B", "C"):
            tile = tiling.operand(role)
            strips = math.prod(d.lines for d in tile.dims[:-1])  # one LOAD per strip
            line_bytes = config.acc_line_bytes if role == "C" else config.spad_line_bytes
            instructions, *counted = (
                bursts(role, tiling) if bursts is not None
                else costs.contiguous_transfer(tile.lines, strips, line_bytes))
            if role == "C":
                cost = costs.transfer(tile.lines, costs.store_row, 0, *counted)
            else:
                cost = costs.transfer(tile.lines, costs.load_row,
                                      instructions * costs.load_instruction, *counted)
            self.transfers[role] = (self._looping(tiling, role), cost)
            self.instructions[role] = instructions
            # bus beats of one tile transfer, the LOADs' or STOREs' own fetch included
            self.beats[role] = counted[1] + instructions * INSTRUCTION_BYTES // costs.bus_bytes
        c_tile = tiling.operand("C")
        outputs = set(c_tile.access.indices)
        operands = [set(tiling.operand(r).access.indices) for r in ("A", "B")]
        # the first step is cut along a reduction index, the last along an output index and
        # its last chunk again along a second one (`codegen`): the first chunk's LOADs (of
        # one reduction block; what the sub-chunks of that one save, the LOADs streaming
        # behind them mostly take back) and one C block's STORE are exposed
        self.first_chunk = 1 / max((blocks[n] for n in sizes
                                    if n not in outputs and all(n in o for o in operands)),
                                   default=1)
        self.last_chunk = 1 / math.prod(sorted(blocks[n] for n in outputs)[-2:])
        c_tiles = math.prod(counts[n] for n in c_tile.access.indices)
        self.zero = c_tiles * (c_tile.lines * costs.zero_line + costs.zero)

    def _looping(self, tiling: Tiling, role: str) -> set[str]:
        """The looping tile indices whose advance reloads ``role`` (not those it holds)."""
        return {n for n in tiling.keys(role) if self.counts[n] > 1}

    def _period(self, looping: set[str], order: tuple[str, ...]) -> int:
        deepest = max((p for p, n in enumerate(order) if n in looping), default=-1)
        if deepest < 0:
            return self.steps  # loaded once: at the first step only
        return math.prod(self.counts[n] for n in order[deepest + 1 :])

    def dram_beats(self, order: tuple[str, ...]) -> int:
        """Bus beats of the program under ``order``: its LOADs, STOREs and the fetch of every
        instruction."""
        return self.fetch_beats + sum(self.steps // self._period(looping, order) * self.beats[role]
                   for role, (looping, _) in self.transfers.items())

    def score(self, order: tuple[str, ...]) -> float:
        """What the mapper minimizes: the cycles, near-ties broken by DRAM traffic
        (`DRAM_BEAT_SCORE`)."""
        return self(order) + DRAM_BEAT_SCORE * self.dram_beats(order)

    def _dispatch_stalls(self, reloads: dict[str, tuple[int, int]]) -> float:
        """The controller dispatches in program order into queues of ``controller.queue_depth``:
        a C tile's STOREs beyond that wait in dispatch for its last COMPUTE and hold back
        what follows them, the next step's LOADs (which so cannot load ahead) and COMPUTEs.
        At each C tile's end the compute waits for those STOREs and for the LOADs of the
        operands reloaded there (`dse.cost_trace` times this instruction by instruction).
        A pipelined program (a held operand's) issues the STOREs after the next step's
        COMPUTEs and its LOADs, so nothing waits behind them."""
        if self.pipelined:
            return 0.0
        c_period, c_times = reloads["C"]
        stores = self.instructions["C"]
        held = stores - self.queue_depth
        if held <= 0 or c_times < 2:
            return 0.0
        per_end = self.transfers["C"][1].busy * held / stores
        total = (c_times - 1) * per_end
        for role in ("A", "B"):
            period, times = reloads[role]
            total += (min(times, c_times) - 1) * self.transfers[role][1].busy
        return total

    def __call__(self, order: tuple[str, ...]) -> float:
        busy = {"load": 0.0, "store": 0.0}
        reloads = {}
        for role, (looping, cost) in self.transfers.items():
            period = self._period(looping, order)
            reloads[role] = (period, self.steps // period)
            busy["store" if role == "C" else "load"] += reloads[role][1] * cost.busy
        compute = self.steps * self.compute + self.zero
        # the first step's first chunk waits for its LOADs and the DRAM; the last chunk's
        # STORE and its write response follow the last step
        first_loads = sum(self.transfers[r][1].busy for r in ("A", "B"))
        prologue = first_loads * (self.first_chunk if self.steps > 1 else 1) + self.latency
        epilogue = (self.transfers["C"][1].busy * (self.last_chunk if self.steps > 1 else 1)
                    + self.latency)
        # a transfer is issued one tile ahead, once the steps that used the half it fills
        # are done: the steps of the tile between must cover its duration, or compute stalls
        stalls = sum(times * max(0.0, self.transfers[role][1].duration - period * self.compute)
                     for role, (period, times) in reloads.items())
        stalls += self._dispatch_stalls(reloads)
        # a pipeline of three units takes its slowest path: the compute with its stalls, or
        # a DMA unit's work plus what must come before its first item and after its last (the
        # first C tile is computed, and its operands loaded, before anything stores; the
        # last step computes after the last LOAD)
        c_period = reloads["C"][0]
        first_c_loads = sum(self.transfers[r][1].busy * -(-c_period // reloads[r][0])
                            for r in ("A", "B"))
        first_store = max(prologue + c_period * self.compute, first_c_loads + self.latency)
        return max(prologue + compute + stalls + epilogue,
                   busy["load"] + self.latency + self.compute + epilogue,
                   first_store + busy["store"] + self.latency)


def _compute_shape(tiling: Tiling, blocks: dict[str, int], stationary: str
                   ) -> tuple[int, float]:
    """MAC COMPUTE instructions of a full tile step and its changes of stationary block."""
    coefs = {r: tiling.operand(r).coef for r in ("C", "A", "B")}
    inner, outer = micro_loop(blocks, coefs, stationary)
    rest = [n for n in blocks if n not in (inner, outer)]
    splits = math.prod(-(-blocks[n] // MAX_EXTENT) for n in (inner, outer) if n)
    instructions = math.prod(blocks[n] for n in rest) * splits
    steps = math.prod(blocks.values())
    keeps = inner is not None and coefs[stationary].get(inner, 0) == 0
    return instructions, steps / blocks[inner] if keeps else steps
