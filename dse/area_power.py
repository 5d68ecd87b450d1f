"""`SynthesisAreaPower`: area, leakage, clock and peak power of an accelerator from a model
calibrated on real synthesis of its generated RTL (`tensorforge.dse.calibrate` makes the fit).

One fit per technology (``dse/data/area_power_fit-<tech>.json``); IHP SG13G2 130 nm is the
default. On IHP the accelerator's area is two parts:

* **memories, exact**: the SRAM macros of the scratchpad banks and the accumulator (and of any
  other memory the flow would build from macros), predicted from the configuration and picked
  as the flow picks them (`memory_shapes`), their area and leakage read from the macros'
  Liberty files. This is most of the area, and it carries to any configuration.
* **logic, fitted**: each component's standard-cell area (and leakage) is a non-negative
  combination of a few features of the configuration, fitted on synthesized blocks:

  ================  ==================================================================
  component         logic features
  ================  ==================================================================
  pe_array          PEs, PEs x systolic forwarding, PEs x crossbar stages (full),
                    PEs x broadcast (none), local-store bits, array edge (rows + cols), 1
  scratchpad        line bits, banks x line bits, banks, macros, bits behind a macro
                    row multiplexer, memories left to flip-flops (their flop area), 1
  accumulator       line bits, macros, multiplexed bits, flip-flop memories, 1
  dma               bus bits, 1
  control           scratchpad line bits, accumulator line bits, bus bits, queued old
                    accumulator lines, the controller's flip-flop memories (instruction
                    and fetch queues: their flop area), 1: what a whole accelerator
                    holds beyond the four
                    (compute and store units, controller, queues, registers, glue), fitted
                    to synthesized accelerators' residuals (its line-wide staging
                    registers and FIFOs; the store unit and fetch queue's bus-wide logic,
                    which the DMA block, a load unit, lacks; per queued old line an
                    address register and its hazard compare, `old_line_queue`; per-PE
                    logic is the PE array's)
  ================  ==================================================================

Clock: the shortest period whole synthesized accelerators meet (the worst path's arrival plus
its endpoint's setup: clock - slack), fitted (the `control` fit) by non-negative least squares
on a constant and the accumulator line's bits where the compute unit's queue of old
accumulator lines (`old_line_queue`) is deeper than 8. Their worst path is the accumulation
(OpenSTA on 10 accelerators, gemm 4x4 to 8x8 and 16x2, ws and os, 64- to 256-bit buses): the
queue's read address (a register; another compute-unit register on the two 4x4 ws) selects
one of its lines through a multiplexer over its entries (flip-flops, read asynchronously), a
32-bit ripple adder adds the array's output to it, and the sum goes to the accumulator
macro's data pins. Where the queue holds 8 lines (weight stationary, and output stationary
without multi-line groups: GEMV measured, dot) the adder sets the path, 7.2 to 7.8 ns
whatever the array. Output-stationary GEMM keeps ``2 x rows + 4`` lines, and the read
address reaches the multiplexers through a chain of up to 26 buffers that ABC builds for its
fan-out (gemm 8x8 os: 6.3 ns of the 9.2 ns arrival), longer the wider the line (64-bit lines
7.8-8.2 ns, 128 8.1 ns, 256 8.6-9.0 ns) and not the deeper the queue (6x2, 8x2 and 16x2 os,
16, 20 and 36 lines: 8.21, 7.88 and 7.82 ns). The bus width does not enter it: gemm 8x8 os at
64 and 128 bits, 8.55 and 8.95 ns; gemm 4x4 ws at 64, 128 and 256 bits, 7.16, 7.17 and 7.40
ns. It is what the flow gives when asked for a clock near it (the calibration synthesizes
each accelerator at such a clock: `calibrate.accelerator_clock_ns`).

Power: leakage is the macros' (exact) plus the fitted logic's. The peak power is a first-order
figure: the dynamic energy per cycle measured at input activity 0.1 (fitted like the area),
scaled to every input toggling every cycle at this model's clock. Workload energy comes from
per-event energies (`dse.energy_ihp`) where their fit is packaged.

OSU 0.18 um keeps its earlier fit (``--tech osu018``: analytical memory compiler, memories in
the fitted features, see `legacy_features`).

The activation memory (``scratchpad.activations``, none in every calibrated design) is priced
as scratchpad SRAM, an extrapolation no synthesized window has checked: on IHP its macros as
the flow would pick them for its shape (`memory_shapes`), on OSU its bits at the scratchpad
fit's area and leakage per bit; its glue logic (two address decoders) is not priced.
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
from tensorforge.dse.memory_shapes import memory_cost, memory_glue
from tensorforge.errors import ConfigError
from tensorforge.fpga.technology import DEFAULT_TECH

COMPONENTS = ("pe_array", "scratchpad", "accumulator", "dma", "control")
QUANTITIES = ("area_um2", "leakage_mw", "dynamic_pj", "critical_path_ns")
#: The technologies whose memories the model prices exactly (their macros' Liberty files).
EXACT_MEMORIES = ("ihp-sg13g2",)
#: Which memories (by instance prefix, `memory_shapes`) belong to which component.
MEMORY_OF = {"scratchpad": "scratchpad.", "accumulator": "accumulator.",
             "control": "controller."}


def fit_file(tech: str) -> str:
    return f"area_power_fit-{tech}.json"


def _pe_array_features(config: AcceleratorConfig) -> dict[str, float]:
    array = config.array
    pes = array.pes
    return {
        "pes": pes,
        "pes_systolic": pes * (array.interconnect is Interconnect.SYSTOLIC),
        "pes_crossbar": pes * math.log2(max(config.spad_line_elems, 2))
        * (array.interconnect is Interconnect.FULL),
        "pes_broadcast": pes * (array.interconnect is Interconnect.NONE),
        "local_bits": pes * int(array.local_bytes) * 8,
        "edge": array.rows + array.cols,
        "one": 1.0,
    }


def features(component: str, config: AcceleratorConfig, tech: str = DEFAULT_TECH
             ) -> dict[str, float]:
    """The fit's inputs for the logic of ``component`` of ``config`` (the same for fitting and
    predicting)."""
    if tech not in EXACT_MEMORIES:
        return legacy_features(component, config)
    spad_line_bits = config.spad_line_bytes * 8
    acc_line_bits = config.acc_line_bytes * 8
    match component:
        case "pe_array":
            return _pe_array_features(config)
        case "scratchpad":
            return {"line_bits": spad_line_bits,
                    "bank_ports": config.scratchpad.banks * spad_line_bits,
                    "banks": config.scratchpad.banks,
                    **memory_glue(config, MEMORY_OF["scratchpad"]), "one": 1.0}
        case "accumulator":
            return {"line_bits": acc_line_bits,
                    **memory_glue(config, MEMORY_OF["accumulator"]), "one": 1.0}
        case "dma":
            return {"bus_bits": config.dma.bus_bits, "one": 1.0}
        case "control":
            return {"line_bits": spad_line_bits, "acc_line_bits": acc_line_bits,
                    "bus_bits": config.dma.bus_bits, "old_lines": old_line_queue(config)[0],
                    "flop_memory_um2": memory_glue(config, MEMORY_OF["control"])[
                        "flop_memory_um2"], "one": 1.0}
    raise ConfigError(f"unknown component {component!r}; known: {', '.join(COMPONENTS)}")


def legacy_features(component: str, config: AcceleratorConfig) -> dict[str, float]:
    """The OSU 0.18 um fit's features: memories (analytical macros) are fitted too."""
    spad = config.scratchpad
    match component:
        case "pe_array":
            return _pe_array_features(config)
        case "scratchpad":
            line_bits = config.spad_line_bytes * 8
            return {"bits": int(spad.capacity) * 8, "words": int(spad.capacity) * 8 / line_bits,
                    "bank_ports": spad.banks * line_bits, "banks": spad.banks, "one": 1.0}
        case "accumulator":
            line_bits = config.acc_line_bytes * 8
            return {"bits": int(spad.accumulator) * 8,
                    "words": int(spad.accumulator) * 8 / line_bits, "line_bits": line_bits,
                    "one": 1.0}
        case "dma":
            return {"bus_bits": config.dma.bus_bits, "one": 1.0}
        case "control":
            return {"pes": config.array.pes, "line_bits": config.spad_line_bytes * 8,
                    "one": 1.0}
    raise ConfigError(f"unknown component {component!r}; known: {', '.join(COMPONENTS)}")


