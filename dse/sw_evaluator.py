"""`SoftwareSearchEvaluator`: the co-design loop's `LayerEvaluator` that runs HASCO's software
search for each (layer, accelerator) under the analytical cost model.

It returns the best mapping's cycles and dynamic energy, and the mapping itself as JSON (the
`compiler.mapping.Mapping` form, so a report can compile it). The search is seeded by the
loop's per-layer seed, so a trial is reproducible. The evaluator is a frozen dataclass of
plain values: picklable for worker processes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from tensorforge.compiler.mappers import library_mapping
from tensorforge.compiler.workload import Workload
from tensorforge.config import AcceleratorConfig
from tensorforge.dse.cost_mapping import batch_cycles
from tensorforge.dse.cost_model import evaluate_mapping, rtl_parameters
from tensorforge.dse.energy import EVENTS
from tensorforge.dse.evaluate import LayerMetrics
from tensorforge.dse.sw_search import SEARCHES, SearchResult
from tensorforge.dse.sw_space import SoftwareSpace
from tensorforge.errors import MappingError
from tensorforge.hashing import package_modules, source_digest
from tensorforge.memory import DEFAULT_MEMORY, MemorySystem

# the modules whose code decides a layer's result: their source is part of the version
MODEL_MODULES = ("cost_model", "cost_parameters", "cost_batch", "cost_mapping", "cost_holds",
                 "cost_space", "cost_rows", "cost_micro_loop", "cost_tile_step", "cost_overlap",
                 "cost_boundary", "cost_split", "cost_timeline", "cost_geometry", "cost_transfers",
                 "cost_trace", "program_events", "sw_space", "sw_search", "sw_dqn",
                 "sw_search_bo", "gp_lcb")
#: The batch model's largest |cycle error| on the held-out programs (docs/fidelity.md: 41.6%),
#: rounded up. A candidate it prices slower than the best by more than
#: ``(1 + e) / (1 - e)`` (2.45x) cannot be faster on the timeline, so its program is not
#: generated: the library's im2col mapping of a large layer on a narrow DOT or GEMV array is
#: tens of millions of cycles and hundreds of thousands of instructions, and generating it
#: cost a ResNet-50 trial half an hour.
BATCH_MAX_ERROR = 0.42
PRUNE_RATIO = (1 + BATCH_MAX_ERROR) / (1 - BATCH_MAX_ERROR)
DETAILS = (
    "compute_cycles",
    "load_cycles",
    "store_cycles",
    "host_cycles",
    "dram_read_bytes",
    "dram_write_bytes",
    "utilization",
    "instructions",  # the program's, FINISH included (reports show them per layer)
)


@dataclass(frozen=True)
class SoftwareSearchEvaluator:
    """``(workload, config, seed) -> LayerMetrics`` by software search (``method`` in
    `sw_search.SEARCHES`) with ``budget`` cost-model evaluations per layer.

    The library's mapping (`sw_search.library`, im2col + GEMM with fixed tiles) is evaluated
    too and kept when it is faster or the search found nothing legal: it is one point of the
    search space, and on large arrays a search started from random candidates can miss every
    legal mapping within a small budget. ``details["library"]`` says which one was kept.

    Layers are priced on ``memory`` (`tensorforge.memory.MemorySystem`, the realistic
    default unless a sweep names another): its latency, bandwidth and bursts in flight with
    the accelerator's own, as `cost_model.rtl_parameters` describes the RTL on it.
    """

    method: str = "hasco"
    budget: int = 600
    grid: str = "pow2"
    memory: MemorySystem = DEFAULT_MEMORY
    version: str = ""  # set from the settings: they change results, so they are identity
    #: its results are a function of ``version`` and the job (`evaluate.run_layer_job` keeps
    #: them): the version holds every source the result depends on
    cacheable: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if self.method not in SEARCHES:
            raise ValueError(
                f"unknown software search {self.method!r}; known: {', '.join(SEARCHES)}"
            )
        object.__setattr__(
            self, "version",
            f"sw-search-5:{self.method}:{self.budget}:{self.grid}+library:"
            f"{self.memory.describe()}:{_model_digest()}",
        )

    def __call__(self, workload: Workload, config: AcceleratorConfig, seed: int) -> LayerMetrics:
        import torch

        torch.set_num_threads(1)
        parameters = rtl_parameters(self.memory, config)
        space = SoftwareSpace.build(workload, config, grid=self.grid, parameters=parameters)
        result = SEARCHES[self.method](space, self.budget, seed)
        if result.found and space.from_mapping(result.mapping) is None:
            raise MappingError("the search returned a mapping outside its own space")
        # the search ranks by the batch model; its finalists are priced again by the
        # program's own timeline (the model docs/fidelity.md checks), which orders close
        # candidates better, and so is the library's mapping they are compared with
        try:
            fallback = library_mapping(workload, config)
        except MappingError:
            fallback = None
        candidates = [*(result.finalists or ((result.mapping,) if result.found else ())),
                      *((fallback,) if fallback is not None else ())]
        chosen, searched = None, None
        for mapping in within_reach(workload, candidates, config, parameters):
            try:
                numbers = evaluate_mapping(workload, mapping, config, parameters)
            except MappingError:  # a finalist the code generator refuses: the others stand
                continue
            if searched is None or numbers["cycles"] < searched["cycles"]:
                chosen, searched = mapping, numbers
        if searched is not None and chosen is fallback:
            return _metrics(fallback, searched, result, library=True)
        if searched is None:
            raise MappingError(
                f"no legal mapping of {workload.text} found on {config.describe()} in "
                f"{self.budget} evaluations, and the library has none"
            )
        return _metrics(chosen, searched, result, library=False)


def within_reach(workload: Workload, candidates: list, config: AcceleratorConfig,
                 parameters) -> list:
    """The ``candidates`` (mappings) the batch model prices within `PRUNE_RATIO` of the
    fastest of them, in their order: the only ones the timeline could find fastest."""
    priced = [(mapping, batch_cycles(workload, mapping, config, parameters))
              for mapping in candidates]
    best = min((cycles for _, cycles in priced), default=math.inf)
    return [mapping for mapping, cycles in priced if cycles <= best * PRUNE_RATIO]


def _model_digest() -> str:
    """The cost model's, the search's and the compiler's source (a finalist is priced on the
    program the code generator emits), with the ISA and the configuration's defaults (a
    stored configuration leaves its defaults out: a new default is new hardware): a stored
    sweep resumes only under the same."""
    return source_digest(*(f"tensorforge.dse.{name}" for name in MODEL_MODULES),
                         "tensorforge.dse.sw_evaluator", *package_modules("tensorforge.compiler"),
                         "tensorforge.isa", "tensorforge.config")


def _metrics(mapping, numbers: dict, result: SearchResult, *, library: bool) -> LayerMetrics:
    """The layer's figures; the search's convergence is kept even when the library's mapping
    wins, since it describes how the search went on this accelerator."""
    evaluations = result.evaluations + (1 if library else 0)
    return LayerMetrics(
        cycles=int(numbers["cycles"]),
        energy_pj=float(numbers["energy_pj"]),
        mapping=mapping.to_dict(),
        details={k: float(numbers[k]) for k in (*DETAILS, *EVENTS)}
        | {"evaluations": float(evaluations), "library": float(library)},
        search_history=[[float(e), float(c), float(j)] for e, c, j in result.history],
    )
