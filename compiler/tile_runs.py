"""A tile's lines as runs of DRAM rows, and the LOAD/STORE instructions that move them.

It exists apart from the walk over tile steps (`tile_walk`) because it depends only on one
operand's tile, its DRAM layout and the elements a step holds: `run_plan` reads the tile's
dimensions once, `tile_runs` yields the row runs of a step (or chunk), `coalesce` joins
runs that lie back to back, and `transfer_rows` / `zero_lines` emit them within the ISA's
field limits (`field_limits`). The cost model measures its transfers on this code
(`dse.cost_transfers`).
"""

from __future__ import annotations

import itertools

from tensorforge.compiler.field_limits import MAX_PAD, MAX_ROWS, MAX_STRIDE
from tensorforge.compiler.tiling import OperandTile
from tensorforge.compiler.tokens import LOAD, STORE, Emitter
from tensorforge.errors import MappingError
from tensorforge.isa import Buffer, Load


def run_plan(tile: OperandTile, offset: int, strides: dict[str, int]):
    """``(offset, ((index, stride), ...), dims)`` that `tile_runs` walks for one operand.

    A dim is ``(kind, index, intrinsic index, size, line step, DRAM step)``: ``index`` is the
    dim's first device index (None if no device index is matched to it), the DRAM step is
    the element distance between neighbouring positions.
    """
    dims = []
    for dim in tile.dims:
        n, iota, size = next((e for e in dim.entries if e[0]), (None, None, 1))
        along = 0 if n is None else strides[n] * (1 if dim.is_line_axis else size)
        dims.append((dim.kind, n, iota, size, dim.step, along, dim.entries))
    uses = tuple((n, strides[n]) for n in tile.access.indices)
    return offset, uses, tuple(dims)


