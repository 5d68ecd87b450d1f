"""Programs on the RTL behind a DRAM with latency: exact results, and latency paid per stream.

Compiled programs (tile-major layouts, coalesced LOADs and STOREs, partial blocks widened to
whole ones) run on a 4x4 GEMM accelerator behind 32 cycles of DRAM latency and must equal
numpy; the seeds are fixed and named on failure. Hand-written LOAD and STORE streams check
the timing contract of `LoadUnit` / `StoreUnit` with the controller's retire window: a
stream of short transfers pays the latency about once, not once per instruction.
"""

from __future__ import annotations

import pytest

from tensorforge.compiler.mappers import default_mapping
from tensorforge.compiler.mapping import random_mapping
from tensorforge.compiler.workload import parse_workload
from tensorforge.isa import Buffer, Finish, Load, Store
from tensorforge.memory import MemorySystem
from tensorforge.sim.rtl_matrix import REGRESSION_CONFIGS

# the RTL tests' shared 4x4 GEMM (tests/test_rtl_run.py's too): one Verilator model for all
CONFIG = REGRESSION_CONFIGS["gemm4x4-systolic-ws"]
LATENCY_32 = MemorySystem.preset("ideal").with_overrides(latency=32)
WORKLOADS = {
    "gemm_partial": ("C[i,j] += A[i,k] * B[k,j]", "i=12,j=10,k=9"),
    "gemm_square": ("C[i,j] += A[i,k] * B[k,j]", "i=16,j=16,k=16"),
    "conv_pad1": ("C[k,x,y] += A[c,x+r-1,y+s-1] * B[k,c,r,s]", "k=5,c=3,x=4,y=6,r=3,s=3"),
    "conv_stride2": ("C[k,x,y] += A[c,2*x+r,2*y+s] * B[k,c,r,s]", "k=4,c=5,x=3,y=3,r=3,s=3"),
}
SEEDS = (3, 17)


@pytest.mark.rtl
def test_compiled_programs_are_exact_at_latency_32(tmp_path):
    import numpy as np

    from tensorforge.sim.rtl_run import RtlCase, RunOptions, run_programs_on_rtl

    cases, names = [], []
    for name, (text, sizes) in WORKLOADS.items():
        workload = parse_workload(text, sizes, name=name)
        for seed in SEEDS:
            rng = np.random.default_rng(seed)
            mapping = default_mapping(workload, CONFIG, LATENCY_32)
            if seed != SEEDS[0]:  # and a random legal mapping of the same choice
                mapping = random_mapping(workload, mapping.choice, CONFIG, rng, mapping.groups)
            cases.append(RtlCase(workload, mapping, seed=seed))
            names.append(f"{name} seed {seed} mapping {mapping.to_json()}")
    results = run_programs_on_rtl(CONFIG, cases, RunOptions(memory=LATENCY_32,
                                                            test_dir=tmp_path))
    for name, result in zip(names, results, strict=True):
        assert result.match, f"{name}: {result.mismatch_count} elements differ from numpy"


@pytest.mark.rtl
def test_a_stream_of_short_transfers_pays_the_latency_about_once():
    from tensorforge.hw.dma import LoadUnit, StoreUnit
    from tensorforge.sim.rtl_run import RawProgram, RunOptions, run_instructions_on_rtl

    latency, count, rows = 48, 8, 4  # eight one-beat-row LOADs (and STOREs of 2 beats a row)
    memory = MemorySystem.preset("ideal").with_overrides(latency=latency)
    dram = bytes(range(256)) * 8
    loads = tuple(Load(buffer=Buffer.SPAD, line=rows * n, dram_addr=64 * n, rows=rows,
                       row_len=4, stride=4) for n in range(count))
    stores = tuple(Store(line=rows * n, dram_addr=1024 + 64 * n, rows=rows, row_len=4,
                         stride=4) for n in range(count))
    programs = [RawProgram((*loads, Finish()), dram),
                RawProgram((*stores, Finish()), dram, writable=((1024, 2048),))]
    (load_run, _), (store_run, _) = run_instructions_on_rtl(
        CONFIG, programs, RunOptions(memory=memory))
    # One latency, the beats, and the per-instruction cost of the controller's gate and the
    # unit's command; each instruction paying the latency would cost count * latency.
    load_beats = count * rows * CONFIG.spad_line_bytes // CONFIG.dma.bus_bytes
    load_bound = 2 * latency + load_beats + count * (LoadUnit.fixed_cycles + 3)
    assert latency + load_beats <= load_run["load_busy"] <= load_bound, load_run
    assert load_bound < count * latency
    store_beats = count * rows * CONFIG.acc_line_bytes // CONFIG.dma.bus_bytes
    store_bound = 2 * latency + store_beats + count * (StoreUnit.fixed_cycles + 3)
    assert latency + store_beats <= store_run["store_busy"] <= store_bound, store_run
