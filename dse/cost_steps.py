"""The cost model's boundary steps and unit timeline, vectorized over a batch of mappings.

Two things the per-step overlap of `cost_model` cannot see, both from the program that
`compiler.codegen` emits and the controller that runs it (`hw.controller`):

* **split steps**: the first tile step is cut into chunks along a reduction index the
  loaded operands use (1, 1, 2, 4, ... blocks), the last along an output index (..., 4, 2,
  1, 1), and the first chunk of the one and the last of the other again along an output
  index (`_pieces`). Each chunk has its own LOADs, its own COMPUTE micro-loop and (last
  step) its own STOREs; `split_index`, `_with_inner_cut` and `chunk_extents` mirror
  `_Walker._split_indices` and `_chunks`.
* **dispatch back-pressure**: the controller dispatches the program in order into one queue
  per unit (``controller.queue_depth`` deep) and a unit's gate holds one more while the unit
  runs, so an instruction enters its queue only once the instruction ``window`` places
  before it on the same unit has finished. A step with more STOREs than the window holds
  stops dispatch until its STOREs are under way, and with them everything behind it in the
  program: the next step's LOADs and COMPUTEs (`pressure`).

`timeline` runs the resulting group-level recurrence (a max-plus recurrence of start and
end times per unit, one iteration per tile step or chunk, not per instruction).

A batch's boundary steps are cut and priced on their own (`boundary_plan`: the prices depend
on its tensorize choices), then laid out with those of the batch's other stacks of choices
(`boundary_schedule`) and run by one `timeline`: each numpy call of the layout and the
recurrence serves them all, and a stack's share of a search's batch is a few hundred.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from tensorforge.dse.cost_rows import gather, gathers

I64 = np.int64


@dataclass(frozen=True)
class Groups:
    """Tile steps or chunks of the program in program order, each field a ``groups x n``
    array (a row per group, a column per mapping): a stacked form, so that building them
    and `timeline`'s set-up take a few numpy calls, not a few per group.

    ``loads``, ``computes``, ``stores`` count instructions (0: the unit has nothing in that
    group); ``reloads`` (``groups x n x 2``) marks A/B loads into the other half of their
    double buffer (they wait for the compute that last read that half); ``new_c`` marks the
    first compute of a C tile (it waits for the store of the tile two before, the other
    half); ``ends_c`` the group whose store completes a C tile. A group that is empty for a
    mapping changes nothing in `timeline` for it.
    """

    load: np.ndarray
    loads: np.ndarray
    compute: np.ndarray
    computes: np.ndarray
    store: np.ndarray
    stores: np.ndarray
    reloads: np.ndarray
    new_c: np.ndarray
    ends_c: np.ndarray

    def __len__(self) -> int:
        return len(self.load)

    def _fields(self) -> list[np.ndarray]:
        return [getattr(self, name) for name in self.__dataclass_fields__]

    @staticmethod
    def chain(parts: list[Groups]) -> Groups:
        """The groups of ``parts`` one after the other (same mappings)."""
        return Groups(*(np.concatenate(f) for f in zip(*(p._fields() for p in parts), strict=True)))


def pressure(cycles: np.ndarray, count: np.ndarray, window: int) -> np.ndarray:
    """Cycles from a unit's first instruction of a group until dispatch can move past its
    last one: that instruction enters the queue when the one ``window`` before it ends
    (instructions of a group taken as equally long)."""
    return np.maximum(count - window, 0) * cycles / np.maximum(count, 1)


def timeline(groups: Groups, window: int, gate: float, fetch: float,
             latency: float = 0.0) -> np.ndarray:
    """Cycles until the last unit finishes, running ``groups`` in program order.

    Per group: its LOADs start when the load unit is free, dispatch has reached them and the
    buffer half they overwrite is no longer read; its COMPUTEs when they are loaded, the
    compute unit is free, dispatch has reached them (and a new C tile's half is stored);
    its STOREs when computed and the store unit is free. Dispatch moves past a unit's part
    of a group with more instructions than the ``window`` only ``pressure`` cycles after
    that part starts (and holds everything behind it). The load and store units' gates
    hand them a command only ``gate`` cycles after they go idle (the compute unit's gate
    takes its next command while it runs: no gap). Fetch brings the program one instruction
    per ``fetch`` cycles, so a unit's part of a group starts no earlier than its first
    instruction is fetched, ends no earlier than its last one is fetched and run, and
    dispatch moves past it no earlier than all of it is fetched. A LOAD's data arrives
    ``latency`` cycles after its unit has streamed it (the unit goes on meanwhile), and the
    program ends ``latency`` after its last STORE's data left (its response).

    Times are never negative, so a wait that no mapping of a group has (no reload, no new
    C tile, no unit's part) is left out of its maximum instead of taken as 0.
    """
    n = groups.load.shape[1]
    zero = np.zeros(n)
    load_end, compute_end, store_end, dispatch, loaded = zero, zero, zero, zero, zero
    half_free = np.zeros((n, 2))  # per operand: end of the compute that last read the other half
    c_stores = [zero, zero]  # store ends of the last two C tiles, older first
    loads = _Unit(groups.load + gate * groups.loads, groups.loads, window, fetch)
    computes = _Unit(groups.compute, groups.computes, window, fetch)
    stores = _Unit(groups.store + gate * groups.stores, groups.stores, window, fetch)
    reloading = groups.reloads.any(axis=(1, 2))
    new_c, ends_c = groups.new_c.any(axis=1), groups.ends_c.any(axis=1)
    for i in range(len(groups)):
        if reloading[i]:
            reloads = groups.reloads[i]
            wait = np.maximum(np.where(reloads[:, 0], half_free[:, 0], 0.0),
                              np.where(reloads[:, 1], half_free[:, 1], 0.0))
            half_free = np.where(reloads, compute_end[:, None], half_free)
        if loads.some[i]:
            start = _latest(load_end, dispatch + fetch, *([wait] if reloading[i] else []))
            load_end, dispatch = loads.run(i, start, load_end, dispatch)
            loaded = np.where(loads.present[i], load_end + latency, loaded)
        if computes.some[i]:
            waits = [np.where(groups.new_c[i], c_stores[0], 0.0)] if new_c[i] else []
            start = _latest(compute_end, loaded, dispatch + fetch, *waits)
            compute_end, dispatch = computes.run(i, start, compute_end, dispatch)
        if stores.some[i]:
            start = _latest(store_end, compute_end, dispatch + fetch)
            store_end, dispatch = stores.run(i, start, store_end, dispatch)
        if ends_c[i]:
            c_stores = [np.where(groups.ends_c[i], c_stores[1], c_stores[0]),
                        np.where(groups.ends_c[i], store_end, c_stores[1])]
    return _latest(load_end, compute_end, np.where(store_end > 0, store_end + latency, 0.0))


def _latest(*times: np.ndarray) -> np.ndarray:
    """Elementwise maximum of ``times`` (pairwise: no stacked copy in the hot loop)."""
    return functools.reduce(np.maximum, times)


class _Unit:
    """One unit's part of every group (``groups x n``: ``cycles`` in all, ``count``
    instructions), with what does not depend on when it starts worked out for all groups
    at once, outside `timeline`'s recurrence."""

    def __init__(self, cycles: np.ndarray, count: np.ndarray, window: int, fetch: float
                 ) -> None:
        self.cycles, self.present = cycles, count > 0
        self.some = self.present.any(axis=1)
        self.fetch = count * fetch
        self.mean = cycles / np.maximum(count, 1)
        self.over = count > window
        self.held = self.over.any(axis=1)
        self.pressure = pressure(cycles, count, window)

    def run(self, i: int, start: np.ndarray, end: np.ndarray, dispatch: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray]:
        """Group ``i``'s part from ``start`` (some mapping has one): its end and where
        dispatch stands after it (unchanged where it is not present). Dispatch moves on
        once the part is fetched, and where it has more instructions than the window only
        ``pressure`` after it starts."""
        fetched = dispatch + self.fetch[i]
        finish = np.maximum(start + self.cycles[i], fetched + self.mean[i])
        moved = fetched  # dispatch never falls below 0, so max(fetched, 0.0) is fetched
        if self.held[i]:
            moved = np.maximum(fetched, np.where(self.over[i], start + self.pressure[i], 0.0))
        present = self.present[i]
        return np.where(present, finish, end), np.where(present, moved, dispatch)


def split_index(blocks: np.ndarray, candidates: np.ndarray, rank: np.ndarray,
                preferred: np.ndarray | None = None) -> np.ndarray:
    """Per mapping, the index position a boundary step is cut along, or -1.

    ``blocks`` (``n x D``) blocks of that step per index, ``candidates`` (``n x D``) where
    a cut is allowed; a ``preferred`` (``n x D``) index first, then the most blocks, ties to
    the greater name (the code generator takes ``max((preferred, blocks, name))``; ``rank``
    (``n x D``) is the name order of each position).
    """
    width = blocks.shape[1]
    first = 0 if preferred is None else preferred * (blocks.max(initial=0) + 1) * width
    key = np.where(candidates & (blocks >= 2), first + blocks * width + rank, -1)
    return np.where(key.max(axis=1) >= 0, np.argmax(key, axis=1), -1)


def chunk_count(blocks: np.ndarray) -> np.ndarray:
    """Chunks of ``blocks`` blocks: 1, 1, 2, 4, ... (``_chunks``): 1 + ceil(log2(blocks)),
    the bit length of ``blocks - 1`` (`np.frexp`'s exponent, exact below 2**53); 1 for
    fewer than two blocks."""
    return (1 + np.frexp(np.maximum(blocks - 1, 0))[1]).astype(blocks.dtype)


def chunk_extents(blocks: np.ndarray, count: np.ndarray, chunk: int, growing: bool
                  ) -> tuple[np.ndarray, np.ndarray]:
    """``(first block, blocks)`` of chunk number ``chunk`` (0 where a mapping has fewer than
    its ``count``, `chunk_count` of ``blocks``, computed once by the caller).

    Growing chunks start at 0, 1, 2, 4, ...; the last step's are the same sizes reversed,
    so chunk ``c`` of ``m`` mirrors growing chunk ``m - 1 - c``.
    """
    k = chunk if growing else count - 1 - chunk
    k = np.maximum(k, 0)
    start = np.where(k == 0, 0, np.left_shift(1, np.maximum(k - 1, 0)))  # 2 ** (k - 1)
    size = np.minimum(np.maximum(1, start), blocks - start)
    exists = (chunk < count) & (size > 0)
    first = start if growing else blocks - start - size
    return np.where(exists, first, 0), np.where(exists, size, 0)


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
    """One batch's first and last tile steps as the code generator cuts them (`_split_plan`)
    with their parts priced (``costs``: per unit ``(cycles, instructions)`` of the first
    step's parts, then the last's), and what `boundary_schedule` needs besides: the tile
    steps, the unsplit steps' costs (``middle``) and what a C tile's first MAC waits for
    the array to drain (``first_wait``)."""

    first: _SplitPlan
    last: _SplitPlan
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
    cuts = _with_inner_cut(cut, g.full_blocks, uses[2] & chunkable & (uses[0] | uses[1]),
                           rows.rank)
    first = _split_plan(rows, g.tile, cuts, True, np.ones(len(steps), dtype=bool))
    # last step: the operands whose innermost loop moves reload; cut along an output index,
    # one the stationary operand uses if it can
    allowed = uses[2] & chunkable
    stationary = uses["AB".index(rows.step.stationary_role)]
    cut = np.where(many, split_index(g.rem_blocks, allowed, rows.rank, stationary), -1)
    cuts = _with_inner_cut(cut, g.rem_blocks, allowed, rows.rank)
    last = _split_plan(rows, g.rem, cuts, False, many)
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


def _with_inner_cut(cut: np.ndarray, blocks: np.ndarray, allowed: np.ndarray,
                    rank: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(cut, inner cut)``: the boundary chunk of a step cut along ``cut`` is cut again
    along the ``allowed`` output index of most blocks but ``cut`` (`codegen._Walker.
    _split_indices`); -1 where there is none."""
    others = allowed & (np.arange(blocks.shape[1])[None, :] != cut[:, None])
    inner = split_index(blocks, others, rank)
    return cut, np.where(cut >= 0, inner, -1)


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


def _side_by_side(plans: list[_SplitPlan], costs: list[dict[str, tuple[np.ndarray, np.ndarray]]],
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


@dataclass(frozen=True)
class _Pieces:
    """The chunks of a boundary step and the chunks of its boundary chunk (``sub``), a row
    per piece in program order: where a mapping has it (``exists``, ``pieces x n``) and its
    elements per index (``valid``, ``pieces x n x D``)."""

    exists: np.ndarray
    valid: np.ndarray
    sub: np.ndarray


def _pieces(rows, valid, cuts, growing, active) -> _Pieces:
    """The chunks of one boundary step in program order (`codegen._Walker._split_step`):
    along ``cuts[0]``, the boundary chunk (the first of a growing cut, the last of a
    shrinking one) cut again along ``cuts[1]`` where that is not -1. The sub-chunks of the
    last step's last chunk come after every mapping's chunks, as empty groups change
    nothing in `timeline`."""
    n = len(valid)
    blocks, counts, onehots, sizes = [], [], [], []
    for cut in cuts:
        size, extent = gathers([rows.block, valid], np.maximum(cut, 0))
        sizes.append(size)
        blocks.append(np.where(cut >= 0, -(-extent // size), 1))
        counts.append(chunk_count(blocks[-1]))
        onehots.append((np.arange(valid.shape[1])[None, :] == cut[:, None])
                       & (cut >= 0)[:, None])

    def narrowed(base, level):
        """Every chunk along cut ``level`` of ``base`` (``chunks x n x D``) and where it is."""
        chunk = np.arange(int(counts[level].max()))[:, None]
        start, size = chunk_extents(blocks[level], counts[level], chunk, growing)
        block = sizes[level]
        elems = np.minimum(size * block, gather(base, np.maximum(cuts[level], 0))
                           - start * block)
        return chunk, size > 0, np.where(onehots[level][None], elems[..., None], base[None])

    split = cuts[1] >= 0
    boundary = np.zeros(n, dtype=int) if growing else counts[0] - 1
    chunk, exists, part = narrowed(valid, 0)
    exists = exists & active & ~(split & (boundary == chunk))
    chunks = (exists, part, np.zeros(len(chunk), dtype=bool))
    if growing:
        edge = part[0]
    else:  # each mapping's last chunk: one block
        at = np.maximum(cuts[0], 0)
        elems = gather(valid, at) - (blocks[0] - 1) * sizes[0]
        edge = np.where(onehots[0], elems[:, None], valid)
    chunk, exists, part = narrowed(edge, 1)
    subs = (exists & (active & split), part, np.ones(len(chunk), dtype=bool))
    ordered = (subs, chunks) if growing else (chunks, subs)
    return _Pieces(*(np.concatenate(field) for field in zip(*ordered, strict=True)))


@dataclass(frozen=True)
class _SplitPlan:
    """One boundary step's pieces (`_pieces`), where each operand's loads and the store
    follow the cuts (``chunked[level][role]``), the first sub-chunk's place (``edge``, -1:
    none), and the parts to price (`_split_plan`, ``m x D``) with their mappings
    (``owners``) and slots (``slot``: 0 the whole step, 1 its whole boundary chunk, 2 + i
    piece i; ``slots`` of them)."""

    cuts: tuple[np.ndarray, np.ndarray]
    pieces: _Pieces
    chunked: list[list[np.ndarray]]
    edge: int
    parts: np.ndarray
    owners: np.ndarray
    slot: np.ndarray
    slots: int


def _split_plan(space_rows, valid, cuts, growing, active) -> _SplitPlan:
    """The pieces of one boundary tile step (one where ``cuts[0]`` is -1) and what to price
    for them: the whole step, its whole boundary chunk where that is cut again, and each
    piece of a cut step. ``valid`` (``n x D``) elements per index of the step, ``cuts`` the
    index positions it is cut along (`_pieces`)."""
    n, dims = valid.shape
    rows = np.arange(n)
    pieces = _pieces(space_rows, valid, cuts, growing, active)
    uses = [space_rows.uses(r) for r in range(3)]
    chunked = [[(cut >= 0) & used for used in gathers(uses, np.maximum(cut, 0))]
               for cut in cuts]
    subs = np.flatnonzero(pieces.sub)
    edge = int(subs[0]) if len(subs) else -1
    whole_chunk = valid
    if edge >= 0:
        at = np.maximum(cuts[1], 0)
        whole_chunk = np.where((np.arange(dims)[None, :] == at[:, None]) & (cuts[1] >= 0)[:, None],
                               gather(valid, at)[:, None], pieces.valid[edge])
    chunk_owners = rows[(cuts[1] >= 0) & active]
    piece, owner = np.nonzero(pieces.exists & (cuts[0] >= 0))  # piece by piece, as priced
    return _SplitPlan(
        cuts, pieces, chunked, edge,
        np.concatenate([valid, whole_chunk[chunk_owners], pieces.valid[piece, owner]]),
        np.concatenate([rows, chunk_owners, owner]),
        np.concatenate([np.zeros(n, dtype=I64), np.ones(len(chunk_owners), dtype=I64),
                        piece + 2]), len(pieces.sub) + 2)


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
