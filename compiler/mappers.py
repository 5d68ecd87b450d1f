"""Ready-made mappings: what a hand-written library does, and a reuse-maximizing heuristic.

``library_mapping``
    The fixed recipe of an accelerator library: lower the workload to one big matrix multiply
    on the host (im2col for convolutions: fuse the output pixels, the reduction taps and the
    output channels into three indices), pick the tensorize choice that puts the activations
    in the intrinsic's A, and use fixed tiles of ``LIBRARY_BLOCKS`` intrinsic blocks per index
    (halved until they fit).
``default_mapping``
    A heuristic search over every stage-0 tensorize choice: grow tiles greedily (doubling the
    index whose growth lowers the estimate most) while they fit, for each order of the output
    loops, scoring with a roofline estimate ``max(compute cycles, DRAM bytes / bus bytes)`` plus
    per-tile-step and per-LOAD overheads. The estimate counts an operand's reloads from the
    loop order: an operand is reloaded whenever a tile loop it depends on advances.
"""

from __future__ import annotations

import itertools
import math

from tensorforge.compiler.lowering import Lowering
from tensorforge.compiler.mapping import Mapping, output_first_order
from tensorforge.compiler.matching import TensorizeChoice, tensorize_choices
from tensorforge.compiler.tiling import Tiling, build_tiling
from tensorforge.compiler.workload import Workload
from tensorforge.config import AcceleratorConfig
from tensorforge.errors import MappingError

LIBRARY_BLOCKS = 4  # intrinsic blocks per tile per matched index, as a fixed library would
STEP_OVERHEAD = 32  # cycles of issue and synchronization per tile step (estimate)
INSTRUCTION_CYCLES = 16  # issue cost of one LOAD (and its 16 fetched bytes), estimate
MAX_ORDERS = 24


def device_choices(workload: Workload, config: AcceleratorConfig,
                   groups: tuple[tuple[str, ...], ...] = ()) -> list[TensorizeChoice]:
    """The tensorize choices the device can run (stage 0 of the fused workload)."""
    fused = Lowering(workload, groups).fused
    return [c for c in tensorize_choices(fused, config.intrinsic.value) if c.stage == 0]


def _no_choice(workload: Workload, config: AcceleratorConfig) -> MappingError:
    return MappingError(f"the {config.intrinsic.value} intrinsic cannot implement "
                        f"{workload.text}: the matching finds no tensorize choice for its first "
                        "product; use an accelerator with another intrinsic")


def _blocks(choice: TensorizeChoice, device: Workload, config: AcceleratorConfig
            ) -> dict[str, int]:
    block = dict.fromkeys(device.indices, 1)
    for iota, n in choice.index_map.items():
        block[n] = config.intrinsic_sizes[iota]
    return block


def _fit(device, choice, tiles, block, config) -> Tiling | None:
    try:
        return build_tiling(device, choice, tiles, config)
    except MappingError:
        return None


# ---------------------------------------------------------------------- library


def im2col_groups(workload: Workload) -> tuple[tuple[str, ...], ...]:
    """Index groups that lower a two-input workload to (batched) GEMM; () if it already is.

    Rows: output indices only the first input uses; columns: output indices only the second
    uses; reduction: indices both inputs use and the output does not. Every other index
    (a batch index used everywhere, say) keeps its own group.
    """
    if len(workload.inputs) != 2:
        return ()
    first, second = (set(a.indices) for a in workload.inputs)
    out = set(workload.output.indices)
    rows = tuple(n for n in workload.indices if n in out and n in first and n not in second)
    cols = tuple(n for n in workload.indices if n in out and n in second and n not in first)
    red = tuple(n for n in workload.indices if n not in out and n in first and n in second)
    rest = [(n,) for n in workload.indices if n not in rows + cols + red]
    groups = tuple(g for g in (rows, cols, red) if g) + tuple(rest)
    if all(len(g) == 1 for g in groups):
        return ()
    return groups


