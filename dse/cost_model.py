"""The analytical cost model: cycles and energy of a batch of mappings, vectorized with numpy.

A batch is struct-of-arrays: ``tiles`` (``n x D`` elements per tile of each device index) and
``order`` (``n x D`` index positions, outermost tile loop first) over one `LayerSpace` (one
workload, fusion, tensorize choice and accelerator). `evaluate` returns a `CostBatch` of ``n``
values per quantity; `evaluate_mapping` wraps one `compiler.mapping.Mapping`. A search's batch
mixes tensorize choices: `evaluate_rows` prices it in one pass, each mapping's choice
constants carried as a row (`cost_rows`), with the same figures as `evaluate` per choice.

What is counted (following the code generator, `tensorforge.compiler.codegen`, step by step):

* **steps**: every index advances in intrinsic blocks; a partial last tile pads its blocks with
  zeros, so MAC steps are the product over indices of the blocks of every tile (padding waste is
  the executed-to-useful MAC ratio). No ZERO steps: the MACs that first visit an output tile's
  blocks carry the ISA's ``overwrite`` bit and write them without reading the old lines.
* **step cost** (`StepPlan`, from `hw.dataflow_plan`): ``beats`` streamed lines, one per cycle;
  when the stationary block changes (the micro-loop's inner index is one it uses) its lines are
  read on the other scratchpad port while the previous step streams (double-banked PE stores),
  so the step takes ``max(beats, stationary_lines)`` plus ``reload_conflict_share`` of the
  bank-conflict cycles of the two concurrent line streams (line ``n`` in bank ``n % banks``;
  the RTL reads a block behind the last beat of its bank, so few collide). The micro-loop
  follows `codegen.micro_loop`: a stationary block serves one step, one inner run or one
  instruction; a PE store bank takes the next block only `bank_reuse_gap` cycles after its
  last beat, which bounds a run from below on systolic output-stationary arrays; and a C line
  that the micro-loop read-modify-writes again after ``d`` steps waits for its last write
  (``d`` steps take at least `StepPlan.accumulate_round_trip` cycles). Back-to-back MAC
  instructions stream (the next starts while the last drains): each adds
  ``instruction_fill_cycles`` and ``issue_cycles``. Each C tile's first MAC waits for the
  array to drain the previous tile: one isolated step (`hw.compute_unit.step_latency`).
* **DRAM**: an operand tile is reloaded each time its tile coordinates change in loop order (an
  operand the inner loops do not use stays resident). Each LOAD row is one scratchpad line:
  ``ceil(row bytes / bus bytes)`` beats (partial beats count whole) at one beat per cycle; pad
  lines cost a cycle each; each LOAD instruction adds its fixed cost and one DRAM latency (the
  load unit keeps rows' bursts in flight, so the latency of later bursts hides behind earlier
  data). STOREs move ``acc_bits`` elements the same way. Bytes are exact; LOAD/STORE
  instructions are one per run of a tile's innermost lines, plus one for a shorter last row
  and one for a run's zero pad lines (`cost_geometry.transfers`). A held operand
  (`compiler.mapping.Mapping.holds`, `cost_holds`) is a tile spanning its held indices
  whole, in the buffers and on the bus, reloaded only when an index it does not hold
  advances; its program dispatches STOREs after the next step's COMPUTEs and LOADs, so they
  hold nothing back (`codegen._Walker._pipelined`), and no boundary step is cut along a
  held index.
* **split steps** (`cost_split`, laid out by `cost_boundary`): the code generator cuts the
  first tile step into chunks along a reduction index and the last along an output index;
  each chunk is priced as a tile step of its own (its LOADs, its micro-loop, its STOREs,
  `_tile_costs`), and the per-unit cycles are those of the program with the chunks.
* **overlap** (the VTA dependency tokens of the generated program and the controller that
  runs it): A, B and C are double-buffered, so the load of the next tile, the compute of this
  one and the store of the previous one run concurrently, as far as the controller lets
  them: it fetches one instruction at a time (`fetch_cycles`) and dispatches in program order
  into per-unit queues, so a step with more STOREs than a queue and gate hold
  (`dispatch_window`) holds back the next step's LOADs until its STOREs run; the load and
  store units idle ``gate_cycles`` between commands. `cost_timeline.timeline` runs this as a
  max-plus recurrence over the chunks of the first and last steps and up to
  `cost_boundary.NEAR_STEPS` steps next to them; the steps between (long programs) cost the
  slowest of the three units or of the dispatch chain per step, whose event streams are
  periodic with nested periods (suffix products of the loop counts), so their sum is exact
  without enumerating them (`_overlapped`). Host-side fusion (im2col/col2im) or gathered
  layouts are charged as a serial DRAM copy at full bus rate (``host_cycles``).
* **energy**: per executed MAC, per scratchpad/accumulator byte read or written, per DRAM byte,
  and per operand byte moved between PEs (hops by interconnect: `cost_space.movement_hops`),
  with the constants of an `EnergyTable`.

Checked against: the functional simulator's MAC/ZERO step counts and DRAM bytes of compiled
programs, and RTL cycle counts of small programs within a stated tolerance
(``tests/test_cost_model.py``; the full table: ``benchmarks/check_cost_model_rtl.py``,
docs/cost_model.md). The unit terms of `CostParameters` come from those RTL measurements;
the DRAM latency is an assumption about the memory outside the accelerator.

Two uses, two granularities: a search ranks thousands of candidate mappings a second with
`evaluate` (the batch model above); every figure a user reads is for one mapping
(`evaluate_mapping`), whose cycles come from the instruction-level timeline of the program
the code generator emits (`cost_trace`), checked on held-out programs in docs/fidelity.md.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from tensorforge.config import AcceleratorConfig
from tensorforge.dse.cost_boundary import BoundaryPlan, Middle, boundary_plan, boundary_schedule
from tensorforge.dse.cost_geometry import (
    Geometry,
    distinct_rows,
    reload_periods,
    sweep_sums,
    tile_lines,
    transfers,
)
from tensorforge.dse.cost_holds import (
    held_geometry,
    hold_columns,
    hold_patterns,
    reload_uses,
    take_held,
    widen_held,
)
from tensorforge.dse.cost_rows import OperandRows, SpaceRows, gathers
from tensorforge.dse.cost_space import (
    LayerSpace,
    StepPlan,
    movement_hops,
)
from tensorforge.dse.cost_timeline import pressure, timeline
from tensorforge.dse.cost_transfers import COUNTS
from tensorforge.dse.evaluate import TECH_45NM, Technology
from tensorforge.hw.controller import Controller
from tensorforge.isa import INSTRUCTION_BYTES
from tensorforge.memory import MemorySystem

I64 = np.int64


@dataclass(frozen=True)
class CostParameters:
    """The model's timing terms. Each unit term was measured on the RTL (the table and the
    commit are in docs/cost_model.md, `benchmarks/check_cost_model_rtl.py`); the DRAM
    latency is an assumption about the memory outside the accelerator."""

    dram_latency_cycles: int = 8  # a burst's address to its first data beat: a delay where
    # something waits for the data, not the DMA units' work (`cost_timeline.timeline`)
    load_fixed_cycles: int = 5  # a LOAD's cost beyond its stream (command, planning, last line)
    store_fixed_cycles: int = 5  # a STORE's cost beyond its stream (StoreUnit.fixed_cycles - 1)
    reload_conflict_share: float = 0.0  # of a reloading step's bank conflicts (the RTL reads
    # a stationary block behind the last beat that uses its bank: few collide)
    instruction_fill_cycles: int = 2  # per MAC COMPUTE: the next one starts while it drains
    issue_cycles: int = 1  # per instruction: decode and dispatch to its unit
    gate_cycles: int = Controller.gate_latency + 1  # LOAD/STORE units idle between commands:
    # their gate takes, checks and issues the next, and a unit lowers `idle` the cycle after
    # it accepts one (the compute unit's gate overlaps its run)
    fetch_request_cycles: int = 3  # per fetched chunk beyond its beats and DRAM latency:
    # REQUEST, the address handshake, the first beat's response (`fetch_cycles`)
    beat_cycles: float = 1.0  # cycles a bus beat takes: above 1 where the DRAM's bandwidth is
    # below the bus's (MemorySystem.beats_per_cycle)
    bursts_in_flight: float = 16.0  # bursts a DMA unit and the DRAM together keep in flight
    # (reads awaiting data, writes awaiting their response; `dma.outstanding` bounds both)
    burst_round_trip_cycles: float = 0.0  # a burst's cycles beyond the DRAM latency, from its
    # address to what frees its slot (its last data beat, its response)

    def burst_cycles(self) -> float:
        """The least spacing of a DMA unit's bursts that the bursts in flight allow."""
        return (self.dram_latency_cycles + self.burst_round_trip_cycles) / self.bursts_in_flight


