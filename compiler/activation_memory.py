"""Which activations of a device segment stay on chip: the activation window's allocation.

An accelerator with ``scratchpad.activations`` serves the DMA addresses of
`AcceleratorConfig.activation_window` from an on-chip memory, so a region placed there is
written and read without DRAM traffic. `place` takes a segment's DRAM map
(`compiler.network`) and moves into the window the regions that are *intermediate*: written
by a layer of the segment and read by later layers of it. It leaves in DRAM the input the host
packs, the outputs the host unpacks (the last layer's, and any a later segment re-reads),
weights and parameters.

* **lifetimes.** A region lives from its first writer to its last reader (both inclusive: a
  layer that reads one region while writing another needs both). Two regions whose lifetimes
  do not meet may share window bytes: layers run in program order behind the barriers of
  `compiler.network`, so the later one's first STORE comes after the earlier one's last LOAD.
  `first_fit` places them in program order at the lowest offset free over the lifetime; one
  that does not fit stays in DRAM (at its DRAM place), the rest still go on chip.
* **clearing.** DRAM images start zeroed, so a padded region (a convolution's input, whose
  halo no STORE writes) reads zeros there. The window's content is undefined until written,
  and a reused slot holds an earlier tensor, so a region that is read where no STORE of the
  segment writes is zeroed right before its first writer: a COMPUTE ZERO clears accumulator
  lines and raw (``acc_bits``) STOREs copy them over the region's window slot (`clearing`),
  inside the barrier before that layer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from tensorforge.compiler.field_limits import LIMITS, MAX_EXTENT
from tensorforge.compiler.layout import aligned
from tensorforge.config import AcceleratorConfig
from tensorforge.isa import Compute, ComputeMode, Instruction, Load, Opcode, Store, expand

STORE_ROWS = LIMITS[(Opcode.STORE, "rows")]
ZERO_STEPS = MAX_EXTENT  # the COMPUTE's inner field


@dataclass(frozen=True)
class OnChip:
    """A region of a segment in the activation window: the layers that write it, its DMA
    address and bytes, and whether it is zeroed before its first writer (module docstring)."""

    layers: tuple[str, ...]
    base: int
    nbytes: int
    cleared: bool


@dataclass(frozen=True)
class Region:
    """One intermediate region of a segment's DRAM map: its DRAM base and bytes, the
    positions of the layers that write it and of those that read it."""

    base: int
    nbytes: int
    writers: tuple[int, ...]
    readers: tuple[int, ...]

    @property
    def lifetime(self) -> tuple[int, int]:
        return min(self.writers), max(self.readers)


def intermediates(regions: Sequence[dict[str, int]], sizes: dict[int, int],
                  kept: Sequence[bool]) -> list[Region]:
    """The regions of a segment (``regions[p]``: layer ``p``'s tensor -> DRAM base, ``sizes``:
    base -> bytes) that layers of it write and later layers read, in order of first writer;
    none written by a layer whose output the host reads (``kept[p]``: the last, or one a
    later segment re-reads)."""
    found = []
    for base in dict.fromkeys(r["C"] for r in regions):
        writers = tuple(p for p, r in enumerate(regions) if r["C"] == base)
        readers = tuple(p for p, r in enumerate(regions) if p and r["A"] == base)
        if readers and not any(kept[p] for p in writers):
            found.append(Region(base, sizes[base], writers, readers))
    return sorted(found, key=lambda region: region.lifetime)


def first_fit(lifetimes: Sequence[tuple[int, int, int]], capacity: int) -> list[int | None]:
    """Window offsets for ``(first, last, nbytes)`` lifetimes taken in the given order: the
    lowest 64-byte-aligned offset whose bytes no placed lifetime that meets this one holds,
    or None where that does not fit in ``capacity`` bytes."""
    placed: list[tuple[int, int, int, int]] = []
    offsets: list[int | None] = []
    for first, last, nbytes in lifetimes:
        offset = 0
        for low, high in sorted((o, o + n) for f, la, o, n in placed
                                if f <= last and first <= la):
            if offset + nbytes <= low:
                break
            offset = max(offset, aligned(high))
        if offset + nbytes > capacity:
            offsets.append(None)
            continue
        placed.append((first, last, offset, nbytes))
        offsets.append(offset)
    return offsets


def unwritten_reads(bodies: Sequence[Sequence[Instruction]], config: AcceleratorConfig,
                    size: int) -> np.ndarray:
    """Per byte of a ``size``-byte DRAM map: read by a LOAD of ``bodies`` and written by none
    of their STOREs (a halo the DRAM image's zeros fill)."""
    from tensorforge.sim.axi_traffic import line_geometry  # the DMA's own reading of a row

    spans: dict[bool, tuple[list, list]] = {False: ([], []), True: ([], [])}
    precision = config.precision
    for body in bodies:
        for ins in expand(list(body), precision.in_bytes, precision.acc_bytes):
            if not isinstance(ins, Load | Store) or not ins.rows:
                continue
            elem_bytes = line_geometry(config, ins)[1]
            starts = ins.dram_addr + np.arange(ins.rows) * (ins.stride * elem_bytes)
            spans[isinstance(ins, Store)][0].append(starts)
            spans[isinstance(ins, Store)][1].append(starts + ins.row_len * elem_bytes)
    read, written = (_covered(*spans[store], size) for store in (False, True))
    return read & ~written


def _covered(starts: list[np.ndarray], stops: list[np.ndarray], size: int) -> np.ndarray:
    """Per byte of ``size``: inside one of the ``[start, stop)`` spans."""
    depth = np.zeros(size + 1, dtype=np.int64)
    if starts:
        np.add.at(depth, np.minimum(np.concatenate(starts), size), 1)
        np.add.at(depth, np.minimum(np.concatenate(stops), size), -1)
    return np.cumsum(depth[:-1]) > 0


@dataclass(frozen=True)
class Placement:
    """`place`'s answer: DRAM base -> window address of each region moved on chip, the
    ``(window address, bytes)`` spans to clear before each layer position, and the regions
    on chip."""

    moved: dict[int, int]
    clears: dict[int, list[tuple[int, int]]]
    on_chip: tuple[OnChip, ...]


def place(regions: Sequence[dict[str, int]], sizes: dict[int, int], kept: Sequence[bool],
          unwritten: np.ndarray, config: AcceleratorConfig, names: Sequence[str]) -> Placement:
    """Move the intermediate regions that fit into the window (`intermediates`,
    `first_fit`); ``unwritten`` (`unwritten_reads`) says which need clearing; ``names``: the
    layers' names by position."""
    found = intermediates(regions, sizes, kept)
    window = config.activation_window
    offsets = first_fit([(*r.lifetime, aligned(r.nbytes)) for r in found], len(window))
    moved: dict[int, int] = {}
    clears: dict[int, list[tuple[int, int]]] = {}
    on_chip = []
    for region, offset in zip(found, offsets, strict=True):
        if offset is None:
            continue
        address = window.start + offset
        moved[region.base] = address
        cleared = bool(unwritten[region.base:region.base + region.nbytes].any())
        if cleared:
            clears.setdefault(region.lifetime[0], []).append((address, aligned(region.nbytes)))
        on_chip.append(OnChip(tuple(names[p] for p in region.writers), address,
                              region.nbytes, cleared))
    return Placement(moved, clears, tuple(on_chip))


def clearing(config: AcceleratorConfig, spans: Sequence[tuple[int, int]]) -> list[Instruction]:
    """Zero ``(address, bytes)`` spans (whole multiples of ``acc_bytes``): a COMPUTE ZERO of
    accumulator lines from 0, which signals the STORE unit, then raw STOREs of those lines
    over the spans, the last of which signals the compute unit (`compiler.network` waits for
    it with its barrier's ZERO)."""
    if not spans:
        return []
    lanes = config.acc_line_elems
    row_bytes = lanes * config.precision.acc_bytes
    block = config.blocks["C"].lines
    need = -(-max(-(-n // row_bytes) for _, n in spans) // block)
    steps = min(need, config.acc_lines // block, ZERO_STEPS)
    rows = min(steps * block, STORE_ROWS)
    body: list[Instruction] = [Compute(mode=ComputeMode.ZERO, inner=steps, acc_inner=block,
                                       push_next=True)]
    for address, nbytes in spans:
        whole, tail = divmod(nbytes, row_bytes)
        while whole:
            count = min(whole, rows)
            body.append(Store(dram_addr=address, rows=count, row_len=lanes, stride=lanes))
            address, whole = address + count * row_bytes, whole - count
        if tail:
            body.append(Store(dram_addr=address, rows=1,
                              row_len=tail // config.precision.acc_bytes, stride=lanes))
    body[1] = replace(body[1], pop_prev=True)
    body[-1] = replace(body[-1], push_prev=True)
    return body
