"""The software design space of one layer on one accelerator, as arrays the search can batch.

A candidate optimization is HASCO's primitive sequence with its factors in compact form: which
tensorize choice (and host fusion) it uses (a `LayerSpace`), one tile size per device index
(``split`` factors, as a *level* into that index's list of tile values) and the order of the
tile loops (``reorder``; output loops outside reduction loops so partial sums stay on chip,
which is the legality rule of `compiler.mapping.Mapping.check_order`). Candidates are rows of
three arrays: ``space`` (``n``), ``levels`` (``n x MAX_DIMS``, -1 past the space's indices) and
``order`` (``n x MAX_DIMS`` index positions, outermost first, -1 padded).

Revisions (the actions of the Q-learning agent), ``N_ACTIONS`` of them:

=======================  =================================================================
action                   revision
=======================  =================================================================
``d``                    tile of index ``d`` one level up (``split`` factor grows)
``MAX_DIMS + d``         tile of index ``d`` one level down
``2*MAX_DIMS + j``       swap tile loops ``j`` and ``j+1`` (``reorder``), within the output
                         or the reduction loops, both looping more than once
``3*MAX_DIMS - 1``       switch the tensorize choice (``tensorize``): the next space, tiles
                         carried over by index name where it has them
``TRADE + MAX_DIMS*d+e`` tile of ``d`` one level up and tile of ``e`` one level down: the
                         buffers bind tiles together, so the best tiles are often across a
                         ridge of illegal candidates from a single-factor neighbour
=======================  =================================================================

Orders are kept *canonical*: a loop that runs once (its tile is the whole index) sits innermost
within its kind (output or reduction), in index order. The cost model only sees the order of
loops that run more than once (`cost_geometry.reload_periods`), so this loses nothing, and
candidates that differ only in where their single-trip loops sit get one key: no search
spends an evaluation on a copy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from tensorforge.compiler.mapping import Mapping
from tensorforge.compiler.workload import Workload
from tensorforge.config import AcceleratorConfig
from tensorforge.dse.cost_batch import CostBatch
from tensorforge.dse.cost_model import CostParameters, evaluate, evaluate_stacks
from tensorforge.dse.cost_rows import SpaceStack, stack_classes
from tensorforge.dse.cost_space import LayerSpace, layer_spaces
from tensorforge.errors import MappingError

MAX_DIMS = 8
SWITCH = 3 * MAX_DIMS - 1
TRADE = 3 * MAX_DIMS
N_ACTIONS = TRADE + MAX_DIMS * MAX_DIMS
N_FEATURES = 3 * MAX_DIMS + 5


def tile_values(size: int, block: int, grid: str) -> np.ndarray:
    """Tile sizes tried for an index: block multiples (``"all"``) or the power-of-two block
    counts plus every divisor of the block count (``"pow2"``), always ending with ``size``."""
    blocks = -(-size // block)
    if grid == "all":
        counts = set(range(1, blocks + 1))
    else:
        counts = {1 << k for k in range(blocks.bit_length())}
        counts |= {d for d in range(1, math.isqrt(blocks) + 1) if blocks % d == 0}
        counts |= {blocks // d for d in counts if blocks % d == 0}
    return np.array(sorted({min(size, block * c) for c in counts if c <= blocks}), dtype=np.int64)


@dataclass
class Candidates:
    """A batch of candidates (see the module docstring for the layout)."""

    space: np.ndarray  # (n,) int
    levels: np.ndarray  # (n x MAX_DIMS) int, -1 padded
    order: np.ndarray  # (n x MAX_DIMS) int, -1 padded

    def __len__(self) -> int:
        return len(self.space)

    def take(self, rows: np.ndarray) -> Candidates:
        return Candidates(self.space[rows], self.levels[rows], self.order[rows])

    @staticmethod
    def concat(parts: list[Candidates]) -> Candidates:
        return Candidates(np.concatenate([p.space for p in parts]),
                          np.concatenate([p.levels for p in parts]),
                          np.concatenate([p.order for p in parts]))

    def keys(self) -> list[bytes]:
        return [np.concatenate(([s], lv, od)).tobytes()
                for s, lv, od in zip(self.space, self.levels, self.order, strict=True)]


@dataclass
class SoftwareSpace:
    """All spaces (tensorize choices, fusions) of a layer, their tile grids, and evaluation."""

    workload: Workload
    config: AcceleratorConfig
    spaces: list[LayerSpace]
    grid: str = "pow2"
    parameters: CostParameters = field(default_factory=CostParameters)
    evaluations: int = 0

    def __post_init__(self) -> None:
        if not self.spaces:
            raise MappingError(f"no tensorize choice of the {self.config.intrinsic.value} "
                               f"intrinsic runs {self.workload.text} on this accelerator")
        for space in self.spaces:
            if space.dims > MAX_DIMS:
                raise MappingError(f"{space.device.text} has {space.dims} indices; the software "
                                   f"search handles at most {MAX_DIMS}")
        self.values = [[tile_values(int(n), int(b), self.grid)
                        for n, b in zip(s.sizes, s.block, strict=True)] for s in self.spaces]
        self.n_levels = np.full((len(self.spaces), MAX_DIMS), 0, dtype=np.int64)
        self.outputs = np.zeros((len(self.spaces), MAX_DIMS), dtype=bool)
        for i, space in enumerate(self.spaces):
            self.n_levels[i, : space.dims] = [len(v) for v in self.values[i]]
            self.outputs[i, : space.dims] = space.output_mask
        # tile sizes by (space, index, level), for a batch's tiles in one lookup
        self.tile_table = np.ones((len(self.spaces), MAX_DIMS, self.n_levels.max()),
                                  dtype=np.int64)
        for i, values in enumerate(self.values):
            for d, v in enumerate(values):
                self.tile_table[i, d, : len(v)] = v
        # the spaces that the batch model prices together, and each space's place in its stack
        self.stacks = [(SpaceStack([self.spaces[i] for i in members]), np.array(members))
                       for members in stack_classes(self.spaces)]
        self.stack_row = np.zeros(len(self.spaces), dtype=np.int64)
        for _, members in self.stacks:
            self.stack_row[members] = np.arange(len(members))

    @classmethod
    def build(cls, workload: Workload, config: AcceleratorConfig, *, grid: str = "pow2",
              fusions: tuple[tuple[tuple[str, ...], ...], ...] | None = None,
              parameters: CostParameters | None = None) -> SoftwareSpace:
        """Every tensorize choice of ``workload``, unfused and (by default) also after the
        im2col fusion (HASCO's ``fuse``; it pays the host's im2col/col2im traffic)."""
        if fusions is None:
            from tensorforge.compiler.mappers import im2col_groups

            groups = im2col_groups(workload)
            fused = bool(groups)
            fusions = ((), groups) if fused else ((),)
        return cls(workload, config, layer_spaces(workload, config, fusions=fusions), grid,
                   parameters or CostParameters())

    # ------------------------------------------------------------------ sampling

    def random(self, count: int, rng: np.random.Generator) -> Candidates:
        """Uniformly random spaces, levels and (output-first) orders."""
        space = rng.integers(0, len(self.spaces), size=count)
        levels = np.full((count, MAX_DIMS), -1, dtype=np.int64)
        order = np.full((count, MAX_DIMS), -1, dtype=np.int64)
        for row, s in enumerate(space):
            dims = self.spaces[s].dims
            levels[row, :dims] = rng.integers(0, self.n_levels[s, :dims])
            order[row, :dims] = self._random_order(s, rng)
        return self.canonical(Candidates(space, levels, order))

    def _random_order(self, s: int, rng: np.random.Generator) -> np.ndarray:
        mask = self.outputs[s, : self.spaces[s].dims]
        outs, reds = np.flatnonzero(mask), np.flatnonzero(~mask)
        return np.concatenate([rng.permutation(outs), rng.permutation(reds)])

    # ------------------------------------------------------------------ canonical form

    def loop_counts(self, batch: Candidates) -> np.ndarray:
        """(n x MAX_DIMS) trips of each index's tile loop (1 past the space's indices)."""
        counts = np.ones((len(batch), MAX_DIMS), dtype=np.int64)
        for s in np.unique(batch.space):
            rows = np.flatnonzero(batch.space == s)
            dims = self.spaces[s].dims
            tiles = self.tiles_of(s, batch.levels[rows])
            counts[rows, :dims] = -(-self.spaces[s].sizes // tiles)
        return counts

    def canonical(self, batch: Candidates) -> Candidates:
        """The same candidates with single-trip loops moved innermost within their kind."""
        counts = self.loop_counts(batch)
        order = batch.order
        index = np.maximum(order, 0)
        reduction = ~np.take_along_axis(self.outputs[batch.space], index, axis=1)
        once = np.take_along_axis(counts, index, axis=1) == 1
        slot = np.where(once, index, np.arange(MAX_DIMS)[None, :])
        rank = np.where(order >= 0, reduction * 4 * MAX_DIMS + once * 2 * MAX_DIMS + slot,
                        8 * MAX_DIMS)
        moved = np.take_along_axis(order, np.argsort(rank, axis=1, kind="stable"), axis=1)
        return Candidates(batch.space.copy(), batch.levels.copy(), moved)

    def from_mapping(self, mapping: Mapping) -> Candidates | None:
        """``mapping`` as a one-row canonical batch; None if it is not a point of this space
        (another fusion or choice, or a tile off the grid)."""
        for s, layer in enumerate(self.spaces):
            if layer.choice != mapping.choice or layer.groups != mapping.groups:
                continue
            tiles = mapping.tile_sizes
            if set(tiles) != set(layer.names) or set(mapping.order) != set(layer.names):
                return None
            levels = np.full((1, MAX_DIMS), -1, dtype=np.int64)
            for d, name in enumerate(layer.names):
                found = np.flatnonzero(self.values[s][d] == min(tiles[name], layer.sizes[d]))
                if not len(found):
                    return None
                levels[0, d] = found[0]
            order = np.full((1, MAX_DIMS), -1, dtype=np.int64)
            order[0, : layer.dims] = [layer.names.index(n) for n in mapping.order]
            return self.canonical(Candidates(np.array([s]), levels, order))
        return None

    # ------------------------------------------------------------------ evaluation

    def tiles_of(self, s: int, levels: np.ndarray) -> np.ndarray:
        """(n x D) tile sizes of space ``s`` for (n x MAX_DIMS) levels."""
        dims = self.spaces[s].dims
        return np.stack([self.values[s][d][levels[:, d]] for d in range(dims)], axis=1)

    def evaluate(self, batch: Candidates) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        """(cycles, energy pJ, breakdown) per candidate; illegal ones have infinite cycles
        and NaN unit cycles in the breakdown (not priced: `cost_model.evaluate_rows`)."""
        n = len(batch)
        self.evaluations += n
        cycles, energy = np.full(n, np.inf), np.full(n, np.inf)
        extra = {k: np.zeros(n) for k in ("compute_cycles", "load_cycles", "utilization")}
        for rows, result in self.evaluate_all(batch, legal_only=True):
            cycles[rows], energy[rows] = result.cycles, result.energy_pj
            for k in extra:
                extra[k][rows] = getattr(result, k)
        return cycles, energy, extra

    def evaluate_all(self, batch: Candidates, *, legal_only: bool = False
                     ) -> list[tuple[np.ndarray, CostBatch]]:
        """The batch model's figures of every candidate, one pass per stack of tensorize
        choices (`cost_rows`; usually one for the whole batch) and one boundary timeline
        for all (`cost_model.evaluate_stacks`): ``(rows, CostBatch)`` pairs; ``legal_only``
        as in `cost_model.evaluate_rows`."""
        levels = np.maximum(batch.levels, 0)
        tiles = self.tile_table[batch.space[:, None], np.arange(MAX_DIMS)[None, :], levels]
        parts, stacked = [], []
        for stack, members in self.stacks:
            rows = (np.arange(len(batch)) if len(self.stacks) == 1
                    else np.flatnonzero(np.isin(batch.space, members)))
            if not len(rows):
                continue
            which = self.stack_row[batch.space[rows]]
            parts.append(rows)
            stacked.append((stack.rows(which),
                            *stack.widen(which, tiles[rows], batch.order[rows]), None))
        return list(zip(parts, evaluate_stacks(stacked, self.parameters, legal_only=legal_only),
                        strict=True))

    def cost(self, batch: Candidates, row: int) -> CostBatch:
        s = int(batch.space[row])
        dims = self.spaces[s].dims
        return evaluate(self.spaces[s], self.tiles_of(s, batch.levels[row : row + 1]),
                        batch.order[row : row + 1, :dims], self.parameters)

    def mapping(self, batch: Candidates, row: int) -> Mapping:
        """The `compiler.mapping.Mapping` of candidate ``row`` (for code generation)."""
        s = int(batch.space[row])
        space = self.spaces[s]
        tiles = self.tiles_of(s, batch.levels[row : row + 1])[0]
        order = tuple(space.names[p] for p in batch.order[row, : space.dims])
        return Mapping(space.choice, tuple(zip(space.names, map(int, tiles), strict=True)), order,
                       space.groups)

    # ------------------------------------------------------------------ revisions

    def valid_actions(self, batch: Candidates) -> np.ndarray:
        """(n x N_ACTIONS) bool: revisions that change the candidate's cost-relevant form."""
        n = len(batch)
        mask = np.zeros((n, N_ACTIONS), dtype=bool)
        levels, n_levels = batch.levels, self.n_levels[batch.space]
        mask[:, :MAX_DIMS] = (levels >= 0) & (levels < n_levels - 1)
        mask[:, MAX_DIMS : 2 * MAX_DIMS] = levels > 0
        order = batch.order
        left, right = order[:, :-1], order[:, 1:]
        outputs = self.outputs[batch.space]
        same_kind = np.take_along_axis(outputs, np.maximum(left, 0), 1) == np.take_along_axis(
            outputs, np.maximum(right, 0), 1)
        loops = self.loop_counts(batch) > 1
        both_loop = np.take_along_axis(loops, np.maximum(left, 0), 1) & np.take_along_axis(
            loops, np.maximum(right, 0), 1)
        mask[:, 2 * MAX_DIMS : 3 * MAX_DIMS - 1] = (left >= 0) & (right >= 0) & same_kind & (
            both_loop)
        mask[:, SWITCH] = len(self.spaces) > 1
        trade = mask[:, :MAX_DIMS, None] & mask[:, None, MAX_DIMS : 2 * MAX_DIMS]
        trade[:, np.arange(MAX_DIMS), np.arange(MAX_DIMS)] = False
        mask[:, TRADE:] = trade.reshape(n, -1)
        return mask

    def revise(self, batch: Candidates, actions: np.ndarray,
               rng: np.random.Generator) -> Candidates:
        """Apply one action per candidate (see the module docstring)."""
        out = Candidates(batch.space.copy(), batch.levels.copy(), batch.order.copy())
        rows = np.arange(len(batch))
        up = actions < MAX_DIMS
        out.levels[rows[up], actions[up]] += 1
        down = (actions >= MAX_DIMS) & (actions < 2 * MAX_DIMS)
        out.levels[rows[down], actions[down] - MAX_DIMS] -= 1
        trade = actions >= TRADE
        grow, shrink = np.divmod(actions[trade] - TRADE, MAX_DIMS)
        out.levels[rows[trade], grow] += 1
        out.levels[rows[trade], shrink] -= 1
        swap = (actions >= 2 * MAX_DIMS) & (actions < SWITCH)
        j = actions[swap] - 2 * MAX_DIMS
        r = rows[swap]
        out.order[r, j], out.order[r, j + 1] = batch.order[r, j + 1], batch.order[r, j]
        for row in rows[actions == SWITCH]:
            self._switch(out, row, rng)
        return self.canonical(out)

    def _switch(self, batch: Candidates, row: int, rng: np.random.Generator) -> None:
        old = int(batch.space[row])
        new = (old + 1 + int(rng.integers(0, len(self.spaces) - 1))) % len(self.spaces)
        old_space, new_space = self.spaces[old], self.spaces[new]
        tiles = dict(zip(old_space.names,
                         self.tiles_of(old, batch.levels[row : row + 1])[0], strict=True))
        levels = np.full(MAX_DIMS, -1, dtype=np.int64)
        for d, name in enumerate(new_space.names):
            values = self.values[new][d]
            if name in tiles:
                levels[d] = int(np.clip(np.searchsorted(values, tiles[name]), 0, len(values) - 1))
            else:
                levels[d] = int(rng.integers(0, len(values)))
        batch.space[row] = new
        batch.levels[row] = levels
        batch.order[row] = -1
        batch.order[row, : new_space.dims] = self._random_order(new, rng)

    # ------------------------------------------------------------------ features

    def features(self, batch: Candidates, cycles: np.ndarray, best: float,
                 extra: dict[str, np.ndarray]) -> np.ndarray:
        """(n x N_FEATURES) float32 state of each candidate for the Q-network."""
        n = len(batch)
        n_levels = np.maximum(self.n_levels[batch.space] - 1, 1)
        valid = batch.levels >= 0
        level_share = np.where(valid, batch.levels / n_levels, -1.0)
        position = np.full((n, MAX_DIMS), -1.0)
        dims = np.array([self.spaces[s].dims for s in batch.space])
        for slot in range(MAX_DIMS):
            index = batch.order[:, slot]
            ok = index >= 0
            position[np.flatnonzero(ok), index[ok]] = slot / np.maximum(dims[ok] - 1, 1)
        finite = np.isfinite(cycles)
        ratio = np.where(finite, np.log(np.maximum(cycles, 1) / max(best, 1)), 5.0)
        safe = np.where(finite, cycles, 1.0)
        columns = [level_share, position, self.outputs[batch.space].astype(float),
                   (batch.space / max(len(self.spaces) - 1, 1))[:, None], ratio[:, None],
                   extra["utilization"][:, None],
                   np.where(finite, extra["compute_cycles"] / safe, 0)[:, None],
                   np.where(finite, extra["load_cycles"] / safe, 0)[:, None]]
        return np.concatenate(columns, axis=1).astype(np.float32)
