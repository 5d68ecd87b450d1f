"""Ready-made mappings: what a hand-written library does, and a reuse-maximizing heuristic.

``library_mapping``
    The fixed recipe of an accelerator library: lower the workload to one big matrix multiply
    on the host (im2col for convolutions: fuse the output pixels, the reduction taps and the
    output channels into three indices), pick the tensorize choice that puts the activations
    in the intrinsic's A, and use fixed tiles of ``LIBRARY_BLOCKS`` intrinsic blocks per index
    (halved until they fit).
``default_mapping``
    A search over every stage-0 tensorize choice, of the workload and of its im2col lowering:
    every tiling of power-of-two block multiples where they are few (greedy doubling of the
    best index otherwise), for each order of the output loops, scored by a pipelined estimate
    (`compiler.mapping_estimate`): the program double-buffers, so LOAD, COMPUTE and STORE
    overlap and the busiest unit sets the pace, plus the first LOADs and the last STORE, on
    the memory the program will run on (`tensorforge.memory.MemorySystem`, default
    `DEFAULT_MEMORY`): the DRAM latency and the bursts it keeps in flight decide whether few
    long transfers beat many short ones, so the mapping depends on the memory. Near-ties are
    broken by DRAM traffic (`Estimate.score`), so a convolution keeps its input reuse (a
    direct mapping whose tiles hold the input window once) where im2col would be as fast.
"""

from __future__ import annotations

import itertools
import math

from tensorforge.compiler.codegen import check_max_reduction
from tensorforge.compiler.lowering import Lowering
from tensorforge.compiler.lowering import device_choices as lowering_choices
from tensorforge.compiler.mapping import Mapping, output_first_order
from tensorforge.compiler.mapping_estimate import (  # noqa: F401 (re-exported)
    Estimate,
    TileBursts,
    UnitCosts,
    estimate_cycles,
)
from tensorforge.compiler.matching import TensorizeChoice
from tensorforge.compiler.tiling import Tiling, build_tiling, sliding_windows
from tensorforge.compiler.workload import Workload
from tensorforge.config import AcceleratorConfig
from tensorforge.errors import MappingError
from tensorforge.memory import DEFAULT_MEMORY, MemorySystem

LIBRARY_BLOCKS = 4  # intrinsic blocks per tile per matched index, as a fixed library would
MAX_ORDERS = 24
MAX_ENUMERATED = 512  # tilings per tensorize choice tried exhaustively; above: greedy growth
EVEN_SPLITS = (2, 3, 4)  # `_even_splits`


def device_choices(workload: Workload, config: AcceleratorConfig,
                   groups: tuple[tuple[str, ...], ...] = ()) -> list[TensorizeChoice]:
    """The tensorize choices the device can run (stage 0 of the fused workload)."""
    return lowering_choices(workload, config.intrinsic.value, groups)


def _no_choice(workload: Workload, config: AcceleratorConfig) -> MappingError:
    instead = ("gemm, gemv or conv2d (a max= workload needs an intrinsic index that is not "
               "summed over)" if workload.reduction == "max" else "another intrinsic")
    return MappingError(f"the {config.intrinsic.value} intrinsic cannot implement "
                        f"{workload.text}: the matching finds no tensorize choice for its first "
                        f"product; use an accelerator with {instead}")


def _blocks(choice: TensorizeChoice, device: Workload, config: AcceleratorConfig
            ) -> dict[str, int]:
    block = dict.fromkeys(device.indices, 1)
    for iota, n in choice.index_map.items():
        block[n] = config.intrinsic_sizes[iota]
    return block


def _fit(device, choice, tiles, block, config, holds=()) -> Tiling | None:
    try:
        return build_tiling(device, choice, tiles, config, holds)
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


def _orders(device: Workload) -> list[tuple[str, ...]]:
    outputs = list(device.output.indices)
    reductions = [n for n in device.indices if n not in outputs]
    found = [tuple(p) + tuple(reductions) for p in itertools.permutations(outputs)]
    return found[:MAX_ORDERS]


def _best_order(device, tiling, orders, config, memory, bursts
                ) -> tuple[float, tuple[str, ...]]:
    estimate = Estimate(device, tiling, config, memory, bursts)
    return min((estimate.score(order), order) for order in orders)


def _tile_options(size: int, block: int) -> list[int]:
    """Tile sizes tried for one index: the block times powers of two, and the whole index."""
    options, tile = [], block
    while tile < size:
        options.append(tile)
        tile *= 2
    return [*options, size]


