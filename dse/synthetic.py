"""Cheap problems with known optima, on the kind of space the hardware search sees.

They test and benchmark the optimizers without a simulator. Each lives on a discrete, mixed
space (integer grids, power-of-two ranges, ordered choice lists, a categorical, a fixed value),
and its best achievable hypervolume is computed by evaluating every point of that space, so
"how close did the search get" has an exact answer that no optimizer code contributed to.

* ``zdt1``: ZDT1 (Zitzler, Deb & Thiele, 2000) on grids, plus a categorical that shifts the
  distance function; 2 objectives, convex front ``f2 = 1 - sqrt(f1)``.
* ``dtlz2``: DTLZ2 (Deb et al., 2002) with 3 objectives; the front is the unit-sphere octant.
* ``toy_accelerator``: a closed-form roofline of a PE-array accelerator (latency, area) under
  a power budget that cuts off most of the fast designs; the constrained case.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tensorforge.dse.pareto import hypervolume
from tensorforge.dse.problem import Constraint, Problem
from tensorforge.dse.space import Categorical, Fixed, IntegerRange, OrderedChoice, Space

#: Column-wise metrics: variable name -> ``n`` values in, metric name -> ``n`` values out.
MetricFunction = Callable[[Mapping[str, np.ndarray]], dict[str, np.ndarray]]


@dataclass
class Benchmark:
    """A `Problem`, its vectorized metrics, and its optimum found by exhaustive enumeration."""

    name: str
    problem: Problem
    metrics: MetricFunction
    _optimum: float | None = field(default=None, repr=False)

    def evaluate(self, points: Sequence[Mapping[str, Any]]) -> tuple[np.ndarray, np.ndarray]:
        """Objectives (``n x m``) and constraint values (``n x c``) of design points."""
        columns = {name: np.array([p[name] for p in points]) for name in self.problem.space.names}
        return self._split(self.metrics(columns), len(points))

    def evaluate_genomes(self, genomes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Objectives (``n x m``) and constraint values (``n x c``) of ``n x d`` genomes."""
        space = self.problem.space
        genomes = space.check_genomes(genomes)
        columns = {
            v.name: np.asarray(v.values)[genomes[:, j]] for j, v in enumerate(space.variables)
        }
        return self._split(self.metrics(columns), genomes.shape[0])

    def _split(self, metrics: dict[str, np.ndarray], n: int) -> tuple[np.ndarray, np.ndarray]:
        problem = self.problem
        objectives = np.stack([metrics[name] for name in problem.objectives], axis=1)
        constraints = [c.value(metrics[c.metric]) for c in problem.constraints]
        values = np.stack(constraints, axis=1) if constraints else np.zeros((n, 0))
        return objectives.astype(float), values

    @property
    def optimal_hypervolume(self) -> float:
        """The largest hypervolume any set of designs reaches: that of the whole space."""
        if self._optimum is None:
            objectives, values = self.evaluate_genomes(self.problem.space.all_genomes())
            self._optimum = hypervolume(objectives, self.problem.reference, values)
        return self._optimum