def old_line_queue(config: AcceleratorConfig) -> tuple[int, int]:
    """Depth and width in bits of the compute unit's queue of old accumulator lines: the lines
    read before their sums are written back, ``max(4, 2 x lines per group) + OUTSTANDING``
    of them (`hw.compute_unit`; a group is ``rows`` lines in output stationary, one line
    otherwise), each an accumulator line (`tests/test_area_power.py` checks both against the
    generated Verilog)."""
    from tensorforge.hw.compute_unit import OUTSTANDING
    from tensorforge.hw.dataflow_plan import plan_for

    depth = max(4, 2 * plan_for(config).lines_per_group) + OUTSTANDING
    return depth, config.acc_line_bytes * 8


def timing_features(component: str, config: AcceleratorConfig, tech: str = DEFAULT_TECH
                    ) -> dict[str, float]:
    """Inputs of the critical-path fit. Whole accelerators (`control`): on IHP the accumulator
    line's bits where the queue of old accumulator lines is deeper than 8, and a constant (see
    the module docstring); on OSU the logarithm of the array. Blocks: the logarithm of their
    size."""
    if component == "control":
        if tech not in EXACT_MEMORIES:
            return {"log2_pes": math.log2(max(config.array.pes, 2)), "one": 1.0}
        depth, width = old_line_queue(config)
        return {"deep_queue_line_bits": width * (depth > 8), "one": 1.0}
    size = {"pe_array": config.array.pes, "scratchpad": int(config.scratchpad.capacity) * 8,
            "accumulator": int(config.scratchpad.accumulator) * 8,
            "dma": config.dma.bus_bits}[component]
    return {"log2_size": math.log2(max(size, 2)), "one": 1.0}


