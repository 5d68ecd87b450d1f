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
from tensorforge.dse.sw_space import MAX_DIMS, N_ACTIONS, SWITCH, TRADE, SoftwareSpace

torch.set_num_threads(1)

CONV = "C[k,x,y] += A[c,x+r,y+s] * B[k,c,r,s]"
GEMM_CORE = AcceleratorConfig.from_dict({
    "array": {"rows": 16, "cols": 16},
    "scratchpad": {"capacity": 64 * 1024, "banks": 4, "accumulator": 16 * 1024},
    "dma": {"bus_bits": 128}})
# ResNet-50 layers with spatial size and channels reduced so a test runs in seconds
REDUCED_RESNET = ["k=64,c=64,x=14,y=14,r=3,s=3", "k=128,c=32,x=28,y=28,r=1,s=1",
                  "k=64,c=128,x=7,y=7,r=3,s=3", "k=32,c=64,x=28,y=28,r=3,s=3"]


def _searches(workload, config, budget, seeds):
    """(HASCO cycles, random cycles) per seed, each search in a fresh space."""
    hasco = [hasco_search(SoftwareSpace.build(workload, config), budget, s) for s in seeds]
    rand = [random_search(SoftwareSpace.build(workload, config), budget, s) for s in seeds]
    assert all(h.found and h.evaluations <= budget for h in hasco)
    assert all(r.evaluations <= budget for r in rand)
    return np.array([h.cycles for h in hasco]), np.array([r.cycles for r in rand])


@pytest.mark.parametrize("sizes", REDUCED_RESNET)
def test_hasco_beats_library_and_random(sizes):
    """At one budget, on every seed, HASCO's search is never worse than random search by more
    than 3% and strictly better on average over the seeds; both stay above the exhaustive
    optimum, and HASCO's mean gap to it is under 3%."""
    workload = parse_workload(CONV, sizes)
    hasco, rand = _searches(workload, GEMM_CORE, 300, (0, 1, 2))
    optimum = exhaustive_search(SoftwareSpace.build(workload, GEMM_CORE)).cycles
    print(f"{sizes}: optimum {optimum:.0f}, HASCO {hasco}, random {rand}")
    assert np.all(hasco >= optimum) and np.all(rand >= optimum)
    assert np.all(hasco < library(workload, GEMM_CORE).cycles)
    assert np.all(hasco <= rand * 1.03)
    assert hasco.mean() < rand.mean()
    assert hasco.mean() / optimum - 1 < 0.03


@pytest.mark.slow
@pytest.mark.parametrize("name", ["conv3_1c", "conv3_downsample", "conv4_1b", "conv5_1b"])
def test_hasco_beats_random_on_resnet50(name):
    """The full-size layers of the ResNet-50 experiment (budget 500, 16x16 core, 256 KiB):
    better than random search on average over four seeds, and never worse by more than 3%."""
    from tensorforge.compiler.zoo import load_model

    config = AcceleratorConfig.from_dict({
        "array": {"rows": 16, "cols": 16},
        "scratchpad": {"capacity": 256 * 1024, "banks": 4, "accumulator": 64 * 1024},
        "dma": {"bus_bits": 128, "max_burst": 16}})
    workload = load_model("resnet50").layer(name).workload
    hasco, rand = _searches(workload, config, 500, (0, 1, 2, 3))
    print(f"{name}: HASCO {hasco}, random {rand}")
    assert np.all(hasco <= rand * 1.03)
    assert hasco.mean() < rand.mean()


def test_exhaustive_optimum_and_gap():
    """A small GEMM with every block multiple as a tile (960 candidates, budget 150): the search
    comes within 1% of the optimum of the whole space on at least one of three seeds and
    within 10% on all (measured: 0.5%, 2.5%, 0.5%; the gaps are printed). The optimum
    (i=64, j=8, k=40: 6 tile steps, one A tile) lies past tiles one-level revisions cannot
    cross: i=48 and 56 do not fit the scratchpad double-buffered; the best of the other
    tensorize choice (i=8, j=48, the operands' roles swapped: 8 tile steps) is 0.5% slower
    and is what two seeds find. On a space this small random search does as well: this test
    checks the search against the optimum, not against it."""
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
    assert min(gaps) < 0.01
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


