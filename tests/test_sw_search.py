"""HASCO's software search against its baselines under the cost model (fixed seeds)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch

from tensorforge.compiler.codegen import generate
from tensorforge.compiler.mapping import check_mapping
from tensorforge.compiler.workload import parse_workload
from tensorforge.config import AcceleratorConfig
from tensorforge.dse.evaluate import LayerEvaluator
from tensorforge.dse.sw_evaluator import SoftwareSearchEvaluator
from tensorforge.dse.sw_search import (
    exhaustive_search,
    hasco_search,
    library,
    random_search,
    space_size,
)
from tensorforge.dse.sw_space import N_ACTIONS, SoftwareSpace

torch.set_num_threads(1)

CONV = "C[k,x,y] += A[c,x+r,y+s] * B[k,c,r,s]"
GEMM_CORE = AcceleratorConfig.from_dict({
    "array": {"rows": 16, "cols": 16},
    "scratchpad": {"capacity": 64 * 1024, "banks": 4, "accumulator": 16 * 1024},
    "dma": {"bus_bits": 128}})
# ResNet-50 layers with spatial size and channels reduced so a test runs in seconds
REDUCED_RESNET = ["k=64,c=64,x=14,y=14,r=3,s=3", "k=128,c=32,x=28,y=28,r=1,s=1",
                  "k=64,c=128,x=7,y=7,r=3,s=3"]


@pytest.mark.parametrize("sizes", REDUCED_RESNET)
def test_hasco_beats_library_and_random(sizes):
    workload = parse_workload(CONV, sizes)
    lib = library(workload, GEMM_CORE)
    for seed in (0, 1):
        hasco = hasco_search(SoftwareSpace.build(workload, GEMM_CORE), 300, seed)
        rand = random_search(SoftwareSpace.build(workload, GEMM_CORE), 300, seed)
        assert hasco.found and hasco.evaluations <= 300
        assert hasco.cycles < lib.cycles
        assert hasco.cycles <= rand.cycles * 1.02  # never meaningfully worse than random


def test_exhaustive_optimum_and_gap():
    """A small GEMM with every block multiple as a tile: the search reaches the optimum of the
    whole space (or is within 10%, and the gap is printed)."""
    config = AcceleratorConfig.from_dict({
        "array": {"rows": 8, "cols": 8},
        "scratchpad": {"capacity": 4096, "banks": 2, "accumulator": 4096}})
    workload = parse_workload("C[i,j] += A[i,k] * B[k,j]", "i=64,j=48,k=40")
    space = SoftwareSpace.build(workload, config, grid="all")
    assert space_size(space) < 5000
    best = exhaustive_search(space)
    assert best.evaluations == space_size(space)
    found = [hasco_search(SoftwareSpace.build(workload, config, grid="all"), 150, seed)
             for seed in range(3)]
    gaps = [f.cycles / best.cycles - 1 for f in found]
    print("gap to the exhaustive optimum per seed:", gaps)
    assert min(gaps) == 0
    assert max(gaps) < 0.10
    assert all(f.cycles >= best.cycles for f in found)
    rand = random_search(SoftwareSpace.build(workload, config, grid="all"), 150, 0)
    assert rand.cycles >= best.cycles


def test_dqn_search_is_deterministic_under_a_seed():
    workload = parse_workload(CONV, REDUCED_RESNET[0])
    runs = [hasco_search(SoftwareSpace.build(workload, GEMM_CORE), 200, seed)
            for seed in (11, 11, 12)]
    assert runs[0].history == runs[1].history
    assert runs[0].mapping == runs[1].mapping
    assert runs[0].history != runs[2].history or runs[0].mapping != runs[2].mapping


def test_revisions_change_one_thing():
    workload = parse_workload(CONV, REDUCED_RESNET[2])
    space = SoftwareSpace.build(workload, GEMM_CORE)
    rng = np.random.default_rng(0)
    batch = space.random(64, rng)
    valid = space.valid_actions(batch)
    assert valid.shape == (64, N_ACTIONS)
    rows, actions = np.nonzero(valid)
    revised = space.revise(batch.take(rows), actions, rng)
    changed = (revised.levels != batch.levels[rows]).sum(axis=1)
    swapped = (revised.order != batch.order[rows]).sum(axis=1)
    switched = revised.space != batch.space[rows]
    assert np.all(switched | (changed + swapped > 0))
    assert np.all(switched | (changed <= 1) & ((swapped == 0) | (swapped == 2)))


def test_found_mapping_compiles():
    """The search's mapping is a legal `Mapping` the code generator accepts."""
    workload = parse_workload(CONV, "k=32,c=16,x=6,y=6,r=3,s=3")
    config = AcceleratorConfig.from_dict({
        "array": {"rows": 8, "cols": 8},
        "scratchpad": {"capacity": 16 * 1024, "banks": 4, "accumulator": 8 * 1024}})
    result = hasco_search(SoftwareSpace.build(workload, config), 150, 0)
    check_mapping(workload, result.mapping, config)
    assert len(generate(workload, result.mapping, config).instructions) > 3


def test_evaluator_protocol_and_pickle():
    evaluator = pickle.loads(pickle.dumps(SoftwareSearchEvaluator(budget=120)))
    assert isinstance(evaluator, LayerEvaluator)
    assert "120" in evaluator.version
    workload = parse_workload(CONV, REDUCED_RESNET[2])
    first = evaluator(workload, GEMM_CORE, 3)
    again = evaluator(workload, GEMM_CORE, 3)
    assert first == again
    assert first.cycles > 0 and first.energy_pj > 0
    assert set(first.mapping) == {"choice", "tiles", "order", "groups"}
