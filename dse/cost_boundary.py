"""The batch cost model's boundary layout: a batch's first and last tile steps, cut and priced,
and the unsplit steps near them laid out as the `cost_timeline.Groups` the timeline runs.

It exists because the boundary steps are priced apart from the periodic middle of a program
(`cost_overlap`): a batch's boundary steps are cut and priced on their own (`boundary_plan`:
the cuts are `cost_split`'s, the prices depend on its tensorize choices), then laid out with
those of the batch's other stacks of choices (`boundary_schedule`) and run by one
`cost_timeline.timeline`: each numpy call of the layout and the recurrence serves them all,
and a stack's share of a search's batch is a few hundred.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tensorforge.dse.cost_split import SplitPlan, split_index, split_plan, with_inner_cut
from tensorforge.dse.cost_timeline import Groups


@dataclass(frozen=True)
class Middle:
    """Mean costs of the unsplit tile steps, per mapping: ``periods`` (``n x 3``) tile steps
    between reloads of A, B and between stores of C; per A/B load and per C store its cycles
    and instructions; per step the COMPUTE cycles and MAC instructions."""

    periods: np.ndarray
    load: list[np.ndarray]
    loads: list[np.ndarray]
    compute: np.ndarray
    computes: np.ndarray
    store: np.ndarray
    stores: np.ndarray

    def take(self, rows: np.ndarray) -> Middle:
        return Middle(self.periods[rows], [v[rows] for v in self.load],
                      [v[rows] for v in self.loads], self.compute[rows], self.computes[rows],
                      self.store[rows], self.stores[rows])

    @staticmethod
    def concat(parts: list[Middle]) -> Middle:
        """The mappings of ``parts`` one after the other."""
        def joined(field: str) -> np.ndarray:
            return _joined([getattr(m, field) for m in parts])

        return Middle(joined("periods"), [_joined([m.load[r] for m in parts]) for r in (0, 1)],
                      [_joined([m.loads[r] for m in parts]) for r in (0, 1)],
                      joined("compute"), joined("computes"), joined("store"), joined("stores"))


def _joined(arrays: list[np.ndarray]) -> np.ndarray:
    """``arrays`` one after the other (the one itself, not a copy, where there is one)."""
    return arrays[0] if len(arrays) == 1 else np.concatenate(arrays)


#: Unsplit tile steps next to the first and last that `timeline` runs one by one (half on
#: each side); a program with more leaves the rest to the periodic overlap.
NEAR_STEPS = 16


@dataclass(frozen=True)
class BoundaryPlan:
    """One batch's first and last tile steps as the code generator cuts them (`split_plan`)
    with their parts priced (``costs``: per unit ``(cycles, instructions)`` of the first
    step's parts, then the last's), and what `boundary_schedule` needs besides: the tile
    steps, the unsplit steps' costs (``middle``) and what a C tile's first MAC waits for
    the array to drain (``first_wait``)."""

    first: SplitPlan
    last: SplitPlan
    costs: dict[str, tuple[np.ndarray, np.ndarray]]
    steps: np.ndarray
    middle: Middle
    first_wait: float

    @property
    def skipped(self) -> np.ndarray:
        """Tile steps `timeline` leaves to the periodic overlap (the middle of long
        programs)."""
        return np.maximum(self.steps - 2 - NEAR_STEPS, 0)


def boundary_plan(rows, g, steps: np.ndarray, middle: Middle, tile_costs, first_wait: float,
                  chunkable: np.ndarray | None = None) -> BoundaryPlan:
    """The first and last tile steps cut as the code generator cuts them, their parts
    priced in one call.

    ``rows``: the batch's `cost_rows.SpaceRows`; ``g``: its `cost_geometry.Geometry`;
    ``tile_costs(valid, owners)``: ``(cycles, instructions)`` per unit of tile steps of
    ``valid`` (``m x D``) elements per index, row ``i`` a step of mapping ``owners[i]``
    (only the mappings that have a chunk are priced); ``first_wait``: what a C tile's first
    MAC waits for the array to drain; ``chunkable``: the indices a step may be cut along
    (``rows.chunkable`` by default).
    """
    uses = [rows.uses(r) for r in range(3)]
    chunkable = rows.chunkable if chunkable is None else chunkable
    many = steps > 1
    # first step: every operand loads; cut along a reduction index both use
    allowed = ~uses[2] & chunkable & uses[0] & uses[1]
    cut = np.where(many, split_index(g.full_blocks, allowed, rows.rank), -1)
    cuts = with_inner_cut(cut, g.full_blocks, uses[2] & chunkable & (uses[0] | uses[1]),
                          rows.rank)
    first = split_plan(rows, g.tile, cuts, True, np.ones(len(steps), dtype=bool))
    # last step: the operands whose innermost loop moves reload; cut along an output index,
    # one the stationary operand uses if it can
    allowed = uses[2] & chunkable
    stationary = uses["AB".index(rows.step.stationary_role)]
    cut = np.where(many, split_index(g.rem_blocks, allowed, rows.rank, stationary), -1)
    cuts = with_inner_cut(cut, g.rem_blocks, allowed, rows.rank)
    last = split_plan(rows, g.rem, cuts, False, many)
    costs = tile_costs(np.concatenate([first.parts, last.parts]),
                       np.concatenate([first.owners, last.owners]))
    return BoundaryPlan(first, last, costs, steps, middle, first_wait)


def boundary_schedule(plans: list[BoundaryPlan]) -> tuple[Groups, list[dict[str, np.ndarray]]]:
    """The first tile step, up to `NEAR_STEPS` unsplit steps and the last tile step of
    every mapping of ``plans`` (side by side, so that each numpy call serves them all) as
    the `Groups` `timeline` runs; and per plan what the split steps add to the same steps
    unsplit: cycles per unit (``load``, ``compute``, ``store``), LOAD/STORE instructions
    (``transfers``) and MAC instructions (``macs``)."""
    offsets = np.cumsum([0, *(len(p.steps) for p in plans)])
    n = int(offsets[-1])
    steps = _joined([p.steps for p in plans])
    middle = Middle.concat([p.middle for p in plans])
    first_wait = np.repeat([float(p.first_wait) for p in plans], np.diff(offsets))
    many = steps > 1
    everywhere = np.ones(n, dtype=bool)
    cut = [len(p.first.owners) for p in plans]
    laid, every = _side_by_side([p.first for p in plans],
                                [{k: (c[:at], m[:at]) for k, (c, m) in p.costs.items()}
                                 for p, at in zip(plans, cut, strict=True)], offsets)
    first = _split_step(laid, every, np.ones((n, 2), dtype=bool), middle.periods[:, 2] == 1,
                        everywhere, everywhere, first_wait)
    loaded = (middle.periods[:, :2] == 1) & many[:, None]
    new_c = (steps - 1) % middle.periods[:, 2] == 0
    laid, every = _side_by_side([p.last for p in plans],
                                [{k: (c[at:], m[at:]) for k, (c, m) in p.costs.items()}
                                 for p, at in zip(plans, cut, strict=True)], offsets)
    last = _split_step(laid, every, loaded, everywhere, new_c, many, first_wait)
    near = _unsplit_steps(middle, steps)
    extra = {k: first[1][k] + last[1][k] for k in first[1]}
    return (Groups.chain([first[0], near, last[0]]),
            [{k: v[a:b] for k, v in extra.items()}
             for a, b in zip(offsets[:-1], offsets[1:], strict=True)])


def _unsplit_steps(middle: Middle, steps: np.ndarray) -> Groups:
    """The `NEAR_STEPS` slots of the unsplit steps run one by one: steps 1, 2, ... in the
    first half, ..., T - 3, T - 2 in the second (a slot that falls outside 1..T-2 or on a
    step the first half holds is empty); all slots at once, as ``slots x n`` arrays."""
    half = NEAR_STEPS // 2
    slot = np.arange(NEAR_STEPS)[:, None]
    step = np.where(slot < half, slot + 1, steps[None, :] - 1 - (NEAR_STEPS - slot))
    exists = (step >= 1) & (step <= steps - 2) & ((slot < half) | (step > half))
    step = np.maximum(step, 0)
    periods = middle.periods
    reloads = np.stack([exists & (step % periods[:, r] == 0) for r in (0, 1)], axis=2)
    stored = exists & ((step + 1) % periods[:, 2] == 0)
    zero = np.zeros(len(steps))
    load = sum(np.where(reloads[..., r], middle.load[r], 0.0) for r in (0, 1)) + zero
    loads = sum(np.where(reloads[..., r], middle.loads[r], 0.0) for r in (0, 1)) + zero
    compute = np.where(exists, middle.compute, 0.0)
    computes = np.where(exists, middle.computes, 0.0)
    store, stores = np.where(stored, middle.store, 0.0), np.where(stored, middle.stores, 0.0)
    new_c = exists & (step % periods[:, 2] == 0)
    return Groups(load, loads, compute, computes, store, stores, reloads, new_c, stored)


@dataclass(frozen=True)
class _Laid:
    """The pieces of one boundary step of several batches side by side (`_side_by_side`),
    a row per piece in program order, a column per mapping: where a mapping has it
    (``exists``), whether it is a chunk of the boundary chunk (``sub``) and the first such
    (``edge``); per cut level and operand whether the operand uses the cut (``chunked``);
    and where the step is not cut (``uncut``, per mapping)."""

    exists: np.ndarray
    sub: np.ndarray
    edge: np.ndarray
    chunked: list[list[np.ndarray]]
    uncut: np.ndarray


def _side_by_side(plans: list[SplitPlan], costs: list[dict[str, tuple[np.ndarray, np.ndarray]]],
                  offsets: np.ndarray) -> tuple[_Laid, dict[str, tuple[np.ndarray, np.ndarray]]]:
    """One boundary step of several batches (mappings ``offsets[i]`` on of plan ``i``) as
    one `_Laid`, each plan's pieces padded with pieces no mapping has (they add nothing),
    and the costs of their parts (``costs[i]``, the parts of ``plans[i]`` in order) as
    ``slots x n`` arrays per unit: slot 0 the whole step, 1 its whole boundary chunk,
    2 + i piece i (0 where a mapping has no such part)."""
    n, count = int(offsets[-1]), max(len(p.pieces.sub) for p in plans)
    if len(plans) == 1:  # a piece's rows broadcast over the mappings
        plan = plans[0]
        exists, sub = plan.pieces.exists, plan.pieces.sub[:, None]
        edge = (np.arange(count) == plan.edge)[:, None]
    else:
        exists, sub, edge = (np.zeros((count, n), dtype=bool) for _ in range(3))
        for plan, at, end in zip(plans, offsets[:-1], offsets[1:], strict=True):
            pieces = len(plan.pieces.sub)
            exists[:pieces, at:end] = plan.pieces.exists
            sub[:pieces, at:end] = plan.pieces.sub[:, None]
            if plan.edge >= 0:
                edge[plan.edge, at:end] = True
    at = _joined([p.slot * n + offset + p.owners
                  for p, offset in zip(plans, offsets[:-1], strict=True)])
    every = {}
    for k in costs[0]:
        spread = []
        for j in (0, 1):
            values = _joined([c[k][j] for c in costs])
            full = np.zeros((count + 2) * n, dtype=values.dtype)
            full[at] = values
            spread.append(full.reshape(count + 2, n))
        every[k] = (spread[0], spread[1])
    chunked = [[_joined([p.chunked[level][r] for p in plans]) for r in range(3)]
               for level in (0, 1)]
    uncut = _joined([p.cuts[0] < 0 for p in plans])
    return _Laid(exists, sub, edge, chunked, uncut), every


def _split_step(laid: _Laid, every, loaded, stored, new_c, active, first_wait
                ) -> tuple[Groups, dict[str, np.ndarray]]:
    """The pieces of one boundary step as `Groups`, and the cycles per unit they add to the
    step unsplit. ``every``: the `_side_by_side` costs of the pieces' parts; ``loaded``
    (``n x 2``) whether A, B load in the step; an operand loads whole before the first
    piece if it does not use the first cut, per chunk if it uses only that, per piece if it
    uses both; the store is per piece where C uses the cuts, else after the last piece.
    """
    chunked, uncut, is_edge = laid.chunked, laid.uncut, laid.edge
    n = len(loaded)
    whole = {k: (c[0], m[0]) for k, (c, m) in every.items()}
    boundary_chunk = {k: (c[1], m[1]) for k, (c, m) in every.items()}
    # the pieces' groups at once: ``count x n`` arrays, a row per piece in program order
    exists, sub = laid.exists, laid.sub
    count = len(exists)
    costs = {k: (np.where(uncut, whole[k][0], c[2:]), np.where(uncut, whole[k][1], m[2:]))
             for k, (c, m) in every.items()}
    started = np.logical_or.accumulate(exists, axis=0)
    first = exists & ~np.concatenate([np.zeros((1, n), dtype=bool), started[:-1]])
    last = exists & (np.cumsum(exists, axis=0) == exists.sum(axis=0))
    load, loads = np.zeros((count, n)), np.zeros((count, n))
    for r, role in enumerate("AB"):
        here, once, twice = loaded[:, r], chunked[0][r], chunked[1][r]
        before = first & (here & ~once)
        per_chunk = is_edge & sub & (here & once & ~twice)  # adds 0 to the other pieces
        mine = np.where(sub, here & once & twice, here & once)
        load = load + np.where(per_chunk, boundary_chunk[role][0], 0)
        loads = loads + np.where(per_chunk, boundary_chunk[role][1], 0)
        load = load + (np.where(before, whole[role][0], 0) + np.where(mine, costs[role][0], 0))
        loads = loads + (np.where(before, whole[role][1], 0)
                         + np.where(mine, costs[role][1], 0))
    c_chunked = chunked[0][2] & (chunked[1][2] | ~sub)
    stores_here = exists & stored & (c_chunked | last)
    part = [np.where(c_chunked, costs["C"][k], whole["C"][k]) for k in (0, 1)]
    group_load, group_loads = np.where(exists, load, 0.0), np.where(exists, loads, 0.0)
    macs = np.where(exists, costs["MAC"][0], 0.0)
    compute = macs + np.where(first & new_c, first_wait, 0.0)
    computes = np.where(exists, costs["MAC"][1], 0.0)
    store = np.where(stores_here, part[0], 0.0)
    store_count = np.where(stores_here, part[1], 0.0)
    reloads = loaded[None, :, :] & first[:, :, None]
    new_cs, ends_c = first & new_c, stored & last
    groups = Groups(group_load, group_loads, compute, computes, store, store_count, reloads,
                    new_cs, ends_c)
    # in program order, one piece at a time (the sums' rounding): an accumulate runs
    # left to right, where a sum may pair terms up
    transfers = np.stack([group_loads, store_count], axis=1).reshape(2 * count, n)
    added = {k: np.add.accumulate(v, axis=0)[-1] for k, v in (
        ("load", group_load), ("compute", macs), ("store", store), ("transfers", transfers),
        ("macs", computes))}
    unsplit = {"load": sum(np.where(loaded[:, r], whole[role][0], 0.0)
                           for r, role in enumerate("AB")),
               "compute": whole["MAC"][0], "store": np.where(stored, whole["C"][0], 0.0),
               "transfers": sum(np.where(loaded[:, r], whole[role][1], 0.0)
                                for r, role in enumerate("AB"))
               + np.where(stored, whole["C"][1], 0.0), "macs": whole["MAC"][1]}
    return groups, {k: np.where(active, added[k] - unsplit[k], 0.0) for k in added}
