"""What a sweep leaves behind for a person: CSV tables, a Markdown report, and plots.

``DIR/trials.csv`` has every trial (status, objectives, design point, error, hypervolume after
it); ``DIR/pareto.csv`` the Pareto set; ``DIR/report.md`` the Pareto table, each chosen
configuration with `AcceleratorConfig.describe` and its per-layer mappings, the hypervolume
trace, and synthesized figures when the top designs were synthesized; ``DIR/pareto.png`` and
``DIR/hypervolume.png`` the plots. When no design meets the constraints the report says so
first and the tables show the closest designs (least total violation) instead.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tensorforge.config import AcceleratorConfig
from tensorforge.dse.codesign import OBJECTIVES, SweepResult
from tensorforge.dse.coverage import (
    HOST_NOTE,
    TrialCoverage,
    describe_space_coverage,
    space_coverage,
    trial_coverage,
)
from tensorforge.dse.model_provenance import provenance
from tensorforge.dse.plots import plot_hypervolume, plot_pareto
from tensorforge.dse.sweep_store import OK, TrialRecord
from tensorforge.dse.synth_top import SynthesisRow

METRIC_COLUMNS = ("latency_ms", "power_w", "area_mm2", "energy_mj", "latency_cycles", "clock_mhz")


def pareto_rows(result: SweepResult) -> list[dict[str, Any]]:
    """The Pareto set (or the closest designs) as flat rows, lowest latency first."""
    return [_row(result, trial) for trial in result.pareto()]


def _row(result: SweepResult, trial: TrialRecord) -> dict[str, Any]:
    row: dict[str, Any] = {"trial": trial.index, "status": trial.status}
    row.update({name: trial.metrics.get(name, "") for name in METRIC_COLUMNS})
    row["feasible"] = result.feasible(trial)
    row["violation"] = round(result.violation(trial), 6) if trial.status == OK else ""
    row["design"] = _describe(trial)
    row.update(_provenance_columns(result))
    return row


def _provenance_columns(result: SweepResult) -> dict[str, Any]:
    """Technology, fit RTL and held-out errors of the hardware model, on every CSV row."""
    return provenance(result.spec.hardware_model).columns()


def _describe(trial: TrialRecord) -> str:
    if trial.config is None:
        return ""
    return AcceleratorConfig.from_dict(trial.config).describe()


def headline(result: SweepResult) -> str:
    """One sentence on feasibility: what a user must read before the table."""
    ok = sum(t.status == OK for t in result.trials)
    if not ok:
        return (
            f"None of the {len(result.trials)} trials produced a valid, evaluated design; "
            "see the errors in trials.csv."
        )
    if not result.any_feasible:
        return (
            f"No design met the constraints ({result.spec.scenario.describe()}) in "
            f"{len(result.trials)} trials; the tables show the closest designs (least total "
            "violation). Relax a bound or widen the space."
        )
    return (
        f"{len(result.pareto())} Pareto-optimal designs among {ok} evaluated "
        f"({len(result.trials)} trials). {_mac_coverage(result)}"
    )


def _mac_coverage(result: SweepResult) -> str:
    """The share of the workload's MACs the evaluated designs ran on the device."""
    layers = result.spec.layers
    found = [_coverage(layers, t) for t in result.trials if t.status == OK]
    low = min(found, key=lambda c: c.share)
    padded = sorted({round(100 * c.padded_macs / max(c.total_macs, 1)) for c in found})
    shown = f"{padded[0]}%" if len(padded) == 1 else f"{padded[0]}-{padded[-1]}%"
    every = "Every evaluated design ran" if low.share == 1.0 else "The evaluated designs ran"
    host = f" The rest ran on the host, {HOST_NOTE}." if low.share < 1.0 else ""
    return (f"{every} {'at least ' if low.share < 1.0 else ''}{low.share:.0%} of the "
            f"workload's {low.total_macs:,} MACs on the device ({shown} through padded "
            f"tensorize choices).{host}")


def _coverage(layers: Sequence[Any], trial: TrialRecord) -> TrialCoverage:
    return trial_coverage(layers, trial.layers, (trial.config or {}).get("intrinsic"))


def space_coverage_lines(result: SweepResult) -> list[str]:
    """Per intrinsic of the space: the share of the workload's MACs it has choices for."""
    intrinsics = next(v.values for v in result.spec.space.space.variables
                      if v.name == "intrinsic")
    rows = space_coverage(result.spec.layers, [str(i) for i in intrinsics])
    return describe_space_coverage(rows)


