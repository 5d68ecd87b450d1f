"""Tile geometry: how a tile of each operand is laid out in the scratchpad or accumulator.

A tile holds ``tiles[n]`` consecutive values of every device index ``n`` (fewer in the last,
partial tile). An index the tensorize choice maps to intrinsic index ``ι`` advances in *blocks*
of the intrinsic size ``s[ι]``; an unmatched (outer) index advances one value at a time.

Each operand tile is a row-major array of buffer lines (`TileDim`, outermost first):

* one *group* dimension per unmatched index of the operand (one slot per value), then one for
  the blocks of the index that runs along a line (`BLOCK_LAYOUTS`' ``elem_axis``);
* one *axis* dimension per line axis of the intrinsic block. A sliding-window axis such as
  CONV2D's ``y+s`` keeps one strip of ``Y*nb_y + S*nb_s - 1`` lines in which consecutive
  blocks overlap (the halo is loaded once and shared).

An intrinsic step reads its block as *consecutive* lines, so an axis may hold several blocks
in one strip only if every line axis inside it spans exactly one block. Where an inner axis
would span several (CONV2D's B, ``(r, s, c)``, with more than one block of ``c``: the lines of
one block would be interleaved with the next block's), that axis keeps one block (kind
*block_axis*) and its blocks become a *blocks* dimension, outermost::

    group k x axis s (S lines) x axis c (C*nb_c)  ->  blocks c (nb_c) x group k x axis s (S)
                                                      x block_axis c (C)

So the block an intrinsic step reads is ``base + sum(coordinate[n] * block_coef[n])``: affine in
the step coordinates, which is what the COMPUTE micro-loop needs, and ``block_lines``
consecutive lines from there. Elements and lines of a block past the valid data are zeroed by
the LOADs (shorter rows and pad lines), per the intrinsic contract: the compiler never relies on
what a buffer held before.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

from tensorforge.compiler.matching import TensorizeChoice
from tensorforge.compiler.workload import Access, Workload
from tensorforge.config import AcceleratorConfig
from tensorforge.errors import MappingError
from tensorforge.intrinsics import BLOCK_LAYOUTS, Intrinsic

ROLES = ("A", "B", "C")


@dataclass(frozen=True)
class TileDim:
    """One dimension of an operand tile: a run of buffer lines."""

    # "group" (unmatched index, or blocks of the index along a line), "axis" (intrinsic line
    # axis, all blocks in one strip), "blocks" (blocks of a line axis kept apart) or
    # "block_axis" (an intrinsic line axis holding one block; its blocks are a "blocks" dim)
    kind: str
    # (device index or None if unmatched, intrinsic index or None, block size) per entry;
    # a group has one entry, an axis one per intrinsic index it sums (y+s has two)
    entries: tuple[tuple[str | None, str | None, int], ...]
    lines: int  # extent of the full tile
    step: int  # buffer lines between neighbouring positions

    @property
    def indices(self) -> tuple[str, ...]:
        return tuple(n for n, _, _ in self.entries if n is not None)

    @property
    def is_line_axis(self) -> bool:
        return self.kind in ("axis", "block_axis")


@dataclass(frozen=True)
class OperandTile:
    role: str
    access: Access
    dims: tuple[TileDim, ...]
    lines: int
    block_coef: tuple[tuple[str, int], ...]  # buffer lines per block (or value) of each index
    elem: str | None  # device index along a line, if the intrinsic's elem axis is matched
    elem_size: int

    @property
    def coef(self) -> dict[str, int]:
        return dict(self.block_coef)


@dataclass(frozen=True)
class Tiling:
    """The tiles of one mapping on one configuration, checked to fit."""

    intrinsic: Intrinsic
    sizes: tuple[tuple[str, int], ...]  # device index sizes
    tiles: tuple[tuple[str, int], ...]  # device index -> tile size in elements
    block: tuple[tuple[str, int], ...]  # device index -> block size (1 if unmatched)
    operands: tuple[OperandTile, ...]  # A, B, C
    slots: tuple[tuple[str, int], ...]  # buffers per operand: 2 double-buffers, 1 if loaded once
    # per input operand, indices whose whole extent its tile holds (`build_tiling`'s holds)
    holds: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def operand(self, role: str) -> OperandTile:
        return self.operands[ROLES.index(role)]

    def held(self, role: str) -> tuple[str, ...]:
        """Indices whose whole extent ``role``'s tile holds (its tile loops skip them)."""
        return dict(self.holds).get(role, ())

    def keys(self, role: str) -> tuple[str, ...]:
        """The indices whose tile coordinates select ``role``'s tile: a change reloads it."""
        held = self.held(role)
        return tuple(n for n in self.operand(role).access.indices if n not in held)

    def count(self, index: str) -> int:
        """How many tiles the index has."""
        return self._counts[index]

    @cached_property  # read in the mapping search's inner loop
    def _counts(self) -> dict[str, int]:
        tiles = dict(self.tiles)
        return {n: -(-size // tiles[n]) for n, size in self.sizes}

    def spad_lines(self) -> int:
        slots = dict(self.slots)
        return sum(self.operand(r).lines * slots[r] for r in ("A", "B"))

    def acc_lines(self) -> int:
        return self.operand("C").lines * dict(self.slots)["C"]


def operand_accesses(choice: TensorizeChoice) -> dict[str, Access]:
    return {name: access for name, access in choice.operands}


def build_tiling(device: Workload, choice: TensorizeChoice, tiles: Mapping[str, int],
                 config: AcceleratorConfig,
                 holds: tuple[tuple[str, tuple[str, ...]], ...] = ()) -> Tiling:
    """Geometry of ``tiles`` (elements per device index) under ``choice``; checks it fits.

    ``holds``: per input operand (A or B), indices whose whole extent its tile holds while
    the tile steps still advance by ``tiles``: a convolution's weights held for every
    output-channel block stay resident while the loops walk the input's spatial tiles, so
    neither the weights nor the input window is read again (COMPUTE addresses the step's
    block inside the held tile).

    Raises `MappingError` saying what does not fit and by how much.
    """
    intrinsic = Intrinsic(choice.intrinsic)
    if intrinsic is not config.intrinsic:
        raise MappingError(f"the tensorize choice uses the {intrinsic.value} intrinsic but the "
                           f"accelerator implements {config.intrinsic.value}")
    sizes = device.sizes
    unknown = set(tiles) ^ set(sizes)
    if unknown:
        raise MappingError(f"tile sizes must name each index of {device.text} once "
                           f"({', '.join(sizes)}); wrong or missing: {sorted(unknown)}")
    isizes = config.intrinsic_sizes
    imap = choice.index_map
    block = {n: 1 for n in sizes}
    for iota, n in imap.items():
        block[n] = isizes[iota]
    fixed = {}
    for n, size in sizes.items():
        tile = tiles[n]
        if isinstance(tile, bool) or not isinstance(tile, int) or tile < 1:
            raise MappingError(f"tile size of {n} must be a positive integer, not {tile!r}")
        tile = min(tile, size) if tile >= size else tile
        if tile < size and tile % block[n]:
            raise MappingError(f"tile size {tile} of {n} must be a multiple of its intrinsic "
                               f"block {block[n]} (or cover all {size})")
        fixed[n] = tile
    accesses = operand_accesses(choice)
    held = _check_holds(holds, accesses)
    operands = tuple(_operand_tile(role, accesses[role], intrinsic, isizes, imap,
                                   {**fixed, **{n: sizes[n] for n in held.get(role, ())}},
                                   block)
                     for role in ROLES)
    slots = {}
    for tile in operands:
        count = math.prod(-(-sizes[n] // fixed[n]) for n in tile.access.indices
                          if n not in held.get(tile.role, ()))
        slots[tile.role] = 1 if count == 1 else 2
    tiling = Tiling(intrinsic, tuple(sizes.items()), tuple(fixed.items()), tuple(block.items()),
                    operands, tuple(slots.items()),
                    tuple((r, tuple(held[r])) for r in ("A", "B") if held.get(r)))
    _check_capacity(tiling, config)
    return tiling


def _check_holds(holds, accesses) -> dict[str, tuple[str, ...]]:
    held: dict[str, tuple[str, ...]] = {}
    for entry in holds:
        try:
            role, names = entry
        except (TypeError, ValueError):
            raise MappingError(f"holds entries are (operand, indices), not {entry!r}") from None
        if role not in ("A", "B") or role in held:
            raise MappingError(f"holds names input operands A and B once each, not {role!r}")
        names = tuple(names)
        wrong = [n for n in names if n not in accesses[role].indices]
        if wrong or len(set(names)) != len(names):
            raise MappingError(f"operand {role} ({accesses[role]}) can hold only indices it "
                               f"uses, once each; not {list(names)}")
        if names:
            held[role] = names
    return held


@dataclass(frozen=True)
class Windows:
    """Unmatched indices that slide with another index along one dimension of an access
    (``x+r``, ``y+s``), so a tile keeps one strip of lines for them, halo shared, instead of
    a copy of the window per kernel tap: direct convolution with input reuse on any intrinsic.

    ``apart``: windows of unmatched indices only (``x+r`` where neither is matched), each an
    *axis* of its own among the groups; ``on_axis``: per intrinsic index that runs along a
    line axis on its own (GEMM's ``i``), the unmatched indices that slide with the device
    index matched to it (``y+s`` with ``y`` on ``i``): they join that axis.
    """

    apart: tuple[tuple[str, ...], ...] = ()
    on_axis: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @property
    def members(self) -> set[str]:
        return {n for w in self.apart for n in w} | {n for _, w in self.on_axis for n in w}


def sliding_windows(access: Access, intrinsic: Intrinsic, role: str,
                    index_map: Mapping[str, str]) -> Windows:
    """The `Windows` of ``access`` as ``role`` of ``intrinsic`` under ``index_map``.

    A dimension slides when it is a sum of distinct indices with coefficient 1 that no other
    dimension of the access uses (a strided ``2*x+r`` does not: its indices step DRAM
    differently). It joins a line axis only where the intrinsic block has that one line axis
    of one index (its blocks then never leave their strip, `_blocks_apart`).
    """
    layout = BLOCK_LAYOUTS[Intrinsic(intrinsic)][role]
    back = {n: iota for iota, n in index_map.items()}
    lone = {axis[0] for axis in layout.line_axes if len(axis) == 1}
    if len(layout.line_axes) != 1:
        lone = set()
    apart, on_axis = [], []
    for dim in access.dims:
        names = dim.indices
        if (len(names) < 2 or len(set(names)) != len(names)
                or any(c != 1 for _, c in dim.terms)
                or any(n in other.indices for other in access.dims if other is not dim
                       for n in names)):
            continue
        matched = [n for n in names if n in back]
        rest = tuple(n for n in names if n not in back)
        if not matched:
            apart.append(names)
        elif len(matched) == 1 and back[matched[0]] in lone:
            on_axis.append((back[matched[0]], rest))
    return Windows(tuple(apart), tuple(on_axis))


def _operand_tile(role, access, intrinsic, isizes, imap, tiles, block) -> OperandTile:
    layout = BLOCK_LAYOUTS[intrinsic][role]
    back = {n: iota for iota, n in imap.items()}
    blocks = {n: -(-tiles[n] // block[n]) for n in tiles}
    apart = _blocks_apart(layout.line_axes, isizes, imap, blocks)
    raw: list[tuple[str, tuple[tuple[str | None, str | None, int], ...], int]] = [
        ("blocks", ((imap[i], i, isizes[i]),), blocks[imap[i]])
        for position, axis in enumerate(layout.line_axes) if position in apart
        for i in axis if i in imap]
    on_axes = {imap[i] for axis in layout.line_axes for i in axis if i in imap}
    elem = imap.get(layout.elem_axis) if layout.elem_axis else None
    windows = sliding_windows(access, intrinsic, role, imap)
    sliding = dict(windows.on_axis)
    for n in access.indices:
        if n in on_axes or n == elem:
            continue
        if n in back:
            raise MappingError(f"index {n} of {access} is matched to intrinsic index {back[n]}, "
                               f"which the intrinsic's {role} does not use")
        window = next((w for w in windows.apart if n in w), None)
        if window is not None:  # one strip for the whole window, at its first index
            if n == window[0]:
                raw.append(("axis", tuple((m, None, 1) for m in window),
                            sum(tiles[m] for m in window) - (len(window) - 1)))
            continue
        if n in windows.members:  # slides along a line axis, below
            continue
        raw.append(("group", ((n, None, 1),), tiles[n]))
    if elem is not None:
        raw.append(("group", ((elem, layout.elem_axis, block[elem]),), blocks[elem]))
    for position, axis in enumerate(layout.line_axes):
        extra = tuple(m for i in axis for m in sliding.get(i, ()))
        entries = tuple((imap.get(i), i, isizes[i]) for i in axis) + tuple(
            (m, None, 1) for m in extra)
        if position in apart:
            raw.append(("block_axis", entries, sum(isizes[i] for i in axis) - (len(axis) - 1)))
            continue
        extent = sum(isizes[i] * (blocks[imap[i]] if i in imap else 1) for i in axis)
        extent += sum(tiles[m] for m in extra)
        raw.append(("axis", entries, extent - (len(entries) - 1)))
    dims, step = [], 1
    for kind, entries, lines in reversed(raw):
        dims.append(TileDim(kind, entries, lines, step))
        step *= lines
    dims.reverse()
    coef: dict[str, int] = {}
    for dim in dims:
        if dim.kind == "block_axis":  # one block: its blocks dimension places it
            continue
        for n, _, size in dim.entries:
            if n is not None:
                coef[n] = size * dim.step if dim.kind == "axis" else dim.step
    elem_size = isizes[layout.elem_axis] if layout.elem_axis else 1
    return OperandTile(role, access, tuple(dims), step, tuple(coef.items()), elem, elem_size)


def _blocks_apart(line_axes, isizes, imap, blocks) -> set[int]:
    """Positions of the line axes whose blocks must leave their strip to keep blocks contiguous.

    A block is consecutive lines if every axis inside the outermost one a block spans several
    lines of holds a single block; an inner axis with more blocks goes apart.
    """
    spans = [sum(isizes[i] for i in axis) - (len(axis) - 1) for axis in line_axes]
    first = next((p for p, lines in enumerate(spans) if lines > 1), len(spans))
    return {p for p, axis in enumerate(line_axes)
            if p > first and any(blocks[imap[i]] > 1 for i in axis if i in imap)}


def _check_capacity(tiling: Tiling, config: AcceleratorConfig) -> None:
    slots = dict(tiling.slots)
    need = tiling.spad_lines()
    if need > config.spad_lines:
        parts = " + ".join(f"{tiling.operand(r).lines} lines of {r} x{slots[r]}"
                           for r in ("A", "B"))
        raise MappingError(
            f"the A and B tiles do not fit the scratchpad: {parts} = {need} lines, but it has "
            f"{config.spad_lines} ({need - config.spad_lines} too many, "
            f"{(need - config.spad_lines) * config.spad_line_bytes} B); use smaller tiles")
    need = tiling.acc_lines()
    if need > config.acc_lines:
        raise MappingError(
            f"the C tile does not fit the accumulator: {tiling.operand('C').lines} lines "
            f"x{slots['C']} = {need}, but it has {config.acc_lines} "
            f"({need - config.acc_lines} too many, "
            f"{(need - config.acc_lines) * config.acc_line_bytes} B); use smaller tiles of the "
            "output indices")
