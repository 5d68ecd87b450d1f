"""The batch-priced layer evaluator (``--evaluator hasco-batch``) and Poros pricing its own
mappings the same way, against the program-priced path's own batch figures."""

from __future__ import annotations

import pytest

from tensorforge.compiler.mappers import library_mapping
from tensorforge.compiler.mapping import Mapping
from tensorforge.compiler.workload import parse_workload
from tensorforge.config import AcceleratorConfig, ArrayConfig
from tensorforge.dse.codesign import make_evaluator
from tensorforge.dse.cost_model import evaluate_mapping, rtl_parameters
from tensorforge.dse.energy import EVENTS
from tensorforge.dse.evaluate import missing_events
from tensorforge.dse.joint_mapping import LAYER_ACTIONS, PlannedMappingEvaluator, layer_key
from tensorforge.dse.opt_poros import PlannedEffort
from tensorforge.dse.sw_evaluator import SoftwareSearchEvaluator
from tensorforge.dse.sw_evaluator_batch import BatchPricedSearchEvaluator, batch_price
from tensorforge.memory import DEFAULT_MEMORY

GEMM = parse_workload("C[i,j] += A[i,k] * B[k,j]", "i=64,j=48,k=96", name="gemm")
CONFIG = AcceleratorConfig(array=ArrayConfig(rows=4, cols=4))
PARAMETERS = rtl_parameters(DEFAULT_MEMORY, CONFIG)


def _mapping(metrics, workload=GEMM) -> Mapping:
    return Mapping.from_dict(metrics.mapping, workload)


def test_batch_price_is_the_program_paths_batch_estimate() -> None:
    mapping = library_mapping(GEMM, CONFIG)
    program = evaluate_mapping(GEMM, mapping, CONFIG, PARAMETERS)
    batch = batch_price(GEMM, mapping, CONFIG, PARAMETERS)
    assert batch["cycles"] == program["batch_cycles"]
    assert batch["energy_pj"] == pytest.approx(program["energy_pj"])
    assert missing_events(batch) == list(EVENTS)  # no program, no event counts


def test_the_evaluator_keeps_the_fastest_of_its_candidates_by_the_batch_model() -> None:
    evaluator = BatchPricedSearchEvaluator(budget=32)
    metrics = evaluator(GEMM, CONFIG, seed=3)
    chosen = batch_price(GEMM, _mapping(metrics), CONFIG, PARAMETERS)
    library = batch_price(GEMM, library_mapping(GEMM, CONFIG), CONFIG, PARAMETERS)
    assert metrics.cycles == int(chosen["cycles"]) <= library["cycles"]
    assert metrics.search_history  # UNICO's MSH and robustness read it
    assert metrics == evaluator(GEMM, CONFIG, seed=3)  # seeded: reproducible
    assert make_evaluator("hasco-batch").version.startswith("sw-search-batch-1:hasco:200:")


def test_poros_prices_its_mappings_as_the_sweeps_evaluator_does() -> None:
    plan = ((layer_key(GEMM), (0,) * len(LAYER_ACTIONS)),)
    batch = PlannedEffort(plan=plan).apply(BatchPricedSearchEvaluator(budget=16))
    program = PlannedEffort(plan=plan).apply(SoftwareSearchEvaluator(budget=16))
    assert (batch.pricing, program.pricing) == ("batch", "program")
    assert batch.version != program.version
    by_batch, by_program = batch(GEMM, CONFIG, seed=0), program(GEMM, CONFIG, seed=0)
    assert by_batch.mapping == by_program.mapping
    reference = evaluate_mapping(GEMM, _mapping(by_program), CONFIG, PARAMETERS)
    assert by_batch.cycles == int(reference["batch_cycles"])
    assert by_program.cycles == int(reference["cycles"])
    # the program's events are kept, so the IHP model prices Poros's energy as it prices
    # the software search's (they were dropped, leaving the 45 nm batch energy)
    assert missing_events(by_program.details) == []
    assert all(by_program.details[e] == pytest.approx(reference[e]) for e in EVENTS)


def test_an_unknown_pricing_is_refused() -> None:
    with pytest.raises(ValueError, match="pricing must be one of"):
        PlannedMappingEvaluator((), pricing="exact")
