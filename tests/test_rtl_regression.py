"""Regression: real compiled programs on real generated RTL, every result equal to numpy's.

Eight accelerator configurations cover every intrinsic, every interconnect, every dataflow
each intrinsic allows (`tensorforge.config.DATAFLOWS`), a non-square array and a bank count
that is not a power of two; each runs the workloads its intrinsic can implement (GEMM, GEMV,
strided and padded 2D convolution, depthwise convolution, TTM, MTTKRP) in one simulator
process. One Verilator build per configuration, shared through the model cache.
`test_suite_covers_the_design_space` checks the coverage claim itself, without a simulator.
"""

from __future__ import annotations

import pytest

from tensorforge.compiler.workload import Workload, parse_workload
from tensorforge.config import DATAFLOWS, AcceleratorConfig, Interconnect
from tensorforge.dse.fidelity_cases import accelerator as _config
from tensorforge.intrinsics import Intrinsic

WORKLOADS = {
    "gemm": ("C[i,j] += A[i,k] * B[k,j]", "i=9,j=11,k=7"),
    "gemv": ("C[i] += A[i,k] * B[k]", "i=13,k=10"),
    "conv_stride2_pad1": ("C[k,x,y] += A[c,x*2+r-1,y*2+s-1] * B[k,c,r,s]",
                          "k=5,c=3,x=4,y=5,r=3,s=3"),
    "conv_pad1": ("C[k,x,y] += A[c,x+r-1,y+s-1] * B[k,c,r,s]", "k=5,c=3,x=4,y=6,r=3,s=3"),
    "conv_valid": ("C[k,x,y] += A[c,x+r,y+s] * B[k,c,r,s]", "k=4,c=2,x=3,y=5,r=3,s=3"),
    "depthwise": ("C[c,x,y] += A[c,x+r,y+s] * B[c,r,s]", "c=4,x=5,y=4,r=3,s=3"),
    "ttm": ("C[i,j,l] += A[i,j,k] * B[k,l]", "i=3,j=4,k=5,l=6"),
    "mttkrp": ("C[i,j] += A[i,k,l] * B[k,j] * D[l,j]", "i=4,j=5,k=3,l=4"),
}

# name -> (configuration, workloads it runs)
SUITE: dict[str, tuple[AcceleratorConfig, tuple[str, ...]]] = {
    "gemm4x4-systolic-ws": (
        _config("gemm", (4, 4), "systolic", "ws"),
        ("gemm", "conv_stride2_pad1", "ttm", "mttkrp"),
    ),
    "gemm4x8-none-os-3banks": (
        _config("gemm", (4, 8), "none", "os", banks=3, bus=32, burst=4, acc=2048),
        ("gemm", "conv_stride2_pad1", "ttm", "mttkrp"),
    ),
    "gemm4x4-full-is-bus128": (
        _config("gemm", (4, 4), "full", "is", banks=2, bus=128, burst=8),
        ("gemm", "conv_stride2_pad1", "ttm"),
    ),
    "dot8-systolic-os": (
        _config("dot", (8, 1), "systolic", "os"),
        ("gemv", "gemm", "depthwise"),
    ),
    "gemv4x4-full-ws-5banks": (
        _config("gemv", (4, 4), "full", "ws", banks=5),
        ("gemv", "depthwise", "mttkrp"),
    ),
    "gemv4x6-none-os": (
        _config("gemv", (4, 6), "none", "os"),
        ("gemv", "gemm", "depthwise", "ttm"),
    ),
    "conv4x4-systolic-ws": (
        _config("conv2d", (4, 4), "systolic", "ws", local=3, spad=4096),
        ("conv_pad1", "conv_valid"),
    ),
    "conv4x4-full-os": (
        _config("conv2d", (4, 4), "full", "os", spad=4096),
        ("conv_pad1", "conv_valid"),
    ),
}


def workload(name: str) -> Workload:
    text, sizes = WORKLOADS[name]
    return parse_workload(text, sizes, name=name)


def test_suite_covers_the_design_space():
    configs = [config for config, _ in SUITE.values()]
    assert {c.intrinsic for c in configs} == set(Intrinsic)
    assert {c.array.interconnect for c in configs} == set(Interconnect)
    pairs = {(c.intrinsic, c.array.dataflow) for c in configs}
    assert pairs == {(i, d) for i, flows in DATAFLOWS.items() for d in flows}
    assert any(c.array.rows != c.array.cols for c in configs if c.intrinsic is Intrinsic.GEMM)
    assert any(c.scratchpad.banks & (c.scratchpad.banks - 1) for c in configs)
    assert {w for _, names in SUITE.values() for w in names} == set(WORKLOADS)


@pytest.mark.rtl
@pytest.mark.parametrize("name", sorted(SUITE))
def test_programs_match_numpy_on_rtl(name, tmp_path):
    from tensorforge.sim.rtl_run import RtlCase, RunOptions, run_programs_on_rtl

    config, names = SUITE[name]
    seed = sum(map(ord, name))  # fixed per configuration, printed below on failure
    cases = [RtlCase(workload(w), seed=seed + index) for index, w in enumerate(names)]
    results = run_programs_on_rtl(config, cases, RunOptions(test_dir=tmp_path, seed=seed))
    for case, result in zip(cases, results, strict=True):
        where = f"{case.workload} on {config.describe()}, seed {case.seed}"
        assert result.match, f"{where}: {result.mismatch_count} wrong, first {result.mismatches}"
        assert result.traffic_consistent, (
            f"{where}: AXI counters read {result.dram_bytes_read} / wrote "
            f"{result.dram_bytes_written} B, the instructions move {result.expected_traffic}"
        )
        assert result.compute_busy < result.cycles, where
        assert result.utilization <= 1.0, where
