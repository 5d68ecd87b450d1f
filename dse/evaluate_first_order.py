"""A first-order layer evaluator: roofline cycles and per-operation energy, no simulation.

This is the default `LayerEvaluator` until the analytical cost model and HASCO's software
search land; it is deliberately simple and says so. For one layer on one accelerator it

1. **tensorizes**: assigns each non-trivial intrinsic index to a distinct workload index of the
   same role (output index to output index, reduction to reduction), or leaves it unused. A
   sliding-window pair of the intrinsic (CONV2D's ``y+s``) must land on a pair the workload
   also sums in one dimension with unit coefficients. Which operand holds which index is not
   checked (the compiler's two-step matching decides that), so the model is optimistic there.
   Padding waste follows: a workload extent ``N`` on an intrinsic extent ``P`` runs
   ``ceil(N / P)`` steps, and an unused intrinsic index wastes its whole width;
2. **tiles**: grows a scratchpad tile (double-buffered inputs in half the scratchpad, the
   output tile in the accumulator) by doubling one index at a time while the DRAM traffic plus
   the per-tile pipeline fill keeps falling; reduction tile loops run innermost so partial
   sums stay on chip, and an input that does not depend on the innermost tile loop stays
   resident across it;
3. **counts**: compute cycles are steps times the slower of the MAC rate and the bank-limited
   scratchpad read rate (the stationary operand is re-read once per reuse run, longer with
   per-PE local memory); DRAM cycles are bytes over the bus in bursts of at most ``max_burst``
   beats with a fixed per-burst overhead; double buffering overlaps the two;
4. **charges** energy per MAC, per byte moved through the interconnect, per SRAM byte (bank
   size sets the cost) and per DRAM byte, with the 45 nm constants of `Technology`.

The three best tensorize choices by padding waste are tiled and the fastest kept. The model is
deterministic, so the ``seed`` argument is accepted and ignored.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from tensorforge.compiler.workload import Access, Workload, parse_workload
from tensorforge.config import AcceleratorConfig, Dataflow, Interconnect
from tensorforge.dse.evaluate import TECH_45NM, LayerMetrics, Technology
from tensorforge.intrinsics import EXPRESSIONS

#: DRAM/AXI cycles lost per burst (address phase, row activation not hidden): an assumption.
BURST_OVERHEAD_CYCLES = 8
#: How many tensorize choices (least padding first) get a tiling search.
CHOICES_TILED = 3


@dataclass(frozen=True)
class _Layer:
    """What the model needs of a workload, computed once per evaluation."""

    workload: Workload
    sizes: dict[str, int]
    shapes: dict[str, tuple[int, ...]]
    spatial: tuple[str, ...]
    reduction: tuple[str, ...]
    windows: frozenset[frozenset[str]]


def _layer(workload: Workload) -> _Layer:
    return _Layer(
        workload,
        workload.sizes,
        workload.shapes,
        workload.spatial_indices,
        workload.reduction_indices,
        _windows(workload.inputs),
    )


def _windows(inputs: tuple[Access, ...]) -> frozenset[frozenset[str]]:
    """Index pairs summed in one input dimension with unit coefficients (``x+r``)."""
    pairs = set()
    for access in inputs:
        for dim in access.dims:
            unit = [name for name, coef in dim.terms if coef == 1]
            pairs.update(frozenset(p) for p in itertools.combinations(unit, 2))
    return frozenset(pairs)


def tensorize_choices(workload: Workload, config: AcceleratorConfig) -> list[dict[str, str]]:
    """Every legal assignment intrinsic index -> workload index (unused ones left out)."""
    layer, intrinsic = _layer(workload), _intrinsic(config)
    sizes = config.intrinsic_sizes
    active = {i for i, size in sizes.items() if size > 1}
    roles = [
        ([i for i in intrinsic.spatial_indices if i in active], layer.spatial),
        ([i for i in intrinsic.reduction_indices if i in active], layer.reduction),
    ]
    per_role = [list(_injections(intr, work)) for intr, work in roles]
    intrinsic_windows = [w for w in _windows(intrinsic.inputs) if w <= active]
    choices = []
    for parts in itertools.product(*per_role):
        assignment = {k: v for part in parts for k, v in part.items()}
        if all(_window_ok(w, assignment, layer.windows) for w in intrinsic_windows):
            choices.append(assignment)
    return choices


def _intrinsic(config: AcceleratorConfig) -> Workload:
    return parse_workload(EXPRESSIONS[config.intrinsic], dict(config.intrinsic_sizes))


def _injections(intrinsic: list[str], workload: tuple[str, ...]) -> Iterator[dict[str, str]]:
    """Each partial injective map from ``intrinsic`` indices into ``workload`` indices."""
    slots = list(workload) + [None] * len(intrinsic)
    seen = set()
    for targets in itertools.permutations(slots, len(intrinsic)):
        if targets in seen:
            continue
        seen.add(targets)
        yield {i: w for i, w in zip(intrinsic, targets, strict=True) if w is not None}


def _window_ok(window: frozenset[str], assignment: Mapping[str, str], pairs: frozenset) -> bool:
    mapped = [assignment[i] for i in window if i in assignment]
    return len(mapped) < 2 or frozenset(mapped) in pairs


@dataclass(frozen=True)
class FirstOrderEvaluator:
    """The default `LayerEvaluator` (see the module docstring for what it models)."""

    technology: Technology = TECH_45NM
    version: str = "first-order-layer-1"

    def __call__(self, workload: Workload, config: AcceleratorConfig, seed: int) -> LayerMetrics:
        layer = _layer(workload)
        choices = tensorize_choices(workload, config) or [{}]
        by_padding = sorted(choices, key=lambda a: (_steps(layer, a, config), sorted(a.items())))
        results = [_Schedule(layer, config, a, self.technology) for a in by_padding[:CHOICES_TILED]]
        best = min(results, key=lambda s: (s.cycles, s.energy_pj))
        return best.metrics()


def _steps(layer: _Layer, assignment: Mapping[str, str], config: AcceleratorConfig) -> int:
    """Intrinsic steps needed for the whole layer under ``assignment`` (padding included)."""
    extent = {w: config.intrinsic_sizes[i] for i, w in assignment.items()}
    return math.prod(-(-n // extent.get(w, 1)) for w, n in layer.sizes.items())


class _Schedule:
    """One tensorize choice with its tile, cycles and energy."""

    def __init__(
        self,
        layer: _Layer,
        config: AcceleratorConfig,
        assignment: dict[str, str],
        tech: Technology,
    ) -> None:
        self.layer, self.config, self.assignment, self.tech = layer, config, assignment, tech
        self.block = {w: config.intrinsic_sizes[i] for i, w in assignment.items()}
        self.padded = {
            w: -(-n // self.block.get(w, 1)) * self.block.get(w, 1) for w, n in layer.sizes.items()
        }
        self.steps = _steps(layer, assignment, config)
        self.tile = self._grow_tile()
        self._count()

    # --- tiling ----------------------------------------------------------------------------

    def _footprint(self, access: Access, tile: Mapping[str, int]) -> int:
        shape = self.layer.shapes[access.tensor]
        elems = 1
        for dim, extent in zip(access.dims, shape, strict=True):
            span = sum(abs(c) * (min(tile[n], self.layer.sizes[n]) - 1) for n, c in dim.terms)
            elems *= min(extent, span + 1)
        return elems

    def _fits(self, tile: Mapping[str, int], share: float) -> bool:
        precision = self.config.precision
        inputs = sum(self._footprint(a, tile) for a in self.layer.workload.inputs)
        output = self._footprint(self.layer.workload.output, tile)
        return (
            inputs * precision.in_bytes <= self.config.scratchpad.capacity * share
            and output * precision.acc_bytes <= self.config.scratchpad.accumulator
        )

    def _tiles(self, tile: Mapping[str, int]) -> dict[str, int]:
        return {w: -(-n // tile[w]) for w, n in self.padded.items()}

    def _innermost(self, tile: Mapping[str, int]) -> str | None:
        """The innermost tile loop: a reduction loop if any runs, else the best spatial one."""
        tiles = self._tiles(tile)
        running = [w for w in self.layer.workload.indices if tiles[w] > 1]
        reductions = [w for w in running if w in self.layer.reduction]
        candidates = reductions or running
        if not candidates:
            return None
        return min(candidates, key=lambda w: (self._traffic(tile, w), w))

    def _traffic(self, tile: Mapping[str, int], innermost: str | None) -> int:
        """DRAM bytes: inputs per tile (resident across the innermost loop when independent
        of it), the output once."""
        tiles = self._tiles(tile)
        total_tiles = math.prod(tiles.values())
        in_bytes = self.config.precision.in_bytes
        traffic = 0
        for access in self.layer.workload.inputs:
            loads = total_tiles
            if innermost is not None and innermost not in access.indices:
                loads //= tiles[innermost]
            traffic += loads * self._footprint(access, tile) * in_bytes
        out_elems = math.prod(self.layer.shapes[self.layer.workload.output.tensor])
        return traffic + out_elems * in_bytes

    def _fill_cycles(self) -> int:
        """Pipeline fill and drain paid once per tile."""
        array = self.config.array
        match array.interconnect:
            case Interconnect.SYSTOLIC:
                return array.rows + array.cols
            case Interconnect.FULL:
                return 2 + math.ceil(math.log2(max(array.pes, 2)))
        return 2

    def _cost(self, tile: Mapping[str, int]) -> float:
        innermost = self._innermost(tile)
        tiles = math.prod(self._tiles(tile).values())
        return self._traffic(tile, innermost) / self.config.dma.bus_bytes + (
            tiles * self._fill_cycles()
        )

    def _grow_tile(self) -> dict[str, int]:
        tile = {w: self.block.get(w, 1) for w in self.layer.sizes}
        cost = self._cost(tile)
        while True:
            moves = []
            for w in self.layer.workload.indices:
                if tile[w] >= self.padded[w]:
                    continue
                bigger = dict(tile, **{w: min(2 * tile[w], self.padded[w])})
                if self._fits(bigger, 0.5):
                    moves.append((self._cost(bigger), w, bigger))
            if not moves:
                return tile
            best_cost, _, best = min(moves, key=lambda move: move[:2])
            if best_cost >= cost:
                return tile
            tile, cost = best, best_cost

    # --- counting --------------------------------------------------------------------------

    def _stationary_reuse(self) -> float:
        """Steps that share one block of the stationary operand, within a tile."""
        config, tile = self.config, self.tile
        intrinsic = _intrinsic(config)
        stationary = {
            Dataflow.WEIGHT_STATIONARY: intrinsic.inputs[1],
            Dataflow.INPUT_STATIONARY: intrinsic.inputs[0],
            Dataflow.OUTPUT_STATIONARY: intrinsic.output,
        }[config.array.dataflow]
        reuse = 1.0
        for i, w in self.assignment.items():
            if i not in stationary.indices:
                reuse *= tile[w] / self.block[w]
        for w in self.layer.sizes:
            if w not in self.block and w not in self._tensor_indices(stationary):
                reuse *= tile[w]
        weights = config.blocks["B"]
        elems_per_pe = max(1.0, weights.lines * weights.elems / config.array.pes)
        local_blocks = config.array.local_bytes // config.precision.in_bytes / elems_per_pe
        return max(1.0, reuse * (1 + local_blocks))

    def _tensor_indices(self, intrinsic_access: Access) -> set[str]:
        """Workload indices that the workload tensor playing ``intrinsic_access`` uses."""
        mapped = {self.assignment[i] for i in intrinsic_access.indices if i in self.assignment}
        for access in (*self.layer.workload.inputs, self.layer.workload.output):
            if mapped and mapped <= set(access.indices):
                return set(access.indices)
        return mapped

    def _dram_cycles(self, traffic_bytes: int) -> float:
        dma = self.config.dma
        beats = traffic_bytes / dma.bus_bytes
        return beats + BURST_OVERHEAD_CYCLES * math.ceil(beats / dma.max_burst)

    def _count(self) -> None:
        config, tech = self.config, self.tech
        blocks, array, precision = config.blocks, config.array, config.precision
        reuse = self._stationary_reuse()
        dataflow = array.dataflow
        a_lines = blocks["A"].lines / (reuse if dataflow is Dataflow.INPUT_STATIONARY else 1)
        b_lines = blocks["B"].lines / (reuse if dataflow is Dataflow.WEIGHT_STATIONARY else 1)
        acc_lines = blocks["C"].lines * 2 / (reuse if dataflow is Dataflow.OUTPUT_STATIONARY else 1)
        step_cycles = max(
            math.ceil(config.macs_per_step / array.pes),
            math.ceil((a_lines + b_lines) / config.scratchpad.banks),
        )
        tiles = math.prod(self._tiles(self.tile).values())
        compute = self.steps * step_cycles + tiles * self._fill_cycles()
        self.innermost = self._innermost(self.tile)
        self.traffic = self._traffic(self.tile, self.innermost)
        memory = self._dram_cycles(self.traffic)
        self.compute_cycles, self.memory_cycles = compute, memory
        self.cycles = math.ceil(max(compute, memory) + min(compute, memory) / tiles)
        executed = self.steps * config.macs_per_step
        self.utilization = self.layer.workload.macs / executed
        bank_bytes = config.scratchpad.capacity / config.scratchpad.banks
        spad_pj = tech.sram_pj_per_byte(bank_bytes)
        acc_pj = tech.sram_pj_per_byte(config.scratchpad.accumulator)
        self.energy_pj = (
            executed * tech.mac_pj(precision.in_bits, precision.acc_bits)
            + executed
            * 2
            * precision.in_bytes
            * tech.movement_pj_per_byte(array.interconnect, array.pes)
            + self.steps * (a_lines + b_lines) * config.spad_line_bytes * spad_pj
            + self.steps * acc_lines * config.acc_line_bytes * acc_pj
            + self.traffic * (tech.dram_pj_per_byte + spad_pj)
        )

    def metrics(self) -> LayerMetrics:
        return LayerMetrics(
            cycles=self.cycles,
            energy_pj=self.energy_pj,
            mapping={
                "tensorize": dict(sorted(self.assignment.items())),
                "tile": dict(self.tile),
                "innermost_loop": self.innermost,
                "utilization": round(self.utilization, 4),
            },
            details={
                "compute_cycles": float(self.compute_cycles),
                "dram_cycles": float(self.memory_cycles),
                "dram_bytes": float(self.traffic),
                "utilization": self.utilization,
            },
        )
