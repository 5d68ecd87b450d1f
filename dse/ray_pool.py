"""Layer evaluations as Ray tasks: the `LayerPool` contract on a local Ray or a cluster.

A sweep whose layers take minutes each (synthesis in the loop, large software-search budgets)
outgrows one machine. `RayPool` runs each `LayerJob` as a Ray task (``run_layer_job``, the
same function the local pool runs, so a trial's numbers do not depend on the backend) and
yields results in completion order, exactly as `LayerPool.run` does; the co-design driver
keeps the one SQLite writer, so no worker ever touches the store.

``address=None`` starts a private Ray on this machine with ``workers`` CPUs and shuts it down
on `close`; an address (``"auto"``, ``"ray://head:10001"``, ``"head:6379"``) joins an existing
cluster and leaves it running. Every node must have tensorforge installed in the same Python
environment as the driver (the README's "Sweeps on a Ray cluster" says how).

`map` runs other jobs the same way: the synthesis of a sweep's best designs
(``--synthesize-top``), minutes to hours each, spread over the cluster.

Failures: an evaluator that raises is caught inside the task (`run_layer_job`), as locally. A
worker process or node that dies takes its task with it; Ray re-runs such a task up to
``retries`` times, and one that is lost every time is reported as an ``("error", ...)`` result,
so its trial is recorded as failed and the sweep goes on. When no task of a batch finishes for
``job_timeout_s`` (as `LayerPool` counts it), the tasks still out are cancelled (their
workers killed) and run again one at a time, so only a task that hangs by itself is recorded
as failed, with the time it was given.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from tensorforge.dse.evaluate import run_layer_job
from tensorforge.dse.layer_pool import DEFAULT_JOB_TIMEOUT_S, JobResult, LayerJob
from tensorforge.errors import ConfigError, TensorforgeError

logger = logging.getLogger(__name__)


def _import_ray() -> Any:
    try:
        import ray
    except ModuleNotFoundError:
        raise ConfigError(
            "the ray backend needs Ray: pip install 'tensorforge[cluster]' (or pip install ray)"
        ) from None
    return ray


class RayPool:
    """Ray-task evaluation of `LayerJob` batches (see the module docstring)."""

    def __init__(self, workers: int = 1, *, address: str | None = None, retries: int = 2,
                 job_timeout_s: float = DEFAULT_JOB_TIMEOUT_S) -> None:
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ValueError(f"workers must be a positive integer, not {workers!r}")
        if retries < 0:
            raise ValueError(f"retries must be zero or more, not {retries}")
        if not job_timeout_s > 0:
            raise ValueError(f"job_timeout_s must be a positive number, not {job_timeout_s!r}")
        self.workers, self.address, self.retries = workers, address, retries
        self.job_timeout_s = job_timeout_s
        self._ray: Any = None
        self._owns_ray = False
        self._task: Any = None

    def __enter__(self) -> RayPool:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Shut down the Ray this pool started (never a cluster it joined)."""
        if self._owns_ray and self._ray is not None and self._ray.is_initialized():
            self._ray.shutdown()
        self._ray, self._owns_ray, self._task = None, False, None

    def _start(self) -> Any:
        if self._ray is None:
            ray = _import_ray()
            if not ray.is_initialized():
                local = self.address is None
                ray.init(
                    address=self.address,
                    num_cpus=self.workers if local else None,
                    include_dashboard=False,
                    log_to_driver=False,
                )
                self._owns_ray = local
            self._ray = ray
            self._task = ray.remote(max_retries=self.retries, num_cpus=1)(run_layer_job)
        return self._ray

    def run(self, jobs: Sequence[LayerJob]) -> Iterator[tuple[LayerJob, JobResult]]:
        """Each job with its result, in completion order."""
        if not jobs:
            return
        ray = self._start()
        futures = {self._task.remote(*job.arguments()): job for job in jobs}
        waiting = list(futures)
        while waiting:
            done, waiting = ray.wait(waiting, num_returns=1, timeout=self.job_timeout_s)
            if not done:  # nothing finished for job_timeout_s: something is hung
                for future in waiting:
                    ray.cancel(future, force=True)
                stalled = sorted((futures[future] for future in waiting), key=lambda j: j.key)
                for job in stalled:  # alone, so only a job that hangs by itself fails
                    yield job, self._alone(ray, job)
                return
            for future in done:
                job = futures[future]
                yield job, self._result(ray, future, job)

    def _alone(self, ray: Any, job: LayerJob) -> JobResult:
        future = self._task.remote(*job.arguments())
        done, _ = ray.wait([future], num_returns=1, timeout=self.job_timeout_s)
        if not done:
            ray.cancel(future, force=True)
            return self._hung(job)
        return self._result(ray, future, job)

    def _hung(self, job: LayerJob) -> JobResult:
        logger.warning("layer %s of trial %d hung; cancelled", job.workload.name, job.key[0])
        return (
            "error",
            f"the Ray task evaluating {job.workload.name} ran alone for {self.job_timeout_s:g} s "
            "without finishing; cancelled as hung",
        )

    def map(self, function: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
        """``function`` of each item as Ray tasks (synthesis of the top designs), in order;
        a task lost on every try raises `TensorforgeError`."""
        if not items:
            return []
        ray = self._start()
        task = ray.remote(max_retries=self.retries, num_cpus=1)(function)
        try:
            return ray.get([task.remote(item) for item in items])
        except ray.exceptions.RayError as error:
            raise TensorforgeError(
                f"a Ray task of {getattr(function, '__name__', function)} failed: {error}"
            ) from None

    def _result(self, ray: Any, future: Any, job: LayerJob) -> JobResult:
        try:
            return ray.get(future)
        except ray.exceptions.RayError as error:
            logger.warning("layer %s of trial %d lost: %s", job.workload.name, job.key[0], error)
            return (
                "error",
                f"the Ray task evaluating {job.workload.name} was lost "
                f"{self.retries + 1} times ({type(error).__name__}: a worker or node died)",
            )