def dispatch_window(config: AcceleratorConfig) -> int:
    """Instructions of one unit dispatched ahead of the one it runs: its queue
    (``controller.queue_depth``) and the one its gate holds (hw/controller.py)."""
    return config.controller.queue_depth + 1


def fetch_cycles(config: AcceleratorConfig, p: CostParameters) -> float:
    """Cycles an instruction's fetch takes in steady state: the controller prefetches the
    program in chunks of ``max(16, bus bytes)`` into a queue of `Controller.fetch_chunks`,
    so the DRAM latency (with the request) is paid once per queue of chunks, and otherwise
    an instruction costs its beats and a cycle of dispatch."""
    chunk = max(INSTRUCTION_BYTES, config.dma.bus_bytes)
    per_chunk = chunk // INSTRUCTION_BYTES
    beats = chunk // config.dma.bus_bytes
    refill = (p.fetch_request_cycles + p.dram_latency_cycles + beats * Controller.fetch_chunks
              ) / (Controller.fetch_chunks * per_chunk)
    return max(refill, (beats + per_chunk) / per_chunk)


#: Terms fitted by `benchmarks/check_cost_model_rtl.py --dram` on the program cycles of the
#: calibration programs at 0, 16, 32 and 48 cycles of DRAM latency (the Verilog DRAM of the
#: RTL bench; the held-out programs never enter the fit): a burst's round trip beyond the
#: latency, the gate's gap, and the LOAD and STORE fixed costs (of which a retiring unit
#: hides all but a transfer's first under the stream: `_unit_time`).
RTL_FITTED_TERMS = {"burst_round_trip_cycles": 4.0, "gate_cycles": 4, "load_fixed_cycles": 1,
                    "store_fixed_cycles": 5}


def rtl_parameters(memory: MemorySystem, config: AcceleratorConfig) -> CostParameters:
    """The parameters under which the model describes ``config``'s RTL on ``memory``: its
    latency, its bandwidth as cycles a bus beat, and as many bursts in flight as the DMA
    (``dma.outstanding``) and the memory both allow."""
    in_flight = config.dma.outstanding
    if memory.outstanding is not None:
        in_flight = min(in_flight, memory.outstanding)
    return CostParameters(
        dram_latency_cycles=memory.latency,
        beat_cycles=1.0 / memory.beats_per_cycle(config.dma.bus_bytes),
        bursts_in_flight=float(in_flight), **RTL_FITTED_TERMS)


@dataclass(frozen=True)
class EnergyTable:
    """Energy per event in pJ (see `energy_table` for where the numbers come from)."""

    mac_pj: float
    spad_pj_per_byte: float
    acc_pj_per_byte: float
    dram_pj_per_byte: float
    hop_pj_per_byte: float


def energy_table(config: AcceleratorConfig, technology: Technology = TECH_45NM) -> EnergyTable:
    """Per-event energies of ``config`` from a `Technology` (45 nm figures by default).

    SRAM energy follows the bank size (square-root law), the accumulator its whole size.
    """
    bank_bytes = config.scratchpad.capacity / config.scratchpad.banks
    return EnergyTable(
        mac_pj=technology.mac_pj(config.precision.in_bits, config.precision.acc_bits),
        spad_pj_per_byte=technology.sram_pj_per_byte(bank_bytes),
        acc_pj_per_byte=technology.sram_pj_per_byte(config.scratchpad.accumulator),
        dram_pj_per_byte=technology.dram_pj_per_byte,
        hop_pj_per_byte=technology.register_pj_per_byte,
    )


