"""Rejection sampling of candidate designs under a problem's known constraints.

Shi et al. (section 3.3) optimize the acquisition over a discrete, constrained space by
drawing random designs until enough pass the known constraints, then scoring only those:
"we randomly sample parameters until we obtain 150 feasible points". ShiBO's and UNICO's
candidate pools are drawn this way from `Problem.screen`.
"""

from __future__ import annotations

import logging

import numpy as np

from tensorforge.dse.problem import Problem

logger = logging.getLogger(__name__)

#: Feasible designs drawn per acquisition (Shi et al. section 3.3).
FEASIBLE_POOL = 150

#: Draws per wanted design before giving up (the paper needed 22K draws for 150 on average,
#: about 150 per design; a space that admits less than that returns a smaller pool).
DRAWS_PER_POINT = 200

#: Designs drawn and screened at a time.
_CHUNK = 512


def screened_pool(
    problem: Problem, n: int, rng: np.random.Generator, seen: set[int]
) -> np.ndarray:
    """Up to ``n`` distinct unseen genomes (``k x d``) that pass ``problem.screen``."""
    space = problem.space
    pool: dict[int, np.ndarray] = {}
    rejected: set[int] = set()
    draws = 0
    while len(pool) < n and draws < DRAWS_PER_POINT * n:
        genomes = space.sample_unseen(_CHUNK, rng, seen | set(pool) | rejected)
        if not genomes.shape[0]:
            break  # every unseen design is either pooled or rejected
        draws += genomes.shape[0]
        ranks = space.rank(genomes)
        admitted = (np.ones(len(ranks), dtype=bool) if problem.screen is None
                    else np.asarray(problem.screen(space.decode(genomes)), dtype=bool))
        for rank, genome, ok in zip(ranks, genomes, admitted, strict=True):
            if ok and len(pool) < n:
                pool[rank] = genome
            elif not ok:
                rejected.add(rank)
    if len(pool) < n:
        logger.info("rejection sampling: %d of %d wanted designs pass the known constraints "
                    "after %d draws", len(pool), n, draws)
    if not pool:
        return np.zeros((0, space.dim), dtype=np.int64)
    return np.stack(list(pool.values()))
