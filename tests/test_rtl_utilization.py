"""Issue 13's latency target on the RTL: at 64 cycles of DRAM latency and 16 B/cycle, the 64^3
GEMM and the 3x3 conv layer on the 8x8 array with 8 banks keep >= 90% of the PEs busy, and
their outputs equal numpy's (cycle counts of the simulated hardware, not wall time)."""

from __future__ import annotations

import pytest

from tensorforge.compiler.mappers import default_mapping
from tensorforge.compiler.workload import parse_workload
from tensorforge.config import AcceleratorConfig
from tensorforge.memory import MemorySystem
from tensorforge.sim.rtl_run import RtlCase, RunOptions, run_programs_on_rtl

MEMORY = MemorySystem.preset("ideal").with_overrides(latency=64, bandwidth=16)


def design(bus_bits: int, capacity: str) -> AcceleratorConfig:
    return AcceleratorConfig.from_dict({
        "intrinsic": "gemm",
        "array": {"rows": 8, "cols": 8, "interconnect": "systolic", "dataflow": "ws"},
        "scratchpad": {"capacity": capacity, "banks": 8, "accumulator": "16KiB"},
        "dma": {"bus_bits": bus_bits, "max_burst": 16},
    })


GEMM = ("C[i,j] += A[i,k] * B[k,j]", "i=64,j=64,k=64")
CONV = ("C[k,x,y] += A[c,x+r-1,y+s-1] * B[k,c,r,s]", "k=32,c=32,x=14,y=14,r=3,s=3")
CASES = {  # what `tensorforge simulate --pe 8x8 --banks 8` builds, and the benchmark's design
    "cli design": (design(64, "64KiB"), [GEMM]),
    "128-bit bus": (design(128, "32KiB"), [GEMM, CONV]),
}


@pytest.mark.rtl
@pytest.mark.slow
@pytest.mark.parametrize("name", CASES)
def test_gemm_and_conv_keep_the_pes_busy_at_64_cycles_of_latency(name, random_seed):
    config, workloads = CASES[name]
    cases = []
    for text, sizes in workloads:
        workload = parse_workload(text, sizes)
        cases.append(RtlCase(workload, default_mapping(workload, config, MEMORY),
                             seed=random_seed))
    results = run_programs_on_rtl(config, cases, RunOptions(memory=MEMORY, seed=random_seed))
    for case, result in zip(cases, results, strict=True):
        assert result.match, f"{case.workload.text}: {result.mismatch_count} elements differ"
        assert result.utilization >= 0.9, (
            f"{case.workload.text}: {result.cycles} cycles, {result.utilization:.1%}")