def _whole_taps(device: Workload, choice: TensorizeChoice) -> set[str]:
    """Reduction indices that slide in a window of an operand (a convolution's kernel taps
    ``r``, ``s`` of ``x+r``, ``y+s``; `tiling.sliding_windows`): tiled, each tile of taps
    would load the window's halo again, so they are tried whole only."""
    outputs = set(device.output.indices)
    return {n for role, access in choice.operands
            for n in sliding_windows(access, choice.intrinsic, role, choice.index_map).members
            if n not in outputs}


def _index_options(device, choice, block, config) -> list[list[int]]:
    """`_tile_options` of each device index (kernel taps whole, `_whole_taps`); with
    ``controller.repeat``, a window's unblocked output rows also `_even_splits`."""
    whole = _whole_taps(device, choice)
    rows = _window_rows(device, choice, block) if config.controller.repeat else set()
    return [[size] if n in whole
            else sorted({*_tile_options(size, block[n]), *_even_splits(size)}) if n in rows
            else _tile_options(size, block[n])
            for n, size in device.sizes.items()]


def _window_rows(device: Workload, choice: TensorizeChoice, block) -> set[str]:
    """Output indices of one element per block that slide in an operand's window (a direct
    convolution's image rows ``x`` of ``x+r``): a tile of ``t`` of them loads ``t + r - 1``
    rows, so how evenly the tiles split the image decides how much halo is read again."""
    outputs = set(device.output.indices)
    return {n for role, access in choice.operands
            for n in sliding_windows(access, choice.intrinsic, role, choice.index_map).members
            if n in outputs and block[n] == 1}


