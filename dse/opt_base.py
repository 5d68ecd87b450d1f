"""The ask/tell contract every search method honours, and the trace they all keep.

The co-design driver owns evaluation: it asks an optimizer for points, evaluates them however
it likes (cached, batched, in parallel), and tells the numbers back::

    opt = make_optimizer("mobo", problem, seed=0)
    while len(opt.history) < budget:
        points = opt.ask(4)
        if not points:
            break  # the optimizer has nothing new to propose (e.g. the space is exhausted)
        metrics = [evaluate(p) for p in points]
        opt.tell(points, problem.objective_values(metrics), problem.constraint_values(metrics))

``ask(n)`` returns *at most* ``n`` points. Fewer means the optimizer cannot propose more until
it has heard back (an NSGA-II generation is still out) or the space holds nothing new.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from scipy.stats import qmc

from tensorforge.compiler.workload import Workload
from tensorforge.dse.pareto import hypervolume, pareto_indices
from tensorforge.dse.problem import Problem
from tensorforge.dse.space import Space
from tensorforge.dse.sw_schedule import SoftwareSchedule

logger = logging.getLogger(__name__)


class History:
    """Every evaluated point in tell order, its Pareto set and hypervolume after each trial.

    Arrays: ``genomes`` ``n x d``, ``objectives`` ``n x m``, ``constraint_values`` ``n x c``,
    ``hypervolumes`` ``n`` (feasible hypervolume of the first ``i + 1`` trials).
    """

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        d, m, c = problem.space.dim, problem.n_objectives, problem.n_constraints
        self.genomes = np.zeros((0, d), dtype=np.int64)
        self.objectives = np.zeros((0, m))
        self.constraint_values = np.zeros((0, c))
        self.hypervolumes = np.zeros(0)
        self.ranks: set[int] = set()

    def __len__(self) -> int:
        return self.genomes.shape[0]

    def add(
        self, genomes: np.ndarray, objectives: np.ndarray, constraint_values: np.ndarray
    ) -> None:
        """Append ``k`` trials (``k x d``, ``k x m``, ``k x c``) and extend the HV trace."""
        k = genomes.shape[0]
        if objectives.shape[0] != k or constraint_values.shape[0] != k:
            raise ValueError("genomes, objectives and constraint values must have equal rows")
        self.genomes = np.concatenate([self.genomes, genomes])
        self.objectives = np.concatenate([self.objectives, objectives])
        self.constraint_values = np.concatenate([self.constraint_values, constraint_values])
        self.ranks.update(self.problem.space.rank(genomes))
        reference = self.problem.reference
        new = [
            hypervolume(self.objectives[:i], reference, self.constraint_values[:i])
            for i in range(len(self) - k + 1, len(self) + 1)
        ]
        self.hypervolumes = np.concatenate([self.hypervolumes, new])

    @property
    def hypervolume(self) -> float:
        """Hypervolume of every feasible trial so far (0 before the first)."""
        return float(self.hypervolumes[-1]) if len(self) else 0.0

    @property
    def pareto_indices(self) -> np.ndarray:
        """Trial indices of the Pareto set (least-violating trials when none is feasible)."""
        return pareto_indices(self.objectives, self.constraint_values)

    @property
    def pareto_points(self) -> list[dict[str, Any]]:
        return self.problem.space.decode(self.genomes[self.pareto_indices])

    @property
    def pareto_objectives(self) -> np.ndarray:
        """``k x m`` objectives of the Pareto set."""
        return self.objectives[self.pareto_indices]

    @property
    def points(self) -> list[dict[str, Any]]:
        return self.problem.space.decode(self.genomes)


class Optimizer(ABC):
    """Base of every search method: validates tells and keeps the shared `History`."""

    #: The name the registry knows this method by.
    name: str = ""

    def __init__(self, problem: Problem, *, seed: int) -> None:
        self.problem = problem
        self.space = problem.space
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        self.history = History(problem)

    @abstractmethod
    def ask(self, n: int) -> list[dict[str, Any]]:
        """At most ``n`` design points to evaluate next."""

    def tell(
        self,
        points: Sequence[Mapping[str, Any]],
        objectives: np.ndarray,
        constraint_values: np.ndarray | None = None,
    ) -> None:
        """Report results: ``objectives`` ``n x m``, ``constraint_values`` ``n x c`` or None.

        None is allowed when every constraint bounds an objective; the values are then derived.
        """
        genomes = self.space.encode(points)
        objectives = self.problem.check_objectives(objectives, genomes.shape[0])
        constraint_values = self.problem.check_constraint_values(constraint_values, objectives)
        self.history.add(genomes, objectives, constraint_values)
        self._observe(genomes, objectives, constraint_values)

    def _observe(
        self, genomes: np.ndarray, objectives: np.ndarray, constraint_values: np.ndarray
    ) -> None:
        """Hook for methods that learn from each tell (``k x d``, ``k x m``, ``k x c``)."""
        return None  # random search needs nothing beyond the shared History

    def attach_layers(self, layers: Sequence[Workload]) -> None:
        """Hook called once before the first ask with the sweep's distinct layers; methods
        that choose each layer's mapping with the hardware (Poros) size their choices by it."""
        return None

    def software_schedule(self) -> SoftwareSchedule:
        """How the driver runs the software search of the next batch's trials; methods with
        an inner loop of their own (ShiBO, UNICO) override it (see `sw_schedule`)."""
        return SoftwareSchedule()

    def observe_layers(
        self, points: Sequence[Mapping[str, Any]], layers: Sequence[Sequence[Mapping[str, Any]]]
    ) -> None:
        """Hook called just before ``tell`` with each point's stored per-layer records
        (`LayerMetrics` dicts, search histories included, or an ``error``), replayed trials
        too, so a method that learns from them resumes with the state it had."""
        return None

    @staticmethod
    def _check_count(n: int) -> None:
        if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 0:
            raise ValueError(f"ask() needs a non-negative number of points, not {n!r}")


def sobol_design(space: Space, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` distinct genomes (``n x d``, fewer only if the space is smaller) from a scrambled
    Sobol sequence snapped onto the grid, topped up at random where snapping merged points.

    A first design that covers every variable's range evenly, which a handful of uniform
    draws often does not: both MOBO's initial sample and NSGA-II's first population use it.
    """
    sobol = qmc.Sobol(space.dim, scramble=True, seed=rng)
    points = sobol.random(1 << max(1, (n - 1).bit_length()))[:n]
    design: dict[int, np.ndarray] = {}
    genomes = space.from_unit(points)
    for rank, genome in zip(space.rank(genomes), genomes, strict=True):
        design.setdefault(rank, genome)
    extra = space.sample_unseen(n - len(design), rng, set(design))
    design.update(zip(space.rank(extra), extra, strict=True))
    if not design:
        return np.zeros((0, space.dim), dtype=np.int64)
    return np.stack(list(design.values()))
