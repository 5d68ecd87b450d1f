"""The files that carry programs into the cocotb process and their outcomes back out.

`run_on_rtl` (pytest or CLI side) and the bench ``bench_run_program.py`` (simulator side) are
two processes; they share nothing but a directory. The host side writes one ``jobs.json``
naming a DRAM image file (``*.in.bin``) per program and puts the path of ``jobs.json`` into
the bench's environment (`JOBS_ENV`); the bench writes, per job, the DRAM after the run
(``*.out.bin``) and an outcome JSON. Plain JSON and raw bytes keep both sides readable by hand
when a run goes wrong.

This module imports neither Amaranth nor cocotb, so both sides can use it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tensorforge.memory import MemorySystem

#: The environment variable that names ``jobs.json`` for the bench.
JOBS_ENV = "TENSORFORGE_RTL_JOBS"
JOBS_FILE = "jobs.json"

#: The DRAM models a bench can put behind the accelerator: ``fast``, the AXI memory in the
#: Verilog of the simulation top (`tensorforge.sim.sim_top`), and ``reference``,
#: cocotbext-axi's `AxiSlave` in Python (`tensorforge.sim.dram_model`), which the fast one is
#: checked against.
DRAM_MODELS = ("fast", "reference")


@dataclass(frozen=True)
class ProgramJob:
    """One program to run: its DRAM image, where its instructions are, what it may write.

    ``writable`` lists the ``[start, end)`` byte ranges the program's STOREs may write (its
    output region); a write anywhere else ends the run with an error naming the instruction.
    ``ram_bytes`` is the simulated DRAM size (the image plus a guard region); reads or writes
    past it answer SLVERR. ``memory`` paces the DRAM; ``dram_model`` names the model that
    serves it (`DRAM_MODELS`). ``ports`` are the accelerator's input ports and their widths, for
    toggle counting when ``activity`` is set. ``register_activity`` keeps the coverage counts
    of the run (the activity model's, `tensorforge.sim.register_activity`) as
    ``<name>.activity.dat``. ``idle`` starts no program: the accelerator only runs on its clock
    for ``max_cycles`` cycles after reset (what an idle design draws). ``config`` is the
    `AcceleratorConfig` as a dict.
    """

    name: str
    config: dict[str, Any]
    image: str
    instruction_base: int
    instruction_count: int
    writable: tuple[tuple[int, int], ...]
    ram_bytes: int
    max_cycles: int
    memory: MemorySystem = field(default_factory=MemorySystem)
    dram_model: str = "fast"
    activity: bool = False
    ports: tuple[tuple[str, int], ...] = ()
    register_activity: bool = False
    idle: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProgramJob:
        values = dict(data)
        values["memory"] = MemorySystem.from_dict(values["memory"])
        values["writable"] = tuple(tuple(pair) for pair in values["writable"])
        values["ports"] = tuple(tuple(pair) for pair in values["ports"])
        return cls(**values)

    def output_image(self, directory: Path) -> Path:
        return directory / f"{self.name}.out.bin"

    def outcome_path(self, directory: Path) -> Path:
        return directory / f"{self.name}.outcome.json"

    def activity_path(self, directory: Path) -> Path:
        return directory / f"{self.name}.activity.dat"


@dataclass(frozen=True)
class JobOutcome:
    """What the bench saw: counters, whether the program finished, and how long it took.

    Raw facts only; `tensorforge.sim.rtl_diagnosis` turns them into a message. ``violations``
    are the refused DRAM writes ``(address, length)``; ``in_flight`` is, per unit, the
    instruction word its controller gate holds (``None`` when it holds nothing), and whether
    it waits for a token. ``toggles`` maps each input port to its bit transitions over
    ``activity_cycles`` cycles (for ``register_activity``: the cycles the coverage counts
    cover).
    """

    name: str
    finished: bool
    counters: dict[str, int]
    status: int
    waited_cycles: int
    wall_seconds: float
    violations: list[tuple[int, int]] = field(default_factory=list)
    in_flight: dict[str, dict[str, Any]] = field(default_factory=dict)
    toggles: dict[str, int] = field(default_factory=dict)
    activity_cycles: int = 0

    def write(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self), indent=2, sort_keys=True))

    @classmethod
    def read(cls, path: Path) -> JobOutcome:
        return cls(**json.loads(path.read_text()))


def write_jobs(directory: Path, jobs: list[ProgramJob]) -> Path:
    """Write ``jobs.json`` into ``directory``; returns its path (the value of `JOBS_ENV`)."""
    path = directory / JOBS_FILE
    path.write_text(json.dumps([job.to_dict() for job in jobs], indent=2))
    return path


def read_jobs(path: Path) -> list[ProgramJob]:
    return [ProgramJob.from_dict(entry) for entry in json.loads(path.read_text())]
