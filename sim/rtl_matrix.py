"""The accelerators the RTL regression runs: one per intrinsic x legal dataflow x interconnect.

Why a table in the package rather than in the tests: three users share these
configurations. ``tests/test_rtl_regression.py`` runs its workload suite on the eight
`REGRESSION_CONFIGS`; ``tests/test_rtl_matrix.py`` runs the remaining combinations on the
`MATRIX_CONFIGS`; ``tensorforge fuzz`` draws its configurations from both
(`tensorforge.sim.fuzz_cases`). A Verilator model is cached by the content of its Verilog, so a
configuration that appears in two of them is built once.

Every combination `legal_triples` names (those `AcceleratorConfig`'s own validation accepts)
has exactly one configuration in `all_configs`. The matrix ones use the smallest arrays that
still exercise their combination (2 PEs a side, 3 kernel taps where the weight-stationary
CONV2D needs them): each is one Verilator build in CI, and small arrays build fastest.
"""

from __future__ import annotations

import itertools

from tensorforge.config import AcceleratorConfig, Dataflow, Interconnect
from tensorforge.dse.fidelity_cases import accelerator
from tensorforge.errors import ConfigError
from tensorforge.intrinsics import Intrinsic

Triple = tuple[Intrinsic, Dataflow, Interconnect]

#: The regression suite's configurations: non-square arrays, a bank count that is not a power
#: of two, three bus widths. Their workloads are in ``tests/test_rtl_regression.py``.
REGRESSION_CONFIGS: dict[str, AcceleratorConfig] = {
    "gemm4x4-systolic-ws": accelerator("gemm", (4, 4), "systolic", "ws"),
    "gemm4x8-none-os-3banks": accelerator("gemm", (4, 8), "none", "os", banks=3, bus=32,
                                          burst=4, acc=2048),
    "gemm4x4-full-is-bus128": accelerator("gemm", (4, 4), "full", "is", banks=2, bus=128,
                                          burst=8),
    "dot8-systolic-os": accelerator("dot", (8, 1), "systolic", "os"),
    "gemv4x4-full-ws-5banks": accelerator("gemv", (4, 4), "full", "ws", banks=5),
    "gemv4x6-none-os": accelerator("gemv", (4, 6), "none", "os"),
    "conv4x4-systolic-ws": accelerator("conv2d", (4, 4), "systolic", "ws", local=3, spad=4096),
    "conv4x4-full-os": accelerator("conv2d", (4, 4), "full", "os", spad=4096),
}

#: The other sixteen combinations, on the smallest arrays (see the module docstring).
MATRIX_CONFIGS: dict[str, AcceleratorConfig] = {
    "gemm2x2-none-ws": accelerator("gemm", (2, 2), "none", "ws"),
    "gemm2x2-full-ws": accelerator("gemm", (2, 2), "full", "ws", banks=3),
    "gemm2x3-systolic-os": accelerator("gemm", (2, 3), "systolic", "os"),
    "gemm2x2-full-os": accelerator("gemm", (2, 2), "full", "os", bus=32),
    "gemm2x2-none-is": accelerator("gemm", (2, 2), "none", "is", banks=2),
    "gemm2x2-systolic-is": accelerator("gemm", (2, 2), "systolic", "is"),
    "gemv2x2-systolic-os": accelerator("gemv", (2, 2), "systolic", "os"),
    "gemv2x2-full-os": accelerator("gemv", (2, 2), "full", "os", banks=2),
    "gemv2x2-none-ws": accelerator("gemv", (2, 2), "none", "ws"),
    "gemv3x2-systolic-ws": accelerator("gemv", (3, 2), "systolic", "ws", banks=3, bus=32),
    "dot2-none-os": accelerator("dot", (2, 1), "none", "os"),
    "dot4-full-os": accelerator("dot", (4, 1), "full", "os", banks=2, bus=32),
    "conv2x2-none-ws": accelerator("conv2d", (2, 2), "none", "ws", local=3),
    "conv2x2-full-ws": accelerator("conv2d", (2, 2), "full", "ws", local=3, banks=3),
    "conv2x2-none-os": accelerator("conv2d", (2, 2), "none", "os"),
    "conv2x2-systolic-os": accelerator("conv2d", (2, 2), "systolic", "os", bus=32),
}


def all_configs() -> dict[str, AcceleratorConfig]:
    """The regression and matrix configurations together, by name."""
    return {**REGRESSION_CONFIGS, **MATRIX_CONFIGS}


def triple(config: AcceleratorConfig) -> Triple:
    """The combination a configuration exercises."""
    return config.intrinsic, config.array.dataflow, config.array.interconnect


def legal_triples() -> set[Triple]:
    """Every intrinsic x dataflow x interconnect that `AcceleratorConfig` accepts.

    Asked of the configuration's own validation (on a 2x2 array with room for kernel taps),
    not of a table here, so a dataflow an intrinsic gains or loses shows up as a missing or
    surplus configuration in the matrix test.
    """
    legal = set()
    for intrinsic, dataflow, link in itertools.product(Intrinsic, Dataflow, Interconnect):
        pe = (2, 1) if intrinsic is Intrinsic.DOT else (2, 2)
        try:
            accelerator(intrinsic.value, pe, link.value, dataflow.value, local=3)
        except ConfigError:
            continue
        legal.add((intrinsic, dataflow, link))
    return legal
