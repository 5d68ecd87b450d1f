"""Nested constrained Bayesian optimization (Shi et al., "Learned hardware/software co-design
of neural accelerators", sections 3-4): ``--method shibo``.

Outer loop, over hardware (section 4.2):

1. a few random designs that pass the known constraints (the paper's warm-up);
2. then, per design asked for: rejection-sample unseen designs until 150 pass the known
   constraints (`Problem.screen`: a buildable accelerator within the area budget; see
   `rejection`), score them by ``LCB utility x P(feasible)`` (`gp_lcb`) and take the best.
   The GP regresses the objective over the feasible designs told so far; the GP classifier
   learns the unknown constraints, everything only an evaluation reveals (no legal mapping of
   some layer, a run over the power budget).

Inner loop, per layer (section 4.3): the layer's mappings are searched by the same
constrained GP + LCB (`sw_search_bo`), through the `SoftwareSchedule` this optimizer hands the
driver, with ``software_budget`` cost-model evaluations per layer.

Objectives: ``"edp"`` (the paper's): the energy-delay product, ``power x latency^2``, read
from the problem's ``power_w`` and ``latency_ms``, modelled on a log scale. ``"parego"``: the
multi-objective variant, each pick minimizing ParEGO's scalarization of the normalized log
objectives under fresh random weights (`scalarize`), so the search sweeps the front and can
be compared by hypervolume.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from tensorforge.dse.gp_lcb import (
    FeasibilityModel,
    constrained_lcb_scores,
    fit_regressor,
    lower_bound,
)
from tensorforge.dse.opt_base import Optimizer
from tensorforge.dse.problem import Problem
from tensorforge.dse.rejection import FEASIBLE_POOL, screened_pool
from tensorforge.dse.scalarize import normalize, parego, random_weights
from tensorforge.dse.sw_schedule import FixedEffort, SoftwareEffort, SoftwareSchedule
from tensorforge.errors import ConfigError

logger = logging.getLogger(__name__)

#: Random designs before the first GP (Shi et al. appendix, Fig. 10: "number of warmup data
#: points 5 (HW)").
WARMUP = 5

#: Cost-model evaluations per layer of the inner mapping BO. The paper runs 250 software
#: trials (section 4.1); a GP fit per round makes ours slower than HASCO's search per
#: evaluation, so the default is the co-design loop's own budget order of magnitude.
SOFTWARE_BUDGET = 100

OBJECTIVES = ("edp", "parego")


class ShiBOSearch(Optimizer):
    """GP + LCB over hardware with a GP-classifier feasibility model; inner mapping BO.

    Options: ``objective`` (``"edp"`` or ``"parego"``), ``initial_points`` (warm-up designs,
    default 5), ``pool`` (feasible designs scored per pick, default 150), ``software_budget``
    (inner BO evaluations per layer, default 100), ``software_search`` (the inner search,
    default ``"bo"``; any name in `sw_search.SEARCHES`).
    """

    name = "shibo"

    def __init__(
        self,
        problem: Problem,
        *,
        seed: int,
        objective: str = "edp",
        initial_points: int = WARMUP,
        pool: int = FEASIBLE_POOL,
        software_budget: int = SOFTWARE_BUDGET,
        software_search: str = "bo",
    ) -> None:
        super().__init__(problem, seed=seed)
        if objective not in OBJECTIVES:
            raise ConfigError(f"shibo objective must be one of {', '.join(OBJECTIVES)}, "
                              f"not {objective!r}")
        if objective == "edp" and not {"latency_ms", "power_w"} <= set(problem.objectives):
            raise ConfigError("shibo's EDP objective needs latency_ms and power_w objectives; "
                              "use objective='parego' for other problems")
        if initial_points < 1 or pool < 1:
            raise ValueError(f"initial_points and pool must be positive, not "
                             f"{initial_points}, {pool}")
        self.objective = objective
        self.initial_points = initial_points
        self.pool = pool
        self.effort = SoftwareEffort(software_search, software_budget)
        self.feasibility = FeasibilityModel(seed)
        self._outstanding: set[int] = set()

    def software_schedule(self) -> SoftwareSchedule:
        return FixedEffort(self.effort)

    def ask(self, n: int) -> list[dict[str, Any]]:
        self._check_count(n)
        chosen: list[np.ndarray] = []
        for _ in range(n):
            seen = self.history.ranks | self._outstanding
            pool = screened_pool(self.problem, self._pool_size(), self.rng, seen)
            if not pool.shape[0]:
                break
            pick = pool[self._best(pool)] if self._learned() else pool[0]
            chosen.append(pick)
            self._outstanding.update(self.space.rank(pick[None]))
        if not chosen:
            return []
        return self.space.decode(np.stack(chosen))

    def _observe(
        self, genomes: np.ndarray, objectives: np.ndarray, constraint_values: np.ndarray
    ) -> None:
        self._outstanding.difference_update(self.space.rank(genomes))

    def _pool_size(self) -> int:
        return self.pool if self._learned() else 1

    def _learned(self) -> bool:
        """Past the warm-up: enough told designs to fit a model to."""
        return len(self.history) >= self.initial_points

    def _best(self, pool: np.ndarray) -> int:
        """Row of ``pool`` with the highest ``LCB utility x P(feasible)``."""
        history = self.history
        x = self.space.features(history.genomes)
        candidates = self.space.features(pool)
        feasible = np.all(history.constraint_values <= 0.0, axis=1)
        probability = self.feasibility.fit(x, feasible).probability(candidates)
        if feasible.sum() < 2:  # no objective to regress yet: the likeliest feasible design
            return int(np.argmax(probability))
        targets = self.scalar(history.objectives[feasible], history.objectives[feasible])
        model = fit_regressor(x[feasible], targets, int(self.rng.integers(2**31)))
        scores = constrained_lcb_scores(lower_bound(model, candidates), probability)
        return int(np.argmax(scores))

    def scalar(self, objectives: np.ndarray, observed: np.ndarray) -> np.ndarray:
        """The minimized scalar of ``objectives`` (``n x m``): log EDP, or ParEGO of the log
        objectives normalized over ``observed`` (``k x m``) under fresh random weights."""
        logged = np.log(np.maximum(objectives, 1e-300))
        if self.objective == "edp":
            names = self.problem.objectives
            return logged[:, names.index("power_w")] + 2 * logged[:, names.index("latency_ms")]
        scale = np.log(np.maximum(observed, 1e-300))
        weights = random_weights(self.problem.n_objectives, self.rng)
        return parego(normalize(logged, scale.min(axis=0), scale.max(axis=0)), weights)
