"""A small co-design sweep for the tests of methods that steer the software search (ShiBO,
UNICO): a 48-design GEMM space and one or two small layers, priced by a test evaluator."""

from __future__ import annotations

from typing import Any

from tensorforge.compiler.workload import parse_workload
from tensorforge.dse.codesign import SweepSpec, merge_layers
from tensorforge.dse.evaluate import FirstOrderAreaPower, LayerEvaluator
from tensorforge.dse.hwspace import HardwareSpace

GEMM = parse_workload("C[i,j] += A[i,k] * B[k,j]", "i=32,j=32,k=64", name="gemm")
GEMV = parse_workload("C[i] += A[i,k] * B[k]", "i=64,k=64", name="gemv")
SPACE = HardwareSpace({
    "intrinsic": "gemm",
    "rows": {"choices": [2, 4, 8, 16]},
    "cols": {"choices": [2, 4, 8, 16]},
    "spad_kib": {"choices": [16, 32, 64]},
})


def small_sweep(method: str, evaluator: LayerEvaluator, *, with_gemv: bool = False,
                **settings: Any) -> SweepSpec:
    """A sweep of ``method`` over `SPACE`: the GEMM once (and the GEMV twice)."""
    layers = [("gemm", GEMM, 1)] + ([("gemv", GEMV, 2)] if with_gemv else [])
    return SweepSpec(workload_name=method, layers=merge_layers(layers), space=SPACE,
                     method=method, evaluator=evaluator, hardware_model=FirstOrderAreaPower(),
                     **settings)
