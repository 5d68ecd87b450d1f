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
import os
import shutil
import tempfile
from collections.abc import Mapping as MappingType
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tensorforge.compiler.mapping import Mapping
from tensorforge.compiler.program import Program
from tensorforge.compiler.workload import Workload
from tensorforge.config import AcceleratorConfig
from tensorforge.errors import SimulationError
from tensorforge.hashing import stable_hash
from tensorforge.isa import INSTRUCTION_BYTES, Compute, Instruction, Load, Store, encode_program
from tensorforge.memory import DEFAULT_MEMORY, MemorySystem
from tensorforge.paths import cache_subdir
from tensorforge.sim.activity import PortActivity, input_ports
from tensorforge.sim.axi_traffic import bus_traffic, dram_rows
from tensorforge.sim.dram_model import ram_size
from tensorforge.sim.program_result import RtlResult, first_mismatches
from tensorforge.sim.rtl_diagnosis import explain
from tensorforge.sim.rtl_jobs import (
    DRAM_MODELS,
    JOBS_ENV,
    JobOutcome,
    ProgramJob,
    write_jobs,
)
from tensorforge.sim.sim_top import BUILD_OPTIONS as SIM_BUILD_OPTIONS
from tensorforge.sim.sim_top import (
    DRAM_CAPACITY_BYTES,
    MAX_OUTSTANDING,
    PATH_BYTES,
    PUBLIC_SIGNALS,
    SIM_TOP,
    WRITABLE_RANGES,
    sim_top_verilog,
)

logger = logging.getLogger(__name__)

def bench_path() -> Path:
    """The cocotb bench that runs programs; it ships inside the package, so installed copies of
    tensorforge (not only source checkouts) can run on RTL."""
    return Path(__file__).with_name("bench_run_program.py")


def hardware_digest() -> str:
    """A hash of every source the accelerator's Verilog depends on (hw/, the ISA, the config)."""
    import importlib.metadata

    import tensorforge
    import tensorforge.hw

    package = Path(tensorforge.__file__).parent
    sources = sorted(Path(tensorforge.hw.__file__).parent.glob("*.py"))
    sources += [package / name for name in ("config.py", "isa.py", "intrinsics.py", "units.py")]
    return stable_hash(importlib.metadata.version("amaranth"),
                       *[(path.name, path.read_bytes().hex()) for path in sources])


@functools.cache
def accelerator_verilog(config: AcceleratorConfig, target: str = "generic", *,
                        zero_init: bool = True) -> str:
    """Verilog of ``Accelerator(config, target=target)``, cached on disk by config, target and
    hardware sources (an ``ecp5`` target's comes with its primitives' simulation models).
    ``zero_init=False`` gives the text `tensorforge generate` writes (no ``initial`` blocks
    zero-filling the memories), the one a user synthesizes.

    Elaborating the whole accelerator takes seconds (tens on a loaded machine) and would
    otherwise be paid by every process before the model cache can even be asked.
    """
    from tensorforge.hw.accelerator import TOP_NAME, Accelerator
    from tensorforge.sim.rtl_harness import design_verilog, with_primitive_models
    from tensorforge.verilog_text import component_verilog

    extra = () if target == "generic" else (target,)  # the default keeps its old keys
    extra += () if zero_init else ("no-init",)
    key = stable_hash(config.to_json(), hardware_digest(), *extra)
    path = cache_subdir("accelerator-verilog") / f"{key}.v"
    if path.is_file():
        return path.read_text()
    top = Accelerator(config, target=target)
    text = (design_verilog(top, TOP_NAME) if zero_init
            else with_primitive_models(component_verilog(top, TOP_NAME)))
    staging = path.with_suffix(f".{os.getpid()}.tmp")
    staging.write_text(text)
    staging.replace(path)  # atomic: a reader sees the whole file or none
    return text


@functools.cache
def simulation_model(config: AcceleratorConfig, waves: bool = False, target: str = "generic"):
    """The Verilator model of the simulation top of ``Accelerator(config, target=target)``: the
    accelerator and both DRAMs (`tensorforge.sim.sim_top`); built once, then from the disk
    cache."""
    from tensorforge.sim.rtl_harness import build_model

    return build_model(sim_top_verilog(config, accelerator_verilog(config, target)), top=SIM_TOP,
                       build_options=SIM_BUILD_OPTIONS, waves=waves, public=PUBLIC_SIGNALS)


