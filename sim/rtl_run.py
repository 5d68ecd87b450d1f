"""Run compiled programs on the generated RTL and check them against numpy: `run_on_rtl`.

This is the truth stage of the pipeline: workload -> mapping -> `Program` -> DRAM image ->
the Verilator model of `Accelerator(config)` (built once per configuration through the
harness and cached) -> DRAM image back -> output, compared exactly with
`Workload.reference`. Alongside the result come the accelerator's own performance counters
(cycles, unit busy cycles, bank conflicts, token waits, AXI traffic), the ideal cycle count
(MACs / PEs) and so the PE utilization, and optionally the run's switching activity.

Several programs for one configuration run in one simulator process (`run_programs_on_rtl`):
starting the simulator costs more than a small program takes to run. Host and bench exchange
files (`tensorforge.sim.rtl_jobs`) in the run's test directory.
"""

from __future__ import annotations

import functools
import logging
import tempfile
from collections.abc import Mapping as MappingType
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tensorforge.compiler.mapping import Mapping
from tensorforge.compiler.program import Program
from tensorforge.compiler.workload import Workload
from tensorforge.config import AcceleratorConfig
from tensorforge.errors import SimulationError
from tensorforge.sim.activity import PortActivity, input_ports
from tensorforge.sim.axi_traffic import Traffic, bus_traffic
from tensorforge.sim.dram_model import ram_size
from tensorforge.sim.rtl_diagnosis import explain
from tensorforge.sim.rtl_jobs import JOBS_ENV, DramTiming, JobOutcome, ProgramJob, write_jobs

logger = logging.getLogger(__name__)

BENCH_NAME = "bench_run_program.py"
#: Mismatching elements an `RtlResult` keeps (the first ones, in C order).
MISMATCHES_KEPT = 10


def bench_path() -> Path:
    """The cocotb bench that runs programs (it lives with the other benches in the checkout)."""
    from tensorforge.paths import repo_root

    root = repo_root()
    path = root / "tests" / "cocotb_benches" / BENCH_NAME if root is not None else None
    if path is None or not path.is_file():
        raise SimulationError(
            f"the cocotb bench {BENCH_NAME} is not found; RTL runs need a source checkout of "
            "tensorforge installed in editable mode (pip install -e .)"
        )
    return path


@functools.cache
def accelerator_model(config: AcceleratorConfig, waves: bool = False):
    """The Verilator model of ``Accelerator(config)`` (built once, then from the disk cache)."""
    from tensorforge.hw.accelerator import TOP_NAME, Accelerator
    from tensorforge.sim.rtl_harness import build_model

    return build_model(Accelerator(config), top=TOP_NAME, waves=waves)


def default_cycle_limit(program: Program, timing: DramTiming) -> int:
    """A limit no correct run reaches: 20x a serial estimate of every step and beat, + 20k."""
    config = program.config
    statistics = program.statistics()
    beats = (statistics["dram_bytes_read"] + statistics["dram_bytes_written"]
             + statistics["program_bytes"]) // config.dma.bus_bytes
    per_beat = 1 / timing.beats_per_cycle(config.dma.bus_bytes)
    rows = sum(getattr(i, "rows", 0) for i in program.instructions)
    step_cycles = statistics["mac_steps"] * (config.blocks["A"].lines + config.blocks["B"].lines)
    serial = step_cycles + beats * per_beat + rows * (timing.latency + 8) + 50 * len(
        program.instructions)
    return int(20 * serial) + 20_000


@dataclass(frozen=True)
class RtlCase:
    """One program to run: a workload, its mapping (None: the default) and its inputs."""

    workload: Workload
    mapping: Mapping | None = None
    inputs: MappingType[str, np.ndarray] | None = None
    seed: int = 0


@dataclass(frozen=True)
class Mismatch:
    index: tuple[int, ...]
    observed: int
    expected: int


