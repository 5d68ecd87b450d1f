"""ShiBO: the feasibility model learns an unknown infeasible region, known constraints are
never violated by an ask, the EDP search closes in on a known optimum, the inner mapping BO
beats random search, seeds reproduce, and a killed sweep resumes with the same trials."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pytest
from dse_evaluators import BudgetedEvaluator, Killed
from inner_loop_sweeps import small_sweep

from tensorforge.compiler.workload import parse_workload
from tensorforge.config import AcceleratorConfig
from tensorforge.dse.codesign import SweepSpec, run_sweep
from tensorforge.dse.evaluate_first_order import FirstOrderEvaluator
from tensorforge.dse.gp_lcb import FeasibilityModel
from tensorforge.dse.optimizers import make_optimizer
from tensorforge.dse.problem import Constraint, Problem
from tensorforge.dse.space import IntegerRange, Space
from tensorforge.dse.sw_evaluator import SoftwareSearchEvaluator
from tensorforge.dse.sw_schedule import SoftwareEffort
from tensorforge.dse.sw_search import SEARCHES, enumerate_space
from tensorforge.dse.sw_space import SoftwareSpace
from tensorforge.dse.sweep_store import SweepStore
from tensorforge.errors import ConfigError

SPARSE_WARNING = pytest.mark.filterwarnings("ignore:Sparse invariant checks:UserWarning")
pytestmark = SPARSE_WARNING


def _blocked(points) -> np.ndarray:
    """The unknown constraint of the synthetic problem: designs with a < 6 have no mapping."""
    return np.array([p["a"] < 6 for p in points])


def _metrics(points) -> tuple[np.ndarray, np.ndarray]:
    """latency, power, area of a smooth problem whose EDP optimum is a = 11, b = 4."""
    a = np.array([p["a"] for p in points], dtype=float)
    b = np.array([p["b"] for p in points], dtype=float)
    latency = 1.0 + ((a - 11) ** 2 + (b - 4) ** 2) / 20.0
    power = 1.0 + 0.02 * a
    objectives = np.stack([latency, power, 1.0 + 0.1 * b], axis=1)
    blocked = np.where(_blocked(points), 1.0, -1.0)
    return objectives, blocked[:, None]


def _edp(points) -> np.ndarray:
    objectives, _ = _metrics(points)
    return objectives[:, 1] * objectives[:, 0] ** 2


def _problem(screen=None) -> Problem:
    space = Space([IntegerRange("a", 0, 15), IntegerRange("b", 0, 15)])
    return Problem(space, ("latency_ms", "power_w", "area_mm2"), (30.0, 2.0, 3.0),
                   (Constraint("blocked", 0.0),), screen)


def _drive(optimizer, trials: int, batch: int = 1) -> list[dict]:
    asked = []
    while len(optimizer.history) < trials:
        points = optimizer.ask(batch)
        asked += points
        optimizer.tell(points, *_metrics(points))
    return asked


def test_feasibility_model_separates_a_region_it_was_shown() -> None:
    rng = np.random.default_rng(0)
    grid = np.array([[a, b] for a in range(16) for b in range(16)]) / 15.0
    train = rng.choice(len(grid), size=40, replace=False)
    infeasible = grid[:, 0] < 6 / 15
    model = FeasibilityModel(seed=0).fit(grid[train], ~infeasible[train])
    held_out = np.setdiff1d(np.arange(len(grid)), train)
    predicted = model.probability(grid[held_out]) > 0.5
    assert (predicted == ~infeasible[held_out]).mean() >= 0.9


def test_shibo_learns_the_unknown_infeasible_region_and_finds_the_edp_optimum() -> None:
    optimizer = make_optimizer("shibo", _problem(), seed=1, pool=60)
    asked = _drive(optimizer, trials=16)
    space = optimizer.space
    everything = space.decode(space.all_genomes())
    blocked = _blocked(everything)
    probability = optimizer.feasibility.probability(space.features(space.all_genomes()))
    # the classifier, trained on ShiBO's own trials, tells the regions apart
    assert probability[blocked].mean() < 0.5 < probability[~blocked].mean()
    # after the warm-up, the search stays out of the region it learned is infeasible
    assert _blocked(asked[8:]).sum() <= 1
    # and closes in on the EDP optimum: among the best 2 % of feasible designs
    feasible_edp = np.sort(_edp(everything)[~blocked])
    best = min(_edp([p])[0] for p in asked if not _blocked([p])[0])
    assert best <= feasible_edp[int(0.02 * feasible_edp.size)]


def test_known_constraints_are_never_violated_by_an_ask() -> None:
    def screen(points: list[Mapping]) -> np.ndarray:
        return np.array([p["b"] <= 8 for p in points])

    optimizer = make_optimizer("shibo", _problem(screen), seed=2, pool=40,
                               objective="parego")
    asked = _drive(optimizer, trials=10, batch=2)
    assert all(p["b"] <= 8 for p in asked)


def test_same_seed_same_asks() -> None:
    def asks(seed: int) -> list[dict]:
        return _drive(make_optimizer("shibo", _problem(), seed=seed, pool=30), trials=8)

    first = asks(5)
    assert asks(5) == first
    assert asks(6) != first


def test_edp_objective_needs_latency_and_power() -> None:
    space = Space([IntegerRange("a", 0, 3)])
    with pytest.raises(ConfigError, match="parego"):
        make_optimizer("shibo", Problem(space, ("f",), (1.0,)), seed=0)


def test_inner_mapping_bo_beats_random_search_at_the_same_budget() -> None:
    workload = parse_workload("C[i,j] += A[i,k] * B[k,j]", "i=96,j=80,k=192", name="g")
    config = AcceleratorConfig()
    space = SoftwareSpace.build(workload, config)
    cycles, energy, _ = space.evaluate(enumerate_space(space))
    legal = np.sort((cycles * energy)[np.isfinite(cycles)])

    def rank(search: str, seed: int) -> float:
        result = SEARCHES[search](SoftwareSpace.build(workload, config), 45, seed)
        assert result.evaluations <= 45
        found = result.cycles * result.energy_pj
        if search == "bo":  # its history records each new best EDP, the last being the result
            assert result.history[-1][1] * result.history[-1][2] == pytest.approx(found)
        return np.searchsorted(legal, found) / legal.size

    # the BO's mapping is among the best 1 % of the 1512 candidates; random's, averaged
    # over three seeds, is not as good
    bo = rank("bo", 0)
    assert bo <= 0.01
    assert bo <= np.mean([rank("random", seed) for seed in range(3)])


def _spec(evaluator: BudgetedEvaluator) -> SweepSpec:
    return small_sweep("shibo", evaluator, with_gemv=True, trials=7, seed=4,
                       method_options={"pool": 24, "software_budget": 40})


def test_layers_get_the_mapping_bo_and_a_killed_sweep_resumes(tmp_path) -> None:
    evaluator = BudgetedEvaluator()
    reference = run_sweep(_spec(evaluator), store=SweepStore(tmp_path / "a.sqlite"))
    assert {(search, budget) for _, _, search, budget in evaluator.calls} == {("bo", 40)}
    assert len(evaluator.calls) == 7 * 2

    store = SweepStore(tmp_path / "b.sqlite")
    with pytest.raises(Killed):
        run_sweep(_spec(BudgetedEvaluator(kill_at=12)), store=store)
    resumed_evaluator = BudgetedEvaluator()
    resumed = run_sweep(_spec(resumed_evaluator), store=store)
    assert [t.point for t in resumed.trials] == [t.point for t in reference.trials]
    assert [t.objectives for t in resumed.trials] == [t.objectives for t in reference.trials]
    assert resumed.replayed == 5 and len(resumed_evaluator.calls) == 2 * 2


def test_a_software_effort_retunes_the_search_evaluator_and_leaves_others_alone() -> None:
    searched = SoftwareSearchEvaluator(budget=200)
    tuned = SoftwareEffort("bo", 40).apply(searched)
    assert (tuned.method, tuned.budget, tuned.memory) == ("bo", 40, searched.memory)
    assert tuned.version != searched.version  # the effort is part of the layer's identity
    assert SoftwareEffort().apply(searched) is searched
    roofline = FirstOrderEvaluator()
    assert SoftwareEffort("bo", 40).apply(roofline) == roofline
