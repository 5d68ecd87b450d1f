"""ParEGO's scalarization: several minimized objectives folded into one number.

Knowles (2006) turns a multi-objective problem into a sequence of single-objective ones by an
augmented Chebyshev function of normalized objectives under a weight vector drawn afresh each
iteration. UNICO (section 3.2, Eq. 1) scores its batches with the same function and
``rho = 0.2``; ShiBO's multi-objective variant uses it to give the paper's single-objective
GP + LCB search a different trade-off each iteration.
"""

from __future__ import annotations

import numpy as np

#: Weight of the augmenting weighted sum (UNICO section 3.2, Eq. 1: "rho = 0.2 by default").
PAREGO_RHO = 0.2


def parego(values: np.ndarray, weights: np.ndarray, rho: float = PAREGO_RHO) -> np.ndarray:
    """``max_j(w_j y_j) + rho * sum_j(w_j y_j)`` of each row of ``values`` (``n x m``,
    normalized, minimized) under ``weights`` (``m``, summing to 1): ``n`` scalars.

    The max term alone ranks by the worst weighted objective and reaches every point of a
    non-convex front; the small sum breaks its ties, so a design better in one objective and
    equal in the worst is preferred.
    """
    values = np.asarray(values, dtype=float)
    weights = np.asarray(weights, dtype=float)
    if values.ndim != 2 or weights.shape != (values.shape[1],):
        raise ValueError(f"values must be n x m and weights m, got {values.shape} and "
                         f"{weights.shape}")
    if np.any(weights < 0) or not np.isclose(weights.sum(), 1.0):
        raise ValueError(f"weights must be non-negative and sum to 1, not {weights}")
    weighted = values * weights
    return weighted.max(axis=1) + rho * weighted.sum(axis=1)


def normalize(values: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """``n x m`` values mapped so ``low`` -> 0 and ``high`` -> 1 per column (a zero-width
    column maps to 0), as ParEGO normalizes by the ranges observed so far."""
    values = np.asarray(values, dtype=float)
    span = np.asarray(high, dtype=float) - np.asarray(low, dtype=float)
    safe = np.where(span > 0, span, 1.0)
    return np.where(span > 0, (values - low) / safe, 0.0)


def random_weights(m: int, rng: np.random.Generator) -> np.ndarray:
    """A weight vector drawn uniformly from the ``m``-simplex (a flat Dirichlet)."""
    return rng.dirichlet(np.ones(m))
