"""Drive the generated accelerator from cocotb: DRAM image in, program started, counters out.

`AcceleratorDriver` is the host of one simulated accelerator inside the simulation top
(`tensorforge.sim.sim_top`: the accelerator as instance ``accel`` beside a Verilog DRAM): the
clock and reset, the DRAM, and an `AxiLiteMaster` on the control registers (``s_axil``),
whose addresses come from `tensorforge.hw.registers.REGISTERS` by name. `run` executes one
`ProgramJob` the way software on a real SoC would: reset, place the image, write
``insn_addr``/``insn_count``, write 1 to ``control``, wait for ``irq`` (STATUS.done) with a
cycle limit, read the counters.

The DRAM is the job's ``dram_model``: ``fast``, the Verilog DRAM (`FastDram`), so that while
the program runs no Python runs per cycle: the top's own clock runs it (`free_running`) and
the wait is one trigger (``irq``, a refused write, or the cycle limit as a timer); or
``reference``,
cocotbext-axi's slave on the top-level ``m_axi`` ports (`DramModel`, Python every cycle).

Nothing a program does can hang the bench: the wait ends at the cycle limit, or at once when
the DRAM refuses a write outside the program's output region. The outcome then records what
each unit's controller gate holds (`in_flight`), so the error can name the instruction.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, Event, FallingEdge, First, RisingEdge, Timer
from cocotb.utils import get_sim_time
from cocotbext.axi import AxiLiteBus, AxiLiteMaster

from tensorforge.hw.registers import COUNTERS, register
from tensorforge.sim.activity import ToggleCounter
from tensorforge.sim.dram_model import DramModel
from tensorforge.sim.fast_dram import FastDram
from tensorforge.sim.register_activity import CYCLE_COUNTER as ACTIVITY_CYCLES
from tensorforge.sim.register_activity import WINDOW_FILE
from tensorforge.sim.rtl_jobs import JobOutcome, ProgramJob
from tensorforge.sim.sim_top import ACCELERATOR_INSTANCE, CLOCK_PERIOD_NS

RESET_CYCLES = 4
UNITS = ("load", "compute", "store")


def _peek(scope, name: str) -> Any:
    """An internal signal's value as an int, or None where the model does not expose it."""
    try:
        value = getattr(scope, name).value
        return int(value) if value.is_resolvable else None
    except (AttributeError, ValueError):
        return None


def in_flight(dut) -> dict[str, dict[str, Any]]:
    """What each controller gate holds: the instruction word and whether it awaits a token.

    Reads the controller's gate registers (``<unit>_gate_state``, ``<unit>_instruction``,
    ``<unit>_waits_for_token``) through VPI; a model built without them yields ``{}``.
    """
    controller = getattr(dut, "controller", None)
    if controller is None:
        return {}
    held = {}
    for unit in UNITS:
        state = _peek(controller, f"{unit}_gate_state")
        if state is None:
            return {}
        held[unit] = {
            "word": _peek(controller, f"{unit}_instruction") if state else None,
            "waits_for_token": bool(_peek(controller, f"{unit}_waits_for_token")),
        }
    return held


