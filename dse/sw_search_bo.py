"""ShiBO's inner loop: constrained GP + LCB over one layer's mappings (Shi et al. section 4.3).

For a fixed accelerator, each layer's mapping is searched by Bayesian optimization of its
energy-delay product (EDP), the paper's objective: a warm-up of random candidates, then rounds
in which a GP on log EDP and a GP classifier of legality (`gp_lcb.FeasibilityModel`: on this
stack whether a mapping fits the buffers is only known by pricing it, so it is an unknown
constraint with a model of its own) score a pool of unseen candidates, and the best are
priced. The pool is 150 random candidates, the size of the paper's rejection sample (nothing
is rejected up front here: legality is the classifier's to judge), plus every one-step
revision of the best mapping so far (`SoftwareSpace.revise`), our addition, which lets the GP
refine what works in a space whose legal region is thin.

A GP fit per evaluated candidate would cost more than the cost model it saves, so each round
prices the ``BATCH`` highest-scoring candidates of one fit.

Budgets count cost-model evaluations like every search of `sw_search`; the result is the
lowest-EDP mapping, and its history records each new best.
"""

from __future__ import annotations

import math

import numpy as np
from botorch.models import SingleTaskGP

from tensorforge.dse.gp_lcb import (
    FeasibilityModel,
    constrained_lcb_scores,
    fit_regressor,
    lower_bound,
)
from tensorforge.dse.sw_search import SearchResult
from tensorforge.dse.sw_space import MAX_DIMS, Candidates, SoftwareSpace

#: Random candidates priced before the first GP (Shi et al. appendix, Fig. 10: "number of
#: warmup data points ... 30 (SW)").
WARMUP = 30

#: Random candidates in each round's pool (Shi et al. appendix, Fig. 10: "number of random
#: data points ... 150 (SW)").
POOL = 150

#: Candidates priced per GP fit (ours: one fit per candidate would dominate the run time).
BATCH = 8


class _Run:
    """One search: the candidates priced so far, their EDPs and the best."""

    def __init__(self, space: SoftwareSpace, budget: int, seed: int) -> None:
        self.space, self.budget, self.seed = space, budget, seed
        self.rng = np.random.default_rng(seed)
        self.start = space.evaluations
        self.seen: set[bytes] = set()
        self.batch: Candidates | None = None
        self.cycles = np.zeros(0)
        self.energy = np.zeros(0)
        self.history: list[tuple[int, float, float]] = []
        self.feasibility = FeasibilityModel(seed)
        self.model: SingleTaskGP | None = None  # the last fit, to warm-start the next

    @property
    def left(self) -> int:
        return self.budget - (self.space.evaluations - self.start)

    def unseen(self, batch: Candidates) -> Candidates:
        """The first copy of each candidate of ``batch`` not priced yet."""
        rows, fresh = [], set()
        for row, key in enumerate(batch.keys()):
            if key not in self.seen and key not in fresh:
                fresh.add(key)
                rows.append(row)
        return batch.take(np.array(rows, dtype=np.int64))

    def price(self, batch: Candidates) -> None:
        batch = batch.take(np.arange(min(len(batch), self.left)))
        cycles, energy, _ = self.space.evaluate(batch)
        self.seen.update(batch.keys())
        edp = cycles * energy
        best = self.best_edp
        for row in np.flatnonzero(np.isfinite(edp)):
            if edp[row] < best:
                best = edp[row]
                evaluations = self.space.evaluations - self.start - len(batch) + row + 1
                self.history.append((evaluations, float(cycles[row]), float(energy[row])))
        self.batch = batch if self.batch is None else Candidates.concat([self.batch, batch])
        self.cycles = np.concatenate([self.cycles, cycles])
        self.energy = np.concatenate([self.energy, energy])

    @property
    def best_edp(self) -> float:
        edp = self.cycles * self.energy
        finite = edp[np.isfinite(edp)]
        return float(finite.min()) if finite.size else math.inf

    def pool(self) -> Candidates:
        parts = [self.space.random(POOL, self.rng)]
        if math.isfinite(self.best_edp):
            row = int(np.nanargmin(np.where(np.isfinite(self.cycles),
                                            self.cycles * self.energy, np.inf)))
            best = self.batch.take(np.array([row]))
            actions = np.flatnonzero(self.space.valid_actions(best)[0])
            if actions.size:
                parents = best.take(np.zeros(actions.size, dtype=np.int64))
                parts.append(self.space.revise(parents, actions, self.rng))
        return self.unseen(Candidates.concat(parts))

    def round(self) -> bool:
        """Price the best ``BATCH`` of a fresh pool; False when the pool is empty."""
        pool = self.pool()
        if not len(pool):
            return False
        legal = np.isfinite(self.cycles)
        x = features(self.space, self.batch)
        probability = self.feasibility.fit(x, legal).probability(features(self.space, pool))
        if legal.sum() >= 2:
            edp = np.log(self.cycles[legal] * self.energy[legal])
            seed = int(self.rng.integers(2**31))
            self.model = fit_regressor(x[legal], edp, seed, self.model)
            bounds = lower_bound(self.model, features(self.space, pool))
            scores = constrained_lcb_scores(bounds, probability)
        else:  # nothing to regress on yet: the most likely legal candidates, at random on ties
            scores = probability + 1e-9 * self.rng.random(len(pool))
        self.price(pool.take(np.argsort(-scores, kind="stable")[:BATCH]))
        return True

    def run(self) -> SearchResult:
        self.price(self.unseen(self.space.random(WARMUP, self.rng)))
        while self.left > 0 and self.round():
            pass
        if not math.isfinite(self.best_edp):
            return SearchResult(math.inf, math.inf, None, self.space.evaluations - self.start)
        edp = np.where(np.isfinite(self.cycles), self.cycles * self.energy, np.inf)
        row = int(np.argmin(edp))
        return SearchResult(float(self.cycles[row]), float(self.energy[row]),
                            self.space.mapping(self.batch, row),
                            self.space.evaluations - self.start, self.history)


def features(space: SoftwareSpace, batch: Candidates) -> np.ndarray:
    """``n x f`` encoding in ``[0, 1]``: the tensorize choice one-hot, each index's tile level
    as a share of its levels, and its loop's position in the order (0 outermost)."""
    n = len(batch)
    choice = np.zeros((n, len(space.spaces)))
    choice[np.arange(n), batch.space] = 1.0
    levels = np.where(batch.levels >= 0,
                      batch.levels / np.maximum(space.n_levels[batch.space] - 1, 1), 0.0)
    position = np.zeros((n, MAX_DIMS))
    for slot in range(MAX_DIMS):
        index = batch.order[:, slot]
        ok = index >= 0
        position[np.flatnonzero(ok), index[ok]] = slot / (MAX_DIMS - 1)
    return np.concatenate([choice, levels, position], axis=1)


def bo_search(space: SoftwareSpace, budget: int, seed: int) -> SearchResult:
    """Constrained GP + LCB mapping search of EDP (see the module docstring)."""
    return _Run(space, budget, seed).run()
