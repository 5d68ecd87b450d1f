"""Output parameter blocks LOADed per output tile, for layers whose blocks do not all fit.

`ParamBlocks` LOADs every block a layer's STOREs use once, at its start, past the C tiles.
A wide layer whose channel runs across the accumulator lines (a depthwise convolution with
the channel an outer loop: a 3-line block per channel) needs more lines than the
accumulator has, so `TileParams` gives each output (C) tile its own blocks instead, LOADed
into one of ``C slots + 1`` rotating parameter slots ahead of the tile: consecutive tiles
share a LOAD while their blocks fit one slot.

Why the order is safe without a new token path (a LOAD cannot wait for a STORE directly):
a load's LOAD follows the first COMPUTE of the tile before its first tile, ``t - 1``, and
waits for it; that COMPUTE reuses the C buffer half of tile ``t - 1 - C slots`` and so
waited for its STORE, so at most ``C slots`` tiles, from at most ``C slots`` loads, may
still be storing: the slot it overwrites (``C slots + 1`` loads back) is free. The first
COMPUTE of each tile waits for its load, and the tile's STOREs for its COMPUTEs. The
functional simulator's hazard check confirms every program.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tensorforge.compiler.output_stage import ParamBlocks, ParamRegion, ParamRoomError
from tensorforge.requant import PARAM_LINES


@dataclass
class TileParams:
    """Each output tile's parameter blocks, by the tile's number in walk order."""

    layer: ParamBlocks  # the layer's element channels and accumulator room
    c_slots: int  # C buffer halves the tiles rotate through
    tiles: dict[int, ParamBlocks] = field(default_factory=dict)
    load_of: dict[int, int] = field(default_factory=dict)  # tile -> the load it reads
    loads: list[int] = field(default_factory=list)  # load -> the tile it is LOADed ahead of
    slots: int = 1
    slot_lines: int = 0
    images: list[np.ndarray] = field(default_factory=list)  # each load's tile images
    transfers: list[tuple[int, int, int]] = field(default_factory=list)  # `ParamRegion`'s

    def for_tile(self, tile: int) -> ParamBlocks:
        """Tile ``tile``'s blocks (collected on the first walk, placed by `place`)."""
        if tile not in self.tiles:
            layer = self.layer
            self.tiles[tile] = ParamBlocks(layer.stage, layer.element_channels, 0, layer.config)
        return self.tiles[tile]

    def place(self) -> None:
        """Group consecutive tiles into loads after a first walk, and fix every tile's lines.

        A load holds the images of consecutive tiles as long as they fit a slot (an equal
        share of the room past the C tiles), a tile whose image the load already holds
        adding nothing, so a layer pays a LOAD per slotful of blocks, not per tile."""
        config, first_line = self.layer.config, self.layer.first_line
        budget = (config.acc_lines - first_line) // (self.c_slots + 1)
        groups: list[dict[tuple, int]] = []  # per load: a tile image -> its line in the slot
        sizes: list[int] = []  # per load: its lines
        offset_of: dict[int, int] = {}  # tile -> the line of its image in its load's slot
        for tile in range(max(self.tiles, default=-1) + 1):
            blocks = self.tiles.get(tile)
            signature = tuple(map(tuple, blocks.blocks)) if blocks else ()
            if not signature:
                continue  # stores nothing
            if blocks.lines > budget:
                lines = (self.c_slots + 1) * blocks.lines
                raise ParamRoomError(
                    lines,
                    f"the output stage's parameter blocks, LOADed per output tile, need "
                    f"{self.c_slots + 1} slot(s) of {blocks.lines // PARAM_LINES} block(s) at "
                    f"accumulator lines {first_line}..{first_line + lines - 1}, past its "
                    f"{config.acc_lines}; choose smaller output tiles or a larger accumulator")
            if not groups or (signature not in groups[-1]
                              and sizes[-1] + blocks.lines > budget):
                groups.append({})
                sizes.append(0)
                self.loads.append(tile)
            if signature not in groups[-1]:
                groups[-1][signature] = sizes[-1]
                sizes[-1] += blocks.lines
                self.images.append(blocks.image())
            self.load_of[tile] = len(groups) - 1
            offset_of[tile] = groups[-1][signature]
        self.slots = max(1, min(self.c_slots + 1, len(groups)))
        self.slot_lines = max(sizes, default=0)
        start = 0
        for load, lines in enumerate(sizes):
            self.transfers.append((self._slot_line(load), start, lines))
            start += lines
        for tile, blocks in self.tiles.items():
            blocks.frozen = True
            if tile in self.load_of:
                blocks.first_line = self._slot_line(self.load_of[tile]) + offset_of[tile]

    def _slot_line(self, load: int) -> int:
        return self.layer.first_line + (load % self.slots) * self.slot_lines

    @property
    def lines(self) -> int:
        return self.slots * self.slot_lines

    def check_room(self) -> None:
        """`place` checked it."""

    def slot(self, tile: int) -> int | None:
        """The parameter slot tile ``tile``'s STOREs read (None: it stores nothing)."""
        load = self.load_of.get(tile)
        return None if load is None else load % self.slots

    def transfer_before(self, tile: int) -> int | None:
        """The transfer to LOAD ahead of tile ``tile`` (None: its blocks are resident)."""
        load = self.load_of.get(tile)
        return load if load is not None and self.loads[load] == tile else None

    def region(self, base: int) -> ParamRegion:
        width = self.layer.config.acc_line_elems
        image = (np.concatenate(self.images) if self.images
                 else np.zeros((0, width), dtype=np.int64))
        return ParamRegion.of_image(image, base, tuple(self.transfers), self.layer.config)