class AcceleratorDriver:
    """The host side of one accelerator instance in a cocotb test (see the module docstring).

    ``ram_bytes`` sizes the reference model's memory (the largest job's).
    """

    def __init__(self, dut, ram_bytes: int) -> None:
        self.dut = dut
        self.accelerator = getattr(dut, ACCELERATOR_INSTANCE)
        self.ram_bytes = ram_bytes
        # cocotb's C++ clock for the parts Python takes part in; it must start now (time 0),
        # high, to rise with the top's own clock (`tensorforge.sim.sim_top`).
        self.clock = Clock(dut.host_clk, CLOCK_PERIOD_NS, unit="ns", impl="gpi")
        self.clock.start(start_high=True)
        dut.free_run.value = 0
        dut.rst.value = 1
        dut.dram_reference.value = 0
        self.bus_bytes = len(dut.m_axi__rdata) // 8
        self.fast = FastDram(dut, self.bus_bytes)
        self.reference: DramModel | None = None  # built for the first job that wants it
        bus = AxiLiteBus.from_prefix(dut, "s_axil", bus_separator="__")
        self.host = AxiLiteMaster(bus, dut.host_clk, dut.rst)

    async def reset(self) -> None:
        self.dut.rst.value = 1
        await ClockCycles(self.dut.host_clk, RESET_CYCLES)
        self.dut.rst.value = 0
        await RisingEdge(self.dut.host_clk)

    async def write_register(self, name: str, value: int) -> None:
        await self.host.write_dword(register(name).offset, value)

    async def read_register(self, name: str) -> int:
        return await self.host.read_dword(register(name).offset)

    async def counters(self) -> dict[str, int]:
        return {name: await self.read_register(name) for name in COUNTERS}

    async def start(self, instruction_base: int, instruction_count: int) -> None:
        await self.write_register("insn_addr", instruction_base)
        await self.write_register("insn_count", instruction_count)
        await self.write_register("control", 1)

    def cycle(self) -> int:
        return int(get_sim_time("ns") // CLOCK_PERIOD_NS)

    def _violations(self, job: ProgramJob) -> list[tuple[int, int]]:
        if job.dram_model == "reference":
            return [(v.address, v.length) for v in self.reference.memory.violations]
        return self.fast.violations()

    async def wait_done(self, job: ProgramJob) -> tuple[bool, int]:
        """Wait for ``irq`` at most ``job.max_cycles``; returns ``(finished, cycles waited)``.

        A refused DRAM write ends the wait at once (unfinished): the program is wrong and what
        it does next is noise.
        """
        limit = Timer(job.max_cycles * CLOCK_PERIOD_NS, unit="ns")
        if job.dram_model == "reference":
            stop = Event()
            memory = self.reference.memory
            memory.on_violation = stop.set
            begin = self.cycle()
            await First(stop.wait(), RisingEdge(self.dut.irq), limit)
            waited = self.cycle() - begin
            memory.on_violation = None
        else:
            async with self.free_running():
                begin = self.cycle()
                if str(self.dut.irq.value) != "1":
                    await First(RisingEdge(self.dut.irq), RisingEdge(self.dut.dram_violation),
                                limit)
                waited = self.cycle() - begin
        finished = str(self.dut.irq.value) == "1" and not self._violations(job)
        return finished, waited

    @contextlib.asynccontextmanager
    async def free_running(self):
        """Run the top's own clock instead of cocotb's for the body, then hand back.

        Both clocks are low in the second half of each period: the switch happens there, so
        ``clk`` has no extra edge, and cocotb's clock restarts low to rise on the period.
        """
        await FallingEdge(self.dut.host_clk)
        self.dut.free_run.value = 1
        self.clock.stop()
        try:
            yield
        finally:
            await FallingEdge(self.dut.clk)
            self.dut.free_run.value = 0
            self.clock.start(start_high=False)

    async def _prepare(self, job: ProgramJob, image: bytes, directory: Path) -> None:
        """Reset the accelerator with the job's image in the job's DRAM."""
        self.dut.rst.value = 1
        if job.dram_model == "reference":
            if self.reference is None:
                self.reference = DramModel(self.dut, self.ram_bytes, self.dut.host_clk)
            self.dut.dram_reference.value = 1
            self.reference.memory.load(image, job.writable, job.ram_bytes)
            await self.reset()
            self.reference.set_memory(job.memory)
        else:
            self.dut.dram_reference.value = 0
            self.fast.configure(job.memory, job.writable, job.ram_bytes)
            await self.fast.load(image, job.ram_bytes, directory / f"{job.name}.in.hex")
            await self.reset()

    async def _dram_after(self, job: ProgramJob, length: int, directory: Path) -> bytes:
        if job.dram_model == "reference":
            return self.reference.read(0, length)
        return await self.fast.dump(length, directory / f"{job.name}.out.hex")

    async def wait_idle(self, job: ProgramJob) -> tuple[bool, int]:
        """Let the accelerator run on its own clock for ``job.max_cycles`` with no program."""
        async with self.free_running():
            begin = self.cycle()
            await Timer(job.max_cycles * CLOCK_PERIOD_NS, unit="ns")
            waited = self.cycle() - begin
        return True, waited

    def _window_cycles(self) -> int:
        """The activity model's count of cycles run on the top's own clock (0 elsewhere)."""
        counter = getattr(self.dut, ACTIVITY_CYCLES, None)
        return int(counter.value) if counter is not None else 0

    async def run(self, job: ProgramJob, directory: Path) -> JobOutcome:
        """Run one job; the DRAM afterwards goes to ``job.output_image(directory)``."""
        image = (directory / job.image).read_bytes()
        await self._prepare(job, image, directory)
        toggles = ToggleCounter(self.accelerator, job.ports) if job.activity else None

        if not job.idle:
            await self.start(job.instruction_base, job.instruction_count)
        started = time.perf_counter()
        window_start = self._window_cycles()
        if toggles is not None:
            toggles.start()
        finished, waited = await (self.wait_idle(job) if job.idle else self.wait_done(job))
        if toggles is not None:
            toggles.stop()
        wall = time.perf_counter() - started
        activity_cycles = toggles.cycles if toggles is not None else 0
        if job.register_activity:  # the window's counts, written once free_run's fall is seen
            await Timer(1, unit="ns")
            (directory / WINDOW_FILE).replace(job.activity_path(directory))
            activity_cycles = self._window_cycles() - window_start
        held = {} if finished else in_flight(self.accelerator)
        violations = self._violations(job)
        status = await self.read_register("status")
        counters = await self.counters()
        after = await self._dram_after(job, len(image), directory)
        job.output_image(directory).write_bytes(after)
        return JobOutcome(
            name=job.name,
            finished=finished,
            counters=counters,
            status=status,
            waited_cycles=waited,
            wall_seconds=wall,
            violations=violations,
            in_flight=held,
            toggles=toggles.toggles if toggles is not None else {},
            activity_cycles=activity_cycles,
        )
