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
    (`estimate_cycles`): the program double-buffers, so LOAD, COMPUTE and STORE overlap and
    the busiest unit sets the pace, plus the first LOADs and the last STORE. Compute counts
    COMPUTE instructions, stationary-block changes and ZEROs, so few long instructions win;
    loads count an operand's reloads from the loop order (an operand is
    reloaded whenever a tile loop it depends on advances).
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass

from tensorforge.compiler.codegen import MAX_EXTENT, micro_loop
from tensorforge.compiler.lowering import Lowering
from tensorforge.compiler.lowering import device_choices as lowering_choices
from tensorforge.compiler.mapping import Mapping, output_first_order
from tensorforge.compiler.matching import TensorizeChoice
from tensorforge.compiler.tiling import Tiling, build_tiling
from tensorforge.compiler.workload import Workload
from tensorforge.config import AcceleratorConfig
from tensorforge.errors import MappingError
from tensorforge.hw.dataflow_plan import plan_for

LIBRARY_BLOCKS = 4  # intrinsic blocks per tile per matched index, as a fixed library would
MAX_ORDERS = 24


def device_choices(workload: Workload, config: AcceleratorConfig,
                   groups: tuple[tuple[str, ...], ...] = ()) -> list[TensorizeChoice]:
    """The tensorize choices the device can run (stage 0 of the fused workload)."""
    return lowering_choices(workload, config.intrinsic.value, groups)


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


