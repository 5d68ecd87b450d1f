"""Random search: the baseline every smarter method has to beat at the same budget."""

from __future__ import annotations

import logging
from typing import Any

from tensorforge.dse.opt_base import Optimizer
from tensorforge.dse.problem import Problem

logger = logging.getLogger(__name__)


class RandomSearch(Optimizer):
    """Uniform sampling without repeats: no point is proposed twice while unseen ones remain.

    Proposals still awaiting a tell count as seen, so a driver that asks twice before telling
    gets no duplicates either. When the space is exhausted ``ask`` returns fewer points.
    """

    name = "random"

    def __init__(self, problem: Problem, *, seed: int) -> None:
        super().__init__(problem, seed=seed)
        self._proposed: set[int] = set()

    def ask(self, n: int) -> list[dict[str, Any]]:
        self._check_count(n)
        genomes = self.space.sample_unseen(n, self.rng, self._proposed | self.history.ranks)
        if genomes.shape[0] < n:
            logger.info(
                "random search: the design space (%d points) is exhausted; proposing %d of %d",
                self.space.cardinality,
                genomes.shape[0],
                n,
            )
        self._proposed.update(self.space.rank(genomes))
        return self.space.decode(genomes)
