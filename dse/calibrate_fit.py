"""Fitting `area_power`'s coefficients to calibration records (`calibrate` makes them), and the
held-out check of the whole model.

Each component's logic is fitted on its own blocks by non-negative least squares; errors per
component are leave-one-out. Where memories are exact (IHP), the targets are the logic's own:
the record's area and leakage minus its macros', its dynamic energy minus the macros' access
energy. Whole accelerators give `control` (their logic beyond the fitted components, fitted to
their residuals) and the clock (their critical paths on `timing_features("control")`). Each
accelerator is then predicted by a model whose `control` was fitted without it: the held-out
check of the model as the search uses it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tensorforge.config import AcceleratorConfig
from tensorforge.dse.area_power import (
    COMPONENTS,
    EXACT_MEMORIES,
    QUANTITIES,
    AreaPowerFit,
    ComponentFit,
    clock_period_ns,
    component_costs,
    features,
    timing_features,
)
from tensorforge.fpga.technology import DEFAULT_TECH

CLOCK_NS = 10.0
ACTIVITY = 0.1
# Used only for a component none of whose designs synthesized (reported as such): the
# first-order 45 nm DMA figure (150 um^2 per bus bit) scaled by (180/45)^2, and a placeholder.
FALLBACKS = {
    "dma": ComponentFit({"bus_bits": 150.0 * 16}, {}, {}, {}),
    "control": ComponentFit({"one": 200_000.0}, {}, {}, {}),
}
FITTED = tuple(c for c in COMPONENTS if c != "control")  # fitted on blocks of their own
DESCRIPTIONS = {
    "ihp-sg13g2": "IHP SG13G2 130 nm cells (typ 1.20 V 25 C) + IHP SRAM macros (yosys + OpenSTA)",
    "osu018": "OSU 0.18um cells + analytical 0.18um SRAM macros (yosys + OpenSTA)",
}


def targets(record: dict[str, Any]) -> dict[str, float]:
    """What synthesis measured: area, leakage, dynamic energy per cycle, and the critical path
    as the shortest period the design meets (clock - slack: the worst path's arrival plus its
    endpoint's setup, which for a macro's address pins is up to 2.3 ns; records without a
    slack, the OSU ones, give the arrival)."""
    asic = record["asic"]
    power = asic["power_mw"]
    clock_ns = record.get("clock_ns", CLOCK_NS)
    period = clock_ns - asic["slack_ns"] if "slack_ns" in asic else asic["critical_path_ns"]
    return {"area_um2": asic["area_um2"], "leakage_mw": power["leakage"],
            "dynamic_pj": (power["internal"] + power["switching"]) * clock_ns,
            "critical_path_ns": period}


def logic_targets(record: dict[str, Any], tech: str) -> dict[str, float]:
    """`targets` without the macros' share where the model prices memories exactly."""
    measured = targets(record)
    if tech not in EXACT_MEMORIES:
        return measured
    asic = record["asic"]
    clock_ns = record.get("clock_ns", CLOCK_NS)
    return {**measured,
            "area_um2": measured["area_um2"] - asic.get("macro_area_um2", 0.0),
            "leakage_mw": measured["leakage_mw"] - asic.get("macro_leakage_mw", 0.0),
            "dynamic_pj": measured["dynamic_pj"] - asic.get("macro_power_mw", 0.0) * clock_ns}


def _matrix(rows: list[dict[str, float]]) -> tuple[list[str], np.ndarray]:
    names = list(rows[0])
    return names, np.array([[row[n] for n in names] for row in rows], dtype=float)


