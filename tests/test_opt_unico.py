"""UNICO: modified successive halving, AUC, robustness R and the high-fidelity update rule
against hand computations; the schedule driven by the co-design loop; seeds and resume."""

from __future__ import annotations

import math

import numpy as np
import pytest
from dse_evaluators import BudgetedEvaluator, Killed
from inner_loop_sweeps import GEMV, small_sweep

from tensorforge.dse.codesign import SweepSpec, merge_layers, run_sweep
from tensorforge.dse.generalization import generalization_gaps, unseen_workload_test
from tensorforge.dse.opt_unico import UNICOSearch
from tensorforge.dse.optimizers import make_optimizer
from tensorforge.dse.problem import Problem
from tensorforge.dse.robustness import angle_penalty, robustness, robustness_from_points
from tensorforge.dse.space import IntegerRange, Space
from tensorforge.dse.successive_halving import (
    SuccessiveHalving,
    curve_auc,
    msh_select,
    rung_budgets,
)
from tensorforge.dse.sweep_store import SweepStore
from tensorforge.dse.synthetic import toy_accelerator

SPARSE_WARNING = pytest.mark.filterwarnings("ignore:Sparse invariant checks:UserWarning")


# --- modified successive halving ---------------------------------------------------------


def test_msh_keeps_k_minus_p_by_terminal_value_then_p_by_auc() -> None:
    # 8 candidates, k = floor(0.5 * 8) = 4, p = floor(0.15 * 8) = 1 (UNICO section 3.3).
    terminal = np.array([5.0, 1.0, 7.0, 3.0, 2.0, 8.0, 6.0, 4.0])
    auc = np.array([0.1, 0.9, 0.3, 0.8, 0.2, 0.7, 0.05, 0.6])
    # by TV: 1 (1.0), 4 (2.0), 3 (3.0); by AUC among the rest: 5 (0.7) beats 7 (0.6)
    assert msh_select(terminal, auc, keep=4, by_auc=1) == [1, 3, 4, 5]
    # p = 0 is plain successive halving: the best half by terminal value
    assert msh_select(terminal, auc, keep=4, by_auc=0) == [1, 3, 4, 7]


def test_rung_budgets_double_up_to_the_maximum() -> None:
    assert rung_budgets(200, 8) == [50, 100, 200]
    assert rung_budgets(200, 4) == [100, 200]
    assert rung_budgets(200, 1) == [200]
    assert rung_budgets(200, 8, min_budget=80) == [80, 100, 200]


def test_auc_is_the_relative_area_above_the_end_value() -> None:
    # one layer: 10 cycles for evaluations 0-4, then 5 until the budget of 10 ends
    # area above 5 = 5 evaluations x 5 cycles = 25; per evaluation 2.5; relative to 5: 0.5
    assert curve_auc([[[0, 10.0, 1.0], [5, 5.0, 1.0]]], [1], 10) == pytest.approx(0.5)
    # a second layer run twice that was flat at 2: adds 4 to the end value (9), no area
    two = [[[0, 10.0, 1.0], [5, 5.0, 1.0]], [[0, 2.0, 1.0]]]
    assert curve_auc(two, [1, 2], 10) == pytest.approx(2.5 / 9)


def _outcome(cycles: float, history: list[list[float]]) -> list[tuple[str, dict]]:
    return [("ok", {"cycles": cycles, "energy_pj": 1.0, "search_history": history})]


def test_successive_halving_schedule_promotes_what_msh_says() -> None:
    schedule = SuccessiveHalving(200, min_budget=16)
    first = schedule.first(list(range(8)))
    assert {e.budget for e in first.values()} == {50}
    terminal = [5.0, 1.0, 7.0, 3.0, 2.0, 8.0, 6.0, 4.0]
    # trial 5's search was still falling steeply: a large AUC; the others were flat
    outcomes = {
        t: _outcome(v, [[0, 40 * v if t == 5 else v, 1.0], [49, v, 1.0]])
        for t, v in enumerate(terminal)
    }
    second = schedule.next(outcomes, [1])
    assert sorted(second) == [1, 3, 4, 5]
    assert {e.budget for e in second.values()} == {100}
    third = schedule.next({t: outcomes[t] for t in second}, [1])
    assert sorted(third) == [1, 4] and {e.budget for e in third.values()} == {200}
    assert schedule.next({t: outcomes[t] for t in third}, [1]) == {}


