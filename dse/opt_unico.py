"""UNICO (Rashidi et al., MICRO 2023, section 3): ``--method unico``.

Batched multi-objective BO whose batches get their software search by modified successive
halving, and whose surrogate learns only from the batches' high-fidelity members:

* **Batches** (Algorithm 1, line 4): the driver's ``--batch-size`` is UNICO's ``N``. After an
  initial Sobol design, each member of a batch minimizes ParEGO's scalarization (`scalarize`)
  of the GPs' lower confidence bounds under its own random weights, times the GP classifier's
  probability of feasibility (as `gp_lcb` scores ShiBO's picks), over a pool of designs that
  pass the known constraints (`rejection`). Different weights spread the batch along the front.
* **Software search** (section 3.3): the batch's layers are searched in rounds of modified
  successive halving (`successive_halving.SuccessiveHalving`), up to ``max_budget``
  cost-model evaluations per layer for the last designs standing.
* **Robustness R** (section 3.4) of each design is computed from its stored search histories
  (`robustness`) and modelled as a 4th objective next to latency, power and area. The
  problem's own objectives (and so the report and hypervolume) stay the three; R lives here,
  in `UNICOSearch.robustness_of`.
* **High-fidelity update** (section 3.2): each told batch is scored by Eq. 1 with equal
  weights on the four objectives (latency, power and area relative to the reference point,
  R as it is); a member joins the GPs' training set when its distance to the best score so
  far is at most the upper update limit, the 95th percentile of the distances admitted
  before (no limit for the first batch). The feasibility classifier learns from every design.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tensorforge.dse.gp_lcb import (
    FeasibilityModel,
    constrained_lcb_scores,
    fit_regressor,
    lower_bound,
)
from tensorforge.dse.opt_base import Optimizer, sobol_design
from tensorforge.dse.problem import Problem
from tensorforge.dse.rejection import FEASIBLE_POOL, screened_pool
from tensorforge.dse.robustness import robustness
from tensorforge.dse.scalarize import normalize, parego, random_weights
from tensorforge.dse.successive_halving import SuccessiveHalving
from tensorforge.dse.sw_schedule import SoftwareSchedule

logger = logging.getLogger(__name__)

#: Largest software-search budget per layer, reached in the last halving round (UNICO
#: section 4.6: "the SW mapping exploration maximum budget is set to b_max = 200").
MAX_BUDGET = 200

#: The smallest first-round budget: below it HASCO's search is all random initial pool.
MIN_BUDGET = 16

#: Percentile of the admitted distances that becomes the next upper update limit (UNICO
#: section 3.2, step 4: "the 95% percentile value of D").
UUL_PERCENTILE = 95.0


class UNICOSearch(Optimizer):
    """Batched ParEGO-MOBO with MSH software search, HF updates and robustness R.

    Options: ``initial_points`` (Sobol design, default 6), ``pool`` (feasible designs scored
    per batch, default 150), ``max_budget`` (software-search evaluations per layer in the last
    halving round, default 200), ``min_budget`` (floor of the first round's, default 16),
    ``software_search`` (the inner search, default the evaluator's own), ``use_robustness``
    (model R as the 4th objective, default true; false drops it from model and score).
    """

    name = "unico"

    def __init__(
        self,
        problem: Problem,
        *,
        seed: int,
        initial_points: int = 6,
        pool: int = FEASIBLE_POOL,
        max_budget: int = MAX_BUDGET,
        min_budget: int = MIN_BUDGET,
        software_search: str | None = None,
        use_robustness: bool = True,
    ) -> None:
        super().__init__(problem, seed=seed)
        if initial_points < 2 or pool < 1:
            raise ValueError(f"initial_points must be at least 2 and pool positive, not "
                             f"{initial_points}, {pool}")
        self.pool, self.use_robustness = pool, use_robustness
        self.max_budget, self.min_budget = max_budget, min_budget
        self.software_search = software_search
        self.feasibility = FeasibilityModel(seed)
        self._initial = list(sobol_design(self.space, initial_points, self.rng))
        self._outstanding: set[int] = set()
        #: R of each design told so far, by rank (0 for one without a search history)
        self.robustness_of: dict[int, float] = {}
        self._pending_robustness: dict[int, float] = {}
        #: which told trials (history rows) train the GPs
        self.high_fidelity = np.zeros(0, dtype=bool)
        self.admitted_distances: list[float] = []
        self.best_score = np.inf

    # --- the inner loop ----------------------------------------------------------------------

    def software_schedule(self) -> SoftwareSchedule:
        return SuccessiveHalving(self.max_budget, search=self.software_search,
                                 min_budget=self.min_budget)

    def observe_layers(
        self, points: Sequence[Mapping[str, Any]], layers: Sequence[Sequence[Mapping[str, Any]]]
    ) -> None:
        ranks = self.space.rank(self.space.encode(points))
        for rank, records in zip(ranks, layers, strict=True):
            self._pending_robustness[rank] = robustness(records)

    # --- ask -------------------------------------------------------------------------------

    def ask(self, n: int) -> list[dict[str, Any]]:
        self._check_count(n)
        seen = self.history.ranks | self._outstanding
        chosen = [g for g in self._initial[:n] if self.space.rank(g[None])[0] not in seen]
        del self._initial[:n]
        if chosen and self.problem.screen is not None:  # the Sobol design is not screened
            admitted = self.problem.screen(self.space.decode(np.stack(chosen)))
            chosen = [g for g, ok in zip(chosen, admitted, strict=True) if ok]
        taken = seen | set(self.space.rank(np.stack(chosen))) if chosen else seen
        if len(chosen) < n and len(self.history) >= 2:
            chosen += self._batch(n - len(chosen), taken)
        elif len(chosen) < n:
            chosen += list(screened_pool(self.problem, n - len(chosen), self.rng, taken))
        if not chosen:
            return []
        genomes = np.stack(chosen)
        self._outstanding.update(self.space.rank(genomes))
        return self.space.decode(genomes)

    def _batch(self, q: int, seen: set[int]) -> list[np.ndarray]:
        """``q`` designs of a fresh pool, each best for its own random ParEGO weights."""
        pool = screened_pool(self.problem, max(self.pool, q), self.rng, seen)
        if pool.shape[0] <= q:
            return list(pool)
        history = self.history
        x = self.space.features(history.genomes)
        candidates = self.space.features(pool)
        feasible = np.all(history.constraint_values <= 0.0, axis=1)
        probability = self.feasibility.fit(x, feasible).probability(candidates)
        train = self.high_fidelity
        if train.sum() < 2:
            return list(pool[np.argsort(-probability, kind="stable")[:q]])
        outcomes = self._outcomes(np.flatnonzero(train))
        model = fit_regressor(x[train], outcomes, int(self.rng.integers(2**31)))
        bounds = lower_bound(model, candidates).reshape(len(pool), -1)
        scaled = normalize(bounds, outcomes.min(axis=0), outcomes.max(axis=0))
        chosen: list[int] = []
        for _ in range(q):
            weights = random_weights(scaled.shape[1], self.rng)
            scores = constrained_lcb_scores(parego(scaled, weights), probability)
            scores[chosen] = -np.inf
            chosen.append(int(np.argmax(scores)))
        return [pool[i] for i in chosen]

    # --- tell ------------------------------------------------------------------------------

    def _observe(
        self, genomes: np.ndarray, objectives: np.ndarray, constraint_values: np.ndarray
    ) -> None:
        ranks = self.space.rank(genomes)
        self._outstanding.difference_update(ranks)
        for rank in ranks:
            self.robustness_of[rank] = self._pending_robustness.pop(rank, 0.0)
        first = len(self.history) - len(ranks)
        scores = self.fidelity_scores(np.arange(first, len(self.history)))
        self.high_fidelity = np.concatenate([self.high_fidelity, self._admit(scores)])

    def _admit(self, scores: np.ndarray) -> np.ndarray:
        """The HF update rule (section 3.2, steps 2-4) for one told batch's Eq. 1 scores."""
        self.best_score = min(self.best_score, float(scores.min()))
        distances = np.abs(scores - self.best_score)
        limit = (np.percentile(self.admitted_distances, UUL_PERCENTILE)
                 if self.admitted_distances else np.inf)
        admitted = distances <= limit
        self.admitted_distances.extend(float(d) for d in distances[admitted])
        return admitted

    def fidelity_scores(self, rows: np.ndarray) -> np.ndarray:
        """Eq. 1 with equal weights for history rows ``rows``: objectives over the reference
        point (R as it is, when used); lower is better."""
        values = self.history.objectives[rows] / self.problem.reference
        if self.use_robustness:
            values = np.concatenate([values, self._robustness(rows)[:, None]], axis=1)
        return parego(values, np.full(values.shape[1], 1.0 / values.shape[1]))

    def _outcomes(self, rows: np.ndarray) -> np.ndarray:
        """``k x (m [+ 1])`` modelled outcomes of history rows: log objectives (+ R)."""
        logged = np.log(np.maximum(self.history.objectives[rows], 1e-300))
        if not self.use_robustness:
            return logged
        return np.concatenate([logged, self._robustness(rows)[:, None]], axis=1)

    def _robustness(self, rows: np.ndarray) -> np.ndarray:
        ranks = self.space.rank(self.history.genomes[rows])
        return np.array([self.robustness_of.get(r, 0.0) for r in ranks])
