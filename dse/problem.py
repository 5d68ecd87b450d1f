"""What is searched and what is asked for, kept apart from the algorithm that searches.

A `Problem` names the variables (a `Space`), the objectives (all minimized: latency, power,
area, ...), upper-bound constraints on objectives or on extra metrics (``power <= 2 W``), and the
reference point that hypervolume is measured against. It holds no evaluation function: the
co-design driver evaluates points however it likes (cached, batched, in parallel) and hands the
numbers to an optimizer's ``tell``.

Constraint values follow pymoo's convention: one column per constraint, feasible when ``<= 0``.
`Problem.constraint_values` computes them as ``(metric - upper) / |upper|``, a *signed* relative
margin, so a model can learn how far inside or outside the bound a design lies.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tensorforge.dse.space import Space
from tensorforge.errors import ConfigError


@dataclass(frozen=True)
class Constraint:
    """``metric <= upper``; ``metric`` is an objective name or any other reported metric."""

    metric: str
    upper: float

    def __post_init__(self) -> None:
        if not np.isfinite(self.upper):
            raise ConfigError(f"constraint on {self.metric}: the bound must be finite")

    def value(self, metric_values: np.ndarray) -> np.ndarray:
        """Signed relative margin (``n``); positive means violated by that fraction of the bound."""
        scale = abs(self.upper) if self.upper != 0 else 1.0
        return (np.asarray(metric_values, dtype=float) - self.upper) / scale

    def __str__(self) -> str:
        return f"{self.metric} <= {self.upper:g}"


@dataclass(frozen=True)
class Problem:
    """A multi-objective design problem over a discrete/mixed `Space`."""

    space: Space
    objectives: tuple[str, ...]
    reference_point: tuple[float, ...]
    constraints: tuple[Constraint, ...] = field(default=())
    #: Known (input) constraints: ``points -> n`` bools, True where a point may be evaluated
    #: at all; methods that optimize an acquisition under them (ShiBO) reject the others
    #: before evaluation. None: no such check.
    screen: Callable[[Sequence[Mapping[str, Any]]], np.ndarray] | None = field(
        default=None, compare=False
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "objectives", tuple(self.objectives))
        object.__setattr__(self, "reference_point", tuple(float(r) for r in self.reference_point))
        object.__setattr__(self, "constraints", tuple(self.constraints))
        if not self.objectives:
            raise ConfigError("a problem needs at least one objective to minimize")
        if len(set(self.objectives)) != len(self.objectives):
            raise ConfigError(f"objective names must be unique, got {list(self.objectives)}")
        if len(self.reference_point) != len(self.objectives):
            raise ConfigError(
                f"the reference point has {len(self.reference_point)} values but there are "
                f"{len(self.objectives)} objectives {list(self.objectives)}; give one per objective"
            )
        if not np.all(np.isfinite(self.reference_point)):
            raise ConfigError("the hypervolume reference point must be finite")

    @property
    def n_objectives(self) -> int:
        return len(self.objectives)

    @property
    def n_constraints(self) -> int:
        return len(self.constraints)

    @property
    def reference(self) -> np.ndarray:
        """The reference point as an ``m`` array."""
        return np.array(self.reference_point, dtype=float)

    def check_objectives(self, objectives: np.ndarray, n: int) -> np.ndarray:
        """``objectives`` as an ``n x m`` float array, or a ValueError naming the shape."""
        objectives = np.asarray(objectives, dtype=float)
        if objectives.shape != (n, self.n_objectives):
            raise ValueError(
                f"objectives must be n x m = {n} x {self.n_objectives} "
                f"({', '.join(self.objectives)}), got shape {objectives.shape}"
            )
        if not np.all(np.isfinite(objectives)):
            raise ValueError("objectives must be finite; report a failed design as infeasible")
        return objectives

    def check_constraint_values(
        self, values: np.ndarray | None, objectives: np.ndarray
    ) -> np.ndarray:
        """``n x c`` constraint values (feasible ``<= 0``).

        When ``values`` is None every constraint must bound an objective, and the values are
        derived from ``objectives`` (``n x m``).
        """
        n = objectives.shape[0]
        if values is None:
            foreign = [c.metric for c in self.constraints if c.metric not in self.objectives]
            if foreign:
                raise ConfigError(
                    f"constraints on {foreign} bound metrics that are not objectives; "
                    "pass their values to tell() (see Problem.constraint_values)"
                )
            columns = [
                c.value(objectives[:, self.objectives.index(c.metric)]) for c in self.constraints
            ]
            return np.stack(columns, axis=1) if columns else np.zeros((n, 0))
        values = np.asarray(values, dtype=float)
        if values.shape != (n, self.n_constraints):
            raise ValueError(
                f"constraint values must be n x c = {n} x {self.n_constraints}, "
                f"got shape {values.shape}"
            )
        if np.isnan(values).any():
            raise ValueError("constraint values must not be NaN")
        return values

    def constraint_values(self, metrics: Sequence[Mapping[str, float]]) -> np.ndarray:
        """``n x c`` constraint values from one metrics dict per evaluated point."""
        columns = []
        for constraint in self.constraints:
            try:
                raw = [m[constraint.metric] for m in metrics]
            except KeyError:
                raise ConfigError(
                    f"constraint {constraint} needs metric {constraint.metric!r}, "
                    "which an evaluation did not report"
                ) from None
            columns.append(constraint.value(np.array(raw, dtype=float)))
        return np.stack(columns, axis=1) if columns else np.zeros((len(metrics), 0))

    def objective_values(self, metrics: Sequence[Mapping[str, float]]) -> np.ndarray:
        """``n x m`` objectives from one metrics dict per evaluated point."""
        try:
            rows = [[m[name] for name in self.objectives] for m in metrics]
        except KeyError as missing:
            raise ConfigError(
                f"an evaluation did not report objective {missing.args[0]!r}"
            ) from None
        return np.array(rows, dtype=float).reshape(len(metrics), self.n_objectives)
