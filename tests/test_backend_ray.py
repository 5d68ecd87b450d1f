"""The ray backend runs a sweep on a local 2-CPU Ray: the same trials as the local backend for
one seed, a stored sweep resumes under it, and a task whose worker dies every time it runs is
retried and then recorded as a failed trial while the sweep goes on."""

from __future__ import annotations

from pathlib import Path

import pytest
from dse_evaluators import FailOnRows

from tensorforge.compiler.workload import parse_workload
from tensorforge.dse.codesign import SweepSpec, merge_layers, run_sweep
from tensorforge.dse.evaluate import FirstOrderAreaPower
from tensorforge.dse.evaluate_first_order import FirstOrderEvaluator
from tensorforge.dse.hwspace import HardwareSpace
from tensorforge.dse.scenarios import Scenario
from tensorforge.dse.sweep_store import FAILED, OK, SweepStore

ray = pytest.importorskip("ray")

KILLER_ROWS = 4  # an array height the seed-5 random sweep below draws

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
        "dataflow": {"choices": ["ws", "os"]},
        "spad_kib": {"choices": [16, 32, 64]},
    }
)


def test_a_ray_pool_starts_and_stops_its_own_local_ray(tmp_path) -> None:
    # first in the file: the module's shared Ray (below) is up from the next test on
    if ray.is_initialized():
        pytest.skip("a Ray is already running in this process")
    result = run_sweep(
        _spec(trials=2, batch_size=2), store=SweepStore(tmp_path / "s.sqlite"), backend="ray"
    )
    assert [t.status for t in result.trials if t.config is not None] == [OK] * 2
    assert not ray.is_initialized()


@pytest.fixture(scope="module")
def local_ray():
    """One private 2-CPU Ray for the module (starting one takes seconds). Its workers can
    import the tests' evaluators (``dse_evaluators``) as the local pool's workers can."""
    tests = str(Path(__file__).resolve().parent)
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": tests}},
    )
    yield
    ray.shutdown()


def _spec(evaluator=None, **fields) -> SweepSpec:
    return SweepSpec(
        workload_name="ray",
        layers=LAYERS,
        space=SPACE,
        scenario=Scenario(power_w=0.5),
        method=fields.pop("method", "random"),
        seed=fields.pop("seed", 5),
        trials=fields.pop("trials", 8),
        batch_size=fields.pop("batch_size", 4),
        evaluator=evaluator or FirstOrderEvaluator(),
        hardware_model=FirstOrderAreaPower(),
        **fields,
    )


def _trials(result):
    return [(t.index, t.point, t.status, t.objectives, t.layers) for t in result.trials]


def test_ray_backend_gives_the_local_backends_trials(local_ray, tmp_path) -> None:
    spec = _spec(method="nsga2", method_options={"population_size": 4})
    local = run_sweep(spec, store=SweepStore(tmp_path / "local.sqlite"), workers=2)
    remote = run_sweep(
        spec, store=SweepStore(tmp_path / "ray.sqlite"), workers=2, backend="ray"
    )
    assert remote.evaluated == spec.trials
    assert _trials(remote) == _trials(local)
    assert remote.hypervolumes == local.hypervolumes


def test_a_sweep_stored_by_the_ray_backend_resumes(local_ray, tmp_path) -> None:
    store = SweepStore(tmp_path / "sweeps.sqlite")
    first = run_sweep(_spec(trials=4), store=store, backend="ray", workers=2)
    longer = _spec(trials=4)
    again = run_sweep(longer, store=store, backend="ray", workers=2)
    assert (again.replayed, again.evaluated) == (4, 0)
    assert _trials(again) == _trials(first)


def test_a_task_that_kills_its_worker_is_retried_then_recorded_failed(local_ray, tmp_path):
    spec = _spec(FailOnRows(rows=KILLER_ROWS, hard=True), trials=8)
    result = run_sweep(
        spec,
        store=SweepStore(tmp_path / "sweeps.sqlite"),
        workers=2,
        backend="ray",
        backend_options={"retries": 1},
    )
    assert len(result.trials) == spec.trials
    for trial in result.trials:
        if trial.point["rows"] == KILLER_ROWS:
            assert trial.status == FAILED and "lost 2 times" in trial.error
        elif trial.config is not None:
            assert trial.status == OK
    assert any(t.point["rows"] == KILLER_ROWS for t in result.trials)
