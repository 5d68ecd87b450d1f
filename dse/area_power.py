"""`SynthesisAreaPower`: area, leakage, clock and power of an accelerator from a model fitted to
real synthesis of its generated blocks (`tensorforge.dse.calibrate` makes the fit).

The accelerator is a sum of components; each has a few features of the configuration whose
coefficients (um^2, mW of leakage, mW of dynamic power per feature unit) come from a
non-negative least-squares fit over synthesized blocks of that component (OSU 0.18um cells,
`tensorforge.fpga.synthesize_asic`):

================  ======================================================================
component         features
================  ======================================================================
pe_array          PEs, PEs x systolic forwarding, PEs x crossbar stages (full),
                  PEs x broadcast (none), local-store bits, array edge (rows + cols), 1
scratchpad        bits, words, banks x line bits (bank ports, muxes), banks, 1: the shape of
                  the memory compiler's macro area (cells, word lines, bit lines, control)
accumulator       bits, words, line bits, 1
dma               bus bits, 1
control           PEs, scratchpad line bits, 1 (what a whole accelerator holds beyond the four:
                  compute and store units, controller, queues, control registers, glue;
                  fitted to synthesized accelerators' residuals)
================  ======================================================================

Memories are SRAM macros (the ASIC flow's analytical 0.18um memory compiler), so buffer area
per bit is a macro figure, not a flip-flop one.
Clock: the critical path of whole synthesized accelerators (the `control` fit, a constant plus
a log2(PEs) term); blocks synthesized alone, with unregistered ports, overstate the paths they
have inside the accelerator. Without whole accelerators it falls back to the slowest
component's path, each fitted as a linear function of the logarithm of its size
(`timing_features`). Dynamic power is at the calibration clock and
switching activity; it scales linearly to this model's clock.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

from tensorforge.config import AcceleratorConfig, Interconnect
from tensorforge.dse.evaluate import HardwareCost
from tensorforge.errors import ConfigError

FIT_FILE = "area_power_fit.json"
COMPONENTS = ("pe_array", "scratchpad", "accumulator", "dma", "control")


def features(component: str, config: AcceleratorConfig) -> dict[str, float]:
    """The fit's inputs for ``component`` of ``config`` (the same for fitting and predicting)."""
    array, spad = config.array, config.scratchpad
    pes = array.pes
    match component:
        case "pe_array":
            line_elems = config.spad_line_elems
            return {
                "pes": pes,
                "pes_systolic": pes * (array.interconnect is Interconnect.SYSTOLIC),
                "pes_crossbar": pes * math.log2(max(line_elems, 2))
                * (array.interconnect is Interconnect.FULL),
                "pes_broadcast": pes * (array.interconnect is Interconnect.NONE),
                "local_bits": pes * int(array.local_bytes) * 8,
                "edge": array.rows + array.cols,
                "one": 1.0,
            }
        case "scratchpad":  # one SRAM macro per bank: cells, word lines, bit lines, control
            line_bits = config.spad_line_bytes * 8
            return {"bits": int(spad.capacity) * 8, "words": int(spad.capacity) * 8 / line_bits,
                    "bank_ports": spad.banks * line_bits, "banks": spad.banks, "one": 1.0}
        case "accumulator":  # one macro of accumulator lines
            line_bits = config.acc_line_bytes * 8
            return {"bits": int(spad.accumulator) * 8,
                    "words": int(spad.accumulator) * 8 / line_bits, "line_bits": line_bits,
                    "one": 1.0}
        case "dma":
            return {"bus_bits": config.dma.bus_bits, "one": 1.0}
        case "control":
            return {"pes": pes, "line_bits": config.spad_line_bytes * 8, "one": 1.0}
    raise ConfigError(f"unknown component {component!r}; known: {', '.join(COMPONENTS)}")


def timing_features(component: str, config: AcceleratorConfig) -> dict[str, float]:
    """Inputs of the critical-path fit: delay grows with the logarithm of a block's size
    (adder trees, address decoders, fan-out buffers), so extrapolation stays sane."""
    if component == "control":
        return {"log2_pes": math.log2(max(config.array.pes, 2)), "one": 1.0}
    size = {"pe_array": config.array.pes, "scratchpad": int(config.scratchpad.capacity) * 8,
            "accumulator": int(config.scratchpad.accumulator) * 8,
            "dma": config.dma.bus_bits}[component]
    return {"log2_size": math.log2(max(size, 2)), "one": 1.0}


