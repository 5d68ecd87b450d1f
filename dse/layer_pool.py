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
result they would have had. The pool is rebuilt for the next batch. A worker that hangs (an
evaluator or a tool that never returns) is handled the same way: when no job of a batch
finishes for ``job_timeout_s``, the workers are killed, and a job that then hangs alone is
reported as failed with the time it was given.

Workers end with the sweep: each watches its parent and exits when the parent is gone (killed
or interrupted), instead of finishing a layer nobody will store.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any

from tensorforge.compiler.workload import Workload
from tensorforge.config import AcceleratorConfig
from tensorforge.dse.evaluate import LayerEvaluator, run_layer_job

logger = logging.getLogger(__name__)

JobResult = tuple[str, dict[str, Any] | str]

#: How long a batch may go without any layer evaluation finishing before its workers count as
#: hung. Generous: one evaluation may synthesize a design, and the tools have their own limits.
DEFAULT_JOB_TIMEOUT_S = 3600.0


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
    """Inline (``workers=1``) or spawned-process evaluation of `LayerJob` batches.

    ``job_timeout_s`` bounds the wait for a worker process; an inline evaluation cannot be
    interrupted, so it has no bound.
    """

    def __init__(self, workers: int = 1, job_timeout_s: float = DEFAULT_JOB_TIMEOUT_S) -> None:
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ValueError(f"workers must be a positive integer, not {workers!r}")
        if not job_timeout_s > 0:
            raise ValueError(f"job_timeout_s must be a positive number, not {job_timeout_s!r}")
        self.workers = workers
        self.job_timeout_s = job_timeout_s
        self._executor: ProcessPoolExecutor | None = None

    def __enter__(self) -> LayerPool:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None

    def _kill_workers(self) -> None:
        """Kill every worker: the executor then fails the jobs in flight as broken."""
        if self._executor is not None:
            _kill_processes(self._executor)

    def _pool(self) -> ProcessPoolExecutor:
        if self._executor is None:
            self._executor = ProcessPoolExecutor(
                max_workers=self.workers, mp_context=multiprocessing.get_context("spawn"),
                initializer=exit_with_parent, initargs=(os.getpid(),),
            )
        return self._executor

    def map(self, function: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
        """``function`` of each item in this pool's workers, in order: other long jobs of a
        sweep (synthesis of its best designs) share the backend the layers used."""
        if self.workers == 1:
            return [function(item) for item in items]
        return list(self._pool().map(function, items))

    def run(self, jobs: Sequence[LayerJob]) -> Iterator[tuple[LayerJob, JobResult]]:
        """Each job with its result, in completion order."""
        if self.workers == 1:
            for job in jobs:
                yield job, run_layer_job(*job.arguments())
            return
        futures: dict[Future[JobResult], LayerJob] = {
            self._pool().submit(run_layer_job, *job.arguments()): job for job in jobs
        }
        pending = set(futures)
        orphans: list[LayerJob] = []
        while pending:
            done, pending = wait(pending, self.job_timeout_s, return_when=FIRST_COMPLETED)
            if not done:
                logger.warning(
                    "no layer evaluation finished in %g s; stopping the workers",
                    self.job_timeout_s,
                )
                self._kill_workers()
                done, pending = wait(pending)
            for future in done:
                job = futures[future]
                try:
                    result = future.result()
                except BrokenProcessPool:
                    orphans.append(job)
                    continue
                yield job, result
        if orphans:
            logger.warning(
                "a worker process died or hung; re-running %d layer evaluations one by one",
                len(orphans),
            )
            self.close()
            for job in sorted(orphans, key=lambda j: j.key):
                yield job, _run_isolated(job, self.job_timeout_s)


def exit_with_parent(parent: int, poll_s: float = 1.0) -> None:
    """In a worker: exit as soon as process ``parent`` is no longer this one's parent (a
    killed sweep's workers are re-parented), from a daemon thread polling once a second."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_s)
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def _kill_processes(executor: ProcessPoolExecutor) -> None:
    # The executor has no public way to stop a running job; its process table is the handle.
    for process in list(getattr(executor, "_processes", {}).values()):
        process.kill()


def _run_isolated(job: LayerJob, timeout_s: float) -> JobResult:
    """``job`` alone in a fresh process, so a crash or a hang is pinned on the job that caused
    it."""
    context = multiprocessing.get_context("spawn")
    executor = ProcessPoolExecutor(max_workers=1, mp_context=context,
                                   initializer=exit_with_parent, initargs=(os.getpid(),))
    try:
        return executor.submit(run_layer_job, *job.arguments()).result(timeout=timeout_s)
    except BrokenProcessPool:
        return (
            "error",
            f"the worker process died while evaluating {job.workload.name} "
            "(a crash or out of memory in the evaluator)",
        )
    except FutureTimeout:
        _kill_processes(executor)
        return (
            "error",
            f"the evaluation of {job.workload.name} did not finish within {timeout_s:g} s "
            "(a hung evaluator or tool); it was stopped",
        )
    finally:
        executor.shutdown(wait=True, cancel_futures=True)