def tile_runs(plan: tuple, origin: dict, valid: dict, padded: bool):
    """``(line, dram_elem, rows, row_len, stride, pad_after)`` per LOAD/STORE row run.

    ``dram_elem`` is None for a run of zero lines only. Loads (``padded``) cover every
    line the valid blocks read; stores only the lines holding results.
    """
    offset, origin_strides, dims = plan
    if not dims:
        yield 0, offset, 1, 1, 0, 0
        return
    apart = [dim for dim in dims if dim[0] == "blocks"]  # outermost, see tiling
    if not apart:
        yield from _strip_runs(offset, origin_strides, dims, origin, valid, padded, 0)
        return
    rest = dims[len(apart):]
    for coords in itertools.product(*(range(-(-valid[n] // size))
                                      for _, n, _, size, _, _, _ in apart)):
        local_origin, local_valid, line = dict(origin), dict(valid), 0
        for c, (_, n, _, size, step, _, _) in zip(coords, apart, strict=True):
            local_origin[n] += c * size
            local_valid[n] = min(size, valid[n] - c * size)
            line += c * step
        yield from _strip_runs(offset, origin_strides, rest, local_origin, local_valid,
                               padded, line)


def _strip_runs(offset, origin_strides, dims, origin, valid, padded, first_line):
    """`tile_runs` of tile dimensions that are independent of each other (no blocks dims).

    Each outer dimension contributes, per coordinate, a line offset, a DRAM offset and
    whether it holds data; their combinations, in row-major order, start one run each.
    """
    address = offset + sum(origin[n] * stride for n, stride in origin_strides)
    data = [_valid_lines(dim, valid) for dim in dims]
    extent = [_needed_lines(dim, valid) for dim in dims] if padded else data
    starts = [(first_line, address, True, 1)]
    outer = zip(dims[:-1], extent, data, strict=False)
    for (kind, n, iota, size, step, dram_step, _), lines, held in outer:
        if kind == "group" and iota is not None:  # blocks along a line: shorter last row
            options = [(c * step, c * dram_step, c < held, min(size, valid[n] - c * size))
                       for c in range(lines)]
            starts = [(line + dl, at + da, ok and ok_c, row_len)
                      for line, at, ok, _ in starts for dl, da, ok_c, row_len in options]
        else:
            options = [(c * step, c * dram_step, c < held) for c in range(lines)]
            starts = [(line + dl, at + da, ok and ok_c, row_len)
                      for line, at, ok, row_len in starts for dl, da, ok_c in options]
    kind, n, iota, size, _, dram_step, _ = dims[-1]
    last, rows = extent[-1], data[-1]
    for line, at, ok, row_len in starts:
        if not ok:
            yield line, None, 0, 0, 0, last
        elif kind == "group" and iota is not None:  # blocks of the line index
            full = valid[n] // size
            if full:
                yield line, at, full, size, dram_step, 0
            if valid[n] % size:
                yield line + full, at + full * dram_step, 1, valid[n] % size, 0, 0
        else:
            yield line, at, rows, row_len, dram_step, last - rows


def _valid_lines(dim: tuple, valid: dict) -> int:
    """Lines of one tile dimension that hold data (``valid`` elements per index)."""
    kind, n, _, size, _, _, entries = dim
    if kind in ("group", "blocks"):
        return -(-valid[n] // size)
    return sum(valid[m] if m else 1 for m, _, _ in entries) - len(entries) + 1


def _needed_lines(dim: tuple, valid: dict) -> int:
    """Lines of one tile dimension that the valid blocks read (data and zero padding)."""
    kind, n, _, size, _, _, entries = dim
    if kind in ("group", "blocks"):
        return -(-valid[n] // size)
    return sum(size * (-(-valid[m] // size) if m else 1)
               for m, _, size in entries) - len(entries) + 1


def check_sliding_axes(tile: OperandTile, strides: dict[str, int]) -> None:
    for dim in tile.dims:
        if dim.is_line_axis and len({strides[n] for n in dim.indices}) > 1:
            raise MappingError(
                f"{tile.access} cannot be loaded as the sliding window "
                f"{'+'.join(i for _, i, _ in dim.entries)}: {' and '.join(dim.indices)} have "
                "different DRAM "
                "strides; use another tensorize choice")


def coalesce(runs, widen_to: int) -> list[tuple]:
    """`tile_runs` with neighbouring runs joined where their rows lie back to back in
    DRAM and in the buffer, so each becomes one LOAD or STORE of long bursts.

    ``widen_to`` > 1 (a tile-major region whose line dimension ends with the index, so its
    last block's tail is the region's zero padding) widens a row shorter than that (the
    index's last, partial block) to the whole block: a LOAD reads the zeros it would
    otherwise fill in, a STORE writes padding the output's reader skips, and the rows of a
    partial block stay back to back too.
    """
    joined: list[list] = []
    for line, address, rows, row_len, stride, pad in runs:
        if address is not None and rows and 0 < row_len < widen_to:
            row_len = widen_to
        if rows == 1:
            stride = row_len  # a single row is back to back with anything right after it
        if joined and address is not None and rows:
            last = joined[-1]
            if (last[1] is not None and last[5] == 0 and last[3] == row_len
                    and last[4] == row_len == stride and last[0] + last[2] == line
                    and last[1] + last[2] * row_len == address):
                last[2] += rows
                last[5] = pad
                continue
        joined.append([line, address, rows, row_len, stride, pad])
    return [tuple(run) for run in joined]


def zero_lines(emit: Emitter, line: int, count: int) -> None:
    for start in range(0, count, MAX_PAD):
        emit.add(LOAD, Load, line=line + start, pad_after=min(MAX_PAD, count - start))


def transfer_rows(emit, kind, line, layout, address, rows, row_len, stride, pad,
                  fields=None) -> None:
    """One LOAD/STORE per chunk of rows that fits the ISA fields; pad lines after.
    ``fields``: more fields of each instruction."""
    chunk = 1 if stride < 0 or stride > MAX_STRIDE else MAX_ROWS
    unit, extra = (LOAD, {"buffer": Buffer.SPAD}) if kind is Load else (STORE, {})
    extra = {**extra, **(fields or {})}
    base, elem_bytes = layout.base, layout.elem_bytes
    for start in range(0, rows, chunk):
        count = min(chunk, rows - start)
        emit.add(unit, kind, line=line + start,
                 dram_addr=base + (address + start * stride) * elem_bytes,
                 rows=count, row_len=row_len, stride=stride if count > 1 else 0, **extra)
    if pad:
        zero_lines(emit, line + rows, pad)
