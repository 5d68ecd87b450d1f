"""ASIC technologies: what the flow needs to know about one, and the table of those it has.

A new technology is data plus one flow module: its Liberty files (vendored under
``fpga/data/`` or found on the system) and a module that builds its `Technology`, which names
the standard-cell Liberty, tells ABC which cells to leave alone and how to buffer, and maps
the design's memories onto the technology's macros (`MemoryMapping`). The ASIC flow
(`tensorforge.fpga.asic`) does the rest the same way for every technology.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tensorforge.errors import ConfigError
from tensorforge.fpga.memories import MemoryCell, MemoryMapping

DEFAULT_TECH = "ihp-sg13g2"
# name -> the module whose ``technology()`` builds it (imported only when asked for)
TECHNOLOGIES = {
    "ihp-sg13g2": "tensorforge.fpga.ihp_sg13g2",
    "osu018": "tensorforge.fpga.osu018",
}

#: ``map_memories(memories, run_dir, top, accesses_per_cycle, clock_ns)``
MemoryMapper = Callable[[list[MemoryCell], Path, str, float, float], MemoryMapping]


@dataclass(frozen=True)
class Technology:
    """One ASIC target.

    ``liberty`` finds the standard-cell Liberty file (raising `ToolError` with the fix when it
    is missing); ``digest`` is the hash of every file the results depend on (part of the
    cache key); ``dont_use`` lists cells that mapping must not pick; ``abc_driving_cell`` and
    ``abc_output_load_pf`` are what ABC assumes around the logic it buffers and sizes.
    """

    name: str
    description: str
    liberty: Callable[[], Path]
    digest: Callable[[], str]
    map_memories: MemoryMapper
    abc_driving_cell: str
    abc_output_load_pf: float
    dont_use: tuple[str, ...] = ()


def technology(name: str) -> Technology:
    """The technology called ``name`` (see `TECHNOLOGIES`)."""
    module = TECHNOLOGIES.get(name)
    if module is None:
        raise ConfigError(
            f"unknown ASIC technology {name!r}; choose one of {', '.join(TECHNOLOGIES)} "
            f"(--tech {DEFAULT_TECH} is the default)"
        )
    return importlib.import_module(module).technology()