def test_a_failed_layer_ranks_last() -> None:
    schedule = SuccessiveHalving(100, min_budget=1)
    schedule.first([0, 1, 2, 3])
    failed = [("error", "no mapping")]
    outcomes = {0: failed, 1: _outcome(9.0, [[0, 9.0, 1.0]]), 2: failed,
                3: _outcome(5.0, [[0, 5.0, 1.0]])}
    assert sorted(schedule.next(outcomes, [1])) == [1, 3]


# --- robustness R ------------------------------------------------------------------------


def test_angle_penalty_matches_eq_2() -> None:
    assert angle_penalty(0.0) == pytest.approx(1.0)
    assert angle_penalty(math.pi / 2) == pytest.approx(0.0)
    assert angle_penalty(math.pi) == pytest.approx(2.0)


def test_robustness_by_hand() -> None:
    optimal = (100.0, 1000.0)  # 10 pJ per cycle
    # 10 % slower at the same power: theta = pi/2, R = Delta = 0.1
    assert robustness_from_points(optimal, (110.0, 1100.0)) == pytest.approx(0.1)
    # same latency, 10 % more power: theta = 0, R = 2 Delta
    assert robustness_from_points(optimal, (100.0, 1100.0)) == pytest.approx(0.2)
    # same latency, 10 % less power (the optimum costs power): theta = pi, R = 3 Delta
    assert robustness_from_points(optimal, (100.0, 900.0)) == pytest.approx(0.3)
    assert robustness_from_points(optimal, optimal) == 0.0


def test_robustness_reads_the_95th_percentile_of_the_loss_history() -> None:
    # best-so-far cycles after evaluations 1..20: 200, then 150 (2-19), then 100 (20).
    # The 95th percentile of those 20 values (inverted CDF) is the 19th smallest: 150,
    # first reached at evaluation 2 with 1500 pJ; the optimum is (100, 1000). Same power
    # (10 pJ/cycle), 50 % slower: R = 0.5.
    layers = [{"count": 1, "search_history": [[1, 200, 2000], [2, 150, 1500], [20, 100, 1000]]}]
    assert robustness(layers) == pytest.approx(0.5)
    assert robustness([{"count": 1, "error": "no mapping"}]) == 0.0
    assert robustness([{"count": 1, "search_history": []}]) == 0.0
    assert robustness([]) == 0.0  # an invalid design has no layers


# --- the high-fidelity update rule -------------------------------------------------------


def _two_objective_problem() -> Problem:
    space = Space([IntegerRange("a", 0, 7), IntegerRange("b", 0, 7)])
    return Problem(space, ("f1", "f2"), reference_point=(1.0, 1.0))


def test_high_fidelity_update_admits_what_the_rule_says() -> None:
    optimizer = UNICOSearch(_two_objective_problem(), seed=0, use_robustness=False)
    points = [{"a": 0, "b": 0}, {"a": 1, "b": 1}]
    # Eq. 1, weights 1/2: v = max(y/2) + 0.2 sum(y/2): 0.26 and 0.42; first batch all in
    optimizer.tell(points, np.array([[0.2, 0.4], [0.6, 0.6]]))
    assert optimizer.high_fidelity.tolist() == [True, True]
    assert optimizer.admitted_distances == pytest.approx([0.0, 0.16])
    # limit = 95th percentile of {0, 0.16} = 0.152; v = 0.07 (new best) and 0.30: d = 0, 0.23
    points = [{"a": 2, "b": 2}, {"a": 3, "b": 3}]
    optimizer.tell(points, np.array([[0.1, 0.1], [0.5, 0.5]]))
    assert optimizer.high_fidelity.tolist() == [True, True, True, False]


