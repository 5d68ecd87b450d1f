"""Cost-model throughput: mapping evaluations per second on one core, as the software search
prices them (`SoftwareSpace.evaluate`). Targets (issue 14): >= 100,000 a second at batch 10k
and >= 50,000 at batch 1k (searches ask small batches).

``python benchmarks/bench_cost_model.py`` prints evaluations/s for batches of random mappings
of a ResNet-50 convolution (GEMM 16x16 accelerator) and of a GEMM, per second of the
process's CPU time (best of five batches), next to the figures of the model before it priced
a batch mixing tensorize choices in one pass (`BEFORE`).

Measured 2026-11-28 on the 2-core machine while other jobs loaded it (load average ~6), best
of two runs alternating the model before and after a batch's stacks laid out their boundary
steps together (`cost_model.evaluate_stacks`): conv3x3 50,653 -> 66,734 (batch 1k), 167,300 ->
183,401 (10k), 238,096 -> 227,872 (100k); gemm 179,037 -> 184,052 (1k), 389,568 -> 378,839
(10k), 362,039 -> 402,016 (100k).
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


#: Evaluations/s before the one-pass batch model (commit 3609836: one numpy pass per
#: tensorize choice, boundary steps priced for illegal mappings too), measured by this script
#: alternately with the one-pass model on the same busy 2-core machine (best of two runs).
BEFORE = {("conv3x3", 1_000): 6_958, ("conv3x3", 10_000): 39_497, ("conv3x3", 100_000): 83_541,
          ("gemm", 1_000): 23_679, ("gemm", 10_000): 71_139, ("gemm", 100_000): 81_407}
TARGET = {1_000: 50_000, 10_000: 100_000}


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
            before = BEFORE[(name.split()[0], batch)]
            target = f", target {TARGET[batch]:,}" if batch in TARGET else ""
            print(f"{name:30s} batch {batch:>7d}: {rate:>12,.0f} mapping evaluations/s "
                  f"(before {before:,}{target})")


if __name__ == "__main__":
    main()
