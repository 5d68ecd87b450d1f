"""Schedules: the loop-nest IR, the primitives split / reorder / fuse / tensorize, and `Mapping`.

HASCO (section VI-A) describes an optimization as a primitive sequence with factors, e.g.
``[split, reorder, fuse, tensorize]`` for a convolution on a GEMM accelerator. Here the IR is
an immutable `LoopNest`; each primitive is a pure function that checks its arguments first and
returns a new nest. A `Mapping` is the compact form the search works with: the tensorize
choice, one tile size per index, the order of the tile loops, and optional host-side index
fusion (im2col). `Mapping.primitives` expands it into the primitive sequence and
`Mapping.loop_nest` applies that sequence; the code generator reads the compact form.

Legality (`check_mapping`): tiles are multiples of the intrinsic blocks, fit the scratchpad
and accumulator double-buffered, and the loop order keeps each output tile in the accumulator
until its reduction is complete (partial sums never return to DRAM).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping as MappingType
from dataclasses import dataclass, replace

import numpy as np

from tensorforge.compiler.lowering import Lowering
from tensorforge.compiler.matching import TensorizeChoice, tensorize_choices
from tensorforge.compiler.tiling import Tiling, build_tiling
from tensorforge.compiler.workload import Workload
from tensorforge.config import AcceleratorConfig
from tensorforge.errors import MappingError

# ---------------------------------------------------------------------- the loop-nest IR


@dataclass(frozen=True)
class Loop:
    """``for name in range(extent)``; ``indices`` are the workload indices it advances."""

    name: str
    indices: tuple[str, ...]
    extent: int


@dataclass(frozen=True)
class LoopNest:
    """Loops outermost first; loops from ``tensorized`` inwards run on the accelerator."""

    loops: tuple[Loop, ...]
    tensorized: int | None = None

    def names(self) -> tuple[str, ...]:
        return tuple(loop.name for loop in self.loops)

    def find(self, name: str) -> int:
        for position, loop in enumerate(self.loops):
            if loop.name == name:
                return position
        raise MappingError(f"no loop named {name!r}; the nest has {', '.join(self.names())}")

    def render(self) -> str:
        lines = []
        for depth, loop in enumerate(self.loops):
            if depth == self.tensorized:
                lines.append("  " * depth + "# tensorized sub-workload:")
            lines.append("  " * depth + f"for {loop.name} in range({loop.extent}):")
        return "\n".join(lines)


def loop_nest(workload: Workload) -> LoopNest:
    """The untransformed nest: one loop per index, in workload order."""
    return LoopNest(tuple(Loop(n, (n,), size) for n, size in workload.extents))


def _outside(nest: LoopNest, position: int, primitive: str) -> None:
    if nest.tensorized is not None and position >= nest.tensorized:
        raise MappingError(f"{primitive}: loop {nest.loops[position].name} is already "
                           "tensorized; apply it before tensorize")


def split(nest: LoopNest, name: str, factor: int) -> LoopNest:
    """Split loop ``name`` into ``name.o`` (tiles) and ``name.i`` (``factor`` per tile).

    ``for k in range(10)`` with factor 4 becomes::

        for k.o in range(3):          # the last tile is partial (2 of 4)
          for k.i in range(4):
    """
    position = nest.find(name)
    loop = nest.loops[position]
    _outside(nest, position, "split")
    if len(loop.indices) != 1 or "." in loop.name:
        raise MappingError(f"split: {name} is not an original index loop")
    if isinstance(factor, bool) or not isinstance(factor, int) or not 1 <= factor <= loop.extent:
        raise MappingError(f"split: factor of {name} must be 1..{loop.extent}, not {factor!r}")
    pieces = (Loop(f"{name}.o", loop.indices, -(-loop.extent // factor)),
              Loop(f"{name}.i", loop.indices, factor))
    return replace(nest, loops=nest.loops[:position] + pieces + nest.loops[position + 1 :])


def reorder(nest: LoopNest, names: tuple[str, ...]) -> LoopNest:
    """Put the loops in the order ``names`` (a permutation of all loop names).

    ``for i.o: for j.o: for i.i: for j.i`` with ``(j.o, i.o, i.i, j.i)`` becomes
    ``for j.o: for i.o: for i.i: for j.i``.
    """
    if sorted(names) != sorted(nest.names()):
        raise MappingError(f"reorder: {list(names)} is not a permutation of the loops "
                           f"{list(nest.names())}")
    if nest.tensorized is not None:
        raise MappingError("reorder: apply it before tensorize")
    return replace(nest, loops=tuple(nest.loops[nest.find(n)] for n in names))


def fuse(nest: LoopNest, outer: str, inner: str) -> LoopNest:
    """Fuse two adjacent loops into one that runs the same iterations in the same order.

    ``for i.o in range(2): for j.o in range(3)`` becomes ``for i.o*j.o in range(6)``.
    """
    first, second = nest.find(outer), nest.find(inner)
    if second != first + 1:
        raise MappingError(f"fuse: {inner} must directly follow {outer}")
    _outside(nest, second, "fuse")
    a, b = nest.loops[first], nest.loops[second]
    fused = Loop(f"{a.name}*{b.name}", a.indices + b.indices, a.extent * b.extent)
    return replace(nest, loops=nest.loops[:first] + (fused,) + nest.loops[second + 1 :])


def tensorize(nest: LoopNest, at: str, choice: TensorizeChoice) -> LoopNest:
    """Mark the loops from ``at`` inwards as the sub-workload the accelerator runs.

    Every loop from ``at`` on must be a tile loop (``n.i``) or a whole index; every index the
    choice maps onto the intrinsic must be among them. Before/after::

        for i.o: for k.o: for i.i: for k.i: for j      (at="i.i")
        for i.o: for k.o: # tensorized: for i.i: for k.i: for j
    """
    position = nest.find(at)
    inside = nest.loops[position:]
    for loop in inside:
        if loop.name.endswith(".o") or "*" in loop.name:
            raise MappingError(f"tensorize: {loop.name} is a tile-level loop and cannot run "
                               "inside the accelerator's sub-workload")
    covered = {n for loop in inside for n in loop.indices}
    missing = set(choice.index_map.values()) - covered
    if missing:
        raise MappingError(f"tensorize: the intrinsic needs {sorted(missing)} inside the "
                           f"sub-workload, but their loops are outside {at}")
    return replace(nest, tensorized=position)


# ---------------------------------------------------------------------- the mapping


@dataclass(frozen=True)
class Mapping:
    """A tensorize choice plus tile sizes, tile-loop order and host-side fusion.

    ``tiles`` gives elements per tile for every index of the device stage (the fused workload's
    first stage); ``order`` the tile loops, outermost first. The operand whose indices the
    innermost tile loops do not use stays resident in the scratchpad (`resident`).
    """

    choice: TensorizeChoice
    tiles: tuple[tuple[str, int], ...]
    order: tuple[str, ...]
    groups: tuple[tuple[str, ...], ...] = ()
    # per input operand, indices whose whole extent its tile holds (`tiling.build_tiling`)
    holds: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @property
    def tile_sizes(self) -> dict[str, int]:
        return dict(self.tiles)

    def check_order(self, tiling: Tiling) -> None:
        """Output tiles must finish before the next starts (partial sums stay on chip)."""
        if sorted(self.order) != sorted(self.tile_sizes):
            raise MappingError(f"loop order {list(self.order)} must list each index "
                               f"{sorted(self.tile_sizes)} once")
        outputs = set(tiling.operand("C").access.indices)
        looping = [n for n in self.order if tiling.count(n) > 1]
        for position, n in enumerate(looping):
            later = [m for m in looping[position + 1 :] if m in outputs]
            if n not in outputs and later:
                raise MappingError(
                    f"loop order puts reduction loop {n} ({tiling.count(n)} tiles) outside "
                    f"output loop {later[0]}; partial sums would have to leave the accumulator. "
                    "Move the output loops outside, or cover the index with one tile")

    def resident(self, tiling: Tiling) -> str | None:
        """The input operand not reloaded by the innermost looping tile loop, if any."""
        looping = [n for n in self.order if tiling.count(n) > 1]
        if not looping:
            return None
        for role in ("A", "B"):
            if looping[-1] not in tiling.keys(role):
                return role
        return None

    def primitives(self, device: Workload) -> list[tuple]:
        """The HASCO primitive sequence this mapping stands for."""
        sequence: list[tuple] = []
        if self.groups:
            sequence.append(("fuse-indices", [list(g) for g in self.groups]))
        sizes = device.sizes
        split_names = [n for n in device.indices if 1 < self.tile_sizes[n] < sizes[n]]
        for n in split_names:
            sequence.append(("split", n, self.tile_sizes[n]))
        outer = [f"{n}.o" if n in split_names else n for n in self.order
                 if n in split_names or self.tile_sizes[n] == 1 < sizes[n]]
        inner = [f"{n}.i" if n in split_names else n for n in self.order
                 if not (self.tile_sizes[n] == 1 < sizes[n])]
        sequence.append(("reorder", outer + inner))
        for role, names in self.holds:  # not a HASCO primitive: the tile it loads is larger
            sequence.append(("hold", role, list(names)))
        if inner:
            sequence.append(("tensorize", inner[0], self.choice.describe()))
        return sequence

    def loop_nest(self, device: Workload) -> LoopNest:
        """Apply `primitives` to the device stage's loop nest."""
        nest = loop_nest(device)
        for primitive in self.primitives(device):
            if primitive[0] == "split":
                nest = split(nest, primitive[1], primitive[2])
            elif primitive[0] == "reorder":
                nest = reorder(nest, tuple(primitive[1]))
            elif primitive[0] == "tensorize":
                nest = tensorize(nest, primitive[1], self.choice)
        return nest

    # ------------------------------------------------------------------ JSON

    def to_dict(self) -> dict[str, object]:
        choice: dict[str, object] = {
            "intrinsic": self.choice.intrinsic, "stage": self.choice.stage,
            "operands": {n: a.tensor for n, a in self.choice.operands},
            "indices": dict(self.choice.indices)}
        if self.choice.padded:  # implied by the indices; kept for reports (dse.coverage)
            choice["padded"] = list(self.choice.padded)
        data = {
            "choice": choice,
            "tiles": dict(self.tiles),
            "order": list(self.order),
            "groups": [list(g) for g in self.groups],
        }
        if self.holds:  # left out when empty, so existing mappings' hashes stay
            data["holds"] = {role: list(names) for role, names in self.holds}
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    @classmethod
    def from_dict(cls, data: MappingType, workload: Workload) -> Mapping:
        """Rebuild a mapping, finding its choice again among the workload's choices."""
        try:
            groups = tuple(tuple(g) for g in data.get("groups", ()))
            wanted = data["choice"]
            lowering = Lowering(workload, groups, int(wanted.get("stage", 0)))
            tiles = tuple((str(n), int(t)) for n, t in data["tiles"].items())
            order = tuple(str(n) for n in data["order"])
            holds = tuple((str(r), tuple(str(n) for n in names))
                          for r, names in dict(data.get("holds", {})).items())
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            raise MappingError(f"a mapping needs choice, tiles and order: {error}") from None
        for choice in tensorize_choices(lowering.fused, wanted["intrinsic"]):
            if (choice.stage == lowering.stage
                    and {n: a.tensor for n, a in choice.operands} == wanted.get("operands")
                    and dict(choice.indices) == wanted.get("indices")):
                return cls(choice, tiles, order, groups, holds)
        raise MappingError(f"the mapping's tensorize choice {wanted} is not a legal choice of "
                           f"the {wanted['intrinsic']} intrinsic for {workload.text}")

    @classmethod
    def from_json(cls, text: str, workload: Workload) -> Mapping:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise MappingError(f"the mapping is not valid JSON: {error}") from None
        return cls.from_dict(data, workload)


