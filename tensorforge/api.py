"""Conveniences that join pipeline stages: pick a mapping, compile, generate the Verilog."""

from __future__ import annotations

from pathlib import Path

from tensorforge.compiler.mapping import Mapping
from tensorforge.compiler.program import Program
from tensorforge.compiler.workload import Workload
from tensorforge.config import AcceleratorConfig
from tensorforge.errors import MappingError
from tensorforge.memory import DEFAULT_MEMORY, MemorySystem

MAPPERS = ("default", "library")


def resolve_mapping(
    workload: Workload, config: AcceleratorConfig, mapping: Mapping | str | Path = "default",
    memory: MemorySystem = DEFAULT_MEMORY,
) -> Mapping:
    """A `Mapping` from a name ("default": the heuristic, "library": im2col + GEMM), a JSON file
    written by ``Mapping.to_json``, or a `Mapping` (returned as is). The heuristic ranks
    tilings on ``memory``, the DRAM the program will run on."""
    if isinstance(mapping, Mapping):
        return mapping
    from tensorforge.compiler.mappers import default_mapping, library_mapping

    if mapping == "default":
        return default_mapping(workload, config, memory)
    if mapping == "library":
        return library_mapping(workload, config)
    path = Path(mapping)
    if not path.is_file():
        raise MappingError(
            f"unknown mapping {str(mapping)!r}: use one of {', '.join(MAPPERS)} or the path of "
            "a mapping JSON file (tensorforge compile --save-mapping writes one)"
        )
    return Mapping.from_json(path.read_text(), workload)


def compile_workload(
    workload: Workload, config: AcceleratorConfig, mapping: Mapping | str | Path = "default",
    memory: MemorySystem = DEFAULT_MEMORY,
) -> Program:
    """Workload -> Program for ``config`` on ``memory``; ``mapping`` as in
    `resolve_mapping`."""
    from tensorforge.compiler.codegen import generate

    return generate(workload, resolve_mapping(workload, config, mapping, memory), config)


def generate_verilog(config: AcceleratorConfig) -> str:
    """The accelerator for ``config`` as Verilog text, top module ``accelerator``."""
    from amaranth.back import verilog

    from tensorforge.hw.accelerator import TOP_NAME, Accelerator

    return verilog.convert(Accelerator(config), name=TOP_NAME, emit_src=False)
