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
from tensorforge.dse.cost_batch import CostBatch
from tensorforge.dse.cost_model import CostParameters, evaluate, rtl_parameters
from tensorforge.dse.sw_space import MAX_DIMS, Candidates, SoftwareSpace
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
ROWS = 120  # per tensorize choice


def case_space(name: str) -> SoftwareSpace:
    text, sizes, accelerator, grid, rtl = CASES[name]
    parameters = rtl_parameters(DEFAULT_MEMORY, accelerator) if rtl else CostParameters()
    return SoftwareSpace.build(parse_workload(text, sizes), accelerator, grid=grid,
                               parameters=parameters)


def seed(*words: str) -> int:
    return int(hashlib.sha256(" ".join(words).encode()).hexdigest()[:8], 16)


def case_batch(name: str) -> tuple[SoftwareSpace, Candidates, dict[str, np.ndarray]]:
    """The case's space, a batch of random candidates of every tensorize choice in a seeded
    mixed order, and the batch rows of each choice (by `LayerSpace.describe`). Each choice
    draws its own candidates from its own seed, so a choice the matcher adds or drops later
    changes no other choice's rows."""
    space = case_space(name)
    parts = []
    for s, layer in enumerate(space.spaces):
        rng = np.random.default_rng(seed(name, layer.describe()))
        levels = np.full((ROWS, MAX_DIMS), -1, dtype=np.int64)
        order = np.full((ROWS, MAX_DIMS), -1, dtype=np.int64)
        levels[:, : layer.dims] = rng.integers(0, space.n_levels[s, : layer.dims],
                                               size=(ROWS, layer.dims))
        for row in range(ROWS):
            order[row, : layer.dims] = space._random_order(s, rng)
        parts.append(Candidates(np.full(ROWS, s), levels, order))
    mixed = np.random.default_rng(seed(name)).permutation(ROWS * len(parts))
    batch = space.canonical(Candidates.concat(parts).take(mixed))
    where = np.argsort(mixed)  # batch row of each drawn candidate
    return space, batch, {layer.describe(): where[s * ROWS:(s + 1) * ROWS]
                          for s, layer in enumerate(space.spaces)}


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


def one_pass(space: SoftwareSpace, batch: Candidates, *, legal_only: bool = False
             ) -> dict[str, np.ndarray]:
    """Every figure per candidate as the search gets them: the whole batch in one pass per
    stack of choices (`SoftwareSpace.evaluate_all`)."""
    out: dict[str, np.ndarray] = {}
    for rows, result in space.evaluate_all(batch, legal_only=legal_only):
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


def reference_of(name: str, values_of) -> dict[str, dict]:
    """Per tensorize choice: its legal candidates and the digests of its figures, from
    ``values_of(space, batch)`` (every figure per batch row)."""
    space, batch, choices = case_batch(name)
    values = values_of(space, batch)
    return {choice: {"legal": int(values["legal"][rows].sum()),
                     "digests": digests({k: v[rows] for k, v in values.items()})}
            for choice, rows in choices.items()}


def main() -> None:
    if sys.argv[1:] != ["--write"]:
        raise SystemExit("usage: python tests/batch_model_cases.py --write")
    reference = {}
    for name in CASES:
        reference[name] = reference_of(name, per_choice)
        legal = sum(c["legal"] for c in reference[name].values())
        print(f"{name:28s} {len(reference[name]):2d} choices, {legal} legal")
    REFERENCE.write_text(json.dumps(reference, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
