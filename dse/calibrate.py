"""Calibration: synthesize generated blocks and whole accelerators, fit `area_power`'s
coefficients, and report the fit's error on held-out designs.

The components are fitted on their own blocks: PE arrays (every interconnect, a few shapes,
with and without local stores), banked scratchpads, accumulator buffers and the DMA load unit,
each through the OSU 0.18um ASIC flow (memories as SRAM macros; area, critical path, power at
a fixed activity) and, where Yosys/nextpnr accept it, the ECP5 flow (LUT/FF/DSP/BRAM). Errors
per component are leave-one-out. Whole accelerators (``hw.accelerator.Accelerator``) are
synthesized too: what they hold beyond the fitted components (controller, instruction queues,
control registers, glue) is the ``control`` component, a constant fitted to their residuals,
and each accelerator is predicted by a model fitted without it (its own control residual left
out), which is the held-out check of the sum-of-components model as the search uses it.
Everything is kept: the design, its configuration as JSON, and both reports, in
``dse/data/calibration_records.json``; the fit in ``dse/data/area_power_fit.json``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from tensorforge.config import AcceleratorConfig
from tensorforge.dse.area_power import (
    COMPONENTS,
    AreaPowerFit,
    ComponentFit,
    clock_period_ns,
    features,
    timing_features,
)
from tensorforge.errors import TensorforgeError

logger = logging.getLogger(__name__)

CLOCK_NS = 10.0
ACTIVITY = 0.1
QUANTITIES = ("area_um2", "leakage_mw", "dynamic_mw", "critical_path_ns")
# Used only for a component none of whose designs synthesized (reported as such): the
# first-order 45 nm DMA figure (150 um^2 per bus bit) scaled by (180/45)^2 to 0.18 um.
# The control fallback is the placeholder the model used before accelerators were synthesized.
FALLBACKS = {
    "dma": ComponentFit({"bus_bits": 150.0 * 16}, {}, {}, {}),
    "control": ComponentFit({"one": 200_000.0}, {}, {}, {}),
}
FITTED = tuple(c for c in COMPONENTS if c != "control")  # fitted on blocks of their own


@dataclass(frozen=True)
class Design:
    component: str
    config: AcceleratorConfig

    @property
    def name(self) -> str:
        return f"{self.component}: {self.config.describe()}"


def _config(rows: int, cols: int, interconnect: str = "systolic", *, capacity: int = 1024,
            banks: int = 2, accumulator: int = 512, bus_bits: int = 64,
            local_bytes: int = 0) -> AcceleratorConfig:
    return AcceleratorConfig.from_dict({
        "array": {"rows": rows, "cols": cols, "interconnect": interconnect,
                  "local_bytes": local_bytes},
        "scratchpad": {"capacity": capacity, "banks": banks, "accumulator": accumulator},
        "dma": {"bus_bits": bus_bits},
    })


def accelerator_set() -> list[Design]:
    """Whole GEMM accelerators, held out one at a time: array sizes 2x2 to 8x8, every
    interconnect, scratchpads from 1 to 64 KiB (the 8x8/64 KiB one is the default
    `AcceleratorConfig`; one to three minutes of ASIC flow each)."""
    return [
        Design("accelerator", _config(2, 2, capacity=1024, banks=2, accumulator=512)),
        Design("accelerator", _config(4, 4, capacity=4096, banks=4, accumulator=1024)),
        Design("accelerator", _config(4, 4, capacity=65536, banks=4, accumulator=16384)),
        Design("accelerator", _config(4, 4, "none", capacity=65536, banks=4,
                                      accumulator=16384)),
        Design("accelerator", _config(4, 4, "full", capacity=65536, banks=4,
                                      accumulator=16384)),
        Design("accelerator", _config(2, 8, capacity=16384, banks=8, accumulator=4096)),
        Design("accelerator", _config(8, 8, capacity=16384, banks=4, accumulator=4096)),
        Design("accelerator", AcceleratorConfig()),
    ]


def calibration_set() -> list[Design]:
    """The component blocks synthesized (a few minutes in all on one core)."""
    designs = [Design("pe_array", _config(r, c, link))
               for r, c in ((2, 2), (2, 4), (4, 4))
               for link in ("none", "systolic", "full")]
    designs += [Design("pe_array", _config(2, 2, "systolic", local_bytes=8)),
                Design("pe_array", _config(4, 2, "systolic"))]
    designs += [Design("scratchpad", _config(2, 2, capacity=cap, banks=banks))
                for cap, banks in ((256, 1), (256, 2), (512, 2), (512, 4), (1024, 4),
                                   (1024, 1), (4096, 4), (16384, 8))]
    # wider lines (4x4 and 8x8 arrays): macro shapes as the accelerators have them
    designs += [Design("scratchpad", _config(r, r, capacity=cap, banks=4))
                for r, cap in ((4, 4096), (4, 16384), (8, 16384), (8, 65536))]
    designs += [Design("accumulator", _config(2, 2, accumulator=acc))
                for acc in (128, 256, 512, 2048)]
    designs += [Design("accumulator", _config(r, r, accumulator=acc))
                for r, acc in ((4, 1024), (4, 16384), (8, 4096))]
    designs += [Design("dma", _config(2, 2, bus_bits=bits)) for bits in (32, 64, 128)]
    return designs


def block_verilog(design: Design) -> tuple[str, str]:
    """``(verilog, top name)`` of the generated block."""
    from amaranth import Signal
    from amaranth.back import verilog
    from amaranth.lib import data

    if design.component == "accelerator":
        from tensorforge.dse.synth_top import TOP, accelerator_verilog

        return accelerator_verilog(design.config), TOP
    from tensorforge.hw.accumulator import AccumulatorBuffer
    from tensorforge.hw.dma import LoadUnit
    from tensorforge.hw.pe_array import PEArray
    from tensorforge.hw.scratchpad import Scratchpad

    make = {"pe_array": PEArray, "scratchpad": Scratchpad, "accumulator": AccumulatorBuffer,
            "dma": LoadUnit}[design.component]
    block = make(design.config)
    ports = []  # always-ready handshakes are constants, not ports
    for _, _, value in block.signature.flatten(block):
        value = value.as_value() if isinstance(value, data.View) else value
        if isinstance(value, Signal):
            ports.append(value)
    top = f"tf_{design.component}"
    return verilog.convert(block, name=top, ports=ports), top


def synthesize(design: Design, *, ecp5: bool = True) -> dict[str, Any]:
    """One calibration record: the design, its ASIC report and (if it runs) its ECP5 report."""
    from tensorforge.fpga import synthesize_asic, synthesize_ecp5

    text, top = block_verilog(design)
    record: dict[str, Any] = {"component": design.component, "config": design.config.to_dict()}
    try:
        asic = synthesize_asic(text, top, clock_ns=CLOCK_NS, activity=ACTIVITY)
    except TensorforgeError as error:  # a flow failure is data: the fit skips the design
        record["asic_error"] = str(error).splitlines()[0]
        return record
    record |= {
        "asic": {"area_um2": asic.area_um2, "cells": asic.cells,
                 "logic_area_um2": asic.logic_area_um2, "macro_area_um2": asic.macro_area_um2,
                 "critical_path_ns": asic.critical_path_ns,
                 "power_mw": vars(asic.power_mw)},
    }
    if ecp5:
        try:
            report = synthesize_ecp5(text, top, clock_ns=CLOCK_NS, out_of_context=True)
            record["ecp5"] = {k: report.summary()[k] for k in
                              ("luts", "ffs", "dsps", "brams", "fmax_mhz")}
        except TensorforgeError as error:
            record["ecp5"] = {"error": str(error).splitlines()[0]}
    return record


def run_calibration(designs: Iterable[Design], *, ecp5: bool = True,
                    progress: Callable[[str], None] = logger.info) -> list[dict[str, Any]]:
    records = []
    for design in designs:
        progress(f"synthesizing {design.name}")
        records.append(synthesize(design, ecp5=ecp5))
    return records


def targets(record: dict[str, Any]) -> dict[str, float]:
    asic = record["asic"]
    power = asic["power_mw"]
    return {"area_um2": asic["area_um2"], "leakage_mw": power["leakage"],
            "dynamic_mw": power["internal"] + power["switching"],
            "critical_path_ns": asic["critical_path_ns"]}


def _design_matrix(component: str, records: list[dict[str, Any]],
                   make=features) -> tuple[list[str], np.ndarray]:
    rows = [make(component, AcceleratorConfig.from_dict(r["config"])) for r in records]
    names = list(rows[0])
    return names, np.array([[row[n] for n in names] for row in rows], dtype=float)


def _fit_nonnegative(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Non-negative least squares, columns scaled so the ridge-free fit is well conditioned."""
    from sklearn.linear_model import LinearRegression

    scale = np.maximum(np.abs(x).max(axis=0), 1e-12)
    model = LinearRegression(positive=True, fit_intercept=False).fit(x / scale, y)
    return model.coef_ / scale


