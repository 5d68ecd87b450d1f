"""Pareto sets, hypervolume and feasibility, on plain ``n x m`` arrays (all minimized).

Every optimizer and report measures progress the same way through these functions, so a
method cannot look better merely because it counts differently. Feasibility is decided by
constraint values in pymoo's convention (``n x c``, feasible when every column is ``<= 0``).
"""

from __future__ import annotations

import numpy as np
from pymoo.indicators.hv import HV


def _check_matrix(values: np.ndarray, name: str) -> np.ndarray:
    values = np.asarray(values, dtype=float)
    if values.ndim != 2:
        raise ValueError(f"{name} must be an n x m array, got shape {values.shape}")
    return values


def non_dominated_mask(objectives: np.ndarray) -> np.ndarray:
    """Which rows of ``objectives`` (``n x m``) no other row dominates (``n`` bools).

    A row dominates another when it is no worse in every objective and better in one, so
    identical rows do not dominate each other and are all kept.
    """
    objectives = _check_matrix(objectives, "objectives")
    n = objectives.shape[0]
    mask = np.ones(n, dtype=bool)
    # Chunked so a few thousand points stay within a few MB: (chunk x n x m) comparisons.
    chunk = max(1, 2_000_000 // max(1, n * objectives.shape[1]))
    for start in range(0, n, chunk):
        rows = objectives[start : start + chunk, None, :]
        no_worse = np.all(objectives[None, :, :] <= rows, axis=2)
        better = np.any(objectives[None, :, :] < rows, axis=2)
        mask[start : start + chunk] = ~np.any(no_worse & better, axis=1)
    return mask


def total_violation(constraint_values: np.ndarray) -> np.ndarray:
    """Sum of the positive parts of ``n x c`` constraint values (``n``; 0 means feasible)."""
    constraint_values = _check_matrix(constraint_values, "constraint values")
    return np.clip(constraint_values, 0.0, None).sum(axis=1)


def feasible_mask(constraint_values: np.ndarray | None, n: int) -> np.ndarray:
    """Which of ``n`` points satisfy every constraint (``n`` bools; all true without any)."""
    if constraint_values is None:
        return np.ones(n, dtype=bool)
    constraint_values = _check_matrix(constraint_values, "constraint values")
    if constraint_values.shape[0] != n:
        raise ValueError(f"constraint values must have {n} rows, got {constraint_values.shape}")
    return total_violation(constraint_values) <= 0.0


def pareto_indices(
    objectives: np.ndarray, constraint_values: np.ndarray | None = None
) -> np.ndarray:
    """Indices of the Pareto set of ``objectives`` (``n x m``) under ``n x c`` constraints.

    Infeasible points never enter it. When nothing is feasible the result is instead the
    points of least total violation (ties all kept): the designs closest to acceptable, which
    is what a user with an over-tight budget wants to see.
    """
    objectives = _check_matrix(objectives, "objectives")
    n = objectives.shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    feasible = feasible_mask(constraint_values, n)
    if not feasible.any():
        violation = total_violation(constraint_values)  # type: ignore[arg-type]
        return np.flatnonzero(violation <= violation.min())
    candidates = np.flatnonzero(feasible)
    return candidates[non_dominated_mask(objectives[candidates])]


def normalize(objectives: np.ndarray, ideal: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """``objectives`` (``n x m``) mapped so ``ideal`` becomes 0 and ``reference`` becomes 1.

    Hypervolumes of problems whose objectives differ by orders of magnitude (cycles vs mm^2)
    are only comparable after this.
    """
    objectives = _check_matrix(objectives, "objectives")
    ideal = np.asarray(ideal, dtype=float)
    reference = np.asarray(reference, dtype=float)
    m = objectives.shape[1]
    if ideal.shape != (m,) or reference.shape != (m,):
        raise ValueError(f"ideal and reference must have {m} values")
    span = reference - ideal
    if np.any(span <= 0):
        raise ValueError("the reference point must be worse than the ideal in every objective")
    return (objectives - ideal) / span


def hypervolume(
    objectives: np.ndarray,
    reference: np.ndarray,
    constraint_values: np.ndarray | None = None,
) -> float:
    """Exact hypervolume dominated by the feasible rows of ``objectives`` (``n x m``).

    Bounded by ``reference`` (``m``); points not strictly better than it in every objective
    add nothing. Computed by pymoo's indicator (moocore, exact in any dimension).
    """
    objectives = _check_matrix(objectives, "objectives")
    reference = np.asarray(reference, dtype=float)
    if reference.shape != (objectives.shape[1],):
        raise ValueError(
            f"the reference point must have {objectives.shape[1]} values, got {reference.shape}"
        )
    feasible = feasible_mask(constraint_values, objectives.shape[0])
    inside = objectives[feasible & np.all(objectives < reference, axis=1)]
    if inside.shape[0] == 0:
        return 0.0
    return float(HV(ref_point=reference)(inside))
