"""A killed sweep resumes: stored trials are replayed, not re-evaluated, and the result equals
an uninterrupted run with the same seed."""

from __future__ import annotations

import pytest
from dse_evaluators import CountingEvaluator, Killed

from tensorforge.compiler.workload import parse_workload
from tensorforge.dse.codesign import SweepSpec, merge_layers, run_sweep
from tensorforge.dse.evaluate import FirstOrderAreaPower
from tensorforge.dse.hwspace import HardwareSpace
from tensorforge.dse.scenarios import Scenario
from tensorforge.dse.sweep_store import OK, SweepStore

LAYERS = merge_layers(
    [
        ("gemm", parse_workload("C[i,j] += A[i,k] * B[k,j]", "i=32,j=32,k=64", name="gemm"), 2),
        ("gemv", parse_workload("C[i] += A[i,k] * B[k]", "i=64,k=64", name="gemv"), 1),
    ]
)
SPACE = HardwareSpace(
    {
        "intrinsic": "gemm",
        "rows": {"choices": [4, 8, 16]},
        "cols": {"choices": [4, 8, 16]},
        "interconnect": {"choices": ["systolic", "none", "full"]},
        "dataflow": {"choices": ["ws", "os", "is"]},
        "spad_kib": {"choices": [16, 32, 64]},
        "banks": {"choices": [1, 2, 4]},
    }
)
CASES = {
    "random": {"trials": 9, "batch_size": 1},
    "random-batched": {"trials": 9, "batch_size": 4},
    "nsga2": {"trials": 10, "batch_size": 3, "method_options": {"population_size": 4}},
    "mobo": {
        "trials": 6,
        "batch_size": 1,
        "method_options": {"initial_points": 4, "candidates": 32, "mc_samples": 8},
    },
}


def _spec(case: str, evaluator: CountingEvaluator) -> SweepSpec:
    options = dict(CASES[case])
    return SweepSpec(
        workload_name="resume",
        layers=LAYERS,
        space=SPACE,
        scenario=Scenario(power_w=0.5),
        method=case.split("-")[0],
        seed=11,
        evaluator=evaluator,
        hardware_model=FirstOrderAreaPower(),
        **options,
    )


# linear_operator builds a sparse tensor inside the GP; torch warns about its own default.
SPARSE_WARNING = pytest.mark.filterwarnings("ignore:Sparse invariant checks:UserWarning")


@pytest.mark.parametrize(
    "case",
    [pytest.param(c, marks=[SPARSE_WARNING] if c == "mobo" else []) for c in sorted(CASES)],
)
def test_killed_sweep_resumes_without_re_evaluation(tmp_path, case: str) -> None:
    reference_evaluator = CountingEvaluator()
    reference_store = SweepStore(tmp_path / "reference.sqlite")
    reference = run_sweep(_spec(case, reference_evaluator), store=reference_store)
    valid = sum(t.config is not None for t in reference.trials)
    assert len(reference_evaluator.calls) == valid * len(LAYERS)

    kill_at = len(reference_evaluator.calls) // 2 + 1  # mid-way, inside a trial
    store = SweepStore(tmp_path / "resumed.sqlite")
    spec = _spec(case, CountingEvaluator(kill_at=kill_at))
    with pytest.raises(Killed):
        run_sweep(spec, store=store)
    finished = store.trials(spec.sweep_id)
    assert 0 < len(finished) < spec.trials

    resumed_evaluator = CountingEvaluator()
    resumed = run_sweep(_spec(case, resumed_evaluator), store=store)
    assert resumed.sweep_id == reference.sweep_id == spec.sweep_id
    assert resumed.replayed == len(finished)
    assert resumed.evaluated == spec.trials - len(finished)
    # nothing that was stored before the kill is evaluated again
    expected_calls = [call for call in reference_evaluator.calls][
        len(reference_evaluator.calls) - len(resumed_evaluator.calls) :
    ]
    assert resumed_evaluator.calls == expected_calls
    stored_valid = sum(t.config is not None for t in finished)
    assert len(resumed_evaluator.calls) == (valid - stored_valid) * len(LAYERS)

    reference_rows = [t.comparable() for t in reference_store.trials(reference.sweep_id)]
    resumed_rows = [t.comparable() for t in store.trials(spec.sweep_id)]
    assert resumed_rows == reference_rows
    assert resumed.hypervolumes == reference.hypervolumes
    assert [t.index for t in resumed.pareto()] == [t.index for t in reference.pareto()]
    assert any(t.status == OK for t in resumed.trials)


def test_a_finished_sweep_is_replayed_entirely(tmp_path) -> None:
    store = SweepStore(tmp_path / "s.sqlite")
    first = run_sweep(_spec("random", CountingEvaluator()), store=store)
    evaluator = CountingEvaluator()
    again = run_sweep(_spec("random", evaluator), store=store)
    assert evaluator.calls == []
    assert again.replayed == first.spec.trials and again.evaluated == 0


def test_changed_arguments_make_a_new_sweep(tmp_path) -> None:
    base = _spec("random", CountingEvaluator())
    assert SweepSpec(**{**base.__dict__, "seed": 12}).sweep_id != base.sweep_id
    assert SweepSpec(**{**base.__dict__, "trials": 10}).sweep_id != base.sweep_id
    assert SweepSpec(**{**base.__dict__, "method": "nsga2"}).sweep_id != base.sweep_id
