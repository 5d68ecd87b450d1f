"""Calibration: synthesize generated blocks and whole accelerators through the ASIC flow of one
technology, so that `calibrate_fit` can fit `area_power`'s coefficients and report the fit's
error on held-out designs.

The components are synthesized on their own blocks: PE arrays (every interconnect, a few
shapes, with and without local stores), banked scratchpads, accumulator buffers and the DMA
load unit, each through the ASIC flow of ``tech`` (memories as SRAM macros; area, critical
path, power at a fixed input activity) and, where asked, the ECP5 flow (LUT/FF/DSP/BRAM).
Whole accelerators (``hw.accelerator.Accelerator``) are synthesized too; what they hold beyond
the components is the ``control`` component, and their critical paths set the model's clock.

The clock each design is synthesized at matters, because ABC maps towards it (`abc -D`).
Blocks run at `BLOCK_CLOCK_NS`. On IHP SG13G2 every whole accelerator runs at
`ACCELERATOR_CLOCK_NS`, near the paths they achieve, so that the path the model learns is the
one a user gets asking the flow for the model's clock. Measured on the 2x2 accelerator: asked
for 10 ns or for 6.5 ns it gives the same netlist (worst arrival 7.33 ns), asked for 4.2 ns
6.55 ns with the logic area within 0.1%: the path moves by a small part of a change in the
target, so a calibration clock within a couple of nanoseconds of the path keeps the model's
clock within a few percent of what the flow gives at it (`docs/cost_model.md` checks this on
accelerators outside the fit).
Everything is kept: the design, its configuration as JSON, its clock and reports, in
``dse/data/calibration_records-<tech>.json``; the fit in ``dse/data/area_power_fit-<tech>.json``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from tensorforge.config import AcceleratorConfig
from tensorforge.dse.area_power import QUANTITIES  # noqa: F401  (re-exported)
from tensorforge.dse.calibrate_fit import FALLBACKS, FITTED, fit, targets  # noqa: F401
from tensorforge.errors import TensorforgeError
from tensorforge.fpga.technology import DEFAULT_TECH

logger = logging.getLogger(__name__)

BLOCK_CLOCK_NS = 10.0
CLOCK_NS = BLOCK_CLOCK_NS  # the OSU calibration ran everything at this clock
ACCELERATOR_CLOCK_NS = 6.5
ACTIVITY = 0.1


@dataclass(frozen=True)
class Design:
    component: str
    config: AcceleratorConfig

    @property
    def name(self) -> str:
        return f"{self.component}: {self.config.describe()}"


def _config(rows: int, cols: int, interconnect: str = "systolic", *, capacity: int = 1024,
            banks: int = 2, accumulator: int = 512, bus_bits: int = 64,
            local_bytes: int = 0, dataflow: str = "ws", intrinsic: str = "gemm"
            ) -> AcceleratorConfig:
    return AcceleratorConfig.from_dict({
        "intrinsic": intrinsic,
        "array": {"rows": rows, "cols": cols, "interconnect": interconnect,
                  "local_bytes": local_bytes, "dataflow": dataflow},
        "scratchpad": {"capacity": capacity, "banks": banks, "accumulator": accumulator},
        "dma": {"bus_bits": bus_bits},
    })


def accelerator_set(tech: str = DEFAULT_TECH) -> list[Design]:
    """Whole accelerators, held out one at a time: every interconnect, non-square arrays,
    scratchpads of 1 to 256 KiB in 2 to 8 banks, arrays up to 16x16, and designs that tell
    apart what the clock could depend on: both GEMM dataflows at the same array (8x8, 4x4),
    bus widths 64 to 256 bits at the same array, queues of old accumulator lines of 8 to 36
    lines at accumulator lines of 64 to 256 bits (os arrays of 6 to 16 rows and 2 columns),
    and GEMV in output stationary (18 designs, about three hours of ASIC flow on the loaded
    2-core machine; the 16x16 takes half an hour)."""
    if tech == "osu018":
        return _osu_accelerators()
    configs = [
        _config(2, 2, capacity=1024, banks=2, accumulator=512),
        _config(4, 4, capacity=4096, banks=4, accumulator=1024),
        _config(2, 8, capacity=16384, banks=8, accumulator=4096),
        _config(4, 4, "none", capacity=65536, banks=4, accumulator=16384),
        _config(4, 4, "full", capacity=65536, banks=4, accumulator=16384),
        AcceleratorConfig(),  # the default: gemm 8x8 systolic ws, 64 KiB / 4 banks
        _config(16, 16, capacity=262144, banks=4, accumulator=32768),
        _config(8, 8, capacity=32768, banks=2, accumulator=32768, bus_bits=128,
                dataflow="os"),
        # a second design whose widest macro array has 32 macros
        _config(2, 16, capacity=16384, banks=4, accumulator=4096),
        # the clock's cause, told apart: bus width against dataflow on the 8x8 above
        _config(8, 8, capacity=32768, banks=2, accumulator=32768, bus_bits=128),
        _config(8, 8, capacity=32768, banks=2, accumulator=32768, dataflow="os"),
        # ... on the 4x4: dataflow (12 queued lines), then buses of 128 and 256 bits
        _config(4, 4, capacity=4096, banks=4, accumulator=1024, dataflow="os"),
        _config(4, 4, capacity=4096, banks=4, accumulator=1024, bus_bits=128),
        _config(4, 4, capacity=4096, banks=4, accumulator=1024, bus_bits=256),
        # ... the queue's depth apart from its width: 36, 20 and 16 lines of 64 bits
        _config(16, 2, capacity=4096, banks=2, accumulator=4096, dataflow="os"),
        _config(8, 2, capacity=4096, banks=2, accumulator=2048, dataflow="os"),
        _config(6, 2, capacity=4096, banks=2, accumulator=2048, dataflow="os"),
        # ... and output stationary without a multi-line group (GEMV)
        _config(8, 8, capacity=16384, banks=2, accumulator=4096, bus_bits=128, dataflow="os",
                intrinsic="gemv"),
    ]
    return [Design("accelerator", config) for config in configs]


def acceptance_set() -> list[Design]:
    """Accelerators outside the calibration set, synthesized at the clock the fitted model
    predicts for them (`synthesize(..., clock_ns=...)`): the check a user makes by running
    ``tensorforge synth --flow asic --clock-ns <model's period>`` on the generated design."""
    return [
        Design("acceptance", _config(8, 8, capacity=65536, banks=4, accumulator=32768,
                                     intrinsic="conv2d", local_bytes=16)),
        # output stationary (12 queued lines) on a 128-bit bus
        Design("acceptance", _config(4, 4, capacity=4096, banks=4, accumulator=1024,
                                     bus_bits=128, dataflow="os")),
    ]