def default_cycle_limit(config: AcceleratorConfig, instructions: Sequence[Instruction],
                        memory: MemorySystem) -> int:
    """A limit no correct run reaches: 20x a serial estimate of every step and beat, + 20k."""
    beats = rows = steps = 0
    for instruction in instructions:
        if isinstance(instruction, Load | Store):
            rows += instruction.rows + getattr(instruction, "pad_before", 0) + getattr(
                instruction, "pad_after", 0)
            beats += sum(-(-size // config.dma.bus_bytes) + 1
                         for _, size in dram_rows(config, instruction))
        elif isinstance(instruction, Compute):
            steps += instruction.outer * instruction.inner
    per_beat = 1 / memory.beats_per_cycle(config.dma.bus_bytes)
    step_cycles = steps * (config.blocks["A"].lines + config.blocks["B"].lines + 4)
    serial = (step_cycles + beats * per_beat + rows * (memory.latency + 8)
              + 50 * len(instructions))
    return int(20 * serial) + 20_000


@dataclass(frozen=True)
class RtlCase:
    """One program to run: a workload, its mapping (None: the default) and its inputs.

    ``program`` replaces compilation with a ready `Program` (of this workload), e.g. one a
    test has edited; ``memory`` replaces the run's `RunOptions.memory` for this case.
    """

    workload: Workload
    mapping: Mapping | None = None
    inputs: MappingType[str, np.ndarray] | None = None
    seed: int = 0
    program: Program | None = None
    memory: MemorySystem | None = None


@dataclass(frozen=True)
class RunOptions:
    """How to run: the memory, its model, cycle limit, waveform, activity, where files go.

    ``memory`` defaults to `DEFAULT_MEMORY` (a realistic DRAM, not the ideal one).
    ``activity`` counts the toggles of the accelerator's input ports; ``register_activity``
    runs the coverage model instead (`tensorforge.sim.register_activity`: every register's
    toggles and every memory port's accesses, ``RtlResult.register_activity``; fast DRAM only,
    its window is the top's own clock).
    ``dram_model`` is ``"fast"`` (the Verilog DRAM of the simulation top: no Python per
    cycle) or ``"reference"`` (cocotbext-axi's slave, the model the fast one is checked
    against; ~30x slower).
    """

    memory: MemorySystem = DEFAULT_MEMORY
    dram_model: str = "fast"
    max_cycles: int | None = None
    waves: bool = False
    activity: bool = False
    test_dir: Path | None = None
    seed: int = 0
    register_activity: bool = False
    target: str = "generic"  # the accelerator's primitives (`tensorforge.hw.targets`)

    def __post_init__(self) -> None:
        if self.dram_model not in DRAM_MODELS:
            raise SimulationError(
                f"dram_model must be one of {', '.join(DRAM_MODELS)}, not {self.dram_model!r}")
        if self.register_activity and (self.dram_model != "fast" or self.waves):
            raise SimulationError(
                "register_activity needs dram_model='fast' and no waveform (its counts cover "
                "the run on the simulation top's own clock); run the waveform separately")


@dataclass(frozen=True)
class _Image:
    """A DRAM image with its program, ready to become a `ProgramJob`."""

    image: bytes
    instructions: tuple[Instruction, ...]
    instruction_base: int
    writable: tuple[tuple[int, int], ...]
    memory: MemorySystem | None = None  # None: the run's
    idle_cycles: int = 0  # > 0: start no program, run the clock this long (an idle design)


def _check_fast_dram(job: ProgramJob, directory: Path) -> None:
    """Raise `SimulationError` for a job the Verilog DRAM cannot serve (sizes are build-time
    constants of `tensorforge.sim.sim_top`); the reference model has no such limits."""
    problems = []
    if job.ram_bytes > DRAM_CAPACITY_BYTES:
        problems.append(f"its DRAM image needs {job.ram_bytes:,} B, more than the "
                        f"{DRAM_CAPACITY_BYTES:,} B the Verilog DRAM holds")
    outstanding = job.memory.outstanding
    if outstanding is not None and outstanding > MAX_OUTSTANDING:
        problems.append(f"{outstanding} bursts outstanding is more than the Verilog DRAM's "
                        f"{MAX_OUTSTANDING}")
    if len(job.writable) > WRITABLE_RANGES:
        problems.append(f"{len(job.writable)} writable ranges is more than the Verilog DRAM "
                        f"checks ({WRITABLE_RANGES})")
    longest = len(str(directory / f"{job.name}.out.hex").encode())
    if longest > PATH_BYTES:
        problems.append(f"its run directory's path is {longest} B long, over {PATH_BYTES} B")
    if problems:
        raise SimulationError(f"the fast DRAM model cannot run {job.name}: "
                              f"{'; '.join(problems)}. Run it with "
                              f"RunOptions(dram_model='reference').")


def _execute(config: AcceleratorConfig, images: Sequence[_Image], options: RunOptions
             ) -> tuple[list[tuple[ProgramJob, JobOutcome, bytes]], Path | None, Path | None]:
    """Run every image in one simulator process; raise for a run that did not end cleanly.

    Returns per image its job, outcome and DRAM afterwards; the run directory (None when it
    was a temporary one, removed after a clean run without waveform); the waveform.
    """
    if options.register_activity:
        from tensorforge.sim.register_activity import activity_model

        model = activity_model(config)
    else:
        model = simulation_model(config, options.waves, options.target)
    own_directory = options.test_dir is None
    directory = Path(tempfile.mkdtemp(prefix="tensorforge-rtl-run-")) if own_directory else Path(
        options.test_dir).resolve()
    directory.mkdir(parents=True, exist_ok=True)
    ports = ()
    if options.activity:
        from tensorforge.hw.accelerator import TOP_NAME

        ports = tuple(input_ports(accelerator_verilog(config), TOP_NAME).items())
    jobs = []
    for index, item in enumerate(images):
        name = f"program{index}"
        memory = item.memory or options.memory
        (directory / f"{name}.in.bin").write_bytes(item.image)
        jobs.append(ProgramJob(
            name=name,
            config=config.to_dict(),
            image=f"{name}.in.bin",
            instruction_base=item.instruction_base,
            instruction_count=len(item.instructions),
            writable=item.writable,
            ram_bytes=ram_size(len(item.image), config.dma.bus_bytes),
            max_cycles=item.idle_cycles or options.max_cycles or default_cycle_limit(
                config, item.instructions, memory),
            memory=memory,
            dram_model=options.dram_model,
            activity=options.activity,
            ports=ports,
            register_activity=options.register_activity,
            idle=item.idle_cycles > 0,
        ))
        if options.dram_model == "fast":
            _check_fast_dram(jobs[-1], directory)
    jobs_file = write_jobs(directory, jobs)
    results = model.run(bench_path(), test_dir=directory, extra_env={JOBS_ENV: str(jobs_file)},
                        seed=options.seed)
    runs = []
    for item, job in zip(images, jobs, strict=True):
        outcome = JobOutcome.read(job.outcome_path(directory))
        error = explain(config, item.instructions, outcome, job.writable, item.image)
        if error:
            raise SimulationError(
                f"RTL run of {job.name} on {config.describe()} (seed {options.seed}): {error}\n"
                f"run directory: {directory}"
            )
        runs.append((job, outcome, job.output_image(directory).read_bytes(),
                     _register_activity(config, job, outcome, directory)))
    if own_directory and results.waveform is None:  # a failed run keeps its files (above)
        shutil.rmtree(directory, ignore_errors=True)
        return runs, None, None
    return runs, directory, results.waveform


def _register_activity(config: AcceleratorConfig, job: ProgramJob, outcome: JobOutcome,
                       directory: Path):
    """The job's `RegisterActivity`, read before a clean run's directory is removed."""
    if not job.register_activity:
        return None
    from tensorforge.sim.register_activity import accelerator_ports, read_activity

    return read_activity(job.activity_path(directory), outcome.activity_cycles,
                         accelerator_ports(config))


def _compile(case: RtlCase, config: AcceleratorConfig, memory: MemorySystem
             ) -> tuple[Program, dict, _Image]:
    """The case's program (the default mapping for the memory it runs on, if it has none),
    inputs and DRAM image."""
    from tensorforge.compiler.codegen import generate
    from tensorforge.compiler.mappers import default_mapping

    program = case.program
    if program is None:
        mapping = case.mapping or default_mapping(case.workload, config,
                                                  case.memory or memory)
        program = generate(case.workload, mapping, config)
    inputs = dict(case.inputs) if case.inputs is not None else case.workload.random_inputs(
        np.random.default_rng(case.seed))
    image = _Image(bytes(program.pack_inputs(inputs)), tuple(program.instructions),
                   program.instruction_base, ((program.output.base, program.output.end),),
                   case.memory)
    return program, inputs, image


def _result(case: RtlCase, program: Program, inputs: dict, run: tuple, directory: Path | None,
            waveform: Path | None) -> RtlResult:
    job, outcome, dram, register_activity = run
    config = program.config
    output = np.asarray(program.unpack_output(dram))
    expected = program.expected_output(inputs)
    mismatches = first_mismatches(output, expected)
    counters = outcome.counters
    activity = None
    if job.activity:
        activity = PortActivity(outcome.toggles, dict(job.ports), outcome.activity_cycles)
    return RtlResult(
        workload=str(case.workload),
        config=config.describe(),
        seed=case.seed,
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
        register_activity=register_activity,
        test_dir=directory,
        waveform=waveform,
        counters=dict(counters),
    )


def run_programs_on_rtl(config: AcceleratorConfig, cases: Sequence[RtlCase],
                        options: RunOptions | None = None) -> list[RtlResult]:
    """Run every case on one simulator process of ``Accelerator(config)``; results in order.

    Raises `SimulationError` for a run that hangs past its cycle limit, writes outside its
    output region or sets STATUS.error, naming the instruction. A wrong output is not an
    error: it is ``match=False`` with the first mismatches.
    """
    if not cases:
        return []
    options = options or RunOptions(seed=cases[0].seed)
    compiled = [_compile(case, config, options.memory) for case in cases]
    runs, directory, waveform = _execute(config, [image for *_, image in compiled], options)
    return [
        _result(case, program, inputs, run, directory, waveform)
        for case, (program, inputs, _), run in zip(cases, compiled, runs, strict=True)
    ]


def run_on_rtl(
    workload: Workload,
    config: AcceleratorConfig,
    mapping: Mapping | None = None,
    *,
    inputs: MappingType[str, np.ndarray] | None = None,
    seed: int = 0,
    memory: MemorySystem = DEFAULT_MEMORY,
    dram_model: str = "fast",
    max_cycles: int | None = None,
    waves: bool = False,
    activity: bool = False,
    test_dir: Path | None = None,
    register_activity: bool = False,
) -> RtlResult:
    """Compile ``workload`` for ``config`` (default mapping if None), run it on the RTL, check it.

    ``inputs`` default to ``workload.random_inputs(np.random.default_rng(seed))``.
    ``memory`` is the DRAM's timing (default `DEFAULT_MEMORY`, realistic DDR3), served by the
    ``dram_model`` (`RunOptions`). ``max_cycles`` bounds the run
    (default: `default_cycle_limit`). ``waves`` records a waveform (``result.waveform``);
    ``activity`` counts input-port toggles for `tensorforge.sim.activity.estimate_power`;
    ``register_activity`` every register's and memory's (`tensorforge.sim.power`).
    """
    options = RunOptions(
        memory=memory, dram_model=dram_model,
        max_cycles=max_cycles, waves=waves, activity=activity, test_dir=test_dir, seed=seed,
        register_activity=register_activity,
    )
    return run_programs_on_rtl(config, [RtlCase(workload, mapping, inputs, seed)], options)[0]


@dataclass(frozen=True)
class RawProgram:
    """A hand-written program: instructions placed after ``dram`` (16-byte aligned).

    ``writable`` are the byte ranges its STOREs may write; ``memory`` overrides the run's.
    """

    instructions: tuple[Instruction, ...]
    dram: bytes = b""
    writable: tuple[tuple[int, int], ...] = ()
    memory: MemorySystem | None = None

    def image(self) -> _Image:
        base = -(-len(self.dram) // INSTRUCTION_BYTES) * INSTRUCTION_BYTES
        image = bytes(self.dram).ljust(base, b"\0") + encode_program(list(self.instructions))
        return _Image(image, tuple(self.instructions), base, tuple(self.writable), self.memory)


def run_instructions_on_rtl(
    config: AcceleratorConfig,
    programs: Sequence[RawProgram],
    options: RunOptions | None = None,
) -> list[tuple[dict[str, int], bytes]]:
    """Run hand-written programs on the RTL (one simulator process): per program the counters
    and the DRAM afterwards. For directed tests of timing and of the error paths."""
    runs, *_ = _execute(config, [p.image() for p in programs], options or RunOptions())
    return [(outcome.counters, after[: len(p.dram)])
            for p, (_, outcome, after, _) in zip(programs, runs, strict=True)]


def run_idle_on_rtl(config: AcceleratorConfig, cycles: int, options: RunOptions | None = None):
    """Reset the accelerator and run its clock ``cycles`` cycles with no program started: the
    `RegisterActivity` of an idle design (``options`` default to register activity on)."""
    if cycles <= 0:
        raise SimulationError(f"an idle run needs a positive number of cycles, not {cycles}")
    options = options or RunOptions(register_activity=True)
    idle = _Image(bytes(INSTRUCTION_BYTES), (), 0, (), idle_cycles=cycles)
    runs, *_ = _execute(config, [idle], options)
    return runs[0][3]
