"""Cost-model throughput: mapping evaluations per second on one core (target >= 100,000).

``python benchmarks/bench_cost_model.py`` prints evaluations/s for batches of random mappings
of a ResNet-50 convolution (GEMM 16x16 accelerator) and of a GEMM, per second of the
process's CPU time (best of five batches).
"""

from __future__ import annotations

import time

import numpy as np
import torch

from tensorforge.compiler.workload import parse_workload
from tensorforge.config import AcceleratorConfig
from tensorforge.dse.sw_space import SoftwareSpace

CONFIG = AcceleratorConfig.from_dict({
    "array": {"rows": 16, "cols": 16},
    "scratchpad": {"capacity": 128 * 1024, "banks": 4, "accumulator": 64 * 1024},
    "dma": {"bus_bits": 128}})


def throughput(text: str, sizes: str, batch: int, repeats: int = 5) -> float:
    space = SoftwareSpace.build(parse_workload(text, sizes), CONFIG)
    rng = np.random.default_rng(0)
    best = 0.0
    for _ in range(repeats):
        candidates = space.random(batch, rng)
        start = time.process_time()  # this process's CPU time: a busy machine does not skew it
        space.evaluate(candidates)
        best = max(best, batch / (time.process_time() - start))
    return best


def main() -> None:
    torch.set_num_threads(1)
    cases = [("conv3x3 (ResNet-50 conv3_x)", "C[k,x,y] += A[c,x+r,y+s] * B[k,c,r,s]",
              "k=128,c=128,x=28,y=28,r=3,s=3"),
             ("gemm 1024^3", "C[i,j] += A[i,k] * B[k,j]", "i=1024,j=1024,k=1024")]
    for name, text, sizes in cases:
        for batch in (1_000, 10_000, 100_000):
            rate = throughput(text, sizes, batch)
            print(f"{name:30s} batch {batch:>7d}: {rate:>12,.0f} mapping evaluations/s")


if __name__ == "__main__":
    main()
