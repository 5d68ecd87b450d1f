"""A layer's mapping as a few small choices, and the evaluator that prices exactly that mapping.

One-level co-exploration (Poros, section III-C) decides the mapping together with the hardware,
so the mapping must be a handful of discrete actions whose meaning does not depend on the
hardware drawn in the same sample. Two kinds of action describe it here:

* **unrolling**: which tensorize choice (and host fusion) of the layer runs on the array, i.e.
  which loops are spatially unrolled. An action is an index into the layer's runnable choices
  on that accelerator (`sw_space.SoftwareSpace.build`), taken modulo their count: the count
  changes with the intrinsic and array shape, the action space must not.
* **prime-factor tiling**, one action per device index: the index's intrinsic blocks
  ``g_1 * ... * g_p`` (primes, smallest first) are split into two tiles, as Poros does for its
  three-level memory (DRAM, scratchpad, PEs) with ``s = 2``. A level ``0 .. TILE_LEVELS - 1``
  keeps the ``round(level * p / (TILE_LEVELS - 1))`` smallest primes in the scratchpad tile;
  the rest are the trips of the tile loop. Tile blocks times trips is always the index's block
  count, so every tile divides its loop: no ragged remainder tiles, as the paper intends.
  Tiles the accelerator cannot hold are lowered until they fit (`fitted_tiles`): the action
  space is pruned to runnable mappings, as Poros's is, without depending on the hardware.

Loop order is fixed (Poros fixes it too): output loops outside reduction loops, each in index
order, which is the order the code generator requires for partial sums to stay on chip.

`PlannedMappingEvaluator` is a `LayerEvaluator` that prices the one mapping its actions name
for each layer with the exact cost model, instead of searching: a search method that chose the
mappings itself hands it to the co-design loop for a trial through its software schedule
(`tensorforge.dse.sw_schedule`, `opt_poros.PlannedEffort`). A layer that no tiling of the
chosen unrolling fits raises `MappingError`, so the trial fails and the method is told it
violated the constraints. A layer that no tensorize choice runs (a GEMV on a GEMM array) takes
the library's padded mapping, as the software search's evaluator does.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np

from tensorforge.compiler.mappers import library_mapping
from tensorforge.compiler.mapping import Mapping
from tensorforge.compiler.workload import Workload
from tensorforge.config import AcceleratorConfig
from tensorforge.dse.cost_model import (
    CostParameters,
    evaluate,
    evaluate_mapping,
    rtl_parameters,
)
from tensorforge.dse.cost_space import LayerSpace
from tensorforge.dse.energy import EVENTS
from tensorforge.dse.evaluate import LayerMetrics
from tensorforge.dse.sw_evaluator_batch import batch_price
from tensorforge.dse.sw_space import MAX_DIMS, SoftwareSpace
from tensorforge.errors import MappingError
from tensorforge.hashing import package_modules, source_digest
from tensorforge.memory import DEFAULT_MEMORY, MemorySystem

#: Unrolling actions per layer; a layer rarely has more runnable tensorize choices than this.
UNROLL_CHOICES = 4
#: Tiling actions per device index: the share of its prime factors kept in the tile, in steps.
TILE_LEVELS = 5
#: Actions of one layer: its unrolling, then one tiling level per device-index slot.
LAYER_ACTIONS = (UNROLL_CHOICES,) + (TILE_LEVELS,) * MAX_DIMS
#: The key of a joint design point that holds each layer's actions, beside the hardware's.
POINT_KEY = "layer_mappings"

DETAILS = ("compute_cycles", "load_cycles", "store_cycles", "utilization")


@cache
def prime_factors(n: int) -> tuple[int, ...]:
    """The prime factors of ``n >= 1``, smallest first, with multiplicity (``()`` for 1)."""
    if n < 1:
        raise ValueError(f"prime factors need a positive integer, not {n}")
    factors, p = [], 2
    while p * p <= n:
        while n % p == 0:
            factors.append(p)
            n //= p
        p += 1
    if n > 1:
        factors.append(n)
    return tuple(factors)


def prime_tiling(blocks: int, level: int) -> tuple[int, int]:
    """``(tile blocks, trips)`` of a loop of ``blocks`` blocks at tiling ``level``.

    The tile takes the ``round(level * p / (TILE_LEVELS - 1))`` smallest of the ``p`` prime
    factors, the trips the others, so ``tile * trips == blocks`` always. Level 0 is one block
    a tile, the last level the whole loop in one tile.
    """
    if not 0 <= level < TILE_LEVELS:
        raise ValueError(f"tiling level must be in 0..{TILE_LEVELS - 1}, not {level}")
    factors = prime_factors(blocks)
    kept = round(level * len(factors) / (TILE_LEVELS - 1))
    tile = int(np.prod(factors[:kept], dtype=np.int64))
    return tile, blocks // tile


def check_actions(actions: tuple[int, ...]) -> tuple[int, ...]:
    """``actions`` as a tuple of ints within `LAYER_ACTIONS`, or a ValueError saying which."""
    actions = tuple(int(a) for a in actions)
    if len(actions) != len(LAYER_ACTIONS):
        raise ValueError(f"a layer's mapping has {len(LAYER_ACTIONS)} actions (unrolling and "
                         f"{MAX_DIMS} tiling levels), not {len(actions)}")
    for position, (action, size) in enumerate(zip(actions, LAYER_ACTIONS, strict=True)):
        if not 0 <= action < size:
            raise ValueError(f"mapping action {position} is {action}; it must be in 0..{size - 1}")
    return actions


def fixed_order(space: LayerSpace) -> np.ndarray:
    """Device-index positions, outermost first: output loops, then reduction loops."""
    return np.concatenate([np.flatnonzero(space.output_mask), np.flatnonzero(~space.output_mask)])


def decode(spaces: list[LayerSpace], actions: tuple[int, ...]) -> tuple[LayerSpace, np.ndarray]:
    """The layer space the actions unroll and the tiling levels they ask for (``D``)."""
    actions = check_actions(actions)
    if not spaces:
        raise MappingError("the layer has no runnable tensorize choice on this accelerator")
    space = spaces[actions[0] % len(spaces)]
    return space, np.array(actions[1 : 1 + space.dims], dtype=np.int64)


def tiles_at(space: LayerSpace, levels: np.ndarray) -> np.ndarray:
    """``n x D`` tile sizes (elements) of ``n x D`` tiling levels of ``space``'s indices."""
    blocks = -(-space.sizes // space.block)
    tiles = [[min(int(space.sizes[d]), int(space.block[d]) * prime_tiling(int(blocks[d]),
                                                                          int(level))[0])
              for d, level in enumerate(row)] for row in np.atleast_2d(levels)]
    return np.array(tiles, dtype=np.int64).reshape(-1, space.dims)


def fitted_tiles(space: LayerSpace, levels: np.ndarray,
                 parameters: CostParameters) -> tuple[np.ndarray, int]:
    """The tiles of the highest levels at or below ``levels`` that fit the accelerator, and by
    how many steps every level was lowered to get there; MappingError if none fits.

    Poros keeps its action space to candidates that can run (section III-C). Here the levels
    are the largest tiles the layer may take: tiles beyond the buffers are lowered one level at
    a time on every index (the fast closed-form model decides what fits, in one batch).
    """
    steps = np.arange(TILE_LEVELS)
    candidates = tiles_at(space, np.maximum(levels[None, :] - steps[:, None], 0))
    order = np.broadcast_to(fixed_order(space), candidates.shape)
    legal = np.isfinite(evaluate(space, candidates, order, parameters).cycles)
    if not legal.any():
        raise MappingError(f"no tiling of {space.describe()} fits "
                           f"{space.config.describe()}, even one block per tile")
    lowered = int(np.argmax(legal))
    return candidates[lowered], lowered


#: How `PlannedMappingEvaluator` prices a mapping, by its ``pricing``.
PRICINGS = {"program": evaluate_mapping, "batch": batch_price}


def layer_key(workload: Workload) -> str:
    """What tells a sweep's layers apart (the co-design loop merges identical workloads)."""
    return f"{workload.text} {workload.sizes_text}"


@dataclass(frozen=True)
class PlannedMappingEvaluator:
    """``(workload, config, seed) -> LayerMetrics`` of the mapping ``plan`` names for the layer.

    ``plan`` pairs each layer's `layer_key` with its actions: one evaluator serves every layer
    of a trial. The seed is unused: nothing is searched, so the result is a function of the
    actions, the layer and the accelerator alone. Priced on ``memory`` like the software
    search's layers, with the exact transfer counts the search's reported figures use.
    """

    plan: tuple[tuple[str, tuple[int, ...]], ...]
    memory: MemorySystem = DEFAULT_MEMORY
    #: "program": by the program's timeline and events, as `SoftwareSearchEvaluator` prices;
    #: "batch": by the batch model alone, as `sw_evaluator_batch` prices (a sweep's evaluator
    #: names which, `opt_poros.PlannedEffort`)
    pricing: str = "program"
    version: str = ""

    def __post_init__(self) -> None:
        if self.pricing not in PRICINGS:
            raise ValueError(f"pricing must be one of {', '.join(PRICINGS)}, not "
                             f"{self.pricing!r}")
        plan = tuple((str(key), check_actions(actions)) for key, actions in self.plan)
        object.__setattr__(self, "plan", plan)
        pricing = "" if self.pricing == "program" else f"+{self.pricing}"
        object.__setattr__(self, "version", f"planned-mapping-1{pricing}:"
                                            f"{self.memory.describe()}:{_model_digest()}")

    def __call__(self, workload: Workload, config: AcceleratorConfig, seed: int) -> LayerMetrics:
        actions = dict(self.plan).get(layer_key(workload))
        if actions is None:
            raise MappingError(f"the plan has no mapping for layer {workload.name}")
        parameters = rtl_parameters(self.memory, config)
        try:
            spaces = SoftwareSpace.build(workload, config, parameters=parameters).spaces
        except MappingError:
            return _library(workload, config, parameters, self.pricing)
        space, levels = decode(spaces, actions)
        tiles, lowered = fitted_tiles(space, levels, parameters)
        mapping = Mapping(space.choice, tuple(zip(space.names, map(int, tiles), strict=True)),
                          tuple(space.names[p] for p in fixed_order(space)), space.groups)
        # priced as the software search's evaluator prices its choice, so the two compare
        numbers = PRICINGS[self.pricing](workload, mapping, config, parameters)
        return _metrics(mapping, numbers, {"levels_lowered": float(lowered), "library": 0.0})


def _library(workload: Workload, config: AcceleratorConfig,
             parameters: CostParameters, pricing: str) -> LayerMetrics:
    """The library's mapping, for a layer no tensorize choice runs without padding (a GEMV on
    a GEMM array): the software search's evaluator falls back to it the same way."""
    mapping = library_mapping(workload, config)
    numbers = PRICINGS[pricing](workload, mapping, config, parameters)
    return _metrics(mapping, numbers, {"levels_lowered": 0.0, "library": 1.0})


def _metrics(mapping: Mapping, numbers: dict, extra: dict[str, float]) -> LayerMetrics:
    return LayerMetrics(
        cycles=int(numbers["cycles"]),
        energy_pj=float(numbers["energy_pj"]),
        mapping=mapping.to_dict(),
        # the program's events too: without them a hardware model with per-event energies
        # falls back to the batch model's 45 nm energy (`evaluate.layer_energy_pj`)
        details={k: float(numbers[k]) for k in (*DETAILS, *EVENTS) if k in numbers} | extra,
    )


def _model_digest() -> str:
    """The source of the code that prices a mapping: a stored trial resumes only under it."""
    names = ("joint_mapping", "sw_evaluator_batch", "cost_model", "cost_parameters",
             "cost_batch", "cost_mapping", "cost_holds", "cost_space", "cost_rows",
             "cost_micro_loop", "cost_tile_step", "cost_overlap", "cost_boundary", "cost_split",
             "cost_timeline", "cost_geometry", "cost_transfers", "sw_space")
    # as `sw_evaluator_batch`'s digest: the code generator's transfers and the defaults too
    return source_digest(*(f"tensorforge.dse.{name}" for name in names),
                         *package_modules("tensorforge.compiler"), "tensorforge.isa",
                         "tensorforge.config")
