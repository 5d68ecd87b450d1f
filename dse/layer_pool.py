"""Running layer evaluations in worker processes without letting one crash stop a sweep.

`LayerPool.run` takes a batch of jobs (evaluator, workload, config, seed) and yields each
result as soon as it exists, so the co-design loop can store a trial the moment its last
layer is done. ``workers=1`` evaluates inline (no processes: exact call counting in tests,
easy debugging). Otherwise jobs go to a `ProcessPoolExecutor` with the *spawn* start method,
which works the same on every OS and never forks a process holding SQLite or torch state.

An evaluator that raises is caught in the worker (`run_layer_job`). A worker that dies
outright (segfault, ``os._exit``, out of memory) breaks the whole executor and every job in
flight with it; those jobs are then re-run one at a time in a fresh single-worker process, so
only the job that really kills its worker is reported as failed, and the others keep the
result they would have had. The pool is rebuilt for the next batch.
"""

from __future__ import annotations

import logging
import multiprocessing
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any

from tensorforge.compiler.workload import Workload
from tensorforge.config import AcceleratorConfig
from tensorforge.dse.evaluate import LayerEvaluator, run_layer_job

logger = logging.getLogger(__name__)

JobResult = tuple[str, dict[str, Any] | str]


@dataclass(frozen=True)
class LayerJob:
    """One layer of one trial; ``key`` lets the caller put the result back in place."""

    key: tuple[int, int]  # (trial index, layer index)
    evaluator: LayerEvaluator
    workload: Workload
    config: AcceleratorConfig
    seed: int

    def arguments(self) -> tuple[Any, ...]:
        return (self.evaluator, self.workload, self.config, self.seed)


class LayerPool:
    """Inline (``workers=1``) or spawned-process evaluation of `LayerJob` batches."""

    def __init__(self, workers: int = 1) -> None:
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ValueError(f"workers must be a positive integer, not {workers!r}")
        self.workers = workers
        self._executor: ProcessPoolExecutor | None = None

    def __enter__(self) -> LayerPool:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None

    def _pool(self) -> ProcessPoolExecutor:
        if self._executor is None:
            self._executor = ProcessPoolExecutor(
                max_workers=self.workers, mp_context=multiprocessing.get_context("spawn")
            )
        return self._executor

    def run(self, jobs: Sequence[LayerJob]) -> Iterator[tuple[LayerJob, JobResult]]:
        """Each job with its result, in completion order."""
        if self.workers == 1:
            for job in jobs:
                yield job, run_layer_job(*job.arguments())
            return
        futures: dict[Future[JobResult], LayerJob] = {
            self._pool().submit(run_layer_job, *job.arguments()): job for job in jobs
        }
        orphans: list[LayerJob] = []
        for future in as_completed(futures):
            job = futures[future]
            try:
                result = future.result()
            except BrokenProcessPool:
                orphans.append(job)
                continue
            yield job, result
        if orphans:
            logger.warning(
                "a worker process died; re-running %d layer evaluations one by one", len(orphans)
            )
            self.close()
            for job in sorted(orphans, key=lambda j: j.key):
                yield job, _run_isolated(job)


def _run_isolated(job: LayerJob) -> JobResult:
    """``job`` alone in a fresh process, so a crash is pinned on the job that caused it."""
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=context) as executor:
        try:
            return executor.submit(run_layer_job, *job.arguments()).result()
        except BrokenProcessPool:
            return (
                "error",
                f"the worker process died while evaluating {job.workload.name} "
                "(a crash or out of memory in the evaluator)",
            )