def write_reports(
    result: SweepResult,
    out_dir: Path,
    synthesis: Sequence[SynthesisRow] = (),
    *,
    plots: bool = True,
) -> dict[str, Path]:
    """Write every report file into ``out_dir``; returns them by name."""
    out_dir.mkdir(parents=True, exist_ok=True)
    files = {
        "trials.csv": _write_trials(result, out_dir / "trials.csv"),
        "pareto.csv": _write_csv(out_dir / "pareto.csv", pareto_rows(result)),
    }
    if plots:
        files["pareto.png"] = plot_pareto(result, out_dir / "pareto.png")
        files["hypervolume.png"] = plot_hypervolume(result, out_dir / "hypervolume.png")
    report = out_dir / "report.md"
    report.write_text(render_markdown(result, synthesis, plots=plots))
    files["report.md"] = report
    return files


def _write_trials(result: SweepResult, path: Path) -> Path:
    names = result.spec.space.space.names
    rows = []
    for trial, hv in zip(
        result.trials, _padded(result.hypervolumes, len(result.trials)), strict=True
    ):
        row = _row(result, trial)
        row["hypervolume"] = hv
        row.update({f"hw.{n}": trial.point.get(n, "") for n in names})
        row["seconds"] = round(trial.seconds, 3)
        row["error"] = trial.error
        rows.append(row)
    return _write_csv(path, rows)


def _padded(values: Sequence[float], n: int) -> list[float | str]:
    return [*values, *([""] * (n - len(values)))][:n]


def _write_csv(path: Path, rows: list[dict[str, Any]]) -> Path:
    fields = list(rows[0]) if rows else ["trial", "status", *METRIC_COLUMNS, "design"]
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    return path


def _markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return lines


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value).replace("|", "/")


def render_markdown(
    result: SweepResult, synthesis: Sequence[SynthesisRow] = (), *, plots: bool = True
) -> str:
    spec = result.spec
    lines = [
        f"# Co-design sweep `{result.sweep_id}`",
        "",
        f"- workload: **{spec.workload_name}** ({len(spec.layers)} distinct layers, "
        f"{sum(la.count for la in spec.layers)} in all)",
        f"- constraints: {spec.scenario.describe()}",
        f"- search: {spec.method}, seed {spec.seed}, {spec.trials} trials "
        f"(batch {spec.batch_size}); {result.evaluated} evaluated, {result.replayed} resumed "
        "from the store",
        f"- models: layer evaluator `{spec.description()['evaluator']}`, hardware model "
        f"`{spec.description()['hardware_model']}`",
        f"- design space: {spec.space.cardinality} points; searched: "
        f"{', '.join(spec.space.free_variables()) or 'nothing (all fixed)'}",
        "- tensorize choices per intrinsic (`dse/coverage.py`; padded choices idle part of "
        "the array): " + "; ".join(space_coverage_lines(result)),
        "- hypervolume reference point: "
        + ", ".join(
            f"{n} {r:.4g}" for n, r in zip(OBJECTIVES, spec_reference(result), strict=True)
        ),
        "",
        headline(result),
        "",
        "## Pareto set" if result.any_feasible else "## Closest designs (constraints unmet)",
        "",
    ]
    pareto = result.pareto()
    lines += _markdown_table(
        ["trial", "latency ms", "power W", "area mm²", "energy mJ", "clock MHz", "design"],
        [
            [
                t.index,
                *(
                    t.metrics.get(n, "")
                    for n in ("latency_ms", "power_w", "area_mm2", "energy_mj", "clock_mhz")
                ),
                _describe(t),
            ]
            for t in pareto
        ],
    )
    lines += ["", "## Chosen configurations and their mappings", ""]
    for trial in pareto:
        lines += [f"### Trial {trial.index}: {_describe(trial)}", ""]
        if trial.status == OK:
            lines += [f"MACs: {_coverage(spec.layers, trial).describe()}.", ""]
        lines += ["```json", json.dumps(trial.config, indent=1, sort_keys=True), "```", ""]
        # instructions: the layer's program (an evaluator that generates none leaves "—")
        lines += _markdown_table(
            ["layer", "count", "cycles", "instructions", "energy µJ", "mapping"],
            [
                [
                    la["name"],
                    la["count"],
                    la.get("cycles", ""),
                    _count(la.get("details", {}).get("instructions")),
                    la.get("energy_pj", 0.0) * 1e-6,
                    json.dumps(la.get("mapping", {})),
                ]
                for la in trial.layers
            ],
        )
        lines.append("")
    lines += fidelity_section(spec.description(), spec.hardware_model)
    if synthesis:
        lines += _synthesis_section(synthesis)
    lines += ["## Hypervolume per trial", ""]
    box = float(np.prod(result.problem.reference))
    lines += _markdown_table(
        ["trial", "status", "hypervolume", "fraction of reference box"],
        [
            [t.index, t.status, hv, hv / box]
            for t, hv in zip(result.trials, result.hypervolumes, strict=False)
        ],
    )
    failed = [t for t in result.trials if t.status != OK]
    if failed:
        lines += ["", "## Trials without a result", ""]
        lines += _markdown_table(
            ["trial", "status", "error"], [[t.index, t.status, t.error] for t in failed]
        )
    if plots:
        lines += [
            "",
            "## Plots",
            "",
            "![Pareto fronts](pareto.png)",
            "",
            "![Hypervolume](hypervolume.png)",
        ]
    return "\n".join(lines) + "\n"


