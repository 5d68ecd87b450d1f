"""Seeded batches of random mappings over several layers, accelerators and tensorize choices,
and their batch-model figures as digests: `tests/test_cost_model_batch.py` checks that the
software search's one-pass evaluation gives, bit for bit, what the model gave choice by
choice when the digests were written (``python tests/batch_model_cases.py --write``)."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np

from tensorforge.compiler.workload import parse_workload
from tensorforge.config import AcceleratorConfig
from tensorforge.dse.cost_model import CostBatch, CostParameters, evaluate, rtl_parameters
from tensorforge.dse.sw_space import Candidates, SoftwareSpace
from tensorforge.memory import DEFAULT_MEMORY

REFERENCE = Path(__file__).resolve().parent / "data" / "batch_model_reference.json"
CONV = "C[k,x,y] += A[c,x+r,y+s] * B[k,c,r,s]"
STRIDED = "C[k,x,y] += A[c,2*x+r,2*y+s] * B[k,c,r,s]"
DEPTHWISE = "C[c,x,y] += A[c,x+r,y+s] * B[c,r,s]"
GEMM = "C[i,j] += A[i,k] * B[k,j]"


def config(intrinsic: str = "gemm", rows: int = 8, cols: int = 8, bus: int = 64,
           capacity: int = 32 * 1024, **array) -> AcceleratorConfig:
    return AcceleratorConfig.from_dict({
        "intrinsic": intrinsic, "array": {"rows": rows, "cols": cols, **array},
        "scratchpad": {"capacity": capacity, "banks": 4, "accumulator": capacity // 2},
        "dma": {"bus_bits": bus}})


#: name -> (workload, sizes, accelerator, tile grid, RTL parameters or the defaults)
CASES = {
    "conv3x3_resnet_16x16": (CONV, "k=128,c=128,x=28,y=28,r=3,s=3",
                             config(rows=16, cols=16, bus=128, capacity=128 * 1024), "pow2",
                             False),
    "conv3x3_is_rtl": (CONV, "k=32,c=16,x=12,y=12,r=3,s=3", config(dataflow="is"), "all",
                       True),
    "conv_strided": (STRIDED, "k=64,c=32,x=14,y=14,r=3,s=3", config(), "pow2", True),
    "conv_conv2d_intrinsic": (CONV, "k=16,c=8,x=10,y=12,r=3,s=3",
                              config("conv2d", 4, 4, local_bytes=16), "all", False),
    "depthwise_gemv": (DEPTHWISE, "c=32,x=14,y=14,r=3,s=3", config("gemv", dataflow="os"),
                       "all", True),
    "depthwise_gemm": (DEPTHWISE, "c=32,x=14,y=14,r=3,s=3", config(), "pow2", False),
    "strided_conv2d_intrinsic": (STRIDED, "k=16,c=8,x=5,y=6,r=3,s=3",
                                 config("conv2d", 4, 4, local_bytes=16), "all", True),
    "gemm_1024": (GEMM, "i=1024,j=1024,k=1024",
                  config(rows=16, cols=16, bus=128, capacity=128 * 1024), "pow2", False),
    "gemm_odd_systolic_rtl": (GEMM, "i=96,j=80,k=112",
                              config(dataflow="ws", interconnect="systolic"), "all", True),
    "gemm_gemv_os": (GEMM, "i=96,j=80,k=112", config("gemv", dataflow="os"), "all", False),
    "gemm_dot": (GEMM, "i=96,j=80,k=112", config("dot", 8, 1, dataflow="os"), "all", True),
}
ROWS = 300


def case_batch(name: str) -> tuple[SoftwareSpace, Candidates]:
    """The case's software space and its seeded batch of random candidates."""
    text, sizes, accelerator, grid, rtl = CASES[name]
    parameters = rtl_parameters(DEFAULT_MEMORY, accelerator) if rtl else CostParameters()
    space = SoftwareSpace.build(parse_workload(text, sizes), accelerator, grid=grid,
                                parameters=parameters)
    seed = int(hashlib.sha256(name.encode()).hexdigest()[:8], 16)
    return space, space.random(ROWS, np.random.default_rng(seed))


def per_choice(space: SoftwareSpace, batch: Candidates) -> dict[str, np.ndarray]:
    """Every figure of the batch model per candidate, one `evaluate` call per tensorize
    choice (the way the search called it before it evaluated a batch in one pass)."""
    out: dict[str, np.ndarray] = {}
    for s in np.unique(batch.space):
        rows = np.flatnonzero(batch.space == s)
        dims = space.spaces[s].dims
        result = evaluate(space.spaces[s], space.tiles_of(s, batch.levels[rows]),
                          batch.order[rows, :dims], space.parameters)
        for name, values in figures(result).items():
            out.setdefault(name, np.zeros(len(batch), dtype=values.dtype))[rows] = values
    return out


def figures(result: CostBatch) -> dict[str, np.ndarray]:
    names = [n for n in CostBatch.__dataclass_fields__ if n != "extra"]
    return {**{n: getattr(result, n) for n in names},
            **{f"extra.{k}": v for k, v in result.extra.items()}}


def digest(values: np.ndarray) -> str:
    """Of the exact bytes, as float64 (a bool or int figure equal as a number digests equal)."""
    return hashlib.sha256(np.ascontiguousarray(values, dtype=np.float64).tobytes()).hexdigest()[:20]


def digests(values: dict[str, np.ndarray]) -> dict[str, str]:
    return {name: digest(v) for name, v in sorted(values.items())}


def main() -> None:
    if sys.argv[1:] != ["--write"]:
        raise SystemExit("usage: python tests/batch_model_cases.py --write")
    reference = {}
    for name in CASES:
        space, batch = case_batch(name)
        values = per_choice(space, batch)
        reference[name] = {"legal": int(values["legal"].sum()), "digests": digests(values)}
        print(f"{name:28s} {len(space.spaces):2d} choices, {reference[name]['legal']} legal")
    REFERENCE.write_text(json.dumps(reference, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
