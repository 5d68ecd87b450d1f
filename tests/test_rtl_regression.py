"""Regression: real compiled programs on real generated RTL, every result equal to numpy's.

Eight accelerator configurations (`tensorforge.sim.rtl_matrix.REGRESSION_CONFIGS`) cover every
intrinsic, every interconnect, every dataflow each intrinsic allows
(`tensorforge.config.DATAFLOWS`), a non-square array and a bank count that is not a power of
two; each runs the workloads its intrinsic can implement (GEMM, GEMV, rows of dot products,
strided and padded 2D convolution, depthwise convolution, TTM, MTTKRP) in one simulator
process. The matrix (`MATRIX_CONFIGS`, the smallest arrays) adds the sixteen other
intrinsic x dataflow x interconnect combinations, so every legal combination runs on the whole
accelerator; `test_matrix_is_the_cross_product` checks that against the configuration's own
validation, combination by combination. One Verilator build per configuration, shared
through the model cache (the fuzzer's configurations are among these).
`test_suite_covers_the_design_space` checks the coverage claim itself, without a simulator.
"""

from __future__ import annotations

from collections import Counter

import pytest

from tensorforge.compiler.workload import Workload, parse_workload
from tensorforge.config import DATAFLOWS, AcceleratorConfig, Interconnect
from tensorforge.intrinsics import Intrinsic
from tensorforge.sim.rtl_matrix import (
    MATRIX_CONFIGS,
    REGRESSION_CONFIGS,
    all_configs,
    legal_triples,
    triple,
)

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
    "dot": ("C[i] += A[i,k] * B[i,k]", "i=5,k=19"),
}

# name -> workloads it runs (the configuration is REGRESSION_CONFIGS[name])
SUITE_WORKLOADS: dict[str, tuple[str, ...]] = {
    "gemm4x4-systolic-ws": ("gemm", "conv_stride2_pad1", "ttm", "mttkrp"),
    "gemm4x8-none-os-3banks": ("gemm", "conv_stride2_pad1", "ttm", "mttkrp"),
    "gemm4x4-full-is-bus128": ("gemm", "conv_stride2_pad1", "ttm"),
    "dot8-systolic-os": ("dot", "gemv", "gemm", "depthwise"),
    "gemv4x4-full-ws-5banks": ("gemv", "depthwise", "mttkrp"),
    "gemv4x6-none-os": ("gemv", "gemm", "depthwise", "ttm"),
    "conv4x4-systolic-ws": ("conv_pad1", "conv_valid"),
    "conv4x4-full-os": ("conv_pad1", "conv_valid"),
}
SUITE: dict[str, tuple[AcceleratorConfig, tuple[str, ...]]] = {
    name: (REGRESSION_CONFIGS[name], names) for name, names in SUITE_WORKLOADS.items()
}
#: What each matrix configuration runs: two workloads of its intrinsic, one of them the
#: intrinsic's own shape (a row of dot products for DOT).
MATRIX_WORKLOADS: dict[Intrinsic, tuple[str, ...]] = {
    Intrinsic.GEMM: ("gemm", "conv_stride2_pad1"),
    Intrinsic.GEMV: ("gemv", "depthwise"),
    Intrinsic.DOT: ("dot", "gemv"),
    Intrinsic.CONV2D: ("conv_pad1", "conv_valid"),
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


def test_matrix_is_the_cross_product():
    """Each legal intrinsic x dataflow x interconnect, as the config's validation says, has
    exactly one configuration; a combination run twice or never fails here by name."""
    runs = Counter(triple(config) for config in all_configs().values())
    legal = legal_triples()
    assert len(legal) == sum(len(flows) for flows in DATAFLOWS.values()) * len(Interconnect)
    missing = sorted(legal - set(runs))
    assert not missing, f"combinations no configuration runs: {missing}"
    illegal = sorted(set(runs) - legal)
    assert not illegal, f"configurations of illegal combinations: {illegal}"
    twice = sorted(t for t, count in runs.items() if count > 1)
    assert not twice, f"combinations with two configurations: {twice}"
    assert set(SUITE) == set(REGRESSION_CONFIGS)


def _check_on_rtl(config: AcceleratorConfig, names: tuple[str, ...], seed: int,
                  tmp_path) -> None:
    from tensorforge.sim.rtl_run import RtlCase, RunOptions, run_programs_on_rtl

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


@pytest.mark.rtl
@pytest.mark.parametrize("name", sorted(SUITE))
def test_programs_match_numpy_on_rtl(name, tmp_path):
    config, names = SUITE[name]
    seed = sum(map(ord, name))  # fixed per configuration, printed on failure
    _check_on_rtl(config, names, seed, tmp_path)


@pytest.mark.rtl
@pytest.mark.parametrize("name", sorted(MATRIX_CONFIGS))
def test_matrix_programs_match_numpy_on_rtl(name, tmp_path):
    config = MATRIX_CONFIGS[name]
    seed = sum(map(ord, name))  # fixed per configuration, printed on failure
    _check_on_rtl(config, MATRIX_WORKLOADS[config.intrinsic], seed, tmp_path)