@dataclass(frozen=True)
class RtlResult:
    """One program's run on the RTL: the output, how it compares, and what the counters say.

    ``ideal_cycles`` is the device stage's MACs / PEs; ``utilization`` = ideal / ``cycles``.
    ``expected_traffic`` is the AXI traffic predicted from the instructions
    (`tensorforge.sim.axi_traffic`); ``traffic_consistent`` says the counters agree with it.
    ``sim_seconds`` is the wall time of the run itself (from start to done, not the build or
    the simulator start), ``sim_cycles_per_second`` = cycles / that.
    """

    workload: str
    config: str
    seed: int
    match: bool
    output: np.ndarray
    expected: np.ndarray
    mismatches: tuple[Mismatch, ...]
    cycles: int
    ideal_cycles: float
    load_busy: int
    compute_busy: int
    store_busy: int
    bank_conflict_stalls: int
    dependency_waits: int
    dram_bytes_read: int
    dram_bytes_written: int
    expected_traffic: Traffic
    instructions: int
    sim_seconds: float
    activity: PortActivity | None = None
    test_dir: Path | None = None
    waveform: Path | None = None
    counters: dict[str, int] = field(default_factory=dict)

    @property
    def utilization(self) -> float:
        return self.ideal_cycles / self.cycles if self.cycles else 0.0

    @property
    def sim_cycles_per_second(self) -> float:
        return self.cycles / self.sim_seconds if self.sim_seconds > 0 else 0.0

    @property
    def mismatch_count(self) -> int:
        return int(np.count_nonzero(self.output != self.expected))

    @property
    def traffic_consistent(self) -> bool:
        return (self.dram_bytes_read, self.dram_bytes_written) == (
            self.expected_traffic.read, self.expected_traffic.written)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able summary (no arrays)."""
        return {
            "workload": self.workload,
            "config": self.config,
            "seed": self.seed,
            "match": self.match,
            "mismatch_count": self.mismatch_count,
            "mismatches": [
                {"index": list(m.index), "observed": m.observed, "expected": m.expected}
                for m in self.mismatches
            ],
            "cycles": self.cycles,
            "ideal_cycles": self.ideal_cycles,
            "utilization": self.utilization,
            "load_busy": self.load_busy,
            "compute_busy": self.compute_busy,
            "store_busy": self.store_busy,
            "bank_conflict_stalls": self.bank_conflict_stalls,
            "dependency_waits": self.dependency_waits,
            "dram_bytes_read": self.dram_bytes_read,
            "dram_bytes_written": self.dram_bytes_written,
            "expected_dram_bytes_read": self.expected_traffic.read,
            "expected_dram_bytes_written": self.expected_traffic.written,
            "instructions": self.instructions,
            "sim_seconds": self.sim_seconds,
            "sim_cycles_per_second": self.sim_cycles_per_second,
            "waveform": str(self.waveform) if self.waveform else None,
        }


def _first_mismatches(output: np.ndarray, expected: np.ndarray) -> tuple[Mismatch, ...]:
    if output.shape != expected.shape:
        raise SimulationError(f"RTL output has shape {output.shape}, the reference "
                              f"{expected.shape}")
    wrong = np.argwhere(output != expected)[:MISMATCHES_KEPT]
    return tuple(
        Mismatch(tuple(int(i) for i in index), int(output[tuple(index)]),
                 int(expected[tuple(index)]))
        for index in wrong
    )


@dataclass(frozen=True)
class _Prepared:
    case: RtlCase
    program: Program
    inputs: dict[str, np.ndarray]
    image: bytes
    job: ProgramJob


def _prepare(case: RtlCase, config: AcceleratorConfig, name: str, directory: Path,
             timing: DramTiming, max_cycles: int | None, ports: tuple, activity: bool
             ) -> _Prepared:
    from tensorforge.compiler.codegen import generate
    from tensorforge.compiler.mappers import default_mapping

    mapping = case.mapping or default_mapping(case.workload, config)
    program = generate(case.workload, mapping, config)
    inputs = dict(case.inputs) if case.inputs is not None else case.workload.random_inputs(
        np.random.default_rng(case.seed))
    image = bytes(program.pack_inputs(inputs))
    (directory / f"{name}.in.bin").write_bytes(image)
    job = ProgramJob(
        name=name,
        config=config.to_dict(),
        image=f"{name}.in.bin",
        instruction_base=program.instruction_base,
        instruction_count=len(program.instructions),
        writable=((program.output.base, program.output.end),),
        ram_bytes=ram_size(len(image), config.dma.bus_bytes),
        max_cycles=max_cycles or default_cycle_limit(program, timing),
        timing=timing,
        activity=activity,
        ports=ports,
    )
    return _Prepared(case, program, inputs, image, job)


def _result(prepared: _Prepared, outcome: JobOutcome, directory: Path, waveform: Path | None
            ) -> RtlResult:
    program, job, config = prepared.program, prepared.job, prepared.program.config
    error = explain(config, program.instructions, outcome, job.writable, prepared.image)
    if error:
        raise SimulationError(
            f"RTL run of {prepared.case.workload} on {config.describe()} (seed "
            f"{prepared.case.seed}): {error}\nrun directory: {directory}"
        )
    dram = job.output_image(directory).read_bytes()
    output = np.asarray(program.unpack_output(dram))
    expected = prepared.case.workload.reference(prepared.inputs)
    mismatches = _first_mismatches(output, expected)
    counters = outcome.counters
    activity = None
    if job.activity:
        activity = PortActivity(outcome.toggles, dict(job.ports), outcome.activity_cycles)
    return RtlResult(
        workload=str(prepared.case.workload),
        config=config.describe(),
        seed=prepared.case.seed,
        match=not mismatches,
        output=output,
        expected=expected,
        mismatches=mismatches,
        cycles=counters["cycles"],
        ideal_cycles=program.lowering.device.macs / config.array.pes,
        load_busy=counters["load_busy"],
        compute_busy=counters["compute_busy"],
        store_busy=counters["store_busy"],
        bank_conflict_stalls=counters["bank_conflicts"],
        dependency_waits=counters["dep_wait"],
        dram_bytes_read=counters["bytes_read"],
        dram_bytes_written=counters["bytes_written"],
        expected_traffic=bus_traffic(config, program.instructions, program.instruction_base),
        instructions=len(program.instructions),
        sim_seconds=outcome.wall_seconds,
        activity=activity,
        test_dir=directory,
        waveform=waveform,
        counters=dict(counters),
    )


def run_programs_on_rtl(
    config: AcceleratorConfig,
    cases: Sequence[RtlCase],
    *,
    dram_latency: int = 0,
    dram_bandwidth: float | None = None,
    max_cycles: int | None = None,
    waves: bool = False,
    activity: bool = False,
    test_dir: Path | None = None,
) -> list[RtlResult]:
    """Run every case on one simulator process of ``Accelerator(config)``; results in order.

    Raises `SimulationError` for a run that hangs past its cycle limit, writes outside its
    output region or sets STATUS.error, naming the instruction. A wrong output is not an
    error: it is ``match=False`` with the first mismatches.
    """
    if not cases:
        return []
    timing = DramTiming(latency=dram_latency, bandwidth=dram_bandwidth)
    model = accelerator_model(config, waves)
    directory = Path(test_dir) if test_dir is not None else Path(
        tempfile.mkdtemp(prefix="tensorforge-rtl-run-"))
    directory.mkdir(parents=True, exist_ok=True)
    ports = ()
    if activity:
        ports = tuple(input_ports(model.verilog_path.read_text(), model.top).items())
    prepared = [
        _prepare(case, config, f"program{index}", directory, timing, max_cycles, ports, activity)
        for index, case in enumerate(cases)
    ]
    jobs_file = write_jobs(directory, [p.job for p in prepared])
    results = model.run(bench_path(), test_dir=directory, extra_env={JOBS_ENV: str(jobs_file)},
                        seed=cases[0].seed)
    outcomes = [JobOutcome.read(p.job.outcome_path(directory)) for p in prepared]
    return [_result(p, o, directory, results.waveform) for p, o in zip(prepared, outcomes,
                                                                       strict=True)]


def run_on_rtl(
    workload: Workload,
    config: AcceleratorConfig,
    mapping: Mapping | None = None,
    *,
    inputs: MappingType[str, np.ndarray] | None = None,
    seed: int = 0,
    dram_latency: int = 0,
    dram_bandwidth: float | None = None,
    max_cycles: int | None = None,
    waves: bool = False,
    activity: bool = False,
    test_dir: Path | None = None,
) -> RtlResult:
    """Compile ``workload`` for ``config`` (default mapping if None), run it on the RTL, check it.

    ``inputs`` default to ``workload.random_inputs(np.random.default_rng(seed))``.
    ``dram_latency`` (cycles) and ``dram_bandwidth`` (bytes per cycle per direction, None: one
    bus beat per cycle) slow the simulated DRAM (`DramTiming`). ``max_cycles`` bounds the run
    (default: `default_cycle_limit`). ``waves`` records a waveform (``result.waveform``);
    ``activity`` counts input-port toggles for `tensorforge.sim.activity.estimate_power`.
    """
    case = RtlCase(workload, mapping, inputs, seed)
    return run_programs_on_rtl(
        config, [case], dram_latency=dram_latency, dram_bandwidth=dram_bandwidth,
        max_cycles=max_cycles, waves=waves, activity=activity, test_dir=test_dir,
    )[0]
