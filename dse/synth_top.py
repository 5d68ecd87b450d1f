"""Synthesize the best designs of a sweep, so the report sets real area/Fmax/power beside the
model's figures (the truth the cost model is judged against, DESIGN.md "Truth and models").

For each of the K fastest Pareto designs: generate Verilog with ``hw.accelerator.Accelerator``,
run the ECP5 flow (LUTs, DSPs, Fmax) and the ASIC flow (IHP SG13G2 area, power, critical path).
This takes minutes per design; results are cached in the shared result store by the flows
themselves. Anything missing (the accelerator template not built yet, a tool not installed, a
flow that fails) becomes a note in that design's row rather than an error: the sweep's results
stand without synthesis.
"""

from __future__ import annotations

import functools
import importlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tensorforge.config import AcceleratorConfig
from tensorforge.dse.codesign import SweepResult
from tensorforge.dse.sweep_store import TrialRecord
from tensorforge.errors import TensorforgeError

logger = logging.getLogger(__name__)

TOP = "accelerator"  # `tensorforge.hw.accelerator.TOP_NAME`, as `generate` writes it


@dataclass
class SynthesisRow:
    """Model figures and synthesized figures of one design (None where a flow did not run)."""

    trial: int
    model: dict[str, float]
    calibrated: dict[str, float] | None = None  # `SynthesisAreaPower`: the flow's own process
    ecp5: dict[str, Any] | None = None
    asic: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)


def accelerator_verilog(config: AcceleratorConfig, target: str = "generic") -> str:
    """Verilog of the accelerator for ``config`` (``target``: `tensorforge.hw.targets`): the
    text `tensorforge generate` writes (`tensorforge.api.generate_verilog`); TensorforgeError
    if hw lacks the template."""
    try:
        importlib.import_module("tensorforge.hw.accelerator")
    except ModuleNotFoundError as error:
        if error.name != "tensorforge.hw.accelerator":
            raise
        raise TensorforgeError(
            "hw/accelerator.py (the top-level accelerator template) has not landed yet; "
            "synthesis of the chosen designs is skipped"
        ) from None
    from tensorforge.api import generate_verilog

    return generate_verilog(config, target)


def synthesize_top(
    result: SweepResult, k: int, *, clock_ns: float = 10.0, map_jobs: MapJobs | None = None
) -> list[SynthesisRow]:
    """Synthesize the ``k`` lowest-latency Pareto designs through both flows; ``map_jobs``
    (a sweep backend's ``map``, e.g. Ray tasks) runs the designs, else one after another."""
    trials = result.pareto()[: max(k, 0)]
    jobs = [functools.partial(_synthesize, trial, clock_ns) for trial in trials]
    if map_jobs is None:
        return [job() for job in jobs]
    return map_jobs(_call, jobs)


#: ``map_jobs(function, items) -> [function(item) for item in items]``, run anywhere.
MapJobs = Callable[[Callable[[Any], Any], Sequence[Any]], list[Any]]


def _call(job: Callable[[], SynthesisRow]) -> SynthesisRow:
    return job()


def _synthesize(trial: TrialRecord, clock_ns: float) -> SynthesisRow:
    """Both flows on one design, each tool run a stage on stderr (jobs run in worker
    processes or Ray tasks, whose stderr reaches the user's terminal)."""
    from tensorforge.fpga.progress import StageProgress, reporting

    with reporting(StageProgress(f"synthesize trial {trial.index}")):
        return _synthesize_quietly(trial, clock_ns)


def _synthesize_quietly(trial: TrialRecord, clock_ns: float) -> SynthesisRow:
    from tensorforge.fpga import synthesize_asic, synthesize_ecp5

    row = SynthesisRow(
        trial.index,
        {k: trial.metrics[k] for k in ("area_mm2", "power_w", "clock_mhz") if k in trial.metrics},
    )
    if trial.config is None:
        row.notes.append("no configuration to synthesize")
        return row
    config = AcceleratorConfig.from_dict(trial.config)
    row.calibrated = _calibrated(config, row.notes)
    try:
        text = accelerator_verilog(config)
    except TensorforgeError as error:
        row.notes.append(str(error))
        return row
    try:
        ecp5 = synthesize_ecp5(text, TOP, clock_ns=clock_ns, out_of_context=True)
        row.ecp5 = {"luts": ecp5.luts, "dsps": ecp5.dsps, "fmax_mhz": ecp5.fmax_mhz}
    except TensorforgeError as error:
        row.notes.append(f"ECP5 flow: {error}")
    # the ASIC flow at the clock the sweep's model gave the design, so its slack tells
    # whether that clock is met; its Fmax is 1 / (clock - slack), setup included
    model_mhz = trial.metrics.get("clock_mhz")
    asic_clock_ns = 1e3 / model_mhz if model_mhz else clock_ns
    try:
        asic = synthesize_asic(text, TOP, clock_ns=asic_clock_ns)
        period = asic.min_period_ns or asic.critical_path_ns
        row.asic = {
            "area_mm2": asic.area_um2 * 1e-6,
            "power_w": asic.power_mw.total * 1e-3,
            "clock_ns": asic_clock_ns,
            "critical_path_ns": asic.critical_path_ns,
            "min_period_ns": period,
            "fmax_mhz": 1e3 / period,
        }
    except TensorforgeError as error:
        row.notes.append(f"ASIC flow: {error}")
    return row


def _calibrated(config: AcceleratorConfig, notes: list[str]) -> dict[str, float] | None:
    """The calibrated model's area, peak power and clock for ``config`` (the ASIC flow's own
    process, unlike the first-order 45 nm model), or None with a note."""
    from tensorforge.dse.area_power import SynthesisAreaPower

    try:
        cost = SynthesisAreaPower()(config)
    except (TensorforgeError, KeyError) as error:
        notes.append(f"synthesis-fitted model: {error}")
        return None
    return {"area_mm2": cost.area_mm2, "power_w": cost.peak_power_w, "clock_mhz": cost.clock_mhz}
