"""The ray backend runs a sweep on a local 2-CPU Ray: the same trials as the local backend for
one seed, a stored sweep resumes under it, and a task whose worker dies every time it runs is
retried and then recorded as a failed trial while the sweep goes on."""

from __future__ import annotations

from pathlib import Path

import pytest
from dse_evaluators import FailOnRows, HangOnRows
from test_dse_resume import LAYERS, SPACE  # the resume tests' sweep, on the ray backend

from tensorforge.dse.codesign import SweepSpec, run_sweep
from tensorforge.dse.evaluate import FirstOrderAreaPower
from tensorforge.dse.evaluate_first_order import FirstOrderEvaluator
from tensorforge.dse.scenarios import Scenario
from tensorforge.dse.sweep_store import FAILED, OK, SweepStore

ray = pytest.importorskip("ray")

KILLER_ROWS = 4  # an array height the seed-5 random sweep below draws


@pytest.mark.slow  # starting and stopping a Ray of its own: about 30 s on two busy cores
def test_a_ray_pool_starts_and_stops_its_own_local_ray(tmp_path) -> None:
    # first in the file: the module's shared Ray (below) is up from the next test on
    if ray.is_initialized():
        pytest.skip("a Ray is already running in this process")
    result = run_sweep(
        _spec(trials=2, batch_size=2), store=SweepStore(tmp_path / "s.sqlite"), backend="ray"
    )
    assert {t.status for t in result.trials if t.config is not None} == {OK}
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


@pytest.mark.slow  # Ray restarts a dead worker for each retry: about a minute
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
    evaluated = [t for t in result.trials if t.config is not None]  # valid accelerators
    killed = [t for t in evaluated if t.point["rows"] == KILLER_ROWS]
    assert killed
    assert all(t.status == FAILED and "lost 2 times" in t.error for t in killed)
    assert all(t.status == OK for t in evaluated if t.point["rows"] != KILLER_ROWS)


def test_a_ray_address_without_the_ray_backend_is_a_clear_error(tmp_path, capsys) -> None:
    from tensorforge.cli import main

    arguments = ["explore", "--workload", "mlp", "--trials", "1", "--ray-address", "auto",
                 "--store", str(tmp_path / "s.sqlite"), "--out", str(tmp_path / "out")]
    assert main(arguments) == 1
    assert "add --backend ray" in capsys.readouterr().err


@pytest.mark.slow  # waits out the timeout and a forced cancel: about half a minute
def test_a_hung_task_is_cancelled_and_recorded_failed(local_ray, tmp_path) -> None:
    spec = _spec(HangOnRows(rows=KILLER_ROWS), trials=8)
    result = run_sweep(
        spec,
        store=SweepStore(tmp_path / "sweeps.sqlite"),
        workers=2,
        backend="ray",
        backend_options={"job_timeout_s": 5.0},
    )
    evaluated = [t for t in result.trials if t.config is not None]
    hung = [t for t in evaluated if t.point["rows"] == KILLER_ROWS]
    assert hung and all(t.status == FAILED and "cancelled as hung" in t.error for t in hung)
    assert all(t.status == OK for t in evaluated if t.point["rows"] != KILLER_ROWS)
