"""A hung worker is a failed trial with its error, and the batch goes on (issue 16, item 4)."""

from __future__ import annotations

import pytest
from dse_evaluators import HangOnRows
from test_dse_codesign import GEMM, SMALL_SPACE, _spec

from tensorforge.compiler.workload import parse_workload
from tensorforge.config import AcceleratorConfig, ArrayConfig
from tensorforge.dse.codesign import merge_layers, run_sweep
from tensorforge.dse.hwspace import HardwareSpace
from tensorforge.dse.layer_pool import LayerJob, LayerPool
from tensorforge.dse.sweep_store import FAILED, INFEASIBLE, OK, SweepStore

WORKLOAD = parse_workload("C[i,j] += A[i,k] * B[k,j]", "i=16,j=16,k=16", name="gemm")


def _job(index: int, rows: int) -> LayerJob:
    config = AcceleratorConfig(array=ArrayConfig(rows=rows, cols=4))
    return LayerJob((index, 0), HangOnRows(8), WORKLOAD, config, seed=index)


@pytest.mark.slow  # the sweep-level test below covers the same path in the default run
def test_a_hung_job_fails_alone_and_the_others_finish():
    jobs = [_job(0, 4), _job(1, 8), _job(2, 2), _job(3, 4)]
    with LayerPool(2, job_timeout_s=4) as pool:
        results = {job.key[0]: result for job, result in pool.run(jobs)}
    assert sorted(results) == [0, 1, 2, 3]  # every job answered, exactly once
    status, error = results[1]
    assert status == "error"
    assert "gemm did not finish within 4 s" in error
    assert all(results[index][0] == "ok" for index in (0, 2, 3)), results


def test_a_sweep_records_a_hung_evaluation_as_a_failed_trial_and_goes_on(tmp_path):
    spec = _spec(
        layers=merge_layers([("gemm", GEMM, 1)]),
        trials=4,
        seed=0,
        evaluator=HangOnRows(8),
        batch_size=4,
        space=HardwareSpace({**SMALL_SPACE, "intrinsic": "gemm"}),
    )
    store = SweepStore(tmp_path / "s.sqlite")
    result = run_sweep(spec, store=store, workers=2, backend_options={"job_timeout_s": 4})
    assert [t.index for t in result.trials] == [0, 1, 2, 3]
    hung = [t for t in result.trials if t.point["rows"] == 8]
    assert hung, "the seed's sample must hold an 8-row array"
    for trial in hung:
        assert trial.status == FAILED and "did not finish within 4 s" in trial.error
    assert all(t.status in (OK, INFEASIBLE) for t in result.trials if t.point["rows"] != 8)
    assert [t.status for t in store.trials(spec.sweep_id)] == [t.status for t in result.trials]