@dataclass(frozen=True)
class ComponentFit:
    """Non-negative coefficients per feature for each fitted quantity of one component."""

    area_um2: dict[str, float]
    leakage_mw: dict[str, float]
    dynamic_mw: dict[str, float]
    critical_path_ns: dict[str, float]

    def predict(self, quantity: str, values: dict[str, float]) -> float:
        coefficients = getattr(self, quantity)
        return sum(coefficients.get(name, 0.0) * value for name, value in values.items())


def clock_period_ns(components: dict[str, ComponentFit], config: AcceleratorConfig) -> float:
    """The accelerator's critical path: the `control` fit where it was made on whole
    accelerators (non-zero), else the slowest fitted block's (see the module docstring)."""
    control = components["control"].predict("critical_path_ns",
                                            timing_features("control", config))
    if control > 0:
        return control
    return max(components[name].predict("critical_path_ns", timing_features(name, config))
               for name in COMPONENTS if name != "control")


@dataclass(frozen=True)
class AreaPowerFit:
    """Everything `SynthesisAreaPower` needs: per-component fits and the calibration setting."""

    components: dict[str, ComponentFit]
    clock_ns: float  # the clock the calibration synthesized at (dynamic power refers to it)
    activity: float
    technology: str
    errors: dict[str, Any] = field(default_factory=dict)  # held-out errors, for the report

    def to_dict(self) -> dict[str, Any]:
        return {
            "components": {k: vars(v) for k, v in self.components.items()},
            "clock_ns": self.clock_ns, "activity": self.activity,
            "technology": self.technology, "errors": self.errors,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AreaPowerFit:
        return cls({k: ComponentFit(**v) for k, v in data["components"].items()},
                   data["clock_ns"], data["activity"], data["technology"], data.get("errors", {}))


@cache
def load_fit() -> AreaPowerFit:
    """The packaged fit, ``dse/data/area_power_fit.json`` (regenerate with
    ``python benchmarks/calibrate_cost_model.py``)."""
    path = resources.files("tensorforge.dse") / "data" / FIT_FILE
    try:
        return AreaPowerFit.from_dict(json.loads(path.read_text()))
    except FileNotFoundError:
        raise ConfigError(f"{FIT_FILE} is missing from tensorforge/dse/data; run "
                          "`python benchmarks/calibrate_cost_model.py` to make it") from None


@dataclass(frozen=True)
class SynthesisAreaPower:
    """The `AreaPowerModel` fitted to synthesis (see the module docstring)."""

    version: str = "synthesis-area-power-1"

    def breakdown(self, config: AcceleratorConfig) -> dict[str, dict[str, float]]:
        """Per component: area (um^2), leakage and dynamic power (mW), critical path (ns)."""
        fit = load_fit()
        result = {}
        for name in COMPONENTS:
            values = features(name, config)
            component = fit.components[name]
            result[name] = {q: component.predict(q, values) for q in
                            ("area_um2", "leakage_mw", "dynamic_mw")}
            result[name]["critical_path_ns"] = component.predict(
                "critical_path_ns", timing_features(name, config))
        return result

    def __call__(self, config: AcceleratorConfig) -> HardwareCost:
        fit = load_fit()
        parts = self.breakdown(config)
        area_um2 = sum(p["area_um2"] for p in parts.values())
        period_ns = max(clock_period_ns(fit.components, config), 1.0)
        clock_mhz = 1e3 / period_ns
        leakage_w = sum(p["leakage_mw"] for p in parts.values()) * 1e-3
        # dynamic power was measured at the calibration clock and activity: scale to this clock
        # and to every node toggling every cycle for the peak.
        dynamic_w = sum(p["dynamic_mw"] for p in parts.values()) * 1e-3
        peak_w = dynamic_w * (fit.clock_ns / period_ns) / max(fit.activity, 1e-9) + leakage_w
        return HardwareCost(area_um2 * 1e-6, leakage_w, clock_mhz, peak_w)