def _osu_accelerators() -> list[Design]:
    """The OSU 0.18 um calibration's accelerators (kept so its fit can be remade)."""
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


def calibration_set(tech: str = DEFAULT_TECH) -> list[Design]:
    """The component blocks synthesized (a few minutes in all on one core)."""
    designs = [Design("pe_array", _config(r, c, link))
               for r, c in ((2, 2), (2, 4), (4, 4))
               for link in ("none", "systolic", "full")]
    designs += [Design("pe_array", _config(2, 2, "systolic", local_bytes=8)),
                Design("pe_array", _config(4, 2, "systolic"))]
    if tech != "osu018":  # per-PE logic from a larger array, and a local store on the IHP run
        designs += [Design("pe_array", _config(4, 4, "systolic", local_bytes=16)),
                    Design("pe_array", _config(8, 8, "systolic"))]
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


def accelerator_clock_ns(config: AcceleratorConfig, tech: str = DEFAULT_TECH) -> float:
    """The clock a whole accelerator is calibrated at (see the module docstring)."""
    return CLOCK_NS if tech == "osu018" else ACCELERATOR_CLOCK_NS


def clock_rule(tech: str = DEFAULT_TECH) -> str:
    """The rule `accelerator_clock_ns` follows, in words (kept with the fit, for reports)."""
    if tech == "osu018":
        return f"every design at {CLOCK_NS} ns"
    return (f"blocks at {BLOCK_CLOCK_NS} ns; every whole accelerator at "
            f"{ACCELERATOR_CLOCK_NS} ns, near the paths they reach")