def _fit_nonnegative(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Non-negative least squares, columns scaled so the fit is well conditioned."""
    from sklearn.linear_model import LinearRegression

    scale = np.maximum(np.abs(x).max(axis=0), 1e-12)
    model = LinearRegression(positive=True, fit_intercept=False).fit(x / scale, y)
    return model.coef_ / scale


def _configs(records: list[dict[str, Any]]) -> list[AcceleratorConfig]:
    return [AcceleratorConfig.from_dict(r["config"]) for r in records]


def fit(records: list[dict[str, Any]], tech: str = DEFAULT_TECH, *, rtl_commit: str = "unknown",
        hardware_digest: str = "", clock_rule: str = "",
        reference_rtl: list | None = None) -> AreaPowerFit:
    """Fit every component's coefficients; leave-one-out errors go into ``errors``."""
    components, errors = {}, {}
    for component in FITTED:
        own = [r for r in records if r["component"] == component and "asic" in r]
        if not own:
            failures = [r.get("asic_error", "") for r in records if r["component"] == component]
            components[component] = FALLBACKS.get(component, ComponentFit({}, {}, {}, {}))
            errors[component] = {"fallback": failures[0] if failures else "no designs"}
            continue
        configs = _configs(own)
        coefficients, component_errors = {}, {}
        for quantity in QUANTITIES:
            make = timing_features if quantity == "critical_path_ns" else features
            names, x = _matrix([make(component, c, tech) for c in configs])
            y = np.array([logic_targets(r, tech)[quantity] for r in own])
            coefficients[quantity] = dict(zip(names, map(float, _fit_nonnegative(x, y)),
                                              strict=True))
            component_errors[quantity] = _leave_one_out(x, y)
        components[component] = ComponentFit(**coefficients)
        errors[component] = component_errors
    accelerators = [r for r in records if r["component"] == "accelerator" and "asic" in r]
    partial = AreaPowerFit({**components, "control": FALLBACKS["control"]}, CLOCK_NS, ACTIVITY,
                           DESCRIPTIONS.get(tech, tech), tech=tech)
    if accelerators:
        components["control"] = _fit_control(partial, accelerators)
        errors["control"] = {"accelerators": len(accelerators)}
        errors["accelerator"] = _held_out_accelerators(partial, accelerators)
    else:
        components["control"] = FALLBACKS["control"]
        errors["control"] = {"fallback": "no whole accelerator synthesized"}
    return AreaPowerFit(components, CLOCK_NS, ACTIVITY, DESCRIPTIONS.get(tech, tech), errors,
                        tech, rtl_commit, hardware_digest, clock_rule, reference_rtl or [])


def _without_control(fit: AreaPowerFit, config: AcceleratorConfig) -> dict[str, float]:
    """The model's area, leakage and dynamic energy of ``config`` with no `control` logic."""
    parts = component_costs(fit, config)
    control = fit.components["control"]
    values = features("control", config, fit.tech)
    return {q: sum(p[q] for p in parts.values()) - control.predict(q, values)
            for q in QUANTITIES[:3]}


def _with_macro_access(fit: AreaPowerFit, config: AcceleratorConfig,
                       values: dict[str, float]) -> dict[str, float]:
    """``values`` plus the macros' access energy at the calibration activity (exact)."""
    if not fit.exact_memories:
        return values
    from tensorforge.dse.memory_shapes import memory_cost

    return {**values, "dynamic_pj": values["dynamic_pj"]
            + fit.activity * memory_cost(config).access_pj}


def _fit_control(fit: AreaPowerFit, accelerators: list[dict[str, Any]]) -> ComponentFit:
    """What whole accelerators hold beyond the fitted components (compute and store units,
    controller, queues, glue): non-negative least squares of their area, leakage and dynamic
    energy residuals on `features("control")`, and of their measured critical paths on
    `timing_features("control")` (the whole accelerator's clock: `clock_period_ns`)."""
    configs = _configs(accelerators)
    names, x = _matrix([features("control", c, fit.tech) for c in configs])
    fits = {}
    for quantity in QUANTITIES[:3]:
        residual = np.array([
            targets(r)[quantity] - _with_macro_access(fit, c, _without_control(fit, c))[quantity]
            for r, c in zip(accelerators, configs, strict=True)])
        fits[quantity] = dict(zip(names, map(float, _fit_nonnegative(x, residual)), strict=True))
    paths = np.array([targets(r)["critical_path_ns"] for r in accelerators])
    timing_names, timing = _matrix([timing_features("control", c, fit.tech) for c in configs])
    fits["critical_path_ns"] = dict(zip(timing_names, map(float, _fit_nonnegative(timing, paths)),
                                        strict=True))
    return ComponentFit(**fits)


def predict(fit: AreaPowerFit, config: AcceleratorConfig) -> dict[str, float]:
    """The model's area, leakage, dynamic energy per cycle (macro accesses included, at the
    calibration activity) and critical path of a whole accelerator."""
    parts = component_costs(fit, config)
    totals = {q: sum(p[q] for p in parts.values()) for q in QUANTITIES[:3]}
    return {**_with_macro_access(fit, config, totals),
            "critical_path_ns": clock_period_ns(fit, config)}


def _held_out_accelerators(fit: AreaPowerFit, accelerators: list[dict[str, Any]]
                           ) -> list[dict[str, Any]]:
    """Each accelerator against the model whose control part was fitted without it (the
    component fits never see accelerators): measured, predicted, relative error."""
    rows = []
    for held, record in enumerate(accelerators):
        others = [r for i, r in enumerate(accelerators) if i != held] or [record]
        control = _fit_control(fit, others)
        without = AreaPowerFit({**fit.components, "control": control}, fit.clock_ns,
                               fit.activity, fit.technology, tech=fit.tech)
        config = AcceleratorConfig.from_dict(record["config"])
        predicted = predict(without, config)
        measured = targets(record)
        rows.append({
            "design": config.describe(),
            "clock_ns": record.get("clock_ns", CLOCK_NS),
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