@dataclass(frozen=True)
class CostBatch:
    """Per-mapping results, each an ``n``-vector. ``legal`` is False where a tile is not a
    block multiple or the tiles do not fit the buffers double-buffered; their cycles are inf."""

    legal: np.ndarray
    cycles: np.ndarray
    energy_pj: np.ndarray
    compute_cycles: np.ndarray
    load_cycles: np.ndarray
    store_cycles: np.ndarray
    host_cycles: np.ndarray
    mac_steps: np.ndarray
    zero_steps: np.ndarray
    dram_read_bytes: np.ndarray
    dram_write_bytes: np.ndarray
    spad_lines: np.ndarray
    acc_lines: np.ndarray
    utilization: np.ndarray  # useful MACs / executed MACs (padding waste)
    extra: dict[str, np.ndarray] = field(default_factory=dict)

    def row(self, i: int) -> dict[str, float]:
        """Mapping ``i``'s numbers as a plain dict (for reports and `LayerMetrics.details`)."""
        names = [n for n in self.__dataclass_fields__ if n != "extra"]
        return {n: float(getattr(self, n)[i]) for n in names}


@dataclass(frozen=True)
class _MicroLoops:
    """The MAC COMPUTE micro-loop of a full tile step, per mapping (`codegen.micro_loop`)."""

    instructions: np.ndarray  # MAC instructions per full tile step
    inner: np.ndarray  # inner extent in blocks (1 without an inner loop)
    run: np.ndarray  # steps per stationary block: 1, inner, or the whole instruction
    revisit: np.ndarray  # steps between two read-modify-writes of one C line; 0: none


