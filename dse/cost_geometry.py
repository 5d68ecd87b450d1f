"""Tile geometry of a batch of mappings for the cost model (`cost_model`), with numpy.

Per mapping and device index: tile sizes, tile counts, remainders and blocks (`Geometry`);
per operand: buffer lines of a tile, DRAM elements, rows, beats and lines of one pass over
its tiles (`sweep_sums`), LOAD/STORE commands and instructions per tile transfer
(`transfers`), and the tile steps between an operand's reloads in a loop order
(`reload_periods`). A `Geometry`
of one tile (``sizes`` = the tile) gives the same quantities for one tile step or chunk.
Every space constant comes per mapping (`cost_rows.SpaceRows`): a batch may mix tensorize
choices.
"""

from __future__ import annotations

import numpy as np

from tensorforge.compiler.repeats import repeat_capacity
from tensorforge.dse.cost_rows import OperandRows, SpaceRows, gather
from tensorforge.dse.cost_space import AXIS, ELEM, GROUP
from tensorforge.isa import Opcode

I64 = np.int64


def ceil_div(a: np.ndarray, b) -> np.ndarray:
    return -(-a // b)


def distinct_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(first, inverse)`` of the distinct rows of a non-negative integer matrix, as
    ``np.unique(rows, axis=0, return_index=True, return_inverse=True)`` gives them (same
    order), but by one integer key per row where the columns' ranges fit in 63 bits: the
    row-wise unique sorts structured rows, a large part of pricing a batch otherwise."""
    rows = np.asarray(rows, dtype=I64)
    if not rows.size:
        return np.zeros(0, dtype=I64), np.zeros(len(rows), dtype=I64)
    spans = rows.max(axis=0) + 1
    if rows.min() < 0 or np.sum(np.log2(spans.astype(float))) >= 62:
        _, first, inverse = np.unique(rows, axis=0, return_index=True, return_inverse=True)
        return first, inverse.reshape(-1)
    weights = np.cumprod(np.concatenate([spans[1:], [1]])[::-1])[::-1]  # row-major radix
    _, first, inverse = np.unique(rows @ weights, return_index=True, return_inverse=True)
    return first, inverse.reshape(-1)


class Geometry:
    """Per-index quantities of a batch: counts, remainders, block counts."""

    def __init__(self, rows: SpaceRows, tiles: np.ndarray,
                 sizes: np.ndarray | None = None) -> None:
        block = rows.block
        self.single = sizes is tiles  # one tile per index: a tile step or chunk on its own
        sizes = rows.sizes if sizes is None else sizes
        self.offset = np.arange(len(tiles)) * tiles.shape[1]
        self.tile = np.minimum(tiles, sizes)
        self.full_blocks = ceil_div(self.tile, block)
        if self.single:  # the same numbers without the divisions (the model's hot path)
            self.count = np.ones_like(self.tile)
            self.rem, self.rem_blocks, self.total_blocks = (
                self.tile, self.full_blocks, self.full_blocks)
        else:
            self.count = ceil_div(sizes, self.tile)
            self.rem = sizes - (self.count - 1) * self.tile
            self.rem_blocks = ceil_div(self.rem, block)
            self.total_blocks = (self.count - 1) * self.full_blocks + self.rem_blocks
        self.legal = np.all((self.tile % block == 0) | (self.tile == sizes), axis=1)
        self.sizes, self.block = sizes, block
        self._flat, self._cols = {}, {}

    def take(self, rows: np.ndarray) -> Geometry:
        """The geometry of mappings ``rows`` only."""
        out = object.__new__(Geometry)
        out.single = self.single
        for name in ("tile", "full_blocks", "count", "rem", "rem_blocks", "total_blocks",
                     "legal", "sizes", "block"):
            setattr(out, name, np.take(getattr(self, name), rows, axis=0))
        out.offset = np.arange(len(rows)) * self.tile.shape[1]
        out._flat, out._cols = {}, {}
        return out

    def col(self, name: str, positions: np.ndarray) -> np.ndarray:
        """Quantity ``name`` of each mapping's index at ``positions`` (an ``n``-vector; read
        only: it is kept for the next caller). Each is gathered once, with the flat indices
        of a ``positions`` vector: the model reads several quantities at the same positions,
        some twice, and each numpy call counts on small batches."""
        known = self._cols.get((name, id(positions)))
        if known is not None and known[0] is positions:
            return known[1]
        flat = self._flat.get(id(positions))
        if flat is None or flat[0] is not positions:
            flat = self._flat[id(positions)] = (positions, self.offset + positions)
        value = getattr(self, name).reshape(-1).take(flat[1])
        self._cols[(name, id(positions))] = (positions, value)
        return value


def tile_lines(g: Geometry, spec: OperandRows) -> np.ndarray:
    """Buffer lines of one full tile (as `compiler.tiling` allocates)."""
    lines = np.ones(g.tile.shape[0], dtype=I64)
    for dim in spec.dims:
        lines *= _dim_lines(g, dim)
    return lines


def _row_sums(g: Geometry, per_row, position: np.ndarray, size: np.ndarray) -> np.ndarray:
    """Sum over the tiles of index ``position`` of ``per_row(elements)`` for each LOAD/STORE
    row (full rows of ``size`` elements, then the remainder row) of one tile."""
    def one_tile(valid: np.ndarray) -> np.ndarray:
        part = valid % size
        return (valid // size) * per_row(size) + np.where(part > 0, per_row(part), 0)
    if g.single:
        return one_tile(g.col("tile", position))
    return (g.col("count", position) - 1) * one_tile(g.col("tile", position)) + one_tile(
        g.col("rem", position))


def sweep_sums(g: Geometry, spec: OperandRows, elem_bytes: int, bus_bytes: int
               ) -> dict[str, np.ndarray]:
    """Totals over one pass through every distinct tile of the operand: DRAM elements, data
    rows, beats and buffer lines (pad lines included). Integer products, in any order."""
    elements = rows = lines = 1  # until a dimension multiplies them
    elem_rows = elem_beats = None
    for dim in spec.dims:
        p = dim.positions[0]
        if dim.kind == GROUP:
            sizes = g.col("sizes", p)
            elements, rows, lines = elements * sizes, rows * sizes, lines * sizes
        elif dim.kind == ELEM:
            elements = elements * g.col("sizes", p)
            size = dim.sizes[0]
            elem_rows = _row_sums(g, lambda v: 1, p, size)
            elem_beats = _row_sums(g, lambda v: ceil_div(v * elem_bytes, bus_bytes), p, size)
            lines = lines * g.col("total_blocks", p)
        else:
            data, need = _window_sums(g, dim)
            elements, rows, lines = elements * data, rows * data, lines * need
    n = g.tile.shape[0]
    elements, rows, lines = (np.full(n, v, dtype=I64) if isinstance(v, int) else v
                             for v in (elements, rows, lines))
    if elem_rows is None:  # one element per line: every data row is one beat
        return {"elements": elements, "rows": rows, "beats": rows, "lines": lines}
    return {"elements": elements, "rows": rows * elem_rows, "beats": rows * elem_beats,
            "lines": lines}


def _window_sums(g: Geometry, dim) -> tuple[np.ndarray, np.ndarray]:
    """Data rows and buffer lines of a sliding-window dimension (``x+r``) over every
    distinct tile: each tile of the window's indices spans their extents less the overlap;
    one tile per index (a tile step on its own) where ``g.single``."""
    overlap = len(dim.positions) - 1
    sizes = [g.col("sizes", q) for q in dim.positions]
    blocks = [g.col("total_blocks", q) for q in dim.positions]
    if g.single:  # every count is 1
        return (sum(sizes) - overlap,
                sum(s * b for s, b in zip(dim.sizes, blocks, strict=True)) - overlap)
    counts = [g.col("count", q) for q in dim.positions]
    keys = np.prod(counts, axis=0)
    data = sum(sizes[e] * keys // counts[e] for e in range(len(counts)))
    need = sum(dim.sizes[e] * blocks[e] * keys // counts[e] for e in range(len(counts)))
    return data - overlap * keys, need - overlap * keys


def reload_periods(g: Geometry, rows: SpaceRows, order: np.ndarray,
                   uses: list[np.ndarray] | None = None) -> tuple[np.ndarray, ...]:
    """Tile steps between reloads of A, B and between stores of C (suffix count products);
    ``uses``: per operand the indices whose advance reloads it (by default those it uses)."""
    counts = gather(g.count, order)  # (n x D), outermost first
    suffix = np.cumprod(counts[:, ::-1], axis=1)[:, ::-1]  # product of this loop and inner
    inner = np.concatenate([suffix[:, 1:], np.ones((len(order), 1), dtype=I64)], axis=1)
    total = suffix[:, 0]
    periods = []
    for row in range(3):
        used = rows.uses(row) if uses is None else uses[row]
        moving = gather(used, order) & (counts > 1)
        last = np.where(moving.any(axis=1),
                        moving.shape[1] - 1 - np.argmax(moving[:, ::-1], axis=1), -1)
        period = np.where(last >= 0, np.take_along_axis(inner, np.maximum(last, 0)[:, None],
                                                         axis=1)[:, 0], total)
        periods.append(period)
    return total, periods[0], periods[1], periods[2]


#: Runs one repeated LOAD/STORE may carry: its ``repeat`` field counts the runs after the
#: first (the narrower of the two opcodes' fields, as `compiler.repeats` folds them).
MAX_RUNS = 1 + min(repeat_capacity(op)[0] for op in (Opcode.LOAD, Opcode.STORE))


def transfers(g: Geometry, spec: OperandRows, lines: np.ndarray, padded: bool,
              repeat: bool = False, folds: np.ndarray | bool = False
              ) -> tuple[np.ndarray, np.ndarray]:
    """``(commands, instructions)`` of one transfer of a tile of ``lines`` lines (means over
    the tiles): the DMA unit's commands and the LOAD/STOREs fetched for them.

    A command per run of the innermost dimension's lines (`tile_runs.tile_runs`); where
    that dimension packs a block of elements per line, a partial last line is a command of
    its own (its row is shorter); where it is a line axis of one index whose partial block
    a LOAD (``padded``) fills with zero lines, those lines are one more LOAD (``pad_after``
    of the run's LOAD with ``repeat``; sliding windows are counted one LOAD a run). Without
    ``repeat`` each command is an instruction; with it (``controller.repeat``,
    `compiler.repeats`), where ``folds`` (per mapping: the second innermost dimension's
    DRAM step fits the ``repeat_stride`` field, `LayerSpace.folds`), the commands of one
    line run each fold into an instruction per `MAX_RUNS` runs along that dimension (a run
    split into a full and a partial line does not fold).
    """
    runs = (lines // _dim_lines(g, spec.dims[-1]) if spec.dims
            else np.ones(len(lines), dtype=I64)).astype(float)
    folds = np.where(folds, _folded(g, spec), 1.0) if repeat else 1.0
    last = spec.dims[-1] if spec.dims else None
    used = [] if last is None else [q for q, present in zip(last.positions, last.present,
                                                            strict=True) if present]
    if (last is None or last.kind == GROUP or (last.kind == AXIS and not padded)
            or len(last.positions) != 1 or not used):  # (a sliding window: a run per extent)
        return runs, runs * folds

    def per_tile(valid: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """(commands, instructions) per run of a tile of ``valid`` elements."""
        partial = (valid[0] % last.sizes[0] > 0).astype(float)
        if last.kind == ELEM:
            commands = (valid[0] >= last.sizes[0]) + partial
            return commands, np.where(commands > 1, commands, commands * folds)
        if repeat:  # the zero lines are the run's own LOAD's pad_after
            return np.ones_like(partial), np.ones_like(partial) * folds
        return 1.0 + partial, 1.0 + partial

    full = per_tile([g.col("tile", q) for q in used])
    if g.single:  # one tile, its own remainder: the mean below is ``runs * full``
        return runs * full[0], runs * full[1]
    rem = per_tile([g.col("rem", q) for q in used])
    count = g.col("count", used[0])
    return tuple(runs * ((count - 1) * f + r) / count for f, r in zip(full, rem, strict=True))


def _folded(g: Geometry, spec: OperandRows) -> np.ndarray | float:
    """Instructions per command where runs fold: one per `MAX_RUNS` runs of the second
    innermost dimension (one where the tile has a single dimension)."""
    if len(spec.dims) < 2:
        return 1.0
    second = _dim_lines(g, spec.dims[-2])
    return ceil_div(second, MAX_RUNS) / np.maximum(second, 1)


def _dim_lines(g: Geometry, dim) -> np.ndarray:
    """Buffer lines along one tile dimension: a group's tile, an element block's full
    blocks, or a line axis's extent (a window's indices overlap)."""
    if dim.kind == GROUP:
        return g.col("tile", dim.positions[0])
    if dim.kind == ELEM:
        return g.col("full_blocks", dim.positions[0])
    extent = sum(s * g.col("full_blocks", q) for q, s in zip(dim.positions, dim.sizes,
                                                              strict=True))
    return extent - (len(dim.positions) - 1)
