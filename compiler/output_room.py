"""Mapping a layer with accumulator room for its output stage's parameter blocks.

A mapper fills the accumulator with C tiles, but the output stage's parameter blocks live
there too. Its callers (`api.compile_workload`, `network_chain`) map for an accumulator
with `output_stage.first_reserve` lines set aside, then `generate_with_room` generates and,
where the blocks turn out not to fit, maps again with the lines they need: first all of
them, LOADed once at the start (the program as before per-tile reloading, and the faster
one where both work: RTL and the cost model's timeline agree); only where the whole
layer's blocks would leave no room for a C block, each output tile's, LOADed ahead of it
(`param_reload`).
"""

from __future__ import annotations

from collections.abc import Callable

from tensorforge.compiler.codegen import generate
from tensorforge.compiler.mapping import Mapping
from tensorforge.compiler.output_stage import OutputStage, ParamRoomError, reserve_accumulator
from tensorforge.compiler.program import Program
from tensorforge.compiler.workload import Workload
from tensorforge.config import AcceleratorConfig
from tensorforge.errors import MappingError

ATTEMPTS = 4  # generations at most: each remap usually settles the room in one


def generate_with_room(workload: Workload, mapping: Mapping, config: AcceleratorConfig,
                       output: OutputStage, remap: Callable[[AcceleratorConfig], Mapping],
                       **options) -> Program:
    """``generate(workload, mapping, config, output=output, **options)``, with ``mapping``
    replaced by ``remap(room)`` (a mapping for ``room``, ``config`` with lines set aside)
    where the parameter blocks do not fit beside its tiles (module docstring)."""
    reload = False
    for _ in range(ATTEMPTS):
        try:
            return generate(workload, mapping, config, output=output, reload_params=reload,
                            **options)
        except ParamRoomError as error:
            try:
                room = reserve_accumulator(config, error.lines)
            except MappingError:
                if reload:
                    raise
                reload = True  # the whole layer's blocks leave no room: per output tile
                continue
            mapping = remap(room)
    raise MappingError(f"{workload.name}: the output stage's parameters do not fit beside "
                       f"its tiles after {ATTEMPTS} mappings; use a larger accumulator")