def zdt1() -> Benchmark:
    """ZDT1 on integer, choice and power-of-two grids plus a 3-way categorical (104k designs).

    ``x1`` places a design along the front; the other variables set the distance ``g`` from
    it, which is least at ``x2 = x3 = 0``, ``x4 = 1`` and ``mode = "fast"``.
    """
    space = Space(
        [
            IntegerRange("x1", 0, 40),
            IntegerRange("x2", 0, 100, step=10),
            OrderedChoice("x3", tuple(k / 10 for k in range(11))),
            IntegerRange("x4", 1, 64, power_of_two=True),
            Categorical("mode", ("slow", "fast", "odd")),
            Fixed("version", 1),
        ]
    )
    penalty = {"slow": 0.5, "fast": 0.0, "odd": 1.0}

    def metrics(x: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        f1 = x["x1"] / 40
        shift = np.array([penalty[m] for m in x["mode"]])
        spread = (x["x2"] / 100 + x["x3"] + np.log2(x["x4"]) / 6) / 3
        g = 1 + 4.5 * spread + shift
        return {"f1": f1, "f2": g * (1 - np.sqrt(f1 / g))}

    problem = Problem(space, ("f1", "f2"), reference_point=(1.1, 3.0))
    return Benchmark("zdt1", problem, metrics)


def dtlz2() -> Benchmark:
    """DTLZ2 with 3 objectives (273k designs): two angles on 17-point grids place a design on
    the sphere octant; four distance variables of mixed types push it outwards."""
    space = Space(
        [
            IntegerRange("a1", 0, 16),
            IntegerRange("a2", 0, 16),
            OrderedChoice("d1", (0.0, 0.25, 0.5, 0.75, 1.0)),
            IntegerRange("d2", 0, 8),
            IntegerRange("banks", 1, 64, power_of_two=True),
            Categorical("layout", ("row", "tile", "col")),
        ]
    )
    offset = {"row": 0.1, "tile": 0.0, "col": 0.2}

    def metrics(x: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        theta1 = x["a1"] / 16 * math.pi / 2
        theta2 = x["a2"] / 16 * math.pi / 2
        distance = (
            (x["d1"] - 0.5) ** 2 + (x["d2"] / 8 - 0.5) ** 2 + (np.log2(x["banks"]) / 6 - 0.5) ** 2
        )
        radius = 1 + distance + np.array([offset[k] for k in x["layout"]])
        return {
            "f1": radius * np.cos(theta1) * np.cos(theta2),
            "f2": radius * np.cos(theta1) * np.sin(theta2),
            "f3": radius * np.sin(theta1),
        }

    problem = Problem(space, ("f1", "f2", "f3"), reference_point=(1.2, 1.2, 1.2))
    return Benchmark("dtlz2", problem, metrics)


def toy_accelerator() -> Benchmark:
    """Latency and area of a PE-array accelerator running a GEMM, with power <= 1.2 W.

    A roofline: compute time falls with PE count and interconnect efficiency, and stalls when
    the banks cannot feed the array edges; memory time falls with scratchpad reuse and burst
    length. Large fast arrays draw too much power, so the unconstrained front is cut.
    """
    space = Space(
        [
            IntegerRange("rows", 1, 64, power_of_two=True),
            IntegerRange("cols", 1, 64, power_of_two=True),
            Categorical("link", ("none", "systolic", "full")),
            IntegerRange("spad_kib", 16, 1024, power_of_two=True),
            OrderedChoice("banks", (1, 2, 4, 8, 16)),
            OrderedChoice("burst", (4, 8, 16, 32, 64)),
            Fixed("width", 8),
        ]
    )
    efficiency = {"none": 0.55, "systolic": 0.9, "full": 1.0}
    link_area = {"none": 0.0, "systolic": 0.1, "full": 0.5}
    macs = float(1 << 24)

    def metrics(x: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        pes = x["rows"] * x["cols"]
        eff = np.array([efficiency[k] for k in x["link"]])
        overhead = np.array([link_area[k] for k in x["link"]])
        stall = np.maximum(1.0, (x["rows"] + x["cols"]) / (4.0 * x["banks"]))
        compute = macs / (pes * eff) * stall
        reuse = np.sqrt(x["spad_kib"] * 1024.0 / x["width"] * 8)
        memory = 2 * macs / reuse / (8.0 * x["burst"] / (x["burst"] + 16.0))
        cycles = np.maximum(compute, memory) + 0.1 * np.minimum(compute, memory)
        area = 0.01 * pes * (1 + overhead * np.sqrt(pes) / 8) + 0.004 * x["spad_kib"]
        area = area + 0.05 * x["banks"] + 0.002 * x["burst"]
        utilization = compute / cycles
        power = 0.004 * pes * (1 + overhead) * utilization + 0.0004 * x["spad_kib"]
        power = power + 0.03 * x["banks"] + 0.1
        return {"latency_ms": cycles / 2e5, "area_mm2": area, "power_w": power}

    problem = Problem(
        space,
        ("latency_ms", "area_mm2"),
        reference_point=(5.0, 4.0),
        constraints=(Constraint("power_w", 1.2),),
    )
    return Benchmark("toy_accelerator", problem, metrics)


#: Every synthetic benchmark by name (each call builds a fresh one).
BENCHMARKS: dict[str, Callable[[], Benchmark]] = {
    "zdt1": zdt1,
    "dtlz2": dtlz2,
    "toy_accelerator": toy_accelerator,
}
