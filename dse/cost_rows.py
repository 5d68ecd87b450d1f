"""Several `LayerSpace`s of one layer as per-row arrays, so that the batch model prices a batch
mixing tensorize choices in one pass of numpy instead of one pass per choice (a pass costs
milliseconds of fixed numpy overhead, more than pricing a thousand mappings).

A `SpaceStack` holds the per-choice constants once, as tables with a row per space; `rows`
picks a table row per mapping (`SpaceRows`). Spaces stack when their operands' tile
dimensions (`cost_space.OperandSpec.dims`) have the same kinds in the same order once each
operand's leading groups are padded to a common count: a group of one element changes no
product, and every choice of one intrinsic for one layer has that form. Each mapping's
device indices take the first columns; the columns after them (up to one past the widest
space where an operand needs it) are indices of size, tile and block 1 whose loop runs once
(innermost), and the last column also stands for an intrinsic index that no workload index
runs along.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from tensorforge.dse.cost_space import GROUP, ROLES, LayerSpace, OperandSpec, StepPlan

I64 = np.int64


def gather(matrix: np.ndarray, columns: np.ndarray) -> np.ndarray:
    """``matrix[i, columns[i, j]]`` (``columns`` ``n x k``) or ``matrix[i, columns[i]]``
    (``n``), by one flat gather: a two-axis fancy index or `np.take_along_axis` takes several
    times as long, which counts in the model's inner loops."""
    n, width = matrix.shape
    offset = np.arange(n) * width
    return np.take(matrix.reshape(-1), columns + (offset if columns.ndim == 1
                                                  else offset[:, None]))


def gathers(matrices: list[np.ndarray], columns: np.ndarray) -> list[np.ndarray]:
    """`gather` of several ``n x W`` matrices at the same ``columns`` (an ``n``-vector),
    the flat indices worked out once."""
    n, width = matrices[0].shape
    flat = columns + np.arange(n) * width
    return [np.reshape(m, -1).take(flat) for m in matrices]


def signature(space: LayerSpace) -> tuple:
    """What must agree for spaces to stack: per operand, its non-group tile dimensions' kinds
    and which of their entries a workload index runs along; and the accelerator."""
    return (space.config, *(tuple((d.kind, tuple(p >= 0 for p in d.positions))
                                  for d in spec.dims if d.kind != GROUP)
                            for spec in space.operands))


def stack_classes(spaces: list[LayerSpace]) -> list[list[int]]:
    """Indices of ``spaces`` grouped by `signature`, in order of first appearance."""
    classes: dict[tuple, list[int]] = {}
    for i, space in enumerate(spaces):
        classes.setdefault(signature(space), []).append(i)
    return list(classes.values())


@dataclass(frozen=True)
class DimRows:
    """One operand tile dimension, per mapping: ``positions`` and ``sizes`` (block size) of each
    entry as ``n``-vectors; ``present``: whether a workload index runs along the entry (where
    not, its position is the padding column)."""

    kind: int
    positions: tuple[np.ndarray, ...]
    sizes: tuple[np.ndarray, ...]
    present: tuple[bool, ...]


@dataclass(frozen=True)
class OperandRows:
    """An operand's tile dimensions per mapping and ``uses`` (``n x W``): the device indices
    its access uses."""

    role: str
    dims: tuple[DimRows, ...]
    uses: np.ndarray