def check_mapping(workload: Workload, mapping: Mapping, config: AcceleratorConfig) -> Tiling:
    """The mapping's tiling, or `MappingError` saying what does not fit and by how much."""
    lowering = Lowering(workload, mapping.groups, mapping.choice.stage)
    tiling = build_tiling(lowering.device, mapping.choice, mapping.tile_sizes, config,
                          mapping.holds)
    mapping.check_order(tiling)
    return tiling


# ---------------------------------------------------------------------- search support


def output_first_order(device: Workload, order: list[str]) -> tuple[str, ...]:
    """``order`` with output indices moved before reduction indices (stable otherwise)."""
    outputs = set(device.output.indices)
    return tuple([n for n in order if n in outputs] + [n for n in order if n not in outputs])


def random_mapping(workload: Workload, choice: TensorizeChoice, config: AcceleratorConfig,
                   rng: np.random.Generator, groups: tuple[tuple[str, ...], ...] = ()
                   ) -> Mapping:
    """A random legal mapping: random tiles (halved until they fit), random output-first order.

    Raises `MappingError` only if even the smallest tiles do not fit.
    """
    device = Lowering(workload, groups, choice.stage).device
    sizes = device.sizes
    block = {n: 1 for n in sizes}
    for iota, n in choice.index_map.items():
        block[n] = config.intrinsic_sizes[iota]
    tiles = {}
    for n, size in sizes.items():
        blocks = -(-size // block[n])
        tiles[n] = min(size, block[n] * int(rng.integers(1, blocks + 1)))
    order = output_first_order(device, list(rng.permutation(list(sizes))))
    while True:
        mapping = Mapping(choice, tuple(tiles.items()), order, groups)
        try:
            check_mapping(workload, mapping, config)
            return mapping
        except MappingError:
            shrinkable = [n for n in sizes if tiles[n] > block[n]]
            if not shrinkable:
                raise
            n = max(shrinkable, key=lambda m: tiles[m] // block[m])
            tiles[n] = max(block[n], math.ceil(tiles[n] / block[n] / 2) * block[n])