def library_mapping(workload: Workload, config: AcceleratorConfig) -> Mapping:
    """im2col + GEMM with fixed tiles, like a hand-written accelerator library."""
    groups = im2col_groups(workload)
    try:
        choices = device_choices(workload, config, groups)
    except MappingError:
        groups, choices = (), device_choices(workload, config)
    if not choices:
        raise _no_choice(workload, config)
    device = Lowering(workload, groups).device
    activations = device.inputs[0].tensor
    choice = next((c for c in choices if c.operand_map.get("A") == activations), choices[0])
    block = _blocks(choice, device, config)
    sizes = device.sizes
    tiles = {n: min(sizes[n], block[n] * (LIBRARY_BLOCKS if block[n] > 1 else 1))
             for n in sizes}
    order = output_first_order(device, list(device.indices))
    while _fit(device, choice, tiles, block, config) is None:
        big = [n for n in sizes if tiles[n] > block[n]]
        if not big:
            raise MappingError(f"even one intrinsic block per index of {device.text} does not "
                               f"fit {config.describe()}")
        n = max(big, key=lambda m: tiles[m] // block[m])
        tiles[n] = max(block[n], (tiles[n] // block[n] // 2) * block[n])
    return Mapping(choice, tuple(tiles.items()), order, groups)


# ---------------------------------------------------------------------- heuristic


def estimate_cycles(device: Workload, tiling: Tiling, order: tuple[str, ...],
                    config: AcceleratorConfig) -> float:
    """Roofline estimate of a tiling under a loop order (for ranking mappings only)."""
    return _Estimate(device, tiling, config)(order)


class _Estimate:
    """`estimate_cycles` of one tiling, with what does not depend on the order computed once."""

    def __init__(self, device: Workload, tiling: Tiling, config: AcceleratorConfig) -> None:
        sizes = device.sizes
        self.counts = counts = {n: tiling.count(n) for n in sizes}
        block = dict(tiling.block)
        self.compute = math.prod(-(-sizes[n] // block[n]) for n in sizes)  # steps, 1 a cycle
        self.operands = []
        for role in ("A", "B"):
            tile = tiling.operand(role)
            strips = math.prod(d.lines for d in tile.dims[:-1])  # one LOAD per strip
            looping = {n for n in tile.access.indices if counts[n] > 1}
            self.operands.append((looping, tile.lines * config.spad_line_bytes, strips))
        self.output_bytes = (math.prod(sizes[n] for n in device.output.indices)
                             * config.precision.acc_bytes)
        self.bus_bytes = config.dma.bus_bytes
        self.tile_steps = math.prod(counts.values())

    def __call__(self, order: tuple[str, ...]) -> float:
        counts = self.counts
        traffic, instructions = 0.0, 0
        for looping, tile_bytes, strips in self.operands:
            deepest = max((p for p, n in enumerate(order) if n in looping), default=-1)
            loads = math.prod(counts[n] for n in order[: deepest + 1])
            traffic += loads * tile_bytes
            instructions += loads * strips
        traffic += self.output_bytes
        memory = traffic / self.bus_bytes
        return (max(self.compute, memory) + STEP_OVERHEAD * self.tile_steps
                + INSTRUCTION_CYCLES * instructions)


def _orders(device: Workload) -> list[tuple[str, ...]]:
    outputs = list(device.output.indices)
    reductions = [n for n in device.indices if n not in outputs]
    found = [tuple(p) + tuple(reductions) for p in itertools.permutations(outputs)]
    return found[:MAX_ORDERS]


def _best_order(device, tiling, orders, config) -> tuple[float, tuple[str, ...]]:
    estimate = _Estimate(device, tiling, config)
    return min((estimate(order), order) for order in orders)


def _grow(device, choice, block, orders, config):
    """Greedy tile growth; ``(cost, tiles, order)`` or None if even one block does not fit."""
    sizes = device.sizes
    tiles = {n: min(block[n], sizes[n]) for n in sizes}
    tiling = _fit(device, choice, tiles, block, config)
    if tiling is None:
        return None
    best, order = _best_order(device, tiling, orders, config)
    while True:
        moves = []
        for n in sizes:
            if tiles[n] >= sizes[n]:
                continue
            grown = dict(tiles)
            grown[n] = min(sizes[n], tiles[n] * 2)
            candidate = _fit(device, choice, grown, block, config)
            if candidate is not None:
                moves.append((*_best_order(device, candidate, orders, config), n, grown))
        if not moves:
            return best, tiles, order
        cost, new_order, _, grown = min(moves, key=lambda m: (m[0], m[2]))
        if cost > best:
            return best, tiles, order
        best, tiles, order = cost, grown, new_order


def default_mapping(workload: Workload, config: AcceleratorConfig) -> Mapping:
    """The best mapping the greedy heuristic finds over every device tensorize choice."""
    choices = device_choices(workload, config)
    if not choices:
        raise _no_choice(workload, config)
    device = Lowering(workload).device
    best: tuple[float, Mapping] | None = None
    for choice in choices:
        block = _blocks(choice, device, config)
        found = _grow(device, choice, block, _orders(device), config)
        if found is None:
            continue
        cost, tiles, order = found
        if best is None or cost < best[0]:
            best = (cost, Mapping(choice, tuple(tiles.items()), order))
    if best is None:
        raise MappingError(f"no tiling of {workload.text} fits {config.describe()}, even one "
                           "intrinsic block per index; enlarge the scratchpad or accumulator")
    return best[1]