def fidelity_section(description: dict[str, Any], hardware_model: Any) -> list[str]:
    """Which model made each figure of the tables, and how far it was from the RTL and from
    synthesis on designs it was not fitted on (its held-out error), or that it was never
    checked."""
    lines = ["## Where the figures come from, and their held-out error", ""]
    evaluator = description["evaluator"]
    if evaluator.startswith("first-order"):
        lines.append(f"- latency (cycles): `{evaluator}`, a first-order model never checked "
                     "against the RTL.")
    else:
        lines.append(f"- latency (cycles): `{evaluator}` on {_cycle_fidelity()}")
    lines.append(f"- {provenance(hardware_model).line()}")
    lines += ["- energy: per-event energies of the hardware model's technology where it has "
              "them (`dse/energy_ihp.py`), else the 45 nm `EnergyTable` (`dse/cost_model.py`).",
              ""]
    return lines


def _cycle_fidelity() -> str:
    from tensorforge.dse.fidelity import load_summary, stale_reasons

    measured = load_summary()
    if measured is None or "held-out" not in measured["sets"]:
        return "the analytical cost model; its held-out error was not measured yet " \
               "(`tensorforge validate --write`)."
    held = measured["sets"]["held-out"]
    stale = stale_reasons(measured)
    return (f"the analytical cost model (`dse/cost_model.py`): against RTL cycles on "
            f"{held['count']} held-out programs, mean |error| {held['mean_abs_error']:.1%}, "
            f"max {held['max_abs_error']:.1%}, Spearman {held['spearman']:.3f} "
            f"(docs/fidelity.md, RTL at {measured['rtl_commit']})"
            + (f"; **stale: {', '.join(stale)}**." if stale else "."))


def spec_reference(result: SweepResult) -> tuple[float, ...]:
    return tuple(float(r) for r in result.problem.reference_point)


def _synthesis_section(rows: Sequence[SynthesisRow]) -> list[str]:
    lines = [
        "## Synthesized designs (model vs synthesis)",
        "",
        "*sweep model*: the sweep's hardware model (its power is the workload's average power);",
        "*calibrated model*: `SynthesisAreaPower`, calibrated on IHP SG13G2 130 nm synthesis",
        "(memories exact), its power the peak (everything toggling); *ASIC*: the whole",
        "accelerator through the IHP flow (memories as SRAM macros, at the sweep model's clock,",
        "input activity 0.1), its MHz 1 / (clock - slack), setup included; *ECP5*: Yosys +",
        "nextpnr (out of context).",
        "",
    ]
    table = []
    for row in rows:
        ecp5, asic, fitted = row.ecp5 or {}, row.asic or {}, row.calibrated or {}
        cells = [row.trial]
        for key in ("area_mm2", "power_w"):
            cells += [_number(row.model.get(key)), _number(fitted.get(key)), _number(asic.get(key))]
        cells += [
            _number(row.model.get("clock_mhz")),
            _number(fitted.get("clock_mhz")),
            _number(asic.get("fmax_mhz")),
            _number(ecp5.get("fmax_mhz")),
            _number(ecp5.get("luts")),
            _number(ecp5.get("dsps")),
            "; ".join(row.notes),
        ]
        table.append(cells)
    header = ["trial"]
    header += [f"{who} mm²" for who in ("sweep model", "calibrated model", "ASIC")]
    header += [f"{who} W" for who in ("sweep model", "calibrated model", "ASIC")]
    header += ["sweep model MHz", "calibrated model MHz", "ASIC MHz"]
    header += ["ECP5 Fmax MHz", "LUTs", "DSPs", "notes"]
    lines += _markdown_table(header, table)
    return [*lines, ""]


def _count(value: float | None) -> str:
    return "—" if value is None else f"{int(value):,}"


def _number(value: Any) -> str:
    if value is None or value == "":
        return "—"
    return f"{value:.4g}" if isinstance(value, float) else str(value)
