"""Run a multi-stage workload's chained program (`compiler.stage_chain`) and check it.

The program's segments run on the functional simulator or the RTL
(`sim.network_run.segment_runner`) on seeded random int8 inputs; the output is compared with
`tensorforge.stage_reference`, which never sees the compiler.
"""

from __future__ import annotations

import numpy as np

from tensorforge.compiler.stage_chain import StagedProgram
from tensorforge.memory import DEFAULT_MEMORY, MemorySystem
from tensorforge.sim.network_run import segment_runner
from tensorforge.stage_reference import staged_reference


def check_stages(program: StagedProgram, seed: int = 0, backend: str = "functional", *,
                 memory: MemorySystem = DEFAULT_MEMORY) -> dict[str, object]:
    """Run ``program`` on ``backend`` with inputs drawn from ``seed``; a JSON-able summary:
    ``equal`` (bit-exact with the reference), mismatches, cycles (RTL: summed over the
    segments), instructions per segment, host ops."""
    workload = program.workload
    inputs = workload.random_inputs(np.random.default_rng(seed))
    device = segment_runner(program.network.config, backend, memory=memory, seed=seed)
    output, cycles = program.run(inputs, device)
    expected = staged_reference(workload, inputs, program.params,
                                program.network.config.precision.acc_bits)
    output = np.asarray(output).reshape(expected.shape)
    return {"seed": seed, "backend": backend, "equal": bool(np.array_equal(output, expected)),
            "mismatches": int(np.count_nonzero(output != expected)),
            "cycles": None if any(c is None for c in cycles) else int(sum(cycles)),
            "segment_cycles": cycles,
            "instructions": [len(s.instructions) for s in program.network.segments],
            "host_ops": list(program.host_ops)}
