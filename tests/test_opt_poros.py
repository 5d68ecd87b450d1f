"""Poros: prime-factor tilings divide their loops, a planned mapping is priced as the cost
model prices that mapping, the policy learns on a synthetic problem with a known optimum,
the same seed asks the same configurations, and a Poros sweep stores, replays and resumes."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tensorforge.compiler.mapping import Mapping
from tensorforge.compiler.workload import parse_workload
from tensorforge.config import AcceleratorConfig, ArrayConfig, ScratchpadConfig
from tensorforge.dse.codesign import SweepSpec, merge_layers, run_sweep
from tensorforge.dse.cost_model import evaluate_mapping, rtl_parameters
from tensorforge.dse.evaluate import FirstOrderAreaPower
from tensorforge.dse.hwspace import HardwareSpace
from tensorforge.dse.joint_mapping import (
    LAYER_ACTIONS,
    POINT_KEY,
    TILE_LEVELS,
    PlannedMappingEvaluator,
    decode,
    layer_key,
    prime_factors,
    prime_tiling,
    tiles_at,
)
from tensorforge.dse.optimizers import make_optimizer
from tensorforge.dse.problem import Problem
from tensorforge.dse.scenarios import Scenario
from tensorforge.dse.space import IntegerRange, Space
from tensorforge.dse.sw_space import SoftwareSpace
from tensorforge.dse.sweep_store import OK, SweepStore
from tensorforge.errors import MappingError
from tensorforge.memory import DEFAULT_MEMORY
from tensorforge.units import Bytes

GEMM = parse_workload("C[i,j] += A[i,k] * B[k,j]", "i=48,j=40,k=72", name="gemm")
BIG = parse_workload("C[i,j] += A[i,k] * B[k,j]", "i=256,j=256,k=512", name="big")


def _is_prime(n: int) -> bool:
    return n > 1 and all(n % d for d in range(2, math.isqrt(n) + 1))


@pytest.mark.parametrize("blocks", [1, 2, 7, 12, 36, 97, 128, 210, 360, 1001])
def test_prime_factor_tilings_multiply_back_to_the_loop(blocks: int) -> None:
    factors = prime_factors(blocks)
    assert math.prod(factors) == blocks and all(_is_prime(p) for p in factors)
    tiles = []
    for level in range(TILE_LEVELS):
        tile, trips = prime_tiling(blocks, level)
        assert tile * trips == blocks
        tiles.append(tile)
    assert tiles[0] == 1 and tiles[-1] == blocks
    assert tiles == sorted(tiles)  # a higher level never keeps fewer primes


def test_tiles_of_a_layer_divide_its_blocks_on_every_index() -> None:
    config = AcceleratorConfig(array=ArrayConfig(rows=8, cols=8))
    space = SoftwareSpace.build(GEMM, config).spaces[0]
    blocks = -(-space.sizes // space.block)
    rng = np.random.default_rng(3)
    levels = rng.integers(0, TILE_LEVELS, size=(20, space.dims))
    for tiles in tiles_at(space, levels):
        tile_blocks = -(-tiles // space.block)
        assert np.all(blocks % tile_blocks == 0)


def test_a_planned_mapping_is_priced_as_the_cost_model_prices_it() -> None:
    config = AcceleratorConfig(array=ArrayConfig(rows=8, cols=8),
                               scratchpad=ScratchpadConfig(capacity=Bytes.kib(16)))
    actions = (1, *[TILE_LEVELS - 1] * 8)  # whole loops in one tile: too big for 16 KiB
    evaluator = PlannedMappingEvaluator(((layer_key(BIG), actions),), DEFAULT_MEMORY)
    metrics = evaluator(BIG, config, seed=0)
    assert metrics.details["levels_lowered"] > 0
    chosen, _ = decode(SoftwareSpace.build(BIG, config).spaces, actions)
    reported = metrics.mapping
    assert reported["tiles"]["k"] < 512  # lowered from the whole loop
    mapping = Mapping(chosen.choice, tuple(reported["tiles"].items()), tuple(reported["order"]),
                      chosen.groups)
    reference = evaluate_mapping(BIG, mapping, config, rtl_parameters(DEFAULT_MEMORY, config))
    assert metrics.cycles == int(reference["cycles"])
    assert metrics.energy_pj == pytest.approx(reference["energy_pj"])


def test_a_layer_outside_the_plan_is_an_error() -> None:
    evaluator = PlannedMappingEvaluator(((layer_key(BIG), (0,) * len(LAYER_ACTIONS)),))
    with pytest.raises(MappingError, match="no mapping for layer gemm"):
        evaluator(GEMM, AcceleratorConfig(), seed=0)


# --- the policy on a synthetic problem -------------------------------------------------------

TARGET = (5, 2, 6, 1)
SYNTHETIC = Problem(Space([IntegerRange(f"x{i}", 0, 7) for i in range(4)]), ("cost",), (60.0,))


def _cost(points) -> np.ndarray:
    """10 plus the L1 distance to TARGET: the optimum is 10, at TARGET, one of 4096 points."""
    return np.array([[10.0 + sum(abs(p[f"x{i}"] - t) for i, t in enumerate(TARGET))]
                     for p in points])


def _optimum_hits(method: str, seed: int, trials: int):
    optimizer = make_optimizer(method, SYNTHETIC, seed=seed)
    hits = 0
    while len(optimizer.history) < trials:
        points = optimizer.ask(32)
        costs = _cost(points)
        hits += int((costs == 10.0).sum())
        optimizer.tell(points, costs)
    return hits, optimizer


def test_the_policy_learns_and_samples_the_optimum_more_often_than_random() -> None:
    poros_hits, poros = _optimum_hits("poros", seed=1, trials=640)
    random_hits, _ = _optimum_hits("random", seed=1, trials=640)
    rewards = poros.batch_rewards
    assert len(rewards) == 20
    assert np.mean(rewards[-3:]) > np.mean(rewards[:3]) + 0.2  # the expected reward rises
    assert poros_hits > max(5, random_hits)


def test_the_same_seed_asks_the_same_configurations() -> None:
    def asks(seed: int) -> list[list[dict]]:
        optimizer = make_optimizer("poros", SYNTHETIC, seed=seed, batch=8)
        rounds = []
        for _ in range(3):
            points = optimizer.ask(8)
            optimizer.tell(points, _cost(points))
            rounds.append(points)
        return rounds

    assert asks(4) == asks(4)
    assert asks(4) != asks(5)


def test_tells_must_follow_the_asks() -> None:
    optimizer = make_optimizer("poros", SYNTHETIC, seed=0, batch=4)
    points = optimizer.ask(2)
    with pytest.raises(ValueError, match="order they were asked"):
        optimizer.tell(points[::-1], _cost(points[::-1]))


# --- a co-design sweep -----------------------------------------------------------------------

LAYERS = merge_layers([
    ("gemm", GEMM, 2),
    ("conv", parse_workload("C[k,x,y] += A[c,x+r,y+s] * B[k,c,r,s]",
                            "k=16,c=8,x=8,y=8,r=3,s=3", name="conv"), 1),
])
SPACE = HardwareSpace({
    "intrinsic": "gemm",
    "rows": {"choices": [4, 8, 16]},
    "cols": {"choices": [4, 8, 16]},
    "dataflow": {"choices": ["ws", "os"]},
    "spad_kib": {"choices": [16, 32, 64]},
})


def _sweep(trials: int) -> SweepSpec:
    return SweepSpec(workload_name="poros", layers=LAYERS, space=SPACE,
                     scenario=Scenario(power_w=0.5), method="poros", trials=trials, seed=2,
                     batch_size=2, method_options={"batch": 4},
                     hardware_model=FirstOrderAreaPower())


def test_a_poros_sweep_prices_its_own_mappings_and_resumes(tmp_path) -> None:
    store = SweepStore(tmp_path / "sweeps.sqlite")
    short = run_sweep(_sweep(4), store=store)
    assert all(len(t.point[POINT_KEY]) == len(LAYERS) for t in short.trials)
    evaluated = [t for t in short.trials if t.status == OK]
    assert evaluated
    for trial in evaluated:
        for layer, actions in zip(trial.layers, trial.point[POINT_KEY], strict=True):
            assert layer["details"]["levels_lowered"] >= 0  # priced by the plan, not a search
            assert layer["details"]["library"] == 0
            assert "evaluations" not in layer["details"]
            assert len(actions) == len(LAYER_ACTIONS)
    again = run_sweep(_sweep(4), store=store)
    assert (again.replayed, again.evaluated) == (4, 0)
    assert [t.point for t in again.trials] == [t.point for t in short.trials]
