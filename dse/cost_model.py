"""The analytical cost model: cycles and energy of a batch of mappings, vectorized with numpy.

A batch is struct-of-arrays: ``tiles`` (``n x D`` elements per tile of each device index) and
``order`` (``n x D`` index positions, outermost tile loop first) over one `LayerSpace` (one
workload, fusion, tensorize choice and accelerator). `evaluate` returns a `cost_batch.CostBatch`
of ``n`` values per quantity; `cost_mapping.evaluate_mapping` (importable from here too) prices
one `compiler.mapping.Mapping`. A search's batch
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
  follows `mac_plan.micro_loop` (`cost_micro_loop`): a stationary block serves one step, one
  inner run or one instruction; a PE store bank takes the next block only `bank_reuse_gap`
  cycles after its last beat, which bounds a run from below on systolic output-stationary
  arrays; and a C line that the micro-loop read-modify-writes again after ``d`` steps waits
  for its last write (``d`` steps take at least `StepPlan.accumulate_round_trip` cycles).
  Back-to-back MAC instructions stream (the next starts while the last drains): each adds
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
  hold nothing back (`tile_walk.TileWalker._pipelined`), and no boundary step is cut along a
  held index.
* **split steps** (`cost_split`, laid out by `cost_boundary`): the code generator cuts the
  first tile step into chunks along a reduction index and the last along an output index;
  each chunk is priced as a tile step of its own (its LOADs, its micro-loop, its STOREs,
  `cost_tile_step.tile_costs`), and the per-unit cycles are those of the program with the
  chunks.
* **overlap** (the VTA dependency tokens of the generated program and the controller that
  runs it): A, B and C are double-buffered, so the load of the next tile, the compute of this
  one and the store of the previous one run concurrently, as far as the controller lets
  them: it fetches one instruction at a time (`cost_parameters.fetch_cycles`) and dispatches
  in program order into per-unit queues, so a step with more STOREs than a queue and gate hold
  (`dispatch_window`) holds back the next step's LOADs until its STOREs run; the load and
  store units idle ``gate_cycles`` between commands. `cost_timeline.timeline` runs this as a
  max-plus recurrence over the chunks of the first and last steps and up to
  `cost_boundary.NEAR_STEPS` steps next to them; the steps between (long programs) cost the
  slowest of the three units or of the dispatch chain per step, whose event streams are
  periodic with nested periods (suffix products of the loop counts), so their sum is exact
  without enumerating them (`cost_overlap.periodic_overlap`). Host-side fusion (im2col/col2im)
  or gathered layouts are charged as a serial DRAM copy at full bus rate (``host_cycles``).
* **energy**: per executed MAC, per scratchpad/accumulator byte read or written, per DRAM byte,
  and per operand byte moved between PEs (hops by interconnect: `cost_space.movement_hops`),
  with the constants of a `cost_parameters.EnergyTable`.

Checked against: the functional simulator's MAC/ZERO step counts and DRAM bytes of compiled
programs, and RTL cycle counts of small programs within a stated tolerance
(``tests/test_cost_model.py``; the full table: ``benchmarks/check_cost_model_rtl.py``,
docs/cost_model.md). The unit terms of `cost_parameters.CostParameters` come from those RTL
measurements; the DRAM latency is an assumption about the memory outside the accelerator.

Two uses, two granularities: a search ranks thousands of candidate mappings a second with
`evaluate` (the batch model above); every figure a user reads is for one mapping
(`cost_mapping.evaluate_mapping`), whose cycles come from the instruction-level timeline of the
program the code generator emits (`cost_trace`), checked on held-out programs in
docs/fidelity.md.

The parts live in modules of their own: the constants (`cost_parameters`), the result
(`cost_batch`), the MAC micro-loop (`cost_micro_loop`), a tile step's price
(`cost_tile_step`), where the boundary steps are cut (`cost_split`) and their layout
(`cost_boundary`), the unit timeline that runs them (`cost_timeline`) and the periodic
overlap of the steps between (`cost_overlap`); this module puts them together, a batch at a
time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tensorforge.config import AcceleratorConfig
from tensorforge.dse.cost_batch import CostBatch, batch_events, concatenate
from tensorforge.dse.cost_boundary import BoundaryPlan, Middle, boundary_plan, boundary_schedule
from tensorforge.dse.cost_geometry import Geometry, reload_periods, tile_lines
from tensorforge.dse.cost_holds import (
    held_geometry,
    hold_columns,
    reload_uses,
    take_held,
    widen_held,
)
from tensorforge.dse.cost_mapping import evaluate_mapping as evaluate_mapping
from tensorforge.dse.cost_micro_loop import micro_loops, remainder_loops, step_cycles
from tensorforge.dse.cost_overlap import Periodic, periodic_overlap, store_pressure
from tensorforge.dse.cost_parameters import (
    CostParameters,
    EnergyTable,
    dispatch_window,
    energy_table,
    fetch_cycles,
)
from tensorforge.dse.cost_parameters import rtl_parameters as rtl_parameters
from tensorforge.dse.cost_rows import SpaceRows
from tensorforge.dse.cost_space import LayerSpace, movement_hops
from tensorforge.dse.cost_tile_step import (
    distinct_tile_costs,
    distinct_tiles,
    sweep_counts,
    unit_time,
)
from tensorforge.dse.cost_timeline import pressure, timeline

I64 = np.int64


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
    `sweep_sums`: row-major runs, folded as `compiler.repeats` folds them where the
    accelerator repeats LOADs/STOREs, one burst a row; fast enough to rank the hundreds of
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
    return [concatenate([next(priced) for _ in part]) if len(part) > 1 else next(priced)
            for part in pending]


#: Mappings evaluated at once; larger batches run slower (their temporaries leave the cache).
SLICE_ROWS = 16384
#: Boundary steps laid out together (`_lay_out_boundaries`): enough mappings that a numpy
#: call's fixed cost no longer counts, few enough that padding the batches' steps to the
#: longest one's does not either.
JOINT_ROWS = 1024


@dataclass(frozen=True)
class _Pending:
    """A slice priced up to its boundary steps (``plan``; None where none is priced) and
    the periodic overlap of its priced mappings' tile steps (``periodic``):
    ``finish(added, ends, overlapped)`` makes its `CostBatch` from what the split steps
    add to the steps unsplit (`cost_boundary.boundary_schedule`), the cycles until `timeline`
    ends and `periodic_overlap` (None, None, None without a plan)."""

    config: AcceleratorConfig
    plan: BoundaryPlan | None
    periodic: Periodic | None
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
        overlapped = periodic_overlap(np.concatenate([s.plan.steps for s in joint]),
                                      Periodic.concat([s.periodic for s in joint]))
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
    tile_keys = {s.role: distinct_tiles(geo[s.role], s) for s in rows.operands}
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
        sums = sweep_counts(rows, geo[spec.role], spec, g.tile, legal, exact, held,
                            (keys, lines[spec.role]))
        count = steps // periods[row]
        sweeps = count // keys
        runs = sums["instructions"] / keys
        program = {k: sweeps * v for k, v in sums.items()}
        cycles = unit_time(program, count, p, store=False)
        load_cycles.append(cycles)
        loads.append(count)
        load_instructions.append(runs)
        read_bytes = read_bytes + program["elements"] * in_bytes
        beats = beats + program["beats"]
        spad_written = spad_written + program["lines"] * config.spad_line_bytes
    out = sweep_counts(rows, g, rows.operands[2], g.tile, legal, exact, held,
                       (tile_keys["C"], lines["C"]))
    stores = steps // periods[2]
    store_instructions = out["instructions"] / np.maximum(stores, 1)
    store_cycles = unit_time(out, stores, p, store=True)
    write_bytes = out["elements"] * acc_bytes

    mac_steps = np.prod(g.total_blocks, axis=1)
    # the compiler clears C tiles with the MAC overwrite bit: no ZERO steps, and each C line's
    # first visit in its tile writes without reading the old line
    zero_steps = np.zeros_like(stores)
    overwritten_lines = stores * lines["C"]
    loops = micro_loops(g.full_blocks, rows)
    reload_share = 1.0 / loops.run
    banks = config.scratchpad.banks
    a_first = step.stationary_role == "B"
    residue = (-(lines["A"] * slots["A"]) if a_first else lines["A"] * slots["A"]) % banks
    conflicts = np.asarray(step.conflicts_by_residue)[residue]
    reload_step = np.maximum(step.beats, step.stationary_lines) + (
        p.reload_conflict_share * conflicts)
    if exact:
        mac_instructions, mac_cycles = remainder_loops(g, rows, reload_step)
    else:  # every tile step as a full one
        mac_instructions = steps * loops.instructions
        mac_cycles = mac_steps * step_cycles(step, loops, reload_step)
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
    periodic = Periodic(
        per_step_compute, load_time, [np.maximum(k - 1, 0) for k in loads], store_time,
        np.maximum(stores - 1, 0), pressure(per_step_compute, step_instructions, window),
        store_pressure(store_time, store_instructions, window, held),
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
        ends them, ``overlapped`` (`periodic_overlap`) what the tile steps cost overlapped."""
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
        events = batch_events(rows, mac_steps,
                              np.maximum(mac_steps * reload_share, mac_instructions),
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

def _boundary_plan(rows: SpaceRows, g: Geometry, steps: np.ndarray, middle: Middle,
                   reload_step: np.ndarray, residue: np.ndarray, p: CostParameters,
                   exact: bool, held=None) -> BoundaryPlan:
    """The boundary steps' `cost_boundary.BoundaryPlan`; ``residue`` decides ``reload_step``
    (the bank residue of the stationary block). The code generator cuts no step along a
    held index (`tile_walk.TileWalker._chunkable`)."""
    def tile_costs(valid: np.ndarray, owners: np.ndarray
                   ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        return distinct_tile_costs(rows.take(owners), p, valid, g.tile[owners],
                                   reload_step[owners], exact, residue[owners],
                                   take_held(held, owners))

    chunkable = rows.chunkable if held is None else rows.chunkable & ~(held[0] | held[1])
    return boundary_plan(rows, g, steps, middle, tile_costs,
                         rows.step.isolated_step + p.issue_cycles, chunkable)
