"""A hung worker is a failed trial with its error, and the batch goes on (issue 16, item 4)."""

from __future__ import annotations

from dse_evaluators import HangOnRows

from tensorforge.compiler.workload import parse_workload
from tensorforge.config import AcceleratorConfig, ArrayConfig
from tensorforge.dse.layer_pool import LayerJob, LayerPool

WORKLOAD = parse_workload("C[i,j] += A[i,k] * B[k,j]", "i=16,j=16,k=16", name="gemm")


def _job(index: int, rows: int) -> LayerJob:
    config = AcceleratorConfig(array=ArrayConfig(rows=rows, cols=4))
    return LayerJob((index, 0), HangOnRows(8), WORKLOAD, config, seed=index)


def test_a_hung_job_fails_alone_and_the_others_finish():
    jobs = [_job(0, 4), _job(1, 8), _job(2, 2), _job(3, 4)]
    with LayerPool(2, job_timeout_s=4) as pool:
        results = {job.key[0]: result for job, result in pool.run(jobs)}
    assert sorted(results) == [0, 1, 2, 3]  # every job answered, exactly once
    status, error = results[1]
    assert status == "error"
    assert "gemm did not finish within 4 s" in error
    assert all(results[index][0] == "ok" for index in (0, 2, 3)), results