def _even_splits(size: int) -> list[int]:
    """Tiles that cut ``size`` into 2, 3 or 4 nearly equal parts (56: 28, 19, 14). Where
    repeated LOADs make a tile's many rows cheap to fetch, the largest tile that fits counts,
    and the powers of two jump past it (16, then 32)."""
    return [-(-size // parts) for parts in EVEN_SPLITS if size > parts]


def _enumerate(device, choice, block, orders, config, memory, bursts, holds=()):
    """Every fitting tiling of `_index_options`; ``(cost, tiles, order)``, None if none
    fits or there are too many to try."""
    sizes = device.sizes
    options = _index_options(device, choice, block, config)
    limit = MAX_ENUMERATED * (2 if config.controller.repeat else 1)  # room for the splits
    if math.prod(len(o) for o in options) > limit:
        return None
    best = None
    for tiles, tiling in _fitting(device, choice, block, config, list(sizes), options, {},
                                  holds):
        cost, order = _best_order(device, tiling, orders, config, memory, bursts)
        if best is None or cost < best[0]:
            best = (cost, tiles, order)
    return best


def _fitting(device, choice, block, config, names, options, chosen, holds=()):
    """``(tiles, tiling)`` of every fitting completion of ``chosen`` (tiles of the first
    indices of ``names``), in product order.

    An index's option is tried with the smallest tiles of the indices after it: if even that
    does not fit, neither does a larger option, except the whole index (one buffer half
    instead of two), which is still tried.
    """
    depth = len(chosen)
    name, rest = names[depth], names[depth + 1 :]
    whole = options[depth][-1]
    smallest = {n: options[depth + 1 + k][0] for k, n in enumerate(rest)}
    for option in options[depth]:
        tiles = {**chosen, name: option}
        tiling = _fit(device, choice, {**tiles, **smallest}, block, config, holds)
        skipped = tiling is None and option != whole
        if skipped:  # to the whole index
            tiles = {**chosen, name: whole}
            tiling = _fit(device, choice, {**tiles, **smallest}, block, config, holds)
        if tiling is None:
            return
        if rest:
            yield from _fitting(device, choice, block, config, names, options, tiles, holds)
        else:
            yield tiles, tiling
        if skipped:
            return


def _grow(device, choice, block, orders, config, memory, bursts, holds=()):
    """Greedy tile growth; ``(cost, tiles, order)`` or None if even one block does not fit."""
    sizes = device.sizes
    whole = _whole_taps(device, choice)
    tiles = {n: sizes[n] if n in whole else min(block[n], sizes[n]) for n in sizes}
    tiling = _fit(device, choice, tiles, block, config, holds)
    if tiling is None:
        return None
    best, order = _best_order(device, tiling, orders, config, memory, bursts)
    while True:
        moves = []
        for n in sizes:
            if tiles[n] >= sizes[n]:
                continue
            grown = dict(tiles)
            grown[n] = min(sizes[n], tiles[n] * 2)
            candidate = _fit(device, choice, grown, block, config, holds)
            if candidate is not None:
                moves.append((*_best_order(device, candidate, orders, config, memory,
                                           bursts), n, grown))
        if not moves:
            return best, tiles, order
        cost, new_order, _, grown = min(moves, key=lambda m: (m[0], m[2]))
        if cost > best:
            return best, tiles, order
        best, tiles, order = cost, grown, new_order


def _hold_options(device, choice, block, config) -> list[tuple]:
    """``holds`` tried for one tensorize choice: none, and for a direct convolution (an
    operand with a sliding window, `tiling.sliding_windows`) the other operand's output
    indices held whole (`tiling.build_tiling`) where that fits with one block of every other
    index: the held weights stay resident while the loops walk the input's spatial tiles, so
    neither is read again. Other workloads keep their reuse by loop order alone."""
    outputs = set(device.output.indices)
    sizes = device.sizes
    smallest = {n: min(block[n], sizes[n]) for n in sizes}
    operands = dict(choice.operands)
    sliding = [role for role in ("A", "B")
               if sliding_windows(operands[role], choice.intrinsic, role,
                                  choice.index_map).members]
    options: list[tuple] = [()]
    for role in ("A", "B"):
        if not sliding or sliding == [role]:
            continue
        names = tuple(n for n in operands[role].indices if n in outputs and smallest[n] < sizes[n])
        if names and _fit(device, choice, smallest, block, config, ((role, names),)):
            options.append(((role, names),))
    return options


def best_mapping(workload: Workload, config: AcceleratorConfig,
                 lowerings: tuple[tuple[tuple[str, ...], ...], ...] = ((),),
                 memory: MemorySystem = DEFAULT_MEMORY) -> Mapping:
    """The mapping of least estimated cycles on ``memory`` over the host-side fusions
    ``lowerings`` and every device tensorize choice of each: all tilings of `_tile_options`
    where they are few enough, greedy tile growth otherwise."""
    best: tuple[float, Mapping] | None = None
    for groups in lowerings:
        for cost, mapping in choice_mappings(workload, config, groups, memory):
            if best is None or cost < best[0]:
                best = (cost, mapping)
    if best is None:
        if not device_choices(workload, config):
            raise _no_choice(workload, config)
        if workload.reduction == "max":
            check_max_reduction(workload, config)  # the reason, where the hardware is it
        raise MappingError(f"no tiling of {workload.text} fits {config.describe()}, even one "
                           "intrinsic block per index; enlarge the scratchpad or accumulator")
    return best[1]


def choice_mappings(workload: Workload, config: AcceleratorConfig,
                    groups: tuple[tuple[str, ...], ...] = (),
                    memory: MemorySystem = DEFAULT_MEMORY) -> list[tuple[float, Mapping]]:
    """``(estimated cost, mapping)`` of the best tiling of each device tensorize choice under
    the host-side fusion ``groups`` (choices no tiling fits are left out; none: []). A
    caller that weighs more than one layer (`tensorforge.compiler.network` chains DRAM
    layouts) picks among them. A ``max=`` workload has none where ``config`` cannot take a
    max (`codegen.check_max_reduction`)."""
    try:
        if workload.reduction == "max":
            check_max_reduction(workload, config)
        device = Lowering(workload, groups).device
        choices = device_choices(workload, config, groups)
    except MappingError:
        return []
    orders = _orders(device)
    found = []
    for choice in choices:
        block = _blocks(choice, device, config)
        bursts = TileBursts(device, choice, config)
        best = None
        for holds in _hold_options(device, choice, block, config):
            tiled = (_enumerate(device, choice, block, orders, config, memory, bursts, holds)
                     or _grow(device, choice, block, orders, config, memory, bursts, holds))
            if tiled is not None and (best is None or tiled[0] < best[0]):
                cost, tiles, order = tiled
                best = (cost, Mapping(choice, tuple(tiles.items()), order, groups, holds))
        if best is not None:
            found.append(best)
    return found


def default_mapping(workload: Workload, config: AcceleratorConfig,
                    memory: MemorySystem = DEFAULT_MEMORY) -> Mapping:
    """The best mapping the pipelined estimate finds on ``memory`` over every device
    tensorize choice, of the workload as written and, where it has one, of its im2col
    lowering (a convolution's output pixels fused into one index pad to whole blocks far less
    than one image row)."""
    groups = im2col_groups(workload)
    return best_mapping(workload, config, ((), groups) if groups else ((),), memory)