def design_clock_ns(design: Design, tech: str = DEFAULT_TECH) -> float:
    if design.component == "accelerator":
        return accelerator_clock_ns(design.config, tech)
    return BLOCK_CLOCK_NS


def block_verilog(design: Design, target: str = "generic") -> tuple[str, str]:
    """``(verilog, top name)`` of the generated block, without source locations (the text,
    and so each synthesis's key, does not depend on where the checkout is); ``target``
    (`tensorforge.hw.targets`) applies to the accelerator and the PE array, the blocks that
    have an ECP5 build. The accelerator's is what `tensorforge generate` writes."""
    from amaranth import Signal
    from amaranth.back import verilog
    from amaranth.lib import data

    if design.component in ("accelerator", "acceptance"):
        from tensorforge.dse.synth_top import TOP, accelerator_verilog

        return accelerator_verilog(design.config, target), TOP
    from tensorforge.hw.accumulator import AccumulatorBuffer
    from tensorforge.hw.dma import LoadUnit
    from tensorforge.hw.pe_array import PEArray
    from tensorforge.hw.scratchpad import Scratchpad

    make = {"pe_array": PEArray, "scratchpad": Scratchpad, "accumulator": AccumulatorBuffer,
            "dma": LoadUnit}[design.component]
    if make is PEArray:
        block = PEArray(design.config, target)
    elif target != "generic":
        raise ValueError(f"the {design.component} has no {target} build; only the accelerator "
                         "and the PE array do")
    else:
        block = make(design.config)
    ports = []  # always-ready handshakes are constants, not ports
    for _, _, value in block.signature.flatten(block):
        value = value.as_value() if isinstance(value, data.View) else value
        if isinstance(value, Signal):
            ports.append(value)
    top = f"tf_{design.component}"
    return verilog.convert(block, name=top, ports=ports, emit_src=False), top


def synthesize(design: Design, *, tech: str = DEFAULT_TECH, ecp5: bool = True,
               clock_ns: float | None = None) -> dict[str, Any]:
    """One calibration record: the design, its ASIC report and (if it runs) its ECP5 report,
    at ``clock_ns`` (default: `design_clock_ns`)."""
    from tensorforge.fpga import synthesize_asic, synthesize_ecp5

    text, top = block_verilog(design)
    clock_ns = clock_ns or design_clock_ns(design, tech)
    record: dict[str, Any] = {"component": design.component, "config": design.config.to_dict(),
                              "tech": tech, "clock_ns": clock_ns}
    try:
        asic = synthesize_asic(text, top, tech=tech, clock_ns=clock_ns, activity=ACTIVITY)
    except TensorforgeError as error:  # a flow failure is data: the fit skips the design
        record["asic_error"] = str(error).splitlines()[0]
        return record
    record |= {
        "asic": {"area_um2": asic.area_um2, "cells": asic.cells,
                 "logic_area_um2": asic.logic_area_um2, "macro_area_um2": asic.macro_area_um2,
                 "critical_path_ns": asic.critical_path_ns, "slack_ns": asic.slack_ns,
                 "macro_leakage_mw": asic.macro_leakage_mw,
                 "macro_access_ns": asic.macro_access_ns,
                 "macro_power_mw": asic.macro_power_mw,
                 "macros": [{k: m[k] for k in ("instance", "cell", "count")}
                            for m in asic.macros],
                 "seconds": sum(asic.tool_seconds.values()),
                 "power_mw": vars(asic.power_mw)},
    }
    if ecp5:
        try:
            report = synthesize_ecp5(text, top, clock_ns=BLOCK_CLOCK_NS,
                                     out_of_context=True)
            record["ecp5"] = {k: report.summary()[k] for k in
                              ("luts", "ffs", "dsps", "brams", "fmax_mhz")}
        except TensorforgeError as error:
            record["ecp5"] = {"error": str(error).splitlines()[0]}
    return record


def run_calibration(designs: Iterable[Design], *, tech: str = DEFAULT_TECH, ecp5: bool = True,
                    progress: Callable[[str], None] = logger.info) -> list[dict[str, Any]]:
    records = []
    for design in designs:
        progress(f"synthesizing {design.name} at {design_clock_ns(design, tech)} ns")
        records.append(synthesize(design, tech=tech, ecp5=ecp5))
    return records
