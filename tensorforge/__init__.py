"""tensorforge: hardware/software co-design for tensor accelerators.

The small public API, one name per pipeline stage (see DESIGN.md). Names load on first use,
so ``import tensorforge`` stays cheap and pulls in neither Amaranth nor torch::

    import tensorforge as tf

    config = tf.AcceleratorConfig()                      # 8x8 int8 systolic GEMM core
    workload = tf.parse_workload("C[i,j] += A[i,k] * B[k,j]", "i=64,j=64,k=64")
    program = tf.compile_workload(workload, config)      # default (heuristic) mapping
    result = program.run_functional(workload.random_inputs(numpy.random.default_rng(0)))
    verilog = tf.generate_verilog(config)                # top module `accelerator`
    report = tf.synthesize_asic(verilog, "accelerator")  # area, timing, power (cached)
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS = {
    "AcceleratorConfig": "tensorforge.config",
    "ArrayConfig": "tensorforge.config",
    "ScratchpadConfig": "tensorforge.config",
    "DmaConfig": "tensorforge.config",
    "PrecisionConfig": "tensorforge.config",
    "ControllerConfig": "tensorforge.config",
    "Intrinsic": "tensorforge.intrinsics",
    "TensorforgeError": "tensorforge.errors",
    "parse_workload": "tensorforge.compiler.workload",
    "Workload": "tensorforge.compiler.workload",
    "load_model": "tensorforge.compiler.zoo",
    "load_workload": "tensorforge.compiler.zoo",
    "from_torch": "tensorforge.compiler.torch_import",
    "tensorize_choices": "tensorforge.compiler.matching",
    "default_mapping": "tensorforge.compiler.mappers",
    "library_mapping": "tensorforge.compiler.mappers",
    "synthesize_ecp5": "tensorforge.fpga",
    "synthesize_asic": "tensorforge.fpga",
    "compile_workload": "tensorforge.api",
    "compile_stages": "tensorforge.api",
    "generate_verilog": "tensorforge.api",
    "simulate_model": "tensorforge.api",
}

__all__ = ["__version__", *_EXPORTS]

def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'tensorforge' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted(__all__)