@dataclass(frozen=True)
class ComponentFit:
    """Non-negative coefficients per feature for each fitted quantity of one component (area
    and leakage of its logic only where memories are exact)."""

    area_um2: dict[str, float]
    leakage_mw: dict[str, float]
    dynamic_pj: dict[str, float]  # energy per cycle at the calibration's input activity
    critical_path_ns: dict[str, float]

    def predict(self, quantity: str, values: dict[str, float]) -> float:
        coefficients = getattr(self, quantity)
        return sum(coefficients.get(name, 0.0) * value for name, value in values.items())


@dataclass(frozen=True)
class AreaPowerFit:
    """Everything `SynthesisAreaPower` needs: per-component fits and where they come from."""

    components: dict[str, ComponentFit]
    clock_ns: float  # the blocks' calibration clock
    activity: float
    technology: str  # a description, for reports
    errors: dict[str, Any] = field(default_factory=dict)  # held-out errors, for the report
    tech: str = DEFAULT_TECH
    rtl_commit: str = "unknown"
    hardware_digest: str = ""  # of hw/ and the sources the RTL depends on, at the fit
    clock_rule: str = ""
    reference_rtl: list = field(default_factory=list)  # `sim.rtl_identity.reference_rtl`

    @property
    def exact_memories(self) -> bool:
        return self.tech in EXACT_MEMORIES

    def to_dict(self) -> dict[str, Any]:
        return {
            "components": {k: vars(v) for k, v in self.components.items()},
            "clock_ns": self.clock_ns, "activity": self.activity,
            "technology": self.technology, "tech": self.tech, "rtl_commit": self.rtl_commit,
            "hardware_digest": self.hardware_digest, "clock_rule": self.clock_rule,
            "reference_rtl": self.reference_rtl, "errors": self.errors,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AreaPowerFit:
        components = {}
        for name, values in data["components"].items():
            values = dict(values)
            if "dynamic_mw" in values:  # the OSU fit: mW at its clock, all of it at clock_ns
                values["dynamic_pj"] = {k: v * data["clock_ns"]
                                        for k, v in values.pop("dynamic_mw").items()}
            components[name] = ComponentFit(**values)
        return cls(components, data["clock_ns"], data["activity"], data["technology"],
                   data.get("errors", {}), data.get("tech", "osu018"),
                   data.get("rtl_commit", "unknown"), data.get("hardware_digest", ""),
                   data.get("clock_rule", ""), data.get("reference_rtl", []))

    def held_out(self) -> list[dict[str, Any]]:
        """The whole accelerators each predicted by a fit without it."""
        return [r for r in self.errors.get("accelerator", []) if not r.get("alone")]

    def worst_error(self, quantity: str) -> float | None:
        rows = self.held_out()
        return max(abs(r["relative_error"][quantity]) for r in rows) if rows else None

    def stale_reasons(self) -> list[str]:
        """Why this fit may no longer describe the RTL: its accelerators' Verilog changed."""
        from tensorforge.sim.rtl_identity import rtl_changed

        if self.hardware_digest and rtl_changed(self.hardware_digest, self.reference_rtl):
            return [f"the RTL changed since the fit (RTL of {self.rtl_commit})"]
        return []


@cache
def load_fit(tech: str = DEFAULT_TECH) -> AreaPowerFit:
    """The packaged fit of ``tech`` (regenerate with
    ``python benchmarks/calibrate_cost_model.py --tech <tech>``)."""
    name = fit_file(tech)
    path = resources.files("tensorforge.dse") / "data" / name
    try:
        return AreaPowerFit.from_dict(json.loads(path.read_text()))
    except FileNotFoundError:
        raise ConfigError(f"{name} is missing from tensorforge/dse/data; run "
                          f"`python benchmarks/calibrate_cost_model.py --tech {tech}` to make "
                          "it") from None


def component_costs(fit: AreaPowerFit, config: AcceleratorConfig
                    ) -> dict[str, dict[str, float]]:
    """Per component: area (um^2), leakage (mW), dynamic energy per cycle at the calibration's
    activity (pJ), memories included where they are exact."""
    result = {}
    for name in COMPONENTS:
        values = features(name, config, fit.tech)
        component = fit.components[name]
        result[name] = {q: component.predict(q, values) for q in QUANTITIES[:3]}
        if fit.exact_memories and name in MEMORY_OF:
            memories = memory_cost(config, MEMORY_OF[name])
            result[name]["area_um2"] += memories.macro_area_um2
            result[name]["leakage_mw"] += memories.macro_leakage_mw
    if config.scratchpad.activations:
        result["activations"] = activation_memory_cost(fit, config)
    return result


def activation_memory_cost(fit: AreaPowerFit, config: AcceleratorConfig) -> dict[str, float]:
    """The activation memory as scratchpad SRAM (module docstring): area (um^2), leakage
    (mW); its access energy is a program's (`program_events`), none per cycle here."""
    if fit.exact_memories:
        memories = memory_cost(config, "activations.")
        return {"area_um2": memories.macro_area_um2, "leakage_mw": memories.macro_leakage_mw,
                "dynamic_pj": 0.0}
    bits = int(config.scratchpad.activations) * 8
    scratchpad = fit.components["scratchpad"]
    return {"area_um2": scratchpad.area_um2.get("bits", 0.0) * bits,
            "leakage_mw": scratchpad.leakage_mw.get("bits", 0.0) * bits, "dynamic_pj": 0.0}


def clock_period_ns(fit: AreaPowerFit, config: AcceleratorConfig) -> float:
    """The accelerator's critical path: the `control` fit where it was made on whole
    accelerators (non-zero), else the slowest fitted block's."""
    components = fit.components
    control = components["control"].predict("critical_path_ns",
                                            timing_features("control", config, fit.tech))
    if control > 0:
        return control
    return max(components[name].predict("critical_path_ns",
                                        timing_features(name, config, fit.tech))
               for name in COMPONENTS if name != "control")


@dataclass(frozen=True)
class SynthesisAreaPower:
    """The `AreaPowerModel` calibrated on synthesis (see the module docstring)."""

    tech: str = DEFAULT_TECH

    @property
    def version(self) -> str:
        """Part of a sweep's identity: the model, its technology, the fit's RTL and the
        energy fit's identity (new energies price stored layers differently)."""
        energy = self.energy_fit()
        return (f"synthesis-area-power-2-{self.tech}-{load_fit(self.tech).rtl_commit}"
                + (f"-energy-{energy.digest}" if energy else ""))

    def energy_fit(self):
        """The per-event energy fit of this technology (`dse.energy_ihp`), or None."""
        if self.tech not in EXACT_MEMORIES:
            return None
        from tensorforge.dse import energy_ihp

        return energy_ihp.load_energy_fit()

    def breakdown(self, config: AcceleratorConfig) -> dict[str, dict[str, float]]:
        """Per component: area (um^2), leakage (mW), dynamic energy per cycle (pJ)."""
        return component_costs(load_fit(self.tech), config)

    def __call__(self, config: AcceleratorConfig) -> HardwareCost:
        fit = load_fit(self.tech)
        parts = component_costs(fit, config)
        area_um2 = sum(p["area_um2"] for p in parts.values())
        period_ns = max(clock_period_ns(fit, config), 1.0)
        clock_mhz = 1e3 / period_ns
        leakage_w = sum(p["leakage_mw"] for p in parts.values()) * 1e-3
        # a first-order peak: the energy per cycle at the calibration's activity, scaled to
        # every input toggling every cycle, at this clock
        energy_pj = sum(p["dynamic_pj"] for p in parts.values()) / max(fit.activity, 1e-9)
        peak_w = energy_pj * 1e-12 * clock_mhz * 1e6 + leakage_w
        energies, clock_w = self._energies(config, clock_mhz)
        return HardwareCost(area_um2 * 1e-6, leakage_w, clock_mhz, peak_w, clock_w, energies)

    def _energies(self, config: AcceleratorConfig, clock_mhz: float):
        """Per-event energies and clock power from `dse.energy_ihp` where its fit is packaged
        (the hook for workload energy); otherwise none, and layers keep their own energy."""
        from tensorforge.dse import energy_ihp

        fit = self.energy_fit()
        if fit is None:
            return None, 0.0
        return energy_ihp.ihp_energies(config, fit), energy_ihp.clock_power_w(
            config, clock_mhz, fit)


def osu018_model() -> SynthesisAreaPower:
    """The model fitted to OSU 0.18 um synthesis (``--hardware-model synthesis-osu018``)."""
    return SynthesisAreaPower("osu018")