def _revision_kinds(actions: np.ndarray) -> dict[str, np.ndarray]:
    return {"up": actions < MAX_DIMS,
            "down": (actions >= MAX_DIMS) & (actions < 2 * MAX_DIMS),
            "swap": (actions >= 2 * MAX_DIMS) & (actions < SWITCH),
            "switch": actions == SWITCH, "trade": actions >= TRADE}


def test_revisions_change_what_they_say():
    """Each revision moves exactly the factors its action names (a trade: one tile up, one
    down); a swap exchanges two adjacent loops; the result stays canonical."""
    workload = parse_workload(CONV, REDUCED_RESNET[2])
    space = SoftwareSpace.build(workload, GEMM_CORE)
    rng = np.random.default_rng(0)
    batch = space.random(64, rng)
    valid = space.valid_actions(batch)
    assert valid.shape == (64, N_ACTIONS)
    rows, actions = np.nonzero(valid)
    before = batch.take(rows)
    revised = space.revise(before, actions, rng)
    assert revised.keys() == space.canonical(revised).keys()
    assert all(a != b for a, b in zip(revised.keys(), before.keys(), strict=True))  # all new
    kinds = _revision_kinds(actions)
    step = revised.levels - before.levels
    expected = np.zeros_like(step)
    for kind, sign, offset in (("up", 1, 0), ("down", -1, MAX_DIMS)):
        picked = np.flatnonzero(kinds[kind])
        expected[picked, actions[picked] - offset] = sign
    picked = np.flatnonzero(kinds["trade"])
    grow, shrink = np.divmod(actions[picked] - TRADE, MAX_DIMS)
    expected[picked, grow], expected[picked, shrink] = 1, -1
    moved = ~kinds["switch"]
    assert np.array_equal(step[moved], expected[moved])
    picked = np.flatnonzero(kinds["swap"])
    j = actions[picked] - 2 * MAX_DIMS
    swapped = before.order[picked].copy()
    swapped[np.arange(len(j)), j] = before.order[picked, j + 1]
    swapped[np.arange(len(j)), j + 1] = before.order[picked, j]
    assert np.array_equal(revised.order[picked], swapped)
    assert kinds["trade"].any() and kinds["swap"].any() and kinds["switch"].any()


def test_canonical_order_keeps_the_cost():
    """Moving single-trip loops innermost changes no candidate's cost (the cost model only
    sees the order of loops that run more than once), and merges candidates that differ only
    there."""
    workload = parse_workload(CONV, REDUCED_RESNET[0])
    space = SoftwareSpace.build(workload, GEMM_CORE)
    rng = np.random.default_rng(5)
    batch = space.random(400, rng)
    batch.order[:] = -1
    for row, s in enumerate(batch.space):
        batch.order[row, : space.spaces[s].dims] = rng.permutation(space.spaces[s].dims)
    batch.order[:] = [_output_first(space, s, o)
                      for s, o in zip(batch.space, batch.order, strict=True)]
    canonical = space.canonical(batch)
    assert np.array_equal(space.evaluate(batch)[0], space.evaluate(canonical)[0])
    assert len(set(canonical.keys())) < len(set(batch.keys()))


def _output_first(space, s, order):
    outputs = space.outputs[s]
    kept = [i for i in order if i >= 0]
    return ([i for i in kept if outputs[i]] + [i for i in kept if not outputs[i]]
            + [-1] * (MAX_DIMS - len(kept)))


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