def fit(records: list[dict[str, Any]]) -> AreaPowerFit:
    """Fit every component's coefficients; leave-one-out errors go into ``errors``."""
    components, errors = {}, {}
    for component in FITTED:
        own = [r for r in records if r["component"] == component and "asic" in r]
        if not own:
            failures = [r.get("asic_error", "") for r in records if r["component"] == component]
            components[component] = FALLBACKS[component]
            errors[component] = {"fallback": failures[0] if failures else "no designs"}
            continue
        coefficients, component_errors = {}, {}
        for quantity in QUANTITIES:
            make = timing_features if quantity == "critical_path_ns" else features
            names, x = _design_matrix(component, own, make)
            y = np.array([targets(r)[quantity] for r in own])
            coef = _fit_nonnegative(x, y)
            coefficients[quantity] = dict(zip(names, map(float, coef), strict=True))
            component_errors[quantity] = _leave_one_out(x, y)
        components[component] = ComponentFit(**coefficients)
        errors[component] = component_errors
    accelerators = [r for r in records if r["component"] == "accelerator" and "asic" in r]
    if accelerators:
        components["control"] = _fit_control(components, accelerators)
        errors["control"] = {"accelerators": len(accelerators)}
        errors["accelerator"] = _held_out_accelerators(components, accelerators)
    else:
        components["control"] = FALLBACKS["control"]
        errors["control"] = {"fallback": "no whole accelerator synthesized"}
    return AreaPowerFit(components, CLOCK_NS, ACTIVITY, TECHNOLOGY, errors)


