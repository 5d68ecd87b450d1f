"""The constrained GP + LCB step Shi et al. use in both of their nested loops (section 3).

A GP regressor models the objective, a GP classifier the probability that a point is
feasible (the "unknown" constraints: only an evaluation tells). A candidate's score is its
LCB utility times that probability (section 3.3, "the acquisition function is modified to
account for the probability that the constraint is satisfied"), and the best of a candidate
pool is taken, the pool standing in for the acquisition optimizer on a discrete space.

LCB is written for minimization, ``mu - lambda * sigma``; the utility that multiplies the
probability must be non-negative, so it is measured from the pool's worst bound:
``max(lcb) - lcb(x)``. The regressor is BoTorch's ``SingleTaskGP`` (Matern-5/2 with automatic
relevance; the paper's linear kernel on hand-made features is not reproduced), the classifier
scikit-learn's ``GaussianProcessClassifier`` with the squared-exponential kernel the paper
names (section 4.2).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import torch
from botorch.exceptions.warnings import InputDataWarning
from botorch.fit import fit_gpytorch_mll
from botorch.models import SingleTaskGP
from botorch.models.transforms.outcome import Standardize
from gpytorch.mlls import ExactMarginalLogLikelihood
from linear_operator.utils.warnings import NumericalWarning
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process import GaussianProcessClassifier
from sklearn.gaussian_process.kernels import RBF, ConstantKernel
from threadpoolctl import threadpool_limits

#: LCB's exploration weight (Shi et al. section 3.2 and appendix Fig. 10: "lambda for LCB 1.0").
LCB_LAMBDA = 1.0

#: L-BFGS cap per GP fit; a few dozen points converge well within it.
FIT_ITERATIONS = 40

_DTYPE = torch.float64


def fit_regressor(
    x: np.ndarray, y: np.ndarray, seed: int, start: SingleTaskGP | None = None
) -> SingleTaskGP:
    """A GP on ``x`` (``n x f`` in ``[0, 1]``) and ``y`` (``n``, or ``n x m``: one GP per
    column, batched), fitted by marginal likelihood; fitting restarts draw from a torch RNG
    forked and seeded with ``seed``.

    ``start``, the previous round's model, seeds the kernel's hyperparameters: the data grew by
    a few points, so L-BFGS converges in a fraction of the steps of a cold start.
    """
    y = np.asarray(y, dtype=float)
    columns = y.reshape(y.shape[0], -1)
    if x.ndim != 2 or columns.shape[0] != x.shape[0] or y.ndim > 2:
        raise ValueError(f"x must be n x f and y n or n x m, got {x.shape} and {y.shape}")
    with _quiet(seed):
        model = SingleTaskGP(
            torch.as_tensor(x, dtype=_DTYPE),
            torch.as_tensor(columns, dtype=_DTYPE),
            outcome_transform=Standardize(m=columns.shape[1]),
        )
        if start is not None:
            warm = {k: v for k, v in start.state_dict().items()
                    if not k.startswith("outcome_transform")}
            model.load_state_dict(warm, strict=False)
        fit_gpytorch_mll(
            ExactMarginalLogLikelihood(model.likelihood, model),
            optimizer_kwargs={"options": {"maxiter": FIT_ITERATIONS}},
        )
    return model


def lower_bound(model: SingleTaskGP, x: np.ndarray, weight: float = LCB_LAMBDA) -> np.ndarray:
    """``mu - weight * sigma`` at each row of ``x`` (``n x f``), in the units of ``y``:
    ``n`` for a one-output model, ``n x m`` for ``m`` outputs."""
    with torch.no_grad(), _quiet(0):
        posterior = model.posterior(torch.as_tensor(x, dtype=_DTYPE))
        mean = posterior.mean.numpy()
        sigma = posterior.variance.clamp_min(0).sqrt().numpy()
    bound = mean - weight * sigma
    return bound[:, 0] if model.num_outputs == 1 else bound


class FeasibilityModel:
    """P(feasible) of a point from the points evaluated so far (GP classifier).

    Before both outcomes have been seen there is nothing to separate: every point gets the
    share of feasible ones seen so far (1 before any evaluation), so the acquisition alone
    decides.
    """

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self._classifier: GaussianProcessClassifier | None = None
        self._prior = 1.0

    def fit(self, x: np.ndarray, feasible: np.ndarray) -> FeasibilityModel:
        feasible = np.asarray(feasible, dtype=bool)
        self._prior = float(feasible.mean()) if feasible.size else 1.0
        self._classifier = None
        if 0 < feasible.sum() < feasible.size:
            # one length scale: a scale per feature cost seconds per fit and a few dozen
            # labels cannot pin twenty of them down anyway
            kernel = ConstantKernel(1.0) * RBF(length_scale=0.5)
            classifier = GaussianProcessClassifier(kernel, random_state=self.seed)
            with warnings.catch_warnings(), threadpool_limits(limits=1, user_api="blas"):
                # a length scale pinned at its bound is a fine answer on a few dozen points
                warnings.filterwarnings("ignore", category=ConvergenceWarning)
                self._classifier = classifier.fit(x, feasible)
        return self

    def probability(self, x: np.ndarray) -> np.ndarray:
        """P(feasible) of each row of ``x`` (``n x f``)."""
        if self._classifier is None:
            return np.full(x.shape[0], self._prior)
        column = list(self._classifier.classes_).index(True)
        return self._classifier.predict_proba(x)[:, column]


def constrained_lcb_scores(bounds: np.ndarray, probability: np.ndarray) -> np.ndarray:
    """Acquisition of each candidate: ``(max(bounds) - bounds) * probability`` (``n``)."""
    return (bounds.max() - bounds) * probability


@contextmanager
def _quiet(seed: int) -> Iterator[None]:
    """Forked, seeded torch RNG, one BLAS thread, and the GP's benign warnings silenced."""
    with (
        torch.random.fork_rng(),
        warnings.catch_warnings(),
        # linear_operator's sparse interpolation matrices are well formed; torch >= 2.13
        # warns unless the caller opts out of checking them
        torch.sparse.check_sparse_tensor_invariants(enable=False),
        # the fits are thousands of tiny BLAS calls; more threads only spin on a shared box
        threadpool_limits(limits=1, user_api="blas"),
    ):
        torch.manual_seed(seed)
        # torch's own intra-op threads: on two busy cores they made a fit 15x slower
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        # near-duplicate designs make the kernel matrix nearly singular; jitter is the remedy
        warnings.filterwarnings("ignore", category=NumericalWarning)
        # a constant outcome (no spread yet) standardizes to zeros, which BoTorch flags
        warnings.filterwarnings("ignore", category=InputDataWarning)
        try:
            yield
        finally:
            torch.set_num_threads(threads)