def test_searches_stop_when_the_space_is_used_up():
    """A budget larger than the space: both searches end (nothing is evaluated twice), and
    having seen (nearly) everything, HASCO's search holds the exhaustive optimum."""
    workload = parse_workload("C[i,j] += A[i,k] * B[k,j]", "i=1,j=64,k=256")
    space = SoftwareSpace.build(workload, GEMM_CORE)
    best = exhaustive_search(SoftwareSpace.build(workload, GEMM_CORE))
    assert space_size(space) < 1000
    hasco = hasco_search(space, 1000, 0)
    rand = random_search(SoftwareSpace.build(workload, GEMM_CORE), 1000, 0)
    assert hasco.evaluations <= space_size(space) and rand.evaluations <= space_size(space)
    assert hasco.cycles == best.cycles


def test_finalists_are_the_best_distinct_candidates_and_the_timeline_picks_among_them():
    """A search hands over its best few distinct candidates by the batch model, its own
    choice first; the evaluator reports the one whose program the timeline prices fastest
    (or the library's mapping, when that is faster still)."""
    from tensorforge.dse.cost_model import evaluate_mapping, rtl_parameters
    from tensorforge.dse.sw_search import FINALISTS
    from tensorforge.memory import DEFAULT_MEMORY

    workload = parse_workload(CONV, "k=32,c=16,x=6,y=6,r=3,s=3")
    config = AcceleratorConfig.from_dict({
        "array": {"rows": 8, "cols": 8},
        "scratchpad": {"capacity": 16 * 1024, "banks": 4, "accumulator": 8 * 1024}})
    space = SoftwareSpace.build(workload, config)
    result = random_search(space, 300, 4)
    assert 1 < len(result.finalists) <= FINALISTS
    assert result.finalists[0] == result.mapping
    batch = [space.evaluate(space.from_mapping(m))[0][0] for m in result.finalists]
    assert batch == sorted(batch) and batch[0] == result.cycles
    assert len({repr(m) for m in result.finalists}) == len(result.finalists)

    evaluator = SoftwareSearchEvaluator(method="random", budget=300)
    reported = evaluator(workload, config, 4)
    parameters = rtl_parameters(DEFAULT_MEMORY, config)
    timeline = [evaluate_mapping(workload, m, config, parameters)["cycles"]
                for m in result.finalists]
    assert reported.cycles <= min(timeline)


def test_candidates_the_batch_model_prices_far_slower_are_not_generated():
    """The evaluator skips the program (and timeline) of a candidate the batch model prices
    more than `PRUNE_RATIO` slower than the best: on a narrow DOT array the library's im2col
    mapping of a 3x3 conv is many times slower, and its timeline agrees that it loses."""
    from tensorforge.compiler.mappers import library_mapping
    from tensorforge.dse.cost_mapping import batch_cycles
    from tensorforge.dse.cost_model import evaluate_mapping, rtl_parameters
    from tensorforge.dse.sw_evaluator import PRUNE_RATIO, within_reach
    from tensorforge.memory import DEFAULT_MEMORY

    workload = parse_workload(CONV, "k=32,c=16,x=14,y=14,r=3,s=3")
    config = AcceleratorConfig.from_dict({
        "intrinsic": "dot", "array": {"rows": 1, "cols": 16, "dataflow": "os"},
        "scratchpad": {"capacity": 64 * 1024, "banks": 1, "accumulator": 16 * 1024}})
    parameters = rtl_parameters(DEFAULT_MEMORY, config)
    searched = random_search(SoftwareSpace.build(workload, config, parameters=parameters),
                             300, 7).mapping
    library = library_mapping(workload, config)
    fast, slow = (batch_cycles(workload, m, config, parameters) for m in (searched, library))
    assert slow > PRUNE_RATIO * fast
    assert within_reach(workload, [searched, library], config, parameters) == [searched]
    assert within_reach(workload, [library], config, parameters) == [library]
    timeline = [evaluate_mapping(workload, m, config, parameters)["cycles"]
                for m in (searched, library)]
    assert timeline[1] > timeline[0]
