"""Sweep plots: the Pareto front in 2D projections, and hypervolume against trials.

Figures are drawn on matplotlib's Agg canvas directly (``Figure`` + ``FigureCanvasAgg``), not
through pyplot, so no global backend or figure registry is touched and plotting works in
worker processes and on machines without a display.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from tensorforge.dse.codesign import OBJECTIVES, SweepResult
from tensorforge.dse.sweep_store import OK

LABELS = {"latency_ms": "latency (ms)", "power_w": "power (W)", "area_mm2": "area (mm²)"}
#: The three 2D projections of the (latency, power, area) front.
PROJECTIONS = (("latency_ms", "power_w"), ("latency_ms", "area_mm2"), ("power_w", "area_mm2"))


def plot_pareto(result: SweepResult, path: Path) -> Path:
    """Every evaluated design (feasible, infeasible) with the Pareto set highlighted."""
    figure = Figure(figsize=(13, 4), layout="constrained")
    axes = figure.subplots(1, len(PROJECTIONS))
    ok = [t for t in result.trials if t.status == OK]
    pareto = {t.index for t in result.pareto()}
    groups = {
        "infeasible": [t for t in ok if not result.feasible(t)],
        "feasible": [t for t in ok if result.feasible(t) and t.index not in pareto],
        "Pareto set": [t for t in ok if t.index in pareto],
    }
    styles = {
        "infeasible": {"marker": "x", "color": "tab:gray", "alpha": 0.6},
        "feasible": {"marker": "o", "color": "tab:blue", "alpha": 0.5},
        "Pareto set": {"marker": "*", "color": "tab:red", "s": 120},
    }
    for ax, (x_name, y_name) in zip(axes, PROJECTIONS, strict=True):
        x_col, y_col = OBJECTIVES.index(x_name), OBJECTIVES.index(y_name)
        for label, trials in groups.items():
            if trials:
                values = np.array([t.objectives for t in trials])
                ax.scatter(values[:, x_col], values[:, y_col], label=label, **styles[label])
        for constraint in result.problem.constraints:
            if constraint.metric == y_name:
                ax.axhline(constraint.upper, color="tab:red", linestyle="--", linewidth=1)
            if constraint.metric == x_name:
                ax.axvline(constraint.upper, color="tab:red", linestyle="--", linewidth=1)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(LABELS[x_name])
        ax.set_ylabel(LABELS[y_name])
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(loc="best", fontsize="small")
    figure.suptitle(f"{result.spec.workload_name}: {len(ok)} designs, {len(pareto)} Pareto-optimal")
    return _save(figure, path)


def plot_hypervolume(result: SweepResult, path: Path) -> Path:
    """Feasible hypervolume (fraction of the reference box) after each trial."""
    figure = Figure(figsize=(6, 4), layout="constrained")
    ax = figure.subplots()
    box = float(np.prod(result.problem.reference))
    trace = np.array(result.hypervolumes) / box
    ax.plot(np.arange(1, len(trace) + 1), trace, marker="o", markersize=3)
    ax.set_xlabel("trial")
    ax.set_ylabel("hypervolume (fraction of reference box)")
    ax.set_title(f"{result.spec.method}, seed {result.spec.seed}")
    ax.grid(True, alpha=0.3)
    return _save(figure, path)


def _save(figure: Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    FigureCanvasAgg(figure)
    figure.savefig(path, dpi=110)
    return path
