"""Multi-objective Bayesian optimization (HASCO section V-B, Algorithm 1) with BoTorch.

HASCO fits a Gaussian process to the evaluated designs and picks the next one by a
hypervolume-based improvement criterion. This module does the same with BoTorch's parts:

1. an initial scrambled-Sobol design, snapped onto the grid (Algorithm 1, line 1);
2. one GP per outcome (a batched ``SingleTaskGP``) on the ``[0, 1]`` feature encoding (one-hot
   categories), with objectives log-transformed when positive, since latency, power and area
   span decades, and standardized (lines 3-4);
3. q-log-noisy expected hypervolume improvement (qLogNEHVI), maximized over a few thousand
   unseen designs sampled from the space (line 5). The space is discrete and mixed, so a
   candidate pool replaces gradient ascent, as in the constrained-BO paper's rejection sampling.

Constraints are modelled as extra GP outcomes (the signed margins ``g <= 0`` of `Problem`), and
qLogNEHVI weights each candidate's improvement by its modelled probability of feasibility, so
the search learns where the power budget lies instead of treating infeasible points as noise.

When the GP cannot be fitted (singular kernel, failed optimizer), ``ask`` logs a warning and
proposes random unseen designs for that round: a search that degrades beats one that stops.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from botorch.acquisition.multi_objective.logei import (
    qLogNoisyExpectedHypervolumeImprovement,
)
from botorch.acquisition.multi_objective.objective import IdentityMCMultiOutputObjective
from botorch.exceptions.errors import BotorchError
from botorch.fit import fit_gpytorch_mll
from botorch.models import SingleTaskGP
from botorch.models.transforms.outcome import Standardize
from botorch.sampling.normal import SobolQMCNormalSampler
from gpytorch.mlls import ExactMarginalLogLikelihood
from linear_operator.utils.warnings import NumericalWarning
from scipy.stats import qmc

from tensorforge.dse.opt_base import Optimizer
from tensorforge.dse.problem import Problem
from tensorforge.dse.space import Space

logger = logging.getLogger(__name__)

_DTYPE = torch.float64

#: Widest span (max / min) of an objective that is still modelled on a log scale.
_LOG_SPAN_MAX = 1e6

#: Candidates rescored for the second and later picks of a batch.
_SHORTLIST = 64


class MOBOSearch(Optimizer):
    """GP surrogate + qLogNEHVI over a discrete candidate pool.

    Options: ``initial_points`` (Sobol design size; default ``max(6, d + 2)`` for ``d`` free
    variables), ``candidates`` (pool size per round, default 1024), ``mc_samples`` (QMC samples
    of the acquisition, default 64), ``log_objectives`` (model the log of every objective
    that is positive throughout and spans at most six decades; default true), ``fit_iterations``
    (L-BFGS cap per GP fit; fits warm-start from the previous round's hyperparameters).
    """

    name = "mobo"

    def __init__(
        self,
        problem: Problem,
        *,
        seed: int,
        initial_points: int | None = None,
        candidates: int = 1024,
        mc_samples: int = 64,
        log_objectives: bool = True,
        fit_iterations: int = 200,
    ) -> None:
        super().__init__(problem, seed=seed)
        free = int((self.space.sizes > 1).sum())
        self.initial_points = max(6, free + 2) if initial_points is None else initial_points
        if self.initial_points < 2:
            raise ValueError(f"initial_points must be at least 2, not {self.initial_points}")
        self.candidates = candidates
        self.mc_samples = mc_samples
        self.log_objectives = log_objectives
        self._initial = self._sobol_design(self.initial_points)
        self.fit_iterations = fit_iterations
        self._outstanding: dict[int, np.ndarray] = {}  # rank -> genome, asked but not told
        self._hyperparameters: dict[str, torch.Tensor] | None = None

    def _sobol_design(self, n: int) -> list[np.ndarray]:
        """``n`` distinct genomes from a scrambled Sobol sequence, topped up at random."""
        sobol = qmc.Sobol(self.space.dim, scramble=True, seed=self.rng)
        points = sobol.random(1 << max(1, (n - 1).bit_length()))[:n]
        design: dict[int, np.ndarray] = {}
        genomes = self.space.from_unit(points)
        for rank, genome in zip(self.space.rank(genomes), genomes, strict=True):
            design.setdefault(rank, genome)
        extra = self.space.sample_unseen(n - len(design), self.rng, set(design))
        design.update(zip(self.space.rank(extra), extra, strict=True))
        return list(design.values())

    # --- ask -------------------------------------------------------------------------------

    def ask(self, n: int) -> list[dict[str, Any]]:
        self._check_count(n)
        seen = self.history.ranks | set(self._outstanding)
        chosen: list[np.ndarray] = []
        while self._initial and len(chosen) < n:
            genome = self._initial.pop(0)
            if self.space.rank(genome[None])[0] not in seen:
                chosen.append(genome)
        if chosen:
            seen = seen | set(self.space.rank(np.stack(chosen)))
        if len(chosen) < n and len(self.history) >= 2:
            pending = list(self._outstanding.values()) + chosen
            chosen += self._acquire(n - len(chosen), seen, pending)
        elif len(chosen) < n:
            chosen += list(self.space.sample_unseen(n - len(chosen), self.rng, seen))
        if not chosen:
            return []
        genomes = np.stack(chosen)
        self._outstanding.update(zip(self.space.rank(genomes), genomes, strict=True))
        return self.space.decode(genomes)

    def _observe(
        self, genomes: np.ndarray, objectives: np.ndarray, constraint_values: np.ndarray
    ) -> None:
        for rank in self.space.rank(genomes):
            self._outstanding.pop(rank, None)

    def _acquire(self, q: int, seen: set[int], pending: list[np.ndarray]) -> list[np.ndarray]:
        """``q`` unseen genomes chosen greedily by qLogNEHVI from a random candidate pool."""
        pool = self._candidate_pool(seen)
        if pool.shape[0] <= q:
            return list(pool)
        with (
            torch.random.fork_rng(),
            warnings.catch_warnings(),
            # linear_operator builds sparse interpolation matrices, and torch >= 2.13 warns
            # unless the caller opts in or out of invariant checks; they are well formed.
            torch.sparse.check_sparse_tensor_invariants(enable=False),
        ):
            # Fitting restarts and MC samples draw from torch's global RNG; fork it so the
            # search is reproducible from `seed` without touching anyone else's random state.
            torch.manual_seed(int(self.rng.integers(2**31)))
            # A nearly noise-free GP makes the joint posterior of close designs singular;
            # linear_operator then adds diagonal jitter, the standard remedy, and says so.
            warnings.filterwarnings(
                "ignore", message=r"A not p\.d\., added jitter", category=NumericalWarning
            )
            try:
                acquisition = self._acquisition()
            except (BotorchError, RuntimeError, ValueError) as error:
                logger.warning(
                    "MOBO: GP fit failed after %d trials (%s: %s); proposing random designs",
                    len(self.history),
                    type(error).__name__,
                    error,
                )
                return list(pool[:q])
            return self._greedy(acquisition, pool, q, pending)

    def _candidate_pool(self, seen: set[int]) -> np.ndarray:
        """Up to ``candidates`` unseen genomes (``N x d``): half near the Pareto set, half
        uniform.

        Uniform draws alone rarely contain a design that is best in every "distance" variable
        at once (one in hundreds of thousands in a hardware space); neighbours of the current
        Pareto set, one or two variables changed, let the acquisition refine what works while
        the uniform half keeps it exploring.
        """
        local = _neighbours(
            self.space,
            self.history.genomes[self.history.pareto_indices],
            self.candidates // 2,
            self.rng,
        )
        pool: dict[int, np.ndarray] = {}
        for rank, genome in zip(self.space.rank(local), local, strict=True):
            if rank not in seen:
                pool.setdefault(rank, genome)
        uniform = self.space.sample_unseen(self.candidates - len(pool), self.rng, seen | set(pool))
        pool.update(zip(self.space.rank(uniform), uniform, strict=True))
        return np.stack(list(pool.values())) if pool else np.zeros((0, self.space.dim), np.int64)

    def _greedy(
        self,
        acquisition: qLogNoisyExpectedHypervolumeImprovement,
        pool: np.ndarray,
        q: int,
        pending: list[np.ndarray],
    ) -> list[np.ndarray]:
        """Sequential greedy batch: each pick becomes pending before the next is scored.

        Only the first pick scores the whole pool; later ones rescore its best few, since a
        point that scored poorly alone rarely becomes the best once others are pending.
        """
        features = self._tensor(self.space.features(pool))  # N x f
        shortlist = torch.arange(features.shape[0])
        chosen: list[int] = []
        for step in range(q):
            pending_genomes = pending + [pool[i] for i in chosen]
            if pending_genomes:
                acquisition.set_X_pending(
                    self._tensor(self.space.features(np.stack(pending_genomes)))
                )
            with torch.no_grad():
                scores = torch.cat(
                    [acquisition(chunk.unsqueeze(1)) for chunk in features[shortlist].split(256)]
                )  # len(shortlist)
            scores[torch.isin(shortlist, torch.tensor(chosen, dtype=torch.long))] = -torch.inf
            chosen.append(int(shortlist[torch.argmax(scores)]))
            if step == 0:
                keep = min(shortlist.numel(), max(_SHORTLIST, 4 * q))
                shortlist = shortlist[torch.topk(scores, keep).indices]
        return [pool[i] for i in chosen]

    # --- model -----------------------------------------------------------------------------

    def _outcomes(self) -> tuple[np.ndarray, np.ndarray]:
        """Training outcomes (``n x (m + c)``, objectives negated for maximization) and the
        reference point (``m``) in the same transformed space."""
        objectives, reference = self.history.objectives.copy(), self.problem.reference.copy()
        if self.log_objectives:
            # Only columns positive throughout (reference included) can be logged, and only
            # those within six decades: a smaller value is a numerical zero (cos(pi/2) is
            # 6e-17), whose log would be an outlier that wrecks the GP, not a scale.
            low = objectives.min(axis=0, initial=np.inf)
            high = np.maximum(objectives.max(axis=0, initial=-np.inf), reference)
            positive = (low > 0) & (reference > 0) & (high <= _LOG_SPAN_MAX * low)
            objectives[:, positive] = np.log(objectives[:, positive])
            reference[positive] = np.log(reference[positive])
        outcomes = np.concatenate([-objectives, self.history.constraint_values], axis=1)
        return outcomes, -reference

    def _acquisition(self) -> qLogNoisyExpectedHypervolumeImprovement:
        m = self.problem.n_objectives
        train_x = self._tensor(self.space.features(self.history.genomes))  # n x f
        outcomes, reference = self._outcomes()
        train_y = self._tensor(outcomes)  # n x (m + c)
        model = SingleTaskGP(train_x, train_y, outcome_transform=Standardize(m=train_y.shape[1]))
        if self._hyperparameters is not None:
            # Start from the last fit: the data grew by a few points, so the optimum moved
            # little and L-BFGS converges in a fraction of the iterations.
            model.load_state_dict(self._hyperparameters, strict=False)
        fit_gpytorch_mll(
            ExactMarginalLogLikelihood(model.likelihood, model),
            optimizer_kwargs={"options": {"maxiter": self.fit_iterations}},
        )
        self._hyperparameters = {
            key: value.detach().clone()
            for key, value in model.state_dict().items()
            if not key.startswith("outcome_transform")  # refitted to each round's data
        }
        constraints: list[Callable[[torch.Tensor], torch.Tensor]] = [
            (lambda samples, column=m + j: samples[..., column])
            for j in range(self.problem.n_constraints)
        ]
        return qLogNoisyExpectedHypervolumeImprovement(
            model=model,
            ref_point=reference.tolist(),
            X_baseline=train_x,
            sampler=SobolQMCNormalSampler(
                torch.Size([self.mc_samples]), seed=int(self.rng.integers(2**31))
            ),
            # The model has m + c outputs; only the first m are objectives.
            objective=IdentityMCMultiOutputObjective(outcomes=list(range(m))),
            constraints=constraints or None,
            prune_baseline=True,
        )

    @staticmethod
    def _tensor(values: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(values, dtype=_DTYPE)


def _neighbours(space: Space, parents: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n x d`` genomes, each a random parent (``p x d``) with one or two free variables
    changed: ordered ones by a step of one, categorical ones to any other value."""
    free = np.flatnonzero(space.sizes > 1)
    if n <= 0 or parents.shape[0] == 0 or free.size == 0:
        return np.zeros((0, space.dim), dtype=np.int64)
    children = parents[rng.integers(parents.shape[0], size=n)].copy()
    ordered = np.array([v.ordered for v in space.variables])
    for change in range(2):
        # Every child changes once; half of them change a second variable too.
        rows = np.flatnonzero(rng.random(n) < 0.5) if change else np.arange(n)
        column = free[rng.integers(free.size, size=rows.size)]
        size = space.sizes[column]
        current = children[rows, column]
        step = np.where(rng.random(rows.size) < 0.5, -1, 1)
        stepped = np.clip(current + step, 0, size - 1)
        # Any other value of a category: shift by 1..size-1 modulo size.
        shifted = (current + rng.integers(1, np.maximum(size, 2))) % size
        children[rows, column] = np.where(ordered[column], stepped, shifted)
    return children
