"""Deployment scenarios: upper bounds on power, area and latency, and HASCO's two presets.

HASCO (section VII-E, Table III) scales one power budget to simulate two markets: an edge
device at 2 W and a cloud accelerator at 20 W. A `Scenario` is such a set of bounds; the
co-design loop turns it into the `Constraint` list of its `Problem`, on the metric names the
evaluator reports (``power_w``, ``area_mm2``, ``latency_ms``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from tensorforge.dse.problem import Constraint
from tensorforge.errors import ConfigError

#: Metric names of the three bounds, as `tensorforge.dse.evaluate.Metrics` reports them.
POWER, AREA, LATENCY = "power_w", "area_mm2", "latency_ms"


@dataclass(frozen=True)
class Scenario:
    """Upper bounds (None: unbounded) on power (W), area (mm^2) and latency (ms)."""

    name: str = "custom"
    power_w: float | None = None
    area_mm2: float | None = None
    latency_ms: float | None = None

    def __post_init__(self) -> None:
        for field_name in ("power_w", "area_mm2", "latency_ms"):
            value = getattr(self, field_name)
            if value is not None and not (isinstance(value, int | float) and value > 0):
                raise ConfigError(
                    f"the {field_name} bound must be a positive number, not {value!r}"
                )

    def constraints(self) -> tuple[Constraint, ...]:
        """The bounds as problem constraints, in power, area, latency order."""
        bounds = ((POWER, self.power_w), (AREA, self.area_mm2), (LATENCY, self.latency_ms))
        return tuple(Constraint(metric, float(upper)) for metric, upper in bounds if upper)

    def bound(self, metric: str) -> float | None:
        return {POWER: self.power_w, AREA: self.area_mm2, LATENCY: self.latency_ms}.get(metric)

    def with_bounds(
        self,
        *,
        power_w: float | None = None,
        area_mm2: float | None = None,
        latency_ms: float | None = None,
    ) -> Scenario:
        """A copy where each given bound replaces the preset's (the CLI's explicit flags win)."""
        changes = {
            name: value
            for name, value in (
                ("power_w", power_w),
                ("area_mm2", area_mm2),
                ("latency_ms", latency_ms),
            )
            if value is not None
        }
        return replace(self, **changes) if changes else self

    def describe(self) -> str:
        bounds = [str(c) for c in self.constraints()]
        return f"{self.name}: " + (", ".join(bounds) if bounds else "unconstrained")


#: HASCO's scenarios (Table III): the same search under a 2 W and a 20 W power budget.
SCENARIOS: dict[str, Scenario] = {
    "edge": Scenario("edge", power_w=2.0),
    "cloud": Scenario("cloud", power_w=20.0),
}


def scenario(name: str | None) -> Scenario:
    """The preset called ``name`` (None: no bounds); a ConfigError lists the known ones."""
    if name is None:
        return Scenario()
    try:
        return SCENARIOS[name]
    except KeyError:
        raise ConfigError(
            f"unknown scenario {name!r}; choose one of {', '.join(sorted(SCENARIOS))}"
        ) from None
