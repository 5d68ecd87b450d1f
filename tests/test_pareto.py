"""Pareto filtering, hypervolume and feasibility against hand-computed cases and brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from tensorforge.dse.pareto import (
    feasible_mask,
    hypervolume,
    non_dominated_mask,
    normalize,
    pareto_indices,
    total_violation,
)


def brute_force_non_dominated(objectives: np.ndarray) -> np.ndarray:
    """Reference: a point survives unless another is <= everywhere and < somewhere."""
    n = len(objectives)
    keep = np.ones(n, dtype=bool)
    for i, j in itertools.product(range(n), range(n)):
        if all(objectives[j] <= objectives[i]) and any(objectives[j] < objectives[i]):
            keep[i] = False
    return keep


def grid_hypervolume(objectives: np.ndarray, reference: np.ndarray, cells: int) -> float:
    """Reference for points on a lattice of ``cells`` steps per axis: count dominated cells."""
    axes = [np.arange(cells) + 0.5 for _ in range(len(reference))]
    centres = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, len(reference))
    dominated = np.zeros(len(centres), dtype=bool)
    for point in objectives:
        dominated |= np.all(centres >= point, axis=1)
    return float(dominated.sum())


def test_non_dominated_hand_case():
    # (2, 3) is dominated by (2, 2); the duplicate (2, 2) rows dominate neither each other.
    objectives = np.array([[1, 3], [2, 2], [3, 1], [2, 3], [2, 2], [4, 4]], dtype=float)
    assert non_dominated_mask(objectives).tolist() == [True, True, True, False, True, False]


def test_non_dominated_matches_brute_force():
    rng = np.random.default_rng(7)
    for m in (2, 3, 4):
        objectives = rng.integers(0, 6, size=(40, m)).astype(float)
        np.testing.assert_array_equal(
            non_dominated_mask(objectives), brute_force_non_dominated(objectives)
        )


def test_hypervolume_two_objectives_by_hand():
    # Staircase under reference (4, 4): 1*1 + 1*2 + 1*3 = 6.
    objectives = np.array([[1, 3], [2, 2], [3, 1]], dtype=float)
    assert hypervolume(objectives, np.array([4.0, 4.0])) == pytest.approx(6.0)


def test_hypervolume_three_objectives_by_hand():
    # Boxes up to (2, 2, 3): from (0,0,1) 2*2*2 = 8, from (1,1,0) 1*1*3 = 3, sharing the
    # block (1,1,1)-(2,2,3) of 1*1*2 = 2: union 8 + 3 - 2 = 9.
    objectives = np.array([[0, 0, 1], [1, 1, 0]], dtype=float)
    assert hypervolume(objectives, np.array([2.0, 2.0, 3.0])) == pytest.approx(9.0)


def test_hypervolume_matches_lattice_count():
    rng = np.random.default_rng(3)
    reference = np.array([6.0, 6.0, 6.0])
    objectives = rng.integers(0, 6, size=(12, 3)).astype(float)
    assert hypervolume(objectives, reference) == pytest.approx(
        grid_hypervolume(objectives, reference, cells=6)
    )


def test_hypervolume_ignores_points_outside_reference_and_empty_sets():
    reference = np.array([2.0, 2.0])
    assert hypervolume(np.zeros((0, 2)), reference) == 0.0
    assert hypervolume(np.array([[3.0, 0.0], [2.0, 1.0]]), reference) == 0.0
    assert hypervolume(np.array([[1.0, 1.0], [3.0, 0.0]]), reference) == pytest.approx(1.0)


def test_infeasible_points_never_count():
    objectives = np.array([[0.0, 0.0], [1.0, 1.0], [1.5, 0.5]])
    constraints = np.array([[0.3], [0.0], [-0.2]])  # the ideal point violates its bound
    reference = np.array([2.0, 2.0])
    assert pareto_indices(objectives, constraints).tolist() == [1, 2]
    # Feasible staircase: (1,1) gives 1*1, (1.5,0.5) adds 0.5*0.5 beside it: 1 + 0.25.
    assert hypervolume(objectives, reference, constraints) == pytest.approx(1.25)


def test_nothing_feasible_returns_least_violating_points():
    objectives = np.array([[0.0, 5.0], [5.0, 0.0], [1.0, 1.0], [2.0, 2.0]])
    constraints = np.array([[0.5, 0.5], [1.0, -1.0], [0.2, 0.9], [1.0, 0.0]])
    # Total violations: 1.0, 1.0, 1.1, 1.0 -> the three tied at 1.0, dominated or not.
    assert pareto_indices(objectives, constraints).tolist() == [0, 1, 3]
    assert total_violation(constraints) == pytest.approx([1.0, 1.0, 1.1, 1.0])
    assert not feasible_mask(constraints, 4).any()


def test_normalize_maps_ideal_and_reference():
    objectives = np.array([[1.0, 10.0], [3.0, 30.0]])
    normalized = normalize(objectives, np.array([1.0, 10.0]), np.array([3.0, 30.0]))
    np.testing.assert_allclose(normalized, [[0.0, 0.0], [1.0, 1.0]])
    with pytest.raises(ValueError, match="worse than the ideal"):
        normalize(objectives, np.array([1.0, 10.0]), np.array([1.0, 30.0]))


def test_shapes_are_checked():
    with pytest.raises(ValueError, match="n x m"):
        non_dominated_mask(np.zeros(3))
    with pytest.raises(ValueError, match="reference point must have 2"):
        hypervolume(np.zeros((1, 2)), np.zeros(3))
