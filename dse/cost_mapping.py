"""The cost model's figures for one `compiler.mapping.Mapping`: what every figure a user reads
comes from.

It exists apart from the batch model (`cost_model`), which ranks thousands of candidates at
once, because one mapping is priced differently: with the code generator's exact transfer
counts, and with the cycles of the program itself, instruction by instruction
(`cost_trace`), checked on held-out programs in docs/fidelity.md.
"""

from __future__ import annotations

import math

import numpy as np

from tensorforge.config import AcceleratorConfig
from tensorforge.dse.cost_parameters import CostParameters
from tensorforge.dse.cost_space import LayerSpace

I64 = np.int64


def mapping_arrays(space: LayerSpace, tiles: dict[str, int], order: tuple[str, ...]
                   ) -> tuple[np.ndarray, np.ndarray]:
    """``(1 x D tiles, 1 x D order)`` for one mapping given by names."""
    position = {name: p for p, name in enumerate(space.names)}
    return (np.array([[tiles[n] for n in space.names]], dtype=I64),
            np.array([[position[n] for n in order]], dtype=I64))


def batch_cycles(workload, mapping, config: AcceleratorConfig,
                 parameters: CostParameters = CostParameters()) -> float:
    """The batch model's cycles for one mapping (what the search ranks by; infinite where it
    finds the mapping illegal), without generating its program."""
    # imported here: `cost_model` imports this module (it keeps `evaluate_mapping` importable)
    from tensorforge.dse.cost_model import evaluate
    from tensorforge.dse.cost_space import build_space

    space = build_space(workload, mapping.choice, config, mapping.groups)
    tiles, order = mapping_arrays(space, mapping.tile_sizes, mapping.order)
    row = evaluate(space, tiles, order, parameters, holds=mapping.holds).row(0)
    return float(row["cycles"]) if row["legal"] else math.inf


def evaluate_mapping(workload, mapping, config: AcceleratorConfig,
                     parameters: CostParameters = CostParameters()) -> dict[str, float]:
    """The cost model's numbers for one `compiler.mapping.Mapping` of ``workload``: the batch
    model's with the code generator's exact transfer counts (``evaluate(..., exact=True)``),
    and the cycles of the program itself, instruction by instruction (`cost_trace`), where
    the batch model's estimate stays as ``batch_cycles``; and the program's events
    (`program_events`: what a technology's energies price), the host's DRAM traffic included."""
    from tensorforge.compiler.codegen import generate
    from tensorforge.dse.cost_model import evaluate
    from tensorforge.dse.cost_space import build_space
    from tensorforge.dse.cost_trace import trace_cycles
    from tensorforge.dse.program_events import program_events

    space = build_space(workload, mapping.choice, config, mapping.groups)
    tiles, order = mapping_arrays(space, mapping.tile_sizes, mapping.order)
    row = evaluate(space, tiles, order, parameters, exact=True, holds=mapping.holds).row(0)
    row["batch_cycles"] = row["cycles"]
    if row["legal"]:
        program = generate(workload, mapping, config)
        row["cycles"] = float(np.ceil(trace_cycles(program.instructions, config, space.step,
                                                   parameters) + row["host_cycles"]))
        events = program_events(program.instructions, config, space.step)
        events["dram_bytes"] += space.host_bytes
        row.update(events)
        row["instructions"] = float(len(program.instructions))
    return row