# --- the optimizer as a whole ------------------------------------------------------------


@SPARSE_WARNING
def test_same_seed_same_asks_and_it_improves_on_its_first_design() -> None:
    benchmark = toy_accelerator()

    def run(seed: int, trials: int = 12) -> list[list[dict]]:
        optimizer = make_optimizer("unico", benchmark.problem, seed=seed, initial_points=4,
                                   pool=32)
        asked = []
        while len(optimizer.history) < trials:
            points = optimizer.ask(4)
            asked.append(points)
            optimizer.tell(points, *benchmark.evaluate(points))
        run.history = optimizer.history
        return asked

    first = run(3)
    history = run.history
    assert run(3) == first
    assert run(4, trials=8) != first[:2]
    # the model-guided batches add hypervolume to the initial Sobol design's
    assert history.hypervolumes[-1] > history.hypervolumes[3]


# --- driven by the co-design loop -----------------------------------------------------------


def _spec(evaluator: BudgetedEvaluator) -> SweepSpec:
    return small_sweep("unico", evaluator, trials=8, seed=5, batch_size=4,
                       method_options={"initial_points": 4, "pool": 32, "max_budget": 64})


@SPARSE_WARNING
def test_the_loop_runs_the_batch_in_halving_rounds_and_resumes(tmp_path) -> None:
    evaluator = BudgetedEvaluator()
    reference = run_sweep(_spec(evaluator), store=SweepStore(tmp_path / "a.sqlite"))
    budgets = [budget for *_, budget in evaluator.calls]
    # two batches of 4: 4 designs at 32 evaluations, the best 2 again at 64, per batch
    assert budgets == [32] * 4 + [64] * 2 + [32] * 4 + [64] * 2
    final = {t.index: t.layers[0]["search_history"][-1][0] for t in reference.trials}
    assert sorted(final.values()) == [32, 32, 32, 32, 64, 64, 64, 64]

    store = SweepStore(tmp_path / "b.sqlite")
    with pytest.raises(Killed):
        run_sweep(_spec(BudgetedEvaluator(kill_at=9)), store=store)  # inside batch 2
    resumed_evaluator = BudgetedEvaluator()
    resumed = run_sweep(_spec(resumed_evaluator), store=store)
    assert [t.point for t in resumed.trials] == [t.point for t in reference.trials]
    assert [t.objectives for t in resumed.trials] == [t.objectives for t in reference.trials]
    assert resumed.replayed == 4  # batch 1 was stored whole; batch 2 is re-run whole
    assert len(resumed_evaluator.calls) == 6


# --- the unseen-workload test -------------------------------------------------------------


def test_generalization_gap_by_hand() -> None:
    # training latencies 1, 2, 4 (ratios to the best 1, 2, 4); held-out 3, 3, 6 (1, 1, 2):
    # the second and third designs do relatively better on the unseen network
    assert generalization_gaps([1.0, 2.0, 4.0], [3.0, 3.0, 6.0]) == pytest.approx([1, 0.5, 0.5])


@SPARSE_WARNING
def test_unseen_workload_test_evaluates_the_pareto_designs_on_held_out_layers(tmp_path) -> None:
    evaluator = BudgetedEvaluator()
    result = run_sweep(_spec(evaluator), store=SweepStore(tmp_path / "a.sqlite"))
    held_out = merge_layers([("gemv", GEMV, 3)])
    calls = len(evaluator.calls)
    rows, rho = unseen_workload_test(result, held_out)
    assert [r.trial for r in rows] == [t.index for t in result.pareto()]
    assert len(evaluator.calls) == calls + len(rows)  # one held-out layer per design
    assert all(r.held_out_latency_ms > 0 and r.robustness >= 0 for r in rows)
    assert math.isnan(rho) or -1 <= rho <= 1