def _micro_loops(blocks: np.ndarray, rows: SpaceRows) -> _MicroLoops:
    """Mirror `codegen.micro_loop` on tile steps of ``blocks`` (``n x D``) blocks per index:
    the inner loop runs over the index with the most blocks that the stationary operand does
    not use (else the one with the most), ties to an output index; the outer over the next
    with the most blocks; the rest unroll."""
    n = blocks.shape[0]
    every = np.arange(n)
    big = np.iinfo(I64).max
    c_uses = rows.uses(2)
    s_uses = rows.uses(0 if rows.step.stationary_role == "A" else 1)
    key = np.where(blocks > 1, 2 * -blocks + ~c_uses, big)  # lower first, index order on ties
    keep_key = np.where(s_uses, big, key)
    has_keep = keep_key.min(axis=1) < big
    inner_at = np.where(has_keep, np.argmin(keep_key, axis=1), np.argmin(key, axis=1))
    has_inner = key.min(axis=1) < big
    rest = key.copy()
    rest[every, inner_at] = big
    outer_at = np.argmin(rest, axis=1)
    has_outer = rest.min(axis=1) < big
    at_inner = gathers([blocks, s_uses, c_uses], inner_at)
    at_outer = gathers([blocks, s_uses, c_uses], outer_at)
    inner = np.where(has_inner, at_inner[0], 1)
    outer = np.where(has_outer, at_outer[0], 1)
    s_inner, s_outer = has_inner & at_inner[1], has_outer & at_outer[1]
    c_inner, c_outer = has_inner & at_inner[2], has_outer & at_outer[2]
    run = np.where(s_inner, 1, np.where(s_outer, inner, inner * outer))
    # a C line comes back each outer pass when only the inner loop moves C; where C stays
    # from step to step, os arrays add in the PEs, the others read-modify-write every step
    per_pass = np.where(c_inner & ~c_outer & (outer > 1), inner, 0)
    same_c = (~c_inner & (inner > 1)) | (~c_inner & ~c_outer & (outer > 1))
    revisit = per_pass if rows.step.groups_span_steps else np.where(same_c, 1, per_pass)
    return _MicroLoops(np.prod(blocks, axis=1) // (inner * outer), inner, run, revisit)


def _remainder_loops(g: Geometry, rows: SpaceRows, reload_step: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray]:
    """MAC instructions and MAC step cycles of the whole program, tile step by tile step: a
    step's micro-loop follows its own blocks (a remainder tile has fewer, and may loop over
    another index), so every combination of full and remainder tiles of the indices is
    priced with its micro-loop and weighted by how many steps have it."""
    n, d = g.tile.shape
    instructions, cycles = np.zeros(n), np.zeros(n)
    for remainder in itertools.product((False, True), repeat=d):
        chosen = np.array(remainder)
        weight = np.prod(np.where(chosen, 1, g.count - 1), axis=1)
        if not weight.any():
            continue
        blocks = np.where(chosen, g.rem_blocks, g.full_blocks)
        loops = _micro_loops(blocks, rows)
        instructions += weight * loops.instructions
        cycles += weight * np.prod(blocks, axis=1) * _step_cycles(rows.step, loops,
                                                                  reload_step)
    return instructions, cycles


def _step_cycles(step: StepPlan, loops: _MicroLoops, first_step: np.ndarray) -> np.ndarray:
    """Mean cycles of a MAC step in its micro-loop.

    A run of ``run`` steps on one stationary block starts with ``first_step`` (its lines load
    on the other port while the last run streams) and streams a step every ``beats`` cycles.
    A bank of the ``stationary_banks`` takes the next block only ``bank_reuse_gap`` cycles
    after its last beat, so each bank serves one run per ``gap + lines + run beats - 1``
    cycles. A C line read-modify-written every ``revisit`` steps waits for its last write:
    ``revisit`` steps take at least `StepPlan.accumulate_round_trip` cycles.
    """
    run = loops.run
    streaming = first_step + (run - 1) * step.beats
    bank_cycle = (step.bank_reuse_gap + step.stationary_lines + run * step.beats - 1) / (
        step.stationary_banks)
    per_step = np.maximum(streaming, bank_cycle) / run
    hazard = np.where(loops.revisit > 0,
                      step.accumulate_round_trip / np.maximum(loops.revisit, 1), 0.0)
    return np.maximum(per_step, hazard)


@dataclass(frozen=True)
class _Periodic:
    """Per mapping: mean time of one compute step, of one A / B load and one C store (each
    with the gate's gaps), how many of each event the overlap pairs with the steps, the
    dispatch pressure of a step's COMPUTEs and STOREs, and the fetch time of each event's
    instructions (compute, load A, load B, store)."""

    compute: np.ndarray
    loads: list[np.ndarray]
    load_events: list[np.ndarray]
    store: np.ndarray
    store_events: np.ndarray
    compute_pressure: np.ndarray
    store_pressure: np.ndarray
    fetch: list[np.ndarray]

    def take(self, rows: np.ndarray) -> _Periodic:
        return _Periodic(*([v[rows] for v in f] if isinstance(f, list) else f[rows]
                           for f in self._fields()))

    @staticmethod
    def concat(parts: list[_Periodic]) -> _Periodic:
        """The mappings of ``parts`` one after the other."""
        if len(parts) == 1:
            return parts[0]
        return _Periodic(*([np.concatenate(v) for v in zip(*f, strict=True)]
                           if isinstance(f[0], list) else np.concatenate(f)
                           for f in zip(*(p._fields() for p in parts), strict=True)))

    def _fields(self) -> list:
        return [getattr(self, name) for name in self.__dataclass_fields__]


def _overlapped(steps: np.ndarray, t: _Periodic) -> np.ndarray:
    """Sum over tile steps of max(compute, this step's loads, this step's store, the
    dispatch chain, the fetch of the step's instructions): dispatch reaches the next step's
    LOADs only ``compute_pressure`` after this step's COMPUTEs start and ``store_pressure``
    after its STOREs start (which wait for its COMPUTEs), so a step costs at least that plus
    those LOADs (`cost_timeline.pressure`); and fetch brings one instruction at a time.

    Event streams have nested periods, so sorting them by frequency, the steps with the j most
    frequent events are ``events[j-1] - events[j]`` (``events[-1]`` = all steps).
    """
    n, compute = len(steps), t.compute
    events = np.stack([*t.load_events, t.store_events], axis=1).astype(float)
    costs = np.stack([*t.loads, np.zeros(n)], axis=1)
    fetches = np.stack(t.fetch[1:], axis=1)
    is_store = np.array([0.0, 0.0, 1.0])
    rank = np.argsort(-events, axis=1, kind="stable")
    events = np.take_along_axis(events, rank, axis=1)
    costs = np.take_along_axis(costs, rank, axis=1)
    fetch = t.fetch[0][:, None] + np.cumsum(np.take_along_axis(fetches, rank, axis=1), axis=1)
    stores = is_store[rank] * t.store[:, None]
    load_sum = np.cumsum(costs, axis=1)
    store_max = np.maximum.accumulate(stores, axis=1)
    held = (store_max > 0) & (t.store_pressure > 0)[:, None]  # more STOREs than the window
    chain = np.maximum(t.compute_pressure[:, None] + load_sum, np.where(
        held, (compute + t.store_pressure)[:, None] + load_sum, 0.0))
    bounds = np.concatenate([steps[:, None].astype(float), events, np.zeros((n, 1))], axis=1)
    total = (bounds[:, 0] - bounds[:, 1]) * np.maximum(compute, t.fetch[0])
    for j in range(3):
        share = bounds[:, j + 1] - bounds[:, j + 2]
        total += share * np.maximum.reduce([np.broadcast_to(compute, share.shape),
                                            load_sum[:, j], store_max[:, j], chain[:, j],
                                            fetch[:, j]])
    return total


def evaluate(space: LayerSpace, tiles: np.ndarray, order: np.ndarray,
             parameters: CostParameters = CostParameters(),
             energy: EnergyTable | None = None, *, exact: bool = False,
             holds: tuple = ()) -> CostBatch:
    """Cycles, energy and counts of ``n`` mappings of ``space``.

    ``tiles``: ``n x D`` int, elements per tile of each device index (clipped to the size).
    ``order``: ``n x D`` int, a permutation of ``0..D-1`` per row, outermost tile loop first.
    ``exact`` takes each tile transfer's LOAD/STORE instructions, bytes, beats and bursts
    from the code generator (`cost_transfers`: what the program does, about a millisecond per
    new tile shape); otherwise from the closed-form geometry (`cost_geometry.transfers`,
    `sweep_sums`: row-major runs, one burst a row; fast enough to rank the hundreds of
    thousands of mappings a search tries). Reported figures use ``exact``.
    ``holds``: held operands of every mapping, as `compiler.mapping.Mapping.holds` names
    them (`cost_holds`).
    """
    tiles = np.atleast_2d(np.asarray(tiles, dtype=I64))
    order = np.atleast_2d(np.asarray(order, dtype=I64))
    if tiles.shape != order.shape or tiles.shape[1] != space.dims:
        raise ValueError(f"tiles {tiles.shape} and order {order.shape} must both be "
                         f"n x {space.dims} ({', '.join(space.names)})")
    stack = space.stack
    which = np.zeros(len(tiles), dtype=I64)
    held = widen_held(hold_columns(space, holds, len(tiles)), stack.width)
    return evaluate_rows(stack.rows(which), *stack.widen(which, tiles, order), parameters,
                         energy, exact=exact, held=held)


def evaluate_rows(rows: SpaceRows, tiles: np.ndarray, order: np.ndarray,
                  parameters: CostParameters = CostParameters(),
                  energy: EnergyTable | None = None, *, exact: bool = False,
                  legal_only: bool = False, held=None) -> CostBatch:
    """`evaluate` on mappings of several tensorize choices at once: ``rows`` (`cost_rows.
    SpaceRows`) gives each mapping's space, ``tiles`` and ``order`` are ``n x W`` in its
    columns (`cost_rows.SpaceStack.widen`). One pass of numpy for the whole batch, with the
    same figures, bit for bit, as `evaluate` on each choice's mappings.

    ``legal_only`` skips the boundary steps and timeline of illegal mappings, most of the
    price of one and often most of a random batch: their cycles stay infinite, their
    energy and counts are the same, but their unit cycles (``compute_cycles``,
    ``load_cycles``, ``store_cycles``) and instruction counts are NaN (not priced).
    ``held``: None, or ``(A, B)`` bool ``n x W`` matrices of held indices (`cost_holds`)."""
    return evaluate_stacks([(rows, tiles, order, held)], parameters, energy, exact=exact,
                           legal_only=legal_only)[0]


def evaluate_stacks(batches: list[tuple[SpaceRows, np.ndarray, np.ndarray, tuple | None]],
                    parameters: CostParameters = CostParameters(),
                    energy: EnergyTable | None = None, *, exact: bool = False,
                    legal_only: bool = False) -> list[CostBatch]:
    """`evaluate_rows` of each ``(rows, tiles, order, held)`` (a search's batch split by
    `cost_rows.SpaceStack`), their boundary steps laid out, run through `timeline` and
    their periodic overlap priced together (`_lay_out_boundaries`): those take as many
    numpy calls for a few mappings as for a thousand, and a stack's share of a search's
    batch is a few hundred. Same figures, bit for bit, as one `evaluate_rows` each."""
    pending = []
    for rows, tiles, order, held in batches:
        table = energy or energy_table(rows.config)
        if len(tiles) <= SLICE_ROWS:
            pending.append([_price(rows, tiles, order, parameters, table, exact, legal_only,
                                   held)])
            continue
        spans = [np.arange(at, min(at + SLICE_ROWS, len(tiles)))
                 for at in range(0, len(tiles), SLICE_ROWS)]
        pending.append([_price(rows.take(s), tiles[s], order[s], parameters, table, exact,
                               legal_only, take_held(held, s)) for s in spans])
    priced = iter(_lay_out_boundaries([s for part in pending for s in part], parameters))
    return [_concatenate([next(priced) for _ in part]) if len(part) > 1 else next(priced)
            for part in pending]


#: Mappings evaluated at once; larger batches run slower (their temporaries leave the cache).
SLICE_ROWS = 16384
#: Boundary steps laid out together (`_lay_out_boundaries`): enough mappings that a numpy
#: call's fixed cost no longer counts, few enough that padding the batches' steps to the
#: longest one's does not either.
JOINT_ROWS = 1024


def _concatenate(parts: list[CostBatch]) -> CostBatch:
    """One `CostBatch` of the slices ``parts``, in order."""
    names = [n for n in CostBatch.__dataclass_fields__ if n != "extra"]
    return CostBatch(**{n: np.concatenate([getattr(b, n) for b in parts]) for n in names},
                     extra={k: np.concatenate([b.extra[k] for b in parts])
                            for k in parts[0].extra})


@dataclass(frozen=True)
class _Pending:
    """A slice priced up to its boundary steps (``plan``; None where none is priced) and
    the periodic overlap of its priced mappings' tile steps (``periodic``):
    ``finish(added, ends, overlapped)`` makes its `CostBatch` from what the split steps
    add to the steps unsplit (`cost_boundary.boundary_schedule`), the cycles until `timeline`
    ends and `_overlapped` (None, None, None without a plan)."""

    config: AcceleratorConfig
    plan: BoundaryPlan | None
    periodic: _Periodic | None
    finish: Callable[[dict[str, np.ndarray] | None, np.ndarray | None, np.ndarray | None],
                     CostBatch]


def _lay_out_boundaries(pending: list[_Pending], p: CostParameters) -> list[CostBatch]:
    """Each slice's `CostBatch`: the boundary steps of one accelerator's slices laid out
    and run through `timeline` together (up to `JOINT_ROWS` mappings at a time), and
    their periodic overlap priced together."""
    done: dict[int, CostBatch] = {}
    todo = [s for s in pending if s.plan is not None]
    while todo:
        config, joint, width = todo[0].config, [], 0
        for s in todo:
            if s.config == config and (not joint or width + len(s.plan.steps) <= JOINT_ROWS):
                joint.append(s)
                width += len(s.plan.steps)
        todo = [s for s in todo if not any(s is j for j in joint)]
        groups, added = boundary_schedule([s.plan for s in joint])
        ends = timeline(groups, dispatch_window(config), p.gate_cycles, fetch_cycles(config, p),
                        p.dram_latency_cycles)
        overlapped = _overlapped(np.concatenate([s.plan.steps for s in joint]),
                                 _Periodic.concat([s.periodic for s in joint]))
        at = 0
        for s, extra in zip(joint, added, strict=True):
            end = at + len(s.plan.steps)
            done[id(s)] = s.finish(extra, ends[at:end], overlapped[at:end])
            at = end
    return [done[id(s)] if s.plan is not None else s.finish(None, None, None)
            for s in pending]


def _price(rows: SpaceRows, tiles: np.ndarray, order: np.ndarray,
           parameters: CostParameters, energy: EnergyTable, exact: bool,
           legal_only: bool = False, held=None) -> _Pending:
    """`evaluate_rows` on one slice of mappings up to its boundary steps' layout, which
    `_lay_out_boundaries` does with other slices' (`_Pending`); a held operand's tile spans
    its held indices whole (``geo``) and reloads only along the others (`cost_holds`)."""
    config, step, p = rows.config, rows.step, parameters
    g = Geometry(rows, tiles)
    n = len(tiles)
    geo = {"A": g, "B": g, "C": g}
    if held is not None:
        geo["A"], geo["B"] = (held_geometry(rows, tiles, h, g) for h in held)
    lines = {s.role: tile_lines(geo[s.role], s) for s in rows.operands}
    tile_keys = {s.role: _keys(geo[s.role], s) for s in rows.operands}
    slots = {role: np.where(keys > 1, 2, 1) for role, keys in tile_keys.items()}
    spad_lines = lines["A"] * slots["A"] + lines["B"] * slots["B"]
    acc_lines = lines["C"] * slots["C"]
    legal = g.legal & (spad_lines <= config.spad_lines) & (acc_lines <= config.acc_lines)

    steps, *periods = reload_periods(g, rows, order, reload_uses(rows, held))
    bus = config.dma.bus_bytes
    in_bytes, acc_bytes = config.precision.in_bytes, config.precision.acc_bytes
    load_cycles, read_bytes, loads, spad_written = [], np.zeros(n), [], np.zeros(n)
    load_instructions = []  # per LOAD event of A, B
    beats = np.zeros(n)
    for row, spec in enumerate(rows.operands[:2]):
        keys = tile_keys[spec.role]
        sums = _sweep_counts(rows, geo[spec.role], spec, g.tile, legal, exact, held,
                             (keys, lines[spec.role]))
        count = steps // periods[row]
        sweeps = count // keys
        runs = sums["instructions"] / keys
        program = {k: sweeps * v for k, v in sums.items()}
        cycles = _unit_time(program, count, p, store=False)
        load_cycles.append(cycles)
        loads.append(count)
        load_instructions.append(runs)
        read_bytes = read_bytes + program["elements"] * in_bytes
        beats = beats + program["beats"]
        spad_written = spad_written + program["lines"] * config.spad_line_bytes
    out = _sweep_counts(rows, g, rows.operands[2], g.tile, legal, exact, held,
                        (tile_keys["C"], lines["C"]))
    stores = steps // periods[2]
    store_instructions = out["instructions"] / np.maximum(stores, 1)
    store_cycles = _unit_time(out, stores, p, store=True)
    write_bytes = out["elements"] * acc_bytes

    mac_steps = np.prod(g.total_blocks, axis=1)
    # the compiler clears C tiles with the MAC overwrite bit: no ZERO steps, and each C line's
    # first visit in its tile writes without reading the old line
    zero_steps = np.zeros_like(stores)
    overwritten_lines = stores * lines["C"]
    loops = _micro_loops(g.full_blocks, rows)
    reload_share = 1.0 / loops.run
    banks = config.scratchpad.banks
    a_first = step.stationary_role == "B"
    residue = (-(lines["A"] * slots["A"]) if a_first else lines["A"] * slots["A"]) % banks
    conflicts = np.asarray(step.conflicts_by_residue)[residue]
    reload_step = np.maximum(step.beats, step.stationary_lines) + (
        p.reload_conflict_share * conflicts)
    if exact:
        mac_instructions, mac_cycles = _remainder_loops(g, rows, reload_step)
    else:  # every tile step as a full one
        mac_instructions = steps * loops.instructions
        mac_cycles = mac_steps * _step_cycles(step, loops, reload_step)
    step_instructions = mac_instructions / steps  # MAC instructions of a mean tile step
    # each C tile's first MAC waits for the array to drain the previous tile's results (the
    # RTL pays ~ one isolated step per C tile, measured with the overwrite bit as with ZERO)
    compute_cycles = (mac_cycles
                      + mac_instructions * (p.instruction_fill_cycles + p.issue_cycles)
                      + stores * (step.isolated_step + p.issue_cycles))

    per_step_compute = compute_cycles / steps
    per_load = [c / np.maximum(k, 1) for c, k in zip(load_cycles, loads, strict=True)]
    per_store = store_cycles / np.maximum(stores, 1)
    window, gate, fetch = dispatch_window(config), p.gate_cycles, fetch_cycles(config, p)
    # a LOAD/STORE unit's time per event: its busy cycles and the gate's gap per command
    load_time = [c + gate * k for c, k in zip(per_load, load_instructions, strict=True)]
    store_time = per_store + gate * store_instructions
    periodic = _Periodic(
        per_step_compute, load_time, [np.maximum(k - 1, 0) for k in loads], store_time,
        np.maximum(stores - 1, 0), pressure(per_step_compute, step_instructions, window),
        _store_pressure(store_time, store_instructions, window, held),
        [fetch * k for k in (step_instructions, *load_instructions, store_instructions)])
    executed = mac_steps * config.macs_per_step
    line_bytes = config.spad_line_bytes
    stationary_reads = mac_steps * reload_share * step.stationary_lines + (
        mac_instructions * step.stationary_lines)
    spad_bytes = (mac_steps * step.beats + stationary_reads) * line_bytes + spad_written
    acc_bytes_moved = (2 * mac_steps * step.output_lines - overwritten_lines
                       + out["rows"]) * config.acc_line_bytes
    hop_bytes = mac_steps * step.beats * config.spad_line_elems * in_bytes * movement_hops(config)
    energy_pj = (executed * energy.mac_pj + spad_bytes * energy.spad_pj_per_byte
                 + acc_bytes_moved * energy.acc_pj_per_byte
                 + (read_bytes + write_bytes + rows.host_bytes) * energy.dram_pj_per_byte
                 + hop_bytes * energy.hop_pj_per_byte)
    # the first and last tile steps as the code generator cuts them, the steps near them one
    # by one, the rest at the mean step cost of the periodic overlap; only the legal
    # mappings where ``legal_only`` (the others' cycles are infinite in any case)
    priced = np.flatnonzero(legal) if legal_only else np.arange(n)
    plan = priced_periodic = None
    if len(priced):
        priced_periodic = periodic.take(priced)
        middle = Middle(np.array(periods).T, per_load, load_instructions, per_step_compute,
                        step_instructions, per_store, store_instructions)
        plan = _boundary_plan(rows.take(priced), g.take(priced), steps[priced],
                              middle.take(priced), reload_step[priced], residue[priced], p,
                              exact, take_held(held, priced))

    def finish(extra: dict[str, np.ndarray] | None, ends: np.ndarray | None,
               overlapped: np.ndarray | None) -> CostBatch:
        """The figures once the boundary steps are laid out (`_lay_out_boundaries`):
        ``extra`` what they add to the steps unsplit, ``ends`` the cycles until `timeline`
        ends them, ``overlapped`` (`_overlapped`) what the tile steps cost overlapped."""
        host_cycles = rows.host_bytes / bus
        cycles = np.full(n, np.inf)
        added = {k: np.full(n, np.nan)
                 for k in ("load", "compute", "store", "macs", "transfers")}
        if plan is not None:
            for k, values in extra.items():
                added[k][priced] = values
            cycles[priced] = np.where(legal[priced], np.ceil(
                ends + plan.skipped * overlapped / steps[priced]
                + step.array_latency + host_cycles[priced]), np.inf)
        transfer_instructions = (loads[0] * load_instructions[0]
                                 + loads[1] * load_instructions[1]
                                 + stores * store_instructions + added["transfers"])
        events = _events(rows, mac_steps, np.maximum(mac_steps * reload_share, mac_instructions),
                         spad_written / line_bytes, overwritten_lines, out,
                         beats + out["beats"], read_bytes + write_bytes,
                         mac_instructions + added["macs"] + transfer_instructions)
        return CostBatch(
            legal=legal, cycles=cycles, energy_pj=energy_pj,
            compute_cycles=compute_cycles + added["compute"],
            load_cycles=load_cycles[0] + added["load"] + load_cycles[1],
            store_cycles=store_cycles + added["store"], host_cycles=host_cycles,
            mac_steps=mac_steps, zero_steps=zero_steps, dram_read_bytes=read_bytes,
            dram_write_bytes=write_bytes, spad_lines=spad_lines, acc_lines=acc_lines,
            utilization=rows.useful / executed,
            extra={"mac_instructions": mac_instructions + added["macs"], "tile_steps": steps,
                   "loads_A": loads[0], "loads_B": loads[1], "stores": stores,
                   "transfer_instructions": transfer_instructions} | events)

    return _Pending(config, plan, priced_periodic, finish)


def _events(rows: SpaceRows, mac_steps: np.ndarray, stationary_runs: np.ndarray,
            spad_writes: np.ndarray, overwritten_lines: np.ndarray,
            out: dict[str, np.ndarray], transfer_beats: np.ndarray, dram_bytes: np.ndarray,
            instructions: np.ndarray) -> dict[str, np.ndarray]:
    """The program's `energy.EVENTS` as `program_events` counts them, from the batch's counts
    (no program): a MAC step reads its beats and writes its C block (reading it too unless it
    overwrites), a stationary block is read once per run of steps that keep it (at least once
    per MAC instruction), a LOAD writes its lines, a STORE reads its lines, every instruction
    is fetched from DRAM (16 bytes)."""
    config, step = rows.config, rows.step
    c_lines = config.blocks["C"].lines
    fetched = instructions * INSTRUCTION_BYTES  # NaN where the boundary was not priced
    return {
        "macs": mac_steps * config.macs_per_step,
        "spad_line_reads": mac_steps * step.beats + stationary_runs * step.stationary_lines,
        "spad_line_writes": spad_writes,
        "acc_line_reads": mac_steps * c_lines - overwritten_lines + out["lines"],
        "acc_line_writes": mac_steps * c_lines,
        "forward_bytes": mac_steps * step.beats * config.spad_line_elems
        * config.precision.in_bytes * movement_hops(config),
        "dma_beats": transfer_beats + np.ceil(fetched / config.dma.bus_bytes),
        "dram_bytes": dram_bytes + rows.host_bytes + fetched,
    }


def _store_pressure(store_time: np.ndarray, store_instructions: np.ndarray, window: int,
                    held) -> np.ndarray:
    """`cost_timeline.pressure` of a step's STOREs; none in a held operand's program, whose
    STOREs dispatch after the next step's COMPUTEs and LOADs (`codegen._Walker._pipelined`)."""
    out = pressure(store_time, store_instructions, window)
    if held is None:
        return out
    return np.where(held[0].any(axis=1) | held[1].any(axis=1), 0.0, out)


def _boundary_plan(rows: SpaceRows, g: Geometry, steps: np.ndarray, middle: Middle,
                   reload_step: np.ndarray, residue: np.ndarray, p: CostParameters,
                   exact: bool, held=None) -> BoundaryPlan:
    """The boundary steps' `cost_boundary.BoundaryPlan`; ``residue`` decides ``reload_step``
    (the bank residue of the stationary block). The code generator cuts no step along a
    held index (`codegen._Walker._chunkable`)."""
    def tile_costs(valid: np.ndarray, owners: np.ndarray
                   ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        return _distinct_tile_costs(rows.take(owners), p, valid, g.tile[owners],
                                    reload_step[owners], exact, residue[owners],
                                    take_held(held, owners))

    chunkable = rows.chunkable if held is None else rows.chunkable & ~(held[0] | held[1])
    return boundary_plan(rows, g, steps, middle, tile_costs,
                         rows.step.isolated_step + p.issue_cycles, chunkable)


def _keys(g: Geometry, spec: OperandRows) -> np.ndarray:
    """Distinct tiles of the operand: the product of its indices' tile counts."""
    return np.prod(np.where(spec.uses, g.count, 1), axis=1)


def _sweep_counts(rows: SpaceRows, g: Geometry, spec: OperandRows, tiles: np.ndarray,
                  legal: np.ndarray, exact: bool, held=None,
                  known: tuple[np.ndarray, np.ndarray] | None = None
                  ) -> dict[str, np.ndarray]:
    """`cost_transfers.COUNTS` summed over one pass through every distinct tile of the
    operand: per index its full tiles and its remainder, each combination weighted by how
    often it occurs, each measured on the code generator (`LayerSpace.transfer_counter`,
    per distinct pattern of ``held``, `cost_holds`); or, not ``exact``, the closed-form
    geometry's (`_closed_form_counts`). A held operand's ``g`` is its held geometry;
    ``known``: its `_keys` and `tile_lines` where the caller has them."""
    if not exact:
        return _closed_form_counts(rows, g, spec, known)
    space = rows.single()
    uses = space.operand(spec.role).indices
    tiles = tiles[:, : space.dims]
    n = len(tiles)
    total = {k: np.zeros(n) for k in COUNTS}
    variants = [(False,)] * len(uses) if g.single else [(False, True)] * len(uses)
    patterns = hold_patterns(space, held, legal)
    for remainder in itertools.product(*variants):
        valid, weight = g.tile.copy(), np.ones(n)
        for position, rem in zip(uses, remainder, strict=True):
            if rem:
                valid[:, position] = g.rem[:, position]
            else:
                weight = weight * (1 if g.single else g.count[:, position] - 1)
        for chosen, holds in patterns:
            counts = space.transfer_counter.batch(spec.role, uses, space.names, tiles,
                                                  valid[:, : space.dims],
                                                  chosen & (weight > 0), holds)
            for k in COUNTS:
                total[k] = total[k] + weight * counts[k]
    return total


def _closed_form_counts(rows: SpaceRows, g: Geometry, spec: OperandRows,
                        known: tuple[np.ndarray, np.ndarray] | None = None
                        ) -> dict[str, np.ndarray]:
    """The counts of `_sweep_counts` by the closed-form geometry: LOAD/STORE instructions
    per run of a tile's innermost lines (`cost_geometry.transfers`), rows, beats and lines
    of row-major regions (`cost_geometry.sweep_sums`), one burst per row."""
    config, store = rows.config, spec.role == "C"
    elem_bytes = config.precision.acc_bytes if store else config.precision.in_bytes
    sums = sweep_sums(g, spec, elem_bytes, config.dma.bus_bytes)
    keys, lines = known or (_keys(g, spec), tile_lines(g, spec))
    runs = transfers(g, spec, lines, padded=not store)
    return {"instructions": keys * runs, "elements": sums["elements"], "beats": sums["beats"],
            "bursts": sums["rows"], "rows": sums["rows"],
            "lines": sums["rows"] if store else sums["lines"]}


def _unit_time(c: dict[str, np.ndarray], events: np.ndarray, p: CostParameters, *,
               store: bool) -> np.ndarray:
    """A DMA unit's cycles for ``c``'s instructions in ``events`` transfers: a retiring unit
    takes its next instruction while the last one's data still streams (`hw.load_unit`,
    `hw.store_unit`), so within a transfer an instruction's fixed cost hides under the
    stream; the transfer's first one does not."""
    fixed = p.issue_cycles + (p.store_fixed_cycles if store else p.load_fixed_cycles)
    hidden = (c["instructions"] - events) * fixed
    return np.maximum(_stream(c, p, store=store), hidden) + events * fixed


def _stream(c: dict[str, np.ndarray], p: CostParameters, *, store: bool) -> np.ndarray:
    """Cycles a DMA unit is busy with ``c``'s ``rows``, ``beats`` and ``bursts``: a line a
    cycle into (or out of) the buffer and a beat every `beat_cycles`, whichever is slower,
    or, when the DRAM's latency outlasts the bursts in flight, one burst every
    `CostParameters.burst_cycles`; and a cycle for each zero line a LOAD makes.
    The latency itself is a delay, not work: the units keep bursts in flight across
    instructions (`hw.load_unit`, `hw.store_unit`), so `cost_timeline.timeline` adds it where
    something waits for the data."""
    stream = np.maximum(np.maximum(c["beats"] * p.beat_cycles, c["rows"]),
                        c["bursts"] * p.burst_cycles())
    zero_lines = 0 if store else c["lines"] - c["rows"]
    return stream + zero_lines


def _distinct_tile_costs(rows: SpaceRows, p: CostParameters, valid: np.ndarray,
                         tiles: np.ndarray, reload_step: np.ndarray, exact: bool = True,
                         step_code: np.ndarray | None = None, held=None
                         ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """`_tile_costs`, priced once per distinct row: the chunks of a batch's boundary steps
    repeat (tiles on a block grid, chunks of 1, 2, 4, ... blocks), so most rows are copies.
    The tiles are part of a row only where they change its price (``exact``: they decide
    how the code generator lays the lines out). ``step_code``: small integers equal where
    ``reload_step`` is (by default its rank among its distinct values)."""
    if step_code is None:
        _, step_code = np.unique(reload_step, return_inverse=True)
    key = np.concatenate([valid, *([tiles] if exact else []), step_code.reshape(-1, 1),
                          rows.space.reshape(-1, 1), *(held or ())], axis=1)
    first, inverse = distinct_rows(key)
    costs = _tile_costs(rows.take(first), p, valid[first], tiles[first], reload_step[first],
                        exact, take_held(held, first))
    return {role: (np.take(c, inverse), np.take(m, inverse)) for role, (c, m) in costs.items()}


def _tile_costs(rows: SpaceRows, p: CostParameters, valid: np.ndarray, tiles: np.ndarray,
                reload_step: np.ndarray, exact: bool = True, held=None
                ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``(cycles, instructions)`` of LOADing A and B, COMPUTE (``"MAC"``) and STOREing C for
    one tile step (or chunk) of ``valid`` (``n x D``) elements per index, by the same terms
    as the whole program's (the first MAC's wait for a drained array not included);
    ``tiles`` are the mappings' tiles, which decide how the lines lie in the buffers; a held
    operand's transfer spans its held indices whole."""
    g = Geometry(rows, valid, sizes=valid)
    everywhere = np.ones(len(valid), dtype=bool)
    costs = {}
    for row, spec in enumerate(rows.operands):
        store = spec.role == "C"
        gr = g
        if held is not None and row < 2 and held[row].any():
            whole = np.where(held[row], rows.sizes, valid)
            gr = Geometry(rows, whole, sizes=whole)
        sums = _sweep_counts(rows, gr, spec, tiles, everywhere, exact, held)
        costs[spec.role] = (_unit_time(sums, np.minimum(sums["instructions"], 1), p,
                                       store=store), sums["instructions"])
    loops = _micro_loops(g.full_blocks, rows)
    steps = np.prod(g.total_blocks, axis=1)
    costs["MAC"] = (steps * _step_cycles(rows.step, loops, reload_step) + loops.instructions
                    * (p.instruction_fill_cycles + p.issue_cycles), loops.instructions)
    return costs


def mapping_arrays(space: LayerSpace, tiles: dict[str, int], order: tuple[str, ...]
                   ) -> tuple[np.ndarray, np.ndarray]:
    """``(1 x D tiles, 1 x D order)`` for one mapping given by names."""
    position = {name: p for p, name in enumerate(space.names)}
    return (np.array([[tiles[n] for n in space.names]], dtype=I64),
            np.array([[position[n] for n in order]], dtype=I64))


def batch_cycles(workload, mapping, config: AcceleratorConfig,
                 parameters: CostParameters = CostParameters()) -> float:
    """The batch model's cycles for one mapping (what the search ranks by; infinite where it
    finds the mapping illegal), without generating its program."""
    from tensorforge.dse.cost_space import build_space

    space = build_space(workload, mapping.choice, config, mapping.groups)
    tiles, order = mapping_arrays(space, mapping.tile_sizes, mapping.order)
    row = evaluate(space, tiles, order, parameters, holds=mapping.holds).row(0)
    return float(row["cycles"]) if row["legal"] else math.inf


def evaluate_mapping(workload, mapping, config: AcceleratorConfig,
                     parameters: CostParameters = CostParameters()) -> dict[str, float]:
    """The cost model's numbers for one `compiler.mapping.Mapping` of ``workload``: the batch
    model's with the code generator's exact transfer counts (``evaluate(..., exact=True)``),
    and the cycles of the program itself, instruction by instruction (`cost_trace`), where
    the batch model's estimate stays as ``batch_cycles``; and the program's events
    (`program_events`: what a technology's energies price), the host's DRAM traffic included."""
    from tensorforge.compiler.codegen import generate
    from tensorforge.dse.cost_space import build_space
    from tensorforge.dse.cost_trace import trace_cycles
    from tensorforge.dse.program_events import program_events

    space = build_space(workload, mapping.choice, config, mapping.groups)
    tiles, order = mapping_arrays(space, mapping.tile_sizes, mapping.order)
    row = evaluate(space, tiles, order, parameters, exact=True, holds=mapping.holds).row(0)
    row["batch_cycles"] = row["cycles"]
    if row["legal"]:
        program = generate(workload, mapping, config)
        row["cycles"] = float(np.ceil(trace_cycles(program.instructions, config, space.step,
                                                   parameters) + row["host_cycles"]))
        events = program_events(program.instructions, config, space.step)
        events["dram_bytes"] += space.host_bytes
        row.update(events)
        row["instructions"] = float(len(program.instructions))
    return row