TECHNOLOGY = "OSU 0.18um cells + analytical 0.18um SRAM macros (yosys + OpenSTA)"


def _fitted_parts(components: dict[str, ComponentFit], record: dict[str, Any]
                  ) -> dict[str, float]:
    """The fitted components' sum (area, leakage, dynamic) and slowest path for ``record``."""
    config = AcceleratorConfig.from_dict(record["config"])
    total = dict.fromkeys(QUANTITIES, 0.0)
    for name in FITTED:
        for quantity in QUANTITIES[:3]:
            total[quantity] += components[name].predict(quantity, features(name, config))
        path = components[name].predict("critical_path_ns", timing_features(name, config))
        total["critical_path_ns"] = max(total["critical_path_ns"], path)
    return total


def _fit_control(components: dict[str, ComponentFit], accelerators: list[dict[str, Any]]
                 ) -> ComponentFit:
    """What whole accelerators hold beyond the fitted components (compute and store units,
    controller, queues, glue): non-negative least squares of their area, leakage and dynamic
    power residuals on `features("control")`, and of their measured critical paths on
    `timing_features("control")` (the whole accelerator's clock: `clock_period_ns`)."""
    configs = [AcceleratorConfig.from_dict(r["config"]) for r in accelerators]
    x = np.array([list(features("control", c).values()) for c in configs], dtype=float)
    names = list(features("control", configs[0]))
    fits = {}
    for quantity in QUANTITIES[:3]:
        residual = np.array([targets(r)[quantity] - _fitted_parts(components, r)[quantity]
                             for r in accelerators])
        coef = _fit_nonnegative(x, residual)
        fits[quantity] = dict(zip(names, map(float, coef), strict=True))
    timing = np.array([list(timing_features("control", c).values()) for c in configs])
    paths = np.array([targets(r)["critical_path_ns"] for r in accelerators])
    timing_names = list(timing_features("control", configs[0]))
    coef = _fit_nonnegative(timing, paths)
    fits["critical_path_ns"] = dict(zip(timing_names, map(float, coef), strict=True))
    return ComponentFit(**fits)


def _held_out_accelerators(components: dict[str, ComponentFit],
                           accelerators: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each accelerator against the model whose control constants were fitted without it (the
    component fits never see accelerators): measured, predicted, relative error."""
    rows = []
    for held, record in enumerate(accelerators):
        others = [r for i, r in enumerate(accelerators) if i != held] or [record]
        control = _fit_control(components, others)
        parts = _fitted_parts(components, record)
        config = AcceleratorConfig.from_dict(record["config"])
        predicted = {q: parts[q] + control.predict(q, features("control", config))
                     for q in QUANTITIES[:3]}
        predicted["critical_path_ns"] = clock_period_ns({**components, "control": control},
                                                        config)
        measured = targets(record)
        rows.append({
            "design": config.describe(),
            "alone": len(others) == 1 and others[0] is record,
            "measured": measured,
            "predicted": predicted,
            "relative_error": {q: (predicted[q] - measured[q]) / max(abs(measured[q]), 1e-12)
                               for q in QUANTITIES},
        })
    return rows


def _leave_one_out(x: np.ndarray, y: np.ndarray) -> dict[str, Any]:
    """Relative error of each design predicted by a fit without it."""
    relative = []
    for held in range(len(y)):
        keep = np.arange(len(y)) != held
        coef = _fit_nonnegative(x[keep], y[keep])
        predicted = float(x[held] @ coef)
        relative.append(abs(predicted - y[held]) / max(abs(y[held]), 1e-12))
    finite = [e for e in relative if math.isfinite(e)]
    return {"mean_abs_rel": float(np.mean(finite)) if finite else None,
            "max_abs_rel": float(np.max(finite)) if finite else None,
            "per_design": [float(e) for e in relative]}
