"""The batch cost model's split steps: where the code generator cuts a program's first and
last tile steps, vectorized over a batch of mappings.

It exists so the model cuts the boundary steps exactly as `compiler.codegen` does, in one
place that mirrors it:

* **split steps**: the first tile step is cut into chunks along a reduction index the
  loaded operands use (1, 1, 2, 4, ... blocks), the last along an output index (..., 4, 2,
  1, 1), and the first chunk of the one and the last of the other again along an output
  index (`_pieces`). Each chunk has its own LOADs, its own COMPUTE micro-loop and (last
  step) its own STOREs; `split_index`, `with_inner_cut` and `chunk_extents` mirror
  `TileWalker._split_indices` and `tile_walk._chunks`.

`split_plan` returns one boundary step's pieces and the parts to price for them;
`cost_boundary` prices and lays them out.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tensorforge.dse.cost_rows import gather, gathers

I64 = np.int64


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


def with_inner_cut(cut: np.ndarray, blocks: np.ndarray, allowed: np.ndarray,
                   rank: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(cut, inner cut)``: the boundary chunk of a step cut along ``cut`` is cut again
    along the ``allowed`` output index of most blocks but ``cut`` (`tile_walk.TileWalker.
    _split_indices`); -1 where there is none."""
    others = allowed & (np.arange(blocks.shape[1])[None, :] != cut[:, None])
    inner = split_index(blocks, others, rank)
    return cut, np.where(cut >= 0, inner, -1)


@dataclass(frozen=True)
class _Pieces:
    """The chunks of a boundary step and the chunks of its boundary chunk (``sub``), a row
    per piece in program order: where a mapping has it (``exists``, ``pieces x n``) and its
    elements per index (``valid``, ``pieces x n x D``)."""

    exists: np.ndarray
    valid: np.ndarray
    sub: np.ndarray


def _pieces(rows, valid, cuts, growing, active) -> _Pieces:
    """The chunks of one boundary step in program order (`tile_walk.TileWalker._split_step`):
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
class SplitPlan:
    """One boundary step's pieces (`_pieces`), where each operand's loads and the store
    follow the cuts (``chunked[level][role]``), the first sub-chunk's place (``edge``, -1:
    none), and the parts to price (`split_plan`, ``m x D``) with their mappings
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


def split_plan(space_rows, valid, cuts, growing, active) -> SplitPlan:
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
    return SplitPlan(
        cuts, pieces, chunked, edge,
        np.concatenate([valid, whole_chunk[chunk_owners], pieces.valid[piece, owner]]),
        np.concatenate([rows, chunk_owners, owner]),
        np.concatenate([np.zeros(n, dtype=I64), np.ones(len(chunk_owners), dtype=I64),
                        piece + 2]), len(pieces.sub) + 2)

