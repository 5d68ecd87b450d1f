"""Two conveniences that join pipeline stages: compile a workload, generate the Verilog."""

from __future__ import annotations

from tensorforge.compiler.mapping import Mapping
from tensorforge.compiler.program import Program
from tensorforge.compiler.workload import Workload
from tensorforge.config import AcceleratorConfig


def compile_workload(
    workload: Workload, config: AcceleratorConfig, mapping: Mapping | str = "default"
) -> Program:
    """Workload -> Program for ``config``; ``mapping`` is a `Mapping`, "default" or "library"."""
    from tensorforge.compiler.codegen import generate
    from tensorforge.compiler.mappers import default_mapping, library_mapping

    if isinstance(mapping, str):
        mappers = {"default": default_mapping, "library": library_mapping}
        if mapping not in mappers:
            from tensorforge.errors import MappingError

            raise MappingError(
                f"unknown mapping {mapping!r}; use one of {', '.join(mappers)} or a Mapping"
            )
        mapping = mappers[mapping](workload, config)
    return generate(workload, mapping, config)


def generate_verilog(config: AcceleratorConfig) -> str:
    """The accelerator for ``config`` as Verilog text, top module ``accelerator``."""
    from amaranth.back import verilog

    from tensorforge.hw.accelerator import TOP_NAME, Accelerator

    return verilog.convert(Accelerator(config), name=TOP_NAME, emit_src=False)
