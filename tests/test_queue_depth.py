"""``controller.queue_depth``: a deeper instruction queue on the RTL and in the timeline.

The program is the output-stationary gemm 16x16x16 on a 4x4 array (default mapping): each
C tile ends in more STOREs than a 4-deep queue holds, so in-order dispatch stalls behind
them at depth 4 and not at depth 16.
"""

from __future__ import annotations

import dataclasses

import pytest

from tensorforge.compiler.codegen import generate
from tensorforge.compiler.mappers import default_mapping
from tensorforge.compiler.workload import parse_workload
from tensorforge.config import AcceleratorConfig, ControllerConfig
from tensorforge.dse.fidelity import TARGET_MAX_ERROR, model_cycles
from tensorforge.isa import Store
from tensorforge.memory import DEFAULT_MEMORY

BASE = AcceleratorConfig.from_dict({
    "array": {"rows": 4, "cols": 4, "dataflow": "os"},
    "scratchpad": {"capacity": 2048, "banks": 4, "accumulator": 1024},
    "dma": {"bus_bits": 64, "max_burst": 16},
})
GEMM = parse_workload("C[i,j] += A[i,k] * B[k,j]", "i=16,j=16,k=16", name="gemm")


def _deep(depth: int) -> AcceleratorConfig:
    return dataclasses.replace(BASE, controller=ControllerConfig(queue_depth=depth))


def test_a_deeper_queue_is_never_slower_in_the_timeline():
    """More STOREs per C tile than a 4-deep queue holds: depth 8 and 16 take no more
    cycles than depth 4 (dispatch only waits less), and depth 16 takes fewer."""
    mapping = default_mapping(GEMM, BASE, DEFAULT_MEMORY)
    stores = sum(isinstance(i, Store) for i in generate(GEMM, mapping, BASE).instructions)
    assert stores > 4
    cycles = {d: model_cycles(GEMM, mapping, _deep(d), DEFAULT_MEMORY) for d in (4, 8, 16)}
    assert cycles[16] <= cycles[8] <= cycles[4], cycles
    assert cycles[16] < cycles[4], cycles


@pytest.mark.rtl
@pytest.mark.slow
def test_a_16_deep_queue_runs_bit_exactly_within_the_timeline_targets():
    from tensorforge.sim.rtl_run import run_on_rtl

    config = _deep(16)
    mapping = default_mapping(GEMM, BASE, DEFAULT_MEMORY)
    result = run_on_rtl(GEMM, config, mapping, seed=3, memory=DEFAULT_MEMORY)
    assert result.match, result.mismatches  # against the numpy reference
    assert result.traffic_consistent
    error = model_cycles(GEMM, mapping, config, DEFAULT_MEMORY) / result.cycles - 1
    assert abs(error) <= TARGET_MAX_ERROR, (result.cycles, error)