class _Gathered:
    """A `SpaceStack` table of that name, gathered for the rows' spaces when first read."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, rows: SpaceRows | None, owner: type | None = None):
        if rows is None:
            return self
        value = rows.__dict__[self.name] = rows._rows(getattr(rows.stack, self.name))
        return value


class SpaceRows:
    """The constants of each mapping's space, ``n`` rows of ``W`` columns (see the module
    docstring): device sizes and intrinsic blocks, the name order of each index (ties of the
    code generator's choices), where a boundary step may be cut, the host's bytes, the useful
    MACs and the operands' tile dimensions. Each is gathered from the stack's tables when
    first read: a boundary chunk's pricing reads only a few."""

    def __init__(self, stack: SpaceStack, space: np.ndarray) -> None:
        self.stack = stack
        self.space = space  # (n,) the stack's space of each mapping

    def __len__(self) -> int:
        return len(self.space)

    def _rows(self, table: np.ndarray) -> np.ndarray:
        return np.take(table, self.space, axis=0)

    sizes = _Gathered()
    block = _Gathered()
    rank = _Gathered()
    chunkable = _Gathered()
    host_bytes = _Gathered()
    useful = _Gathered()
    folds = _Gathered()  # (n x 3) whether A's, B's, C's runs fold (`LayerSpace.folds`)

    @cached_property
    def operands(self) -> tuple[OperandRows, OperandRows, OperandRows]:
        out = []
        for role, (uses, dims, entries) in zip(ROLES, self.stack.operand_tables, strict=True):
            gathered = iter(np.take(entries, self.space, axis=1))  # one gather per operand
            out.append(OperandRows(role, tuple(
                DimRows(kind, tuple(next(gathered) for _ in present),
                        tuple(next(gathered) for _ in present), present)
                for kind, present in dims), self._rows(uses)))
        return tuple(out)

    @property
    def config(self):
        return self.stack.spaces[0].config

    @property
    def step(self) -> StepPlan:
        return self.stack.spaces[0].step

    def uses(self, role: int) -> np.ndarray:
        """(``n x W``) bool: operand A/B/C (0/1/2) uses the index."""
        return self.operands[role].uses

    def take(self, rows: np.ndarray) -> SpaceRows:
        return SpaceRows(self.stack, self.space[rows])

    def single(self) -> LayerSpace:
        """The one space of these rows (the code generator's exact counts are per space)."""
        if len(self.stack.spaces) != 1:
            raise ValueError("exact transfer counts price one tensorize choice at a time: "
                             "evaluate each space on its own")
        return self.stack.spaces[0]


def _needs_padding(spaces: list[LayerSpace]) -> bool:
    """Whether some operand needs a column of ones past the widest space: to pad its groups
    to the others' count, or for an intrinsic index no workload index runs along."""
    for role in range(len(ROLES)):
        specs = [s.operands[role] for s in spaces]
        if len({sum(d.kind == GROUP for d in spec.dims) for spec in specs}) > 1:
            return True
        if any(p < 0 for spec in specs for d in spec.dims for p in d.positions):
            return True
    return False


class SpaceStack:
    """Per-space constants of stackable `LayerSpace`s (`stack_classes`) as tables, built once."""

    def __init__(self, spaces: list[LayerSpace]) -> None:
        if len({signature(s) for s in spaces}) != 1:
            raise ValueError("these spaces do not stack: group them with stack_classes")
        self.spaces = tuple(spaces)
        self.width = max(s.dims for s in spaces) + _needs_padding(spaces)
        pad = self.width - 1
        count, width = len(spaces), self.width
        self.sizes = np.ones((count, width), dtype=I64)
        self.block = np.ones((count, width), dtype=I64)
        self.rank = np.tile(np.arange(width, dtype=I64), (count, 1))
        self.chunkable = np.zeros((count, width), dtype=bool)
        for i, s in enumerate(spaces):
            self.sizes[i, : s.dims] = s.sizes
            self.block[i, : s.dims] = s.block
            self.rank[i, : s.dims] = np.argsort(np.argsort(np.array(s.names)))
            self.chunkable[i, : s.dims] = [
                not any(d in dim.positions and len(dim.positions) > 1
                        for spec in s.operands for dim in spec.dims) for d in range(s.dims)]
        self.host_bytes = np.array([s.host_bytes for s in spaces], dtype=I64)
        self.useful = np.array([float(np.prod(s.sizes.astype(float))) for s in spaces])
        self.folds = np.array([s.folds for s in spaces], dtype=bool).reshape(count, len(ROLES))
        self.operand_tables = [self._operand_tables(r, pad) for r in range(len(ROLES))]

    def _operand_tables(self, role: int, pad: int) -> tuple[np.ndarray, list, np.ndarray]:
        """``(uses table, dims, entries)``; each dim ``(kind, present)``, ``entries`` a row
        per entry of each dim's positions, then of its sizes (dim by dim), a column per
        space."""
        specs: list[OperandSpec] = [s.operands[role] for s in self.spaces]
        groups = max(sum(d.kind == GROUP for d in spec.dims) for spec in specs)
        uses = np.zeros((len(specs), self.width), dtype=bool)
        padded = []
        for i, spec in enumerate(specs):
            uses[i, list(spec.indices)] = True
            own = sum(d.kind == GROUP for d in spec.dims)
            neutral = [(GROUP, (pad,), (1,), (True,))] * (groups - own)  # one element: factor 1
            padded.append(neutral + [(d.kind, tuple(p if p >= 0 else pad for p in d.positions),
                                      d.sizes, tuple(p >= 0 for p in d.positions))
                                     for d in spec.dims])
        dims, entries = [], [np.zeros((0, len(specs)), dtype=I64)]
        for at, (kind, _, _, present) in enumerate(padded[0]):
            dims.append((kind, present))
            entries.append(np.array([row[at][1] for row in padded], dtype=I64).T)
            entries.append(np.array([row[at][2] for row in padded], dtype=I64).T)
        return uses, dims, np.concatenate(entries)

    def rows(self, which: np.ndarray) -> SpaceRows:
        """The constants of space ``which[i]`` (an index into this stack) for row ``i``."""
        return SpaceRows(self, np.asarray(which, dtype=I64))

    def widen(self, which: np.ndarray, tiles: np.ndarray, order: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray]:
        """``(n x W tiles, n x W order)`` from tiles and orders of each row's own indices,
        ``-1`` (or nothing) past them: tile 1 on the padding columns, which loop innermost."""
        n, width = len(which), self.width
        dims = np.array([s.dims for s in self.spaces])[which]
        column = np.arange(width)[None, :]
        own = column < dims[:, None]
        wide_tiles = np.ones((n, width), dtype=I64)
        wide_order = np.broadcast_to(column, (n, width)).copy()
        span = min(width, tiles.shape[1])
        wide_tiles[:, :span] = np.where(own[:, :span], tiles[:, :span], 1)
        wide_order[:, :span] = np.where(own[:, :span], order[:, :span], column[:, :span])
        return wide_tiles, wide_order
