"""NSGA-II from pymoo, driven through pymoo's own ask/tell API.

pymoo sees only the free variables (fixed ones would give zero-width bounds) as integers
``0..size-1``: simulated binary crossover and polynomial mutation work on the real line and a
rounding repair snaps offspring back onto the grid. Categorical variables ride along as
integers too; with few categories the mutation still visits each of them.

pymoo wants a whole generation back at once, while the driver may ask and tell in smaller
batches. So a generation is queued, handed out ``n`` at a time, and passed to pymoo when its
last member has been told. Offspring that were evaluated in an earlier generation are answered
from the history rather than proposed again: the budget is spent on new designs only.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
from pymoo.algorithms.moo.nsga2 import NSGA2
from pymoo.core.evaluator import Evaluator
from pymoo.core.population import Population
from pymoo.core.problem import Problem as PymooProblem
from pymoo.operators.crossover.sbx import SBX
from pymoo.operators.mutation.pm import PM
from pymoo.operators.repair.rounding import RoundingRepair
from pymoo.problems.static import StaticProblem

from tensorforge.dse.opt_base import Optimizer
from tensorforge.dse.problem import Problem
from tensorforge.errors import TensorforgeError

logger = logging.getLogger(__name__)

#: Generations in a row made only of already-evaluated designs before NSGA-II gives up.
_MAX_STALE_GENERATIONS = 50


class NSGA2Search(Optimizer):
    """Elitist non-dominated sorting GA with crowding distance (Deb et al., 2002).

    Options: ``population_size`` (default 10: hardware evaluations are dear, and at budgets of
    about a hundred, more generations of a small population beat fewer of a large one),
    ``crossover_eta`` and ``mutation_eta`` (distribution indices; low values take big steps,
    which suits coarse integer grids).
    """

    name = "nsga2"

    def __init__(
        self,
        problem: Problem,
        *,
        seed: int,
        population_size: int = 10,
        crossover_eta: float = 3.0,
        mutation_eta: float = 3.0,
    ) -> None:
        super().__init__(problem, seed=seed)
        if population_size < 2:
            raise ValueError(f"population_size must be at least 2, not {population_size}")
        self.population_size = population_size
        self._free = np.flatnonzero(self.space.sizes > 1)
        if self._free.size == 0:
            raise TensorforgeError(
                "NSGA-II has nothing to search: every design variable is fixed; "
                "evaluate the single design directly"
            )
        upper = (self.space.sizes[self._free] - 1).astype(float)
        self._pymoo_problem = PymooProblem(
            n_var=self._free.size,
            n_obj=problem.n_objectives,
            n_ieq_constr=problem.n_constraints,
            xl=np.zeros_like(upper),
            xu=upper,
            vtype=int,
        )
        initial = self.space.sample_unseen(population_size, self.rng, set())
        self._algorithm = NSGA2(
            pop_size=population_size,
            sampling=initial[:, self._free],
            crossover=SBX(prob=0.9, eta=crossover_eta, vtype=float, repair=RoundingRepair()),
            mutation=PM(eta=mutation_eta, vtype=float, repair=RoundingRepair()),
            eliminate_duplicates=True,
        )
        self._algorithm.setup(
            self._pymoo_problem,
            termination=("n_gen", 10**9),
            seed=int(self.rng.integers(2**31)),
            verbose=False,
        )
        self._generation: Population | None = None
        self._generation_ranks: list[int] = []
        self._queue: list[int] = []  # ranks not yet handed out
        self._outstanding: set[int] = set()  # ranks handed out, not yet told
        self._results: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._genome_of: dict[int, np.ndarray] = {}

    def _genomes(self, pymoo_x: np.ndarray) -> np.ndarray:
        """Full ``n x d`` genomes from pymoo's ``n x free`` integer vectors."""
        genomes = np.zeros((pymoo_x.shape[0], self.space.dim), dtype=np.int64)
        genomes[:, self._free] = np.rint(pymoo_x).astype(np.int64)
        return genomes

    def _next_generation(self) -> None:
        """Ask pymoo for the next generation and queue its never-evaluated members."""
        for _ in range(_MAX_STALE_GENERATIONS):
            population = self._algorithm.ask()
            genomes = self._genomes(population.get("X"))
            ranks = self.space.rank(genomes)
            self._genome_of = dict(zip(ranks, genomes, strict=True))
            self._generation, self._generation_ranks = population, ranks
            self._queue = [r for r in dict.fromkeys(ranks) if r not in self._results]
            if self._queue:
                return
            self._finish_generation()
        logger.info("NSGA-II: %d generations brought no new design", _MAX_STALE_GENERATIONS)

    def _finish_generation(self) -> None:
        objectives = np.stack([self._results[r][0] for r in self._generation_ranks])
        values = {"F": objectives}
        if self.problem.n_constraints:
            values["G"] = np.stack([self._results[r][1] for r in self._generation_ranks])
        Evaluator().eval(StaticProblem(self._pymoo_problem, **values), self._generation)
        self._algorithm.tell(infills=self._generation)
        self._generation = None

    def ask(self, n: int) -> list[dict[str, Any]]:
        self._check_count(n)
        if n and not self._queue and not self._outstanding:
            self._next_generation()
        if n and not self._queue and self._outstanding:
            raise TensorforgeError(
                "NSGA-II cannot propose more until the rest of its generation is told: "
                f"{len(self._outstanding)} asked points have no results yet"
            )
        chosen, self._queue = self._queue[:n], self._queue[n:]
        self._outstanding.update(chosen)
        if not chosen:
            return []
        return self.space.decode(np.stack([self._genome_of[r] for r in chosen]))

    def _observe(
        self, genomes: np.ndarray, objectives: np.ndarray, constraint_values: np.ndarray
    ) -> None:
        ranks = self.space.rank(genomes)
        for rank, objective, constraint in zip(ranks, objectives, constraint_values, strict=True):
            self._results[rank] = (objective, constraint)
            self._outstanding.discard(rank)
        if self._generation is not None and not self._queue and not self._outstanding:
            self._finish_generation()
