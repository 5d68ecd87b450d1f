"""Where a sweep's area, clock and power figures come from, in one line every report prints: the
technology, the RTL the fit was made at, the held-out error of each figure, and whether hw/
has changed since (then the fit is stale: the figures describe older RTL)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Provenance:
    """``area_error`` and ``clock_error`` are the largest held-out relative errors on whole
    synthesized accelerators (None: never checked against synthesis)."""

    model: str
    technology: str
    rtl_commit: str = "n/a"
    area_error: float | None = None
    clock_error: float | None = None
    stale: list[str] = field(default_factory=list)
    power_error: float | None = None  # the energy model's, on held-out power runs
    energy_rtl: str = "n/a"

    def line(self) -> str:
        """One sentence for the Markdown report and the CLI summary."""
        if self.area_error is None:
            return (f"area, clock, power: `{self.model}`, {self.technology}, never checked "
                    "against this project's synthesis.")
        text = (f"area, clock: `{self.model}`, {self.technology}, fitted on the RTL of "
                f"{self.rtl_commit}; held-out error on whole synthesized accelerators: area "
                f"{self.area_error:.1%}, clock {self.clock_error:.1%} (docs/cost_model.md); "
                + self._power())
        if self.stale:
            text += f"; **stale: {', '.join(self.stale)}**"
        return text + "."

    def _power(self) -> str:
        if self.power_error is None:
            return "power: no energy model of this technology (layer energies first-order)"
        return (f"power: events x per-event energies fitted on workload-driven power runs of "
                f"the RTL of {self.energy_rtl}, held-out error of on-chip power "
                f"{self.power_error:.1%} (docs/energy_model.md)")

    def columns(self) -> dict[str, Any]:
        """The same, as CSV columns."""
        def error(value: float | None) -> Any:
            return "" if value is None else round(value, 4)

        return {"hw_technology": self.technology, "hw_fit_rtl": self.rtl_commit,
                "area_held_out_error": error(self.area_error),
                "clock_held_out_error": error(self.clock_error),
                "power_held_out_error": error(self.power_error),
                "hw_fit_stale": "; ".join(self.stale)}


def provenance(model: Any) -> Provenance:
    """The provenance of a hardware model (`AreaPowerModel`)."""
    from tensorforge.dse.area_power import SynthesisAreaPower, load_fit

    version = str(getattr(model, "version", "") or type(model).__qualname__)
    if not isinstance(model, SynthesisAreaPower):
        return Provenance(version, "first-order 45 nm constants (Horowitz)")
    fit = load_fit(model.tech)
    energy = model.energy_fit()
    stale = fit.stale_reasons() + (energy.stale_reasons() if energy else [])
    return Provenance(version, fit.technology, fit.rtl_commit,
                      fit.worst_error("area_um2"), fit.worst_error("critical_path_ns"),
                      stale, energy.held_out_error() if energy else None,
                      energy.rtl_commit if energy else "n/a")
