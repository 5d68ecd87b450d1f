"""``--evaluator hasco-batch``: HASCO's software search with every candidate priced by the batch
model alone, for experiments that must afford hundreds of hardware trials.

`SoftwareSearchEvaluator` prices its finalists (and the library's mapping) again by the
program's own timeline: it generates each program and walks it instruction by instruction,
4 s for a ResNet-50 3x3 layer on the default 8x8 array and up to 2 min for a BERT projection
on a 8x8 DOT array (2 busy cores), against milliseconds for the search itself. Here the same
search runs and the same candidates are compared, but each is priced by the batch model with
the code generator's exact transfer counts (`cost_model.evaluate(..., exact=True)`), the
figure the timeline starts from (``batch_cycles`` in `cost_model.evaluate_mapping`). What that
leaves out is the timeline's cycles (a few percent apart, see docs/fidelity.md). The program's
event counts, which the hardware model's per-event energies price (`evaluate.layer_energy_pj`),
come from the batch model's own counts (`cost_batch.batch_events`), within 1% of the program's
dynamic energy (`tests/test_sw_evaluator_batch.py`); ``energy_pj`` stays the batch model's
45 nm figure, used only by a hardware model without per-event energies.

A method that prices mappings it chose itself (Poros's `joint_mapping.PlannedMappingEvaluator`)
reads `pricing` to price them the same way, so methods compared under this evaluator compare.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from tensorforge.compiler.mappers import library_mapping
from tensorforge.compiler.workload import Workload
from tensorforge.config import AcceleratorConfig
from tensorforge.dse.cost_mapping import mapping_arrays
from tensorforge.dse.cost_model import CostParameters, evaluate, rtl_parameters
from tensorforge.dse.cost_space import build_space
from tensorforge.dse.energy import EVENTS
from tensorforge.dse.evaluate import LayerMetrics
from tensorforge.dse.sw_search import SEARCHES
from tensorforge.dse.sw_space import SoftwareSpace
from tensorforge.errors import MappingError
from tensorforge.hashing import package_modules, source_digest
from tensorforge.memory import DEFAULT_MEMORY, MemorySystem

#: Cost-model evaluations per layer of `hasco_batch_evaluator` (the co-design loop's budget).
BUDGET = 200

#: Figures of the batch row kept in a layer's details.
DETAILS = ("compute_cycles", "load_cycles", "store_cycles", "host_cycles", "dram_read_bytes",
           "dram_write_bytes", "utilization")


def batch_price(workload: Workload, mapping, config: AcceleratorConfig,
                parameters: CostParameters) -> dict[str, float]:
    """The batch model's row for one `compiler.mapping.Mapping`, exact transfer counts and no
    program; MappingError where the model finds the mapping illegal."""
    space = build_space(workload, mapping.choice, config, mapping.groups)
    tiles, order = mapping_arrays(space, mapping.tile_sizes, mapping.order)
    batch = evaluate(space, tiles, order, parameters, exact=True, holds=mapping.holds)
    row = batch.row(0) | {name: float(batch.extra[name][0]) for name in EVENTS}
    if not row["legal"]:
        raise MappingError(f"the batch model finds mapping {mapping.choice} of "
                           f"{workload.text} illegal on {config.describe()}")
    return row


@dataclass(frozen=True)
class BatchPricedSearchEvaluator:
    """``(workload, config, seed) -> LayerMetrics``: `SoftwareSearchEvaluator`'s search
    (``method``, ``budget`` evaluations) and candidates (its finalists and the library's
    mapping), the fastest by `batch_price` kept."""

    method: str = "hasco"
    budget: int = BUDGET
    grid: str = "pow2"
    memory: MemorySystem = DEFAULT_MEMORY
    version: str = ""
    #: How mappings are priced; a method that prices its own mappings follows it.
    pricing: ClassVar[str] = "batch"

    def __post_init__(self) -> None:
        if self.method not in SEARCHES:
            raise ValueError(
                f"unknown software search {self.method!r}; known: {', '.join(SEARCHES)}"
            )
        object.__setattr__(self, "version", f"sw-search-batch-1:{self.method}:{self.budget}:"
                                            f"{self.grid}+library:{self.memory.describe()}:"
                                            f"{_model_digest()}")

    def __call__(self, workload: Workload, config: AcceleratorConfig, seed: int) -> LayerMetrics:
        import torch

        torch.set_num_threads(1)
        parameters = rtl_parameters(self.memory, config)
        space = SoftwareSpace.build(workload, config, grid=self.grid, parameters=parameters)
        result = SEARCHES[self.method](space, self.budget, seed)
        candidates = [(m, False) for m in (result.finalists or
                                           ((result.mapping,) if result.found else ()))]
        try:
            candidates.append((library_mapping(workload, config), True))
        except MappingError:
            pass
        best = None
        for mapping, library in candidates:
            try:
                row = batch_price(workload, mapping, config, parameters)
            except MappingError:
                continue
            if best is None or row["cycles"] < best[1]["cycles"]:
                best = (mapping, row, library)
        if best is None:
            raise MappingError(f"no legal mapping of {workload.text} found on "
                               f"{config.describe()} in {self.budget} evaluations, and the "
                               "library has none")
        mapping, row, library = best
        return LayerMetrics(
            cycles=int(row["cycles"]),
            energy_pj=float(row["energy_pj"]),
            mapping=mapping.to_dict(),
            details={k: float(row[k]) for k in (*DETAILS, *EVENTS)}
            | {"evaluations": float(result.evaluations + len(candidates)),
               "library": float(library)},
            search_history=[[float(e), float(c), float(j)] for e, c, j in result.history],
        )


def hasco_batch_evaluator() -> BatchPricedSearchEvaluator:
    """The registry's ``hasco-batch``: HASCO's search, `BUDGET` evaluations, batch-priced."""
    return BatchPricedSearchEvaluator(method="hasco", budget=BUDGET)


def _model_digest() -> str:
    names = ("sw_evaluator_batch", "cost_model", "cost_parameters", "cost_batch",
             "cost_mapping", "cost_holds", "cost_space", "cost_rows", "cost_micro_loop",
             "cost_tile_step", "cost_overlap", "cost_boundary", "cost_split", "cost_timeline",
             "cost_geometry", "cost_transfers", "sw_space", "sw_search", "sw_dqn",
             "sw_search_bo", "gp_lcb")
    # the transfer counts come from the code generator; a stored configuration leaves its
    # defaults out, so a new default (new hardware) must change the digest too
    return source_digest(*(f"tensorforge.dse.{name}" for name in names),
                         *package_modules("tensorforge.compiler"), "tensorforge.isa",
                         "tensorforge.config")