@dataclass(frozen=True)
class UnitCosts:
    """Cycle costs of the accelerator's units, for ranking mappings (not a cycle model).

    Measured on the generated RTL of an 8x8 GEMM accelerator (docs/rtl_utilization.md): a
    MAC step streams one beat per cycle; a COMPUTE instruction adds its pipeline fill and
    drain; a change of stationary block costs its lines where the PEs cannot load it behind
    the current one; the pipelined load unit takes about one cycle per buffer line, the store
    unit about one per bus beat of an accumulator line; a ZERO clears one accumulator line
    a cycle, after the array has drained.
    """

    step: int  # cycles of one intrinsic step (streamed beats)
    stationary_operand: str  # "A" or "B": the operand the PEs hold
    instruction: int  # fill and drain of one COMPUTE instruction
    stationary: int  # cycles per change of stationary block
    load_row: float  # per LOAD row (one buffer line)
    load_instruction: int  # issue of one LOAD
    store_row: float  # per STORE row (one accumulator line)
    zero_line: int  # per accumulator line a ZERO clears (0: the MAC overwrite bit clears it)
    zero: int  # per C tile: its first MAC waits for the previous tile's results to be written

    @classmethod
    @functools.cache  # read for every tiling the mapping search scores
    def of(cls, config: AcceleratorConfig) -> UnitCosts:
        plan = plan_for(config)
        bus = config.dma.bus_bytes
        return cls(step=len(plan.beats), stationary_operand=plan.stationary.value,
                   instruction=INSTRUCTION_FILL,
                   stationary=STATIONARY_SWITCH, zero=ZERO_DRAIN,
                   load_row=max(1.0, config.spad_line_bytes / bus) + ROW_SLACK,
                   load_instruction=LOAD_ISSUE,
                   store_row=-(-config.acc_line_bytes // bus) + ROW_SLACK, zero_line=0)


INSTRUCTION_FILL = 2  # cycles; the next MAC instruction starts while the last one drains
STATIONARY_SWITCH = 0  # cycles; the PEs load the next block behind the current one's beats
ZERO_DRAIN = 24  # cycles per C tile; ~ the array latency plus a group's output lines
LOAD_ISSUE = 8  # cycles of one LOAD's command decode and address set-up
ROW_SLACK = 0.1  # cycles per row lost to beats that straddle a bus word
MAX_ENUMERATED = 512  # tilings per tensorize choice tried exhaustively; above: greedy growth


def estimate_cycles(device: Workload, tiling: Tiling, order: tuple[str, ...],
                    config: AcceleratorConfig) -> float:
    """Pipelined estimate of a tiling under a loop order (for ranking mappings only)."""
    return _Estimate(device, tiling, config)(order)


class _Estimate:
    """`estimate_cycles` of one tiling, with what does not depend on the order computed once.

    The program double-buffers: an operand tile loads while the previous tile of that operand
    is in use, and a C tile stores while the next one computes. So the three units run side by
    side and the busiest sets the pace, after a prologue (the LOADs of the first step's first
    chunk) and before an epilogue (the last chunk's STORE); a transfer longer than the steps
    that use the previous tile stalls the pipeline by the difference. Each C tile starts with
    a ZERO COMPUTE of its lines. An operand is (re)loaded when a tile loop it depends on
    advances: every ``period`` steps, the product of the counts of the loops inside its
    innermost one.
    """

    def __init__(self, device: Workload, tiling: Tiling, config: AcceleratorConfig) -> None:
        costs = UnitCosts.of(config)
        sizes, block, tiles = device.sizes, dict(tiling.block), dict(tiling.tiles)
        self.counts = counts = {n: tiling.count(n) for n in sizes}
        self.steps = math.prod(counts.values())
        mac_steps = math.prod(-(-sizes[n] // block[n]) for n in sizes)
        blocks = {n: -(-tiles[n] // block[n]) for n in sizes}
        instructions, switches = _compute_shape(tiling, blocks, costs.stationary_operand)
        self.compute = (mac_steps * costs.step / self.steps + instructions * costs.instruction
                        + switches * costs.stationary)
        self.transfers = {}  # role -> (looping indices, cycles of one LOAD or STORE)
        for role in ("A", "B"):
            tile = tiling.operand(role)
            strips = math.prod(d.lines for d in tile.dims[:-1])  # one LOAD per strip
            cycles = tile.lines * costs.load_row + strips * costs.load_instruction
            self.transfers[role] = (self._looping(tile), cycles)
        c_tile = tiling.operand("C")
        self.transfers["C"] = (self._looping(c_tile), c_tile.lines * costs.store_row)
        outputs = set(c_tile.access.indices)
        operands = [set(tiling.operand(r).access.indices) for r in ("A", "B")]
        # the first step is cut along a reduction index, the last along an output index and
        # its last chunk again along a second one (`codegen`): the first chunk's LOADs (of
        # one reduction block; what the sub-chunks of that one save, the LOADs streaming
        # behind them mostly take back) and one C block's STORE are exposed
        self.first_chunk = 1 / max((blocks[n] for n in sizes
                                    if n not in outputs and all(n in o for o in operands)),
                                   default=1)
        self.last_chunk = 1 / math.prod(sorted(blocks[n] for n in outputs)[-2:])
        c_tiles = math.prod(counts[n] for n in c_tile.access.indices)
        self.zero = c_tiles * (c_tile.lines * costs.zero_line + costs.zero)

    def _looping(self, tile) -> set[str]:
        return {n for n in tile.access.indices if self.counts[n] > 1}

    def _period(self, looping: set[str], order: tuple[str, ...]) -> int:
        deepest = max((p for p, n in enumerate(order) if n in looping), default=-1)
        if deepest < 0:
            return self.steps  # loaded once: at the first step only
        return math.prod(self.counts[n] for n in order[deepest + 1 :])

    def __call__(self, order: tuple[str, ...]) -> float:
        busy = {"load": 0.0, "store": 0.0}
        stalls = 0.0
        for role, (looping, cycles) in self.transfers.items():
            period = self._period(looping, order)
            times = self.steps // period
            busy["store" if role == "C" else "load"] += times * cycles
            stalls += times * max(0.0, cycles - period * self.compute)  # one tile ahead only
        compute = self.steps * self.compute + self.zero
        first_loads = sum(self.transfers[r][1] for r in ("A", "B"))
        prologue = first_loads * (self.first_chunk if self.steps > 1 else 1)
        epilogue = self.transfers["C"][1] * (self.last_chunk if self.steps > 1 else 1)
        steady = max(compute, busy["load"] - prologue, busy["store"] - epilogue)
        return prologue + steady + stalls + epilogue


def _compute_shape(tiling: Tiling, blocks: dict[str, int], stationary: str
                   ) -> tuple[int, float]:
    """MAC COMPUTE instructions of a full tile step and its changes of stationary block."""
    coefs = {r: tiling.operand(r).coef for r in ("C", "A", "B")}
    inner, outer = micro_loop(blocks, coefs, stationary)
    rest = [n for n in blocks if n not in (inner, outer)]
    splits = math.prod(-(-blocks[n] // MAX_EXTENT) for n in (inner, outer) if n)
    instructions = math.prod(blocks[n] for n in rest) * splits
    steps = math.prod(blocks.values())
    keeps = inner is not None and coefs[stationary].get(inner, 0) == 0
    return instructions, steps / blocks[inner] if keeps else steps


def _orders(device: Workload) -> list[tuple[str, ...]]:
    outputs = list(device.output.indices)
    reductions = [n for n in device.indices if n not in outputs]
    found = [tuple(p) + tuple(reductions) for p in itertools.permutations(outputs)]
    return found[:MAX_ORDERS]


def _best_order(device, tiling, orders, config) -> tuple[float, tuple[str, ...]]:
    estimate = _Estimate(device, tiling, config)
    return min((estimate(order), order) for order in orders)


def _tile_options(size: int, block: int) -> list[int]:
    """Tile sizes tried for one index: the block times powers of two, and the whole index."""
    options, tile = [], block
    while tile < size:
        options.append(tile)
        tile *= 2
    return [*options, size]


def _enumerate(device, choice, block, orders, config):
    """Every fitting tiling of `_tile_options`; ``(cost, tiles, order)``, None if none fits
    or there are too many to try."""
    sizes = device.sizes
    options = [_tile_options(sizes[n], block[n]) for n in sizes]
    if math.prod(len(o) for o in options) > MAX_ENUMERATED:
        return None
    best = None
    for tiles, tiling in _fitting(device, choice, block, config, list(sizes), options, {}):
        cost, order = _best_order(device, tiling, orders, config)
        if best is None or cost < best[0]:
            best = (cost, tiles, order)
    return best


def _fitting(device, choice, block, config, names, options, chosen):
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
        tiling = _fit(device, choice, {**tiles, **smallest}, block, config)
        skipped = tiling is None and option != whole
        if skipped:  # to the whole index
            tiles = {**chosen, name: whole}
            tiling = _fit(device, choice, {**tiles, **smallest}, block, config)
        if tiling is None:
            return
        if rest:
            yield from _fitting(device, choice, block, config, names, options, tiles)
        else:
            yield tiles, tiling
        if skipped:
            return


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


def best_mapping(workload: Workload, config: AcceleratorConfig,
                 lowerings: tuple[tuple[tuple[str, ...], ...], ...] = ((),)) -> Mapping:
    """The mapping of least estimated cycles over the host-side fusions ``lowerings`` and
    every device tensorize choice of each: all tilings of `_tile_options` where they are
    few enough, greedy tile growth otherwise."""
    best: tuple[float, Mapping] | None = None
    for groups in lowerings:
        try:
            device = Lowering(workload, groups).device
            choices = device_choices(workload, config, groups)
        except MappingError:
            continue
        orders = _orders(device)
        for choice in choices:
            block = _blocks(choice, device, config)
            found = (_enumerate(device, choice, block, orders, config)
                     or _grow(device, choice, block, orders, config))
            if found is None:
                continue
            cost, tiles, order = found
            if best is None or cost < best[0]:
                best = (cost, Mapping(choice, tuple(tiles.items()), order, groups))
    if best is None:
        if not device_choices(workload, config):
            raise _no_choice(workload, config)
        raise MappingError(f"no tiling of {workload.text} fits {config.describe()}, even one "
                           "intrinsic block per index; enlarge the scratchpad or accumulator")
    return best[1]


def default_mapping(workload: Workload, config: AcceleratorConfig) -> Mapping:
    """The best mapping the pipelined estimate finds over every device tensorize choice, of
    the workload as written and, where it has one, of its im2col lowering (a convolution's
    output pixels fused into one index pad to whole blocks far less than one image row)."""
    groups = im2col_groups(workload)
    return best_mapping(workload, config, ((), groups) if groups else ((),))
