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

    def line(self) -> str:
        """One sentence for the Markdown report and the CLI summary."""
        if self.area_error is None:
            return (f"area, clock, power: `{self.model}`, {self.technology}, never checked "
                    "against this project's synthesis.")
        text = (f"area, clock: `{self.model}`, {self.technology}, fitted on the RTL of "
                f"{self.rtl_commit}; held-out error on whole synthesized accelerators: area "
                f"{self.area_error:.1%}, clock {self.clock_error:.1%} (docs/cost_model.md); "
                "power: see the energy model")
        if self.stale:
            text += f"; **stale: {', '.join(self.stale)}**"
        return text + "."

    def columns(self) -> dict[str, Any]:
        """The same, as CSV columns."""
        def error(value: float | None) -> Any:
            return "" if value is None else round(value, 4)

        return {"hw_technology": self.technology, "hw_fit_rtl": self.rtl_commit,
                "area_held_out_error": error(self.area_error),
                "clock_held_out_error": error(self.clock_error),
                "hw_fit_stale": "; ".join(self.stale)}


def provenance(model: Any) -> Provenance:
    """The provenance of a hardware model (`AreaPowerModel`)."""
    from tensorforge.dse.area_power import SynthesisAreaPower, load_fit

    version = str(getattr(model, "version", "") or type(model).__qualname__)
    if not isinstance(model, SynthesisAreaPower):
        return Provenance(version, "first-order 45 nm constants (Horowitz)")
    fit = load_fit(model.tech)
    return Provenance(version, fit.technology, fit.rtl_commit,
                      fit.worst_error("area_um2"), fit.worst_error("critical_path_ns"),
                      fit.stale_reasons())
