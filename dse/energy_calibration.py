"""The workload-driven power runs the IHP energy model is fitted on and checked against.

Each run is a compiled program on the RTL of one accelerator with register activity
(`tensorforge.sim.power`): its events are counted from the program itself
(`program_events`), its power measured on the synthesized netlist. The calibration set varies
what the energies must separate: array sizes and interconnects (forwarding, clock),
intrinsics, GEMMs whose reduction is long or short against their outputs (accumulator writes
per MAC), convolutions (stationary reloads), and DRAM latency (cycles without events, which
is what separates the clock's energy per cycle from the events'). The held-out set is other
accelerators (a non-square array, another interconnect and dataflow) running their own
programs; nothing of it enters the fit.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tensorforge.config import AcceleratorConfig
from tensorforge.dse.energy_ihp import PowerRun
from tensorforge.memory import MemorySystem

CLOCK_NS = 10.0
DATA = "random"  # uniform int8 operands, seeded: the model's energies are for such data

GEMM = "C[i,j] += A[i,k] * B[k,j]"
CONV = "O[n,h,w,k] += I[n,h+r,w+s,c] * W[r,s,c,k]"
PROGRAMS = (
    ("gemm-long-k", GEMM, "i=16,j=16,k=96", "ideal"),
    ("gemm-wide", GEMM, "i=48,j=32,k=16", "ddr3"),
    ("conv3x3", CONV, "n=1,h=8,w=8,k=16,r=3,s=3,c=8", "ddr3"),
    ("gemm-slow-dram", GEMM, "i=32,j=16,k=32", "latency128"),
)


def _config(rows: int, cols: int, interconnect: str = "systolic", dataflow: str = "ws", *,
            intrinsic: str = "gemm", capacity: int = 4096, banks: int = 4,
            accumulator: int = 2048, local_bytes: int = 0) -> AcceleratorConfig:
    return AcceleratorConfig.from_dict({
        "intrinsic": intrinsic,
        "array": {"rows": rows, "cols": cols, "interconnect": interconnect,
                  "dataflow": dataflow, "local_bytes": local_bytes},
        "scratchpad": {"capacity": capacity, "banks": banks, "accumulator": accumulator},
    })


CALIBRATION = {
    "gemm 2x2 systolic": _config(2, 2, capacity=2048, banks=2, accumulator=1024),
    "gemm 4x4 systolic": _config(4, 4),
    "gemm 4x4 full os": _config(4, 4, "full", "os"),
    "conv2d 4x4 systolic": _config(4, 4, intrinsic="conv2d", capacity=8192,
                                   local_bytes=3),
    "gemm 8x8 systolic": _config(8, 8, capacity=16384, accumulator=4096),
}
HELD_OUT = {
    "gemm 2x8 systolic": _config(2, 8, capacity=8192, banks=8, accumulator=4096),
    "gemm 4x8 none os": _config(4, 8, "none", "os", capacity=8192, accumulator=4096),
}


def memory_named(name: str) -> MemorySystem:
    """A preset, or ``latency<N>``: the default memory with N cycles of latency."""
    if name.startswith("latency"):
        return MemorySystem.preset("ddr3").with_overrides(latency=int(name[len("latency"):]))
    return MemorySystem.preset(name)


@dataclass(frozen=True)
class RunRecord:
    """One measured run as stored: which accelerator and program, and the measurement. The
    program's events and the cycle model's cycles are worked out again from the program
    (`model_numbers`), so a refit follows the current models without measuring again."""

    config_name: str
    program: str
    config: dict[str, Any]
    measurement: dict[str, Any]

    def power_run(self) -> PowerRun:
        m = self.measurement
        config = AcceleratorConfig.from_dict(self.config)
        events, _ = model_numbers(config, self.program)
        return PowerRun(f"{self.config_name}: {self.program}", config, events,
                        int(m["cycles"]), float(m["clock_ns"]), float(m["logic_mw"]),
                        float(m["clock_mw"]), float(m["memory_mw"]), float(m["leakage_mw"]))


def compiled(config: AcceleratorConfig, label: str):
    """``(workload, program, memory)`` of the program `PROGRAMS` calls ``label`` on ``config``."""
    from tensorforge.api import compile_workload
    from tensorforge.compiler.workload import parse_workload

    text, sizes, memory_name = next(p[1:] for p in PROGRAMS if p[0] == label)
    workload = parse_workload(text, sizes, name=label)
    memory = memory_named(memory_name)
    return workload, compile_workload(workload, config, memory=memory), memory


@functools.cache
def model_numbers(config: AcceleratorConfig, label: str) -> tuple[dict[str, float], float]:
    """The program's events and the cycle model's cycles of its run on the device (the host's
    re-layout of the inputs, which the RTL does not run, left out). Kept per process: a refit
    and its comparison ask for each program twice, and compiling one takes seconds."""
    from tensorforge.dse.cost_model import evaluate_mapping, rtl_parameters
    from tensorforge.dse.energy import EVENTS

    workload, program, memory = compiled(config, label)
    row = evaluate_mapping(workload, program.mapping, config, rtl_parameters(memory, config))
    return ({name: float(row[name]) for name in EVENTS},
            float(row["cycles"] - row["host_cycles"]))


def measure_config(name: str, config: AcceleratorConfig, *, seed: int = 0,
                   progress: Callable[[str], None] = print) -> list[RunRecord]:
    """Every program of `PROGRAMS` on ``config``: one simulator process, then one OpenSTA
    power analysis per run on the (cached) netlist."""
    from tensorforge.sim.power import operands, power_of_activity
    from tensorforge.sim.rtl_run import RtlCase, RunOptions, run_programs_on_rtl

    cases = []
    for label, *_ in PROGRAMS:
        workload, program, memory = compiled(config, label)
        cases.append(RtlCase(workload, program.mapping, operands(workload, DATA, seed), seed,
                             program=program, memory=memory))
    progress(f"{name}: running {len(cases)} programs with register activity")
    results = run_programs_on_rtl(config, cases, RunOptions(register_activity=True, seed=seed))
    records = []
    for (label, *_), result in zip(PROGRAMS, results, strict=True):
        if not result.match:
            raise RuntimeError(f"{name}: {label} differs from numpy on the RTL")
        progress(f"{name}: pricing {label} ({result.cycles} cycles)")
        measured = power_of_activity(config, result.register_activity, clock_ns=CLOCK_NS)
        records.append(RunRecord(name, label, config.to_dict(),
                                 measured.to_dict() | {"rtl_cycles": result.cycles}))
    return records
