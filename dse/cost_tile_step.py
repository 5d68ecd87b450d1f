"""The batch cost model's price of one tile step (or chunk): per unit its cycles and
instructions, from the LOAD/STORE counts of its tiles and its MAC micro-loop.

It exists so that the whole program's transfers (`cost_model`) and the boundary steps'
chunks (`cost_boundary`) are priced by the same terms: counts summed over one pass through
every distinct tile of an operand (`sweep_counts`, exact from the code generator or by the
closed-form geometry), a DMA unit's time for them (`unit_time`), and a tile step's prices
(`tile_costs`, once per distinct row: `distinct_tile_costs`).
"""

from __future__ import annotations

import itertools

import numpy as np

from tensorforge.dse.cost_geometry import (
    Geometry,
    distinct_rows,
    sweep_sums,
    tile_lines,
    transfers,
)
from tensorforge.dse.cost_holds import hold_patterns, take_held
from tensorforge.dse.cost_micro_loop import micro_loops, step_cycles
from tensorforge.dse.cost_parameters import CostParameters
from tensorforge.dse.cost_rows import ROLES, OperandRows, SpaceRows
from tensorforge.dse.cost_transfers import COUNTS


def distinct_tiles(g: Geometry, spec: OperandRows) -> np.ndarray:
    """Distinct tiles of the operand: the product of its indices' tile counts."""
    return np.prod(np.where(spec.uses, g.count, 1), axis=1)


def sweep_counts(rows: SpaceRows, g: Geometry, spec: OperandRows, tiles: np.ndarray,
                 legal: np.ndarray, exact: bool, held=None,
                 known: tuple[np.ndarray, np.ndarray] | None = None
                 ) -> dict[str, np.ndarray]:
    """`cost_transfers.COUNTS` summed over one pass through every distinct tile of the
    operand: per index its full tiles and its remainder, each combination weighted by how
    often it occurs, each measured on the code generator (`LayerSpace.transfer_counter`,
    per distinct pattern of ``held``, `cost_holds`); or, not ``exact``, the closed-form
    geometry's (`_closed_form_counts`). A held operand's ``g`` is its held geometry;
    ``known``: its `distinct_tiles` and `tile_lines` where the caller has them."""
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
    """The counts of `sweep_counts` by the closed-form geometry: LOAD/STORE commands per
    run of a tile's innermost lines and the instructions they fold into
    (`cost_geometry.transfers`), rows, beats and lines of row-major regions
    (`cost_geometry.sweep_sums`), one burst per row."""
    config, store = rows.config, spec.role == "C"
    elem_bytes = config.precision.acc_bytes if store else config.precision.in_bytes
    sums = sweep_sums(g, spec, elem_bytes, config.dma.bus_bytes)
    keys, lines = known or (distinct_tiles(g, spec), tile_lines(g, spec))
    commands, instructions = transfers(g, spec, lines, padded=not store,
                                       repeat=config.controller.repeat,
                                       folds=rows.folds[:, ROLES.index(spec.role)])
    return {"instructions": keys * instructions, "commands": keys * commands,
            "elements": sums["elements"], "beats": sums["beats"], "bursts": sums["rows"],
            "rows": sums["rows"], "lines": sums["rows"] if store else sums["lines"]}


def unit_time(c: dict[str, np.ndarray], events: np.ndarray, p: CostParameters, *,
              store: bool) -> np.ndarray:
    """A DMA unit's cycles for ``c``'s commands in ``events`` transfers: a retiring unit
    takes its next command while the last one's data still streams (`hw.load_unit`,
    `hw.store_unit`), so within a transfer a command's fixed cost hides under the stream;
    the transfer's first one does not. A repeated instruction's further runs each wait
    `CostParameters.run_cycles` at the gate (the gate's gap per instruction,
    `CostParameters.gate_cycles`, the caller adds)."""
    fixed = p.issue_cycles + (p.store_fixed_cycles if store else p.load_fixed_cycles)
    hidden = (c["commands"] - events) * fixed
    runs = (c["commands"] - c["instructions"]) * p.run_cycles
    return np.maximum(_stream(c, p, store=store), hidden + runs) + events * fixed


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


def distinct_tile_costs(rows: SpaceRows, p: CostParameters, valid: np.ndarray,
                        tiles: np.ndarray, reload_step: np.ndarray, exact: bool = True,
                        step_code: np.ndarray | None = None, held=None
                        ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """`tile_costs`, priced once per distinct row: the chunks of a batch's boundary steps
    repeat (tiles on a block grid, chunks of 1, 2, 4, ... blocks), so most rows are copies.
    The tiles are part of a row only where they change its price (``exact``: they decide
    how the code generator lays the lines out). ``step_code``: small integers equal where
    ``reload_step`` is (by default its rank among its distinct values)."""
    if step_code is None:
        _, step_code = np.unique(reload_step, return_inverse=True)
    key = np.concatenate([valid, *([tiles] if exact else []), step_code.reshape(-1, 1),
                          rows.space.reshape(-1, 1), *(held or ())], axis=1)
    first, inverse = distinct_rows(key)
    costs = tile_costs(rows.take(first), p, valid[first], tiles[first], reload_step[first],
                       exact, take_held(held, first))
    return {role: (np.take(c, inverse), np.take(m, inverse)) for role, (c, m) in costs.items()}


def tile_costs(rows: SpaceRows, p: CostParameters, valid: np.ndarray, tiles: np.ndarray,
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
        sums = sweep_counts(rows, gr, spec, tiles, everywhere, exact, held)
        costs[spec.role] = (unit_time(sums, np.minimum(sums["instructions"], 1), p,
                                      store=store), sums["instructions"])
    loops = micro_loops(g.full_blocks, rows)
    steps = np.prod(g.total_blocks, axis=1)
    costs["MAC"] = (steps * step_cycles(rows.step, loops, reload_step) + loops.instructions
                    * (p.instruction_fill_cycles + p.issue_cycles), loops.instructions)
    return costs
