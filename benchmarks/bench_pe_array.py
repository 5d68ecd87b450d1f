"""Cycles the compute unit spends per COMPUTE instruction beyond its beats (Amaranth simulator).

Not a test: prints, for an 8x8 int8 weight-stationary systolic GEMM array with two PE store
banks and ideal memories (1-cycle reads, never stalled), how many cycles a program of GEMM
COMPUTE instructions takes against its beats (one streamed line per cycle is the ideal):

* weights stay while 8 A blocks stream (``b_inner == 0``), instructions one at a time;
* the weight block changes with every step (``k`` inner), instructions one at a time;
* the same instructions offered back to back (the next one while the last one drains).

    .venv/bin/python benchmarks/bench_pe_array.py [--rows 8] [--instructions 4]
"""

from __future__ import annotations

import argparse

import numpy as np

from tensorforge.config import AcceleratorConfig
from tensorforge.hw.compute_unit import step_latency
from tensorforge.isa import Compute
from tensorforge.sim.compute_unit_sim import run_compute_program


def gemm_config(rows: int) -> AcceleratorConfig:
    return AcceleratorConfig.from_dict({
        "intrinsic": "gemm",
        "array": {"rows": rows, "cols": rows, "interconnect": "systolic", "dataflow": "ws",
                  "local_bytes": 0},
        "scratchpad": {"capacity": 65536, "banks": 4, "accumulator": 16384},
    })


def run(config: AcceleratorConfig, program: list[Compute], back_to_back: bool) -> int:
    """Cycles from offering the first instruction until the unit is idle after the last."""
    rng = np.random.default_rng(0)
    spad = rng.integers(-128, 128, (512, config.spad_line_elems))
    acc = rng.integers(-1000, 1000, (512, config.acc_line_elems))
    return sum(run_compute_program(config, program, spad, acc, back_to_back=back_to_back).cycles)


def programs(rows: int, count: int) -> dict[str, list[Compute]]:
    """Each instruction: 8 x 8 steps of ``rows`` beats over its own A, B and C regions."""
    weights_stay = [Compute(outer=8, inner=8, a_base=0, a_inner=rows, b_base=256 + k * rows,
                            b_outer=rows, acc_base=0, acc_outer=8 * rows, acc_inner=rows)
                    for k in range(count)]
    weights_change = [Compute(outer=8, inner=8, a_base=0, a_outer=rows, a_inner=8 * rows,
                              b_base=256 + k * rows, b_outer=0, b_inner=rows, acc_base=0,
                              acc_outer=rows, acc_inner=0)
                      for k in range(count)]
    return {"weights stay (b_inner = 0)": weights_stay,
            "weights change every step": weights_change}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=8, help="array rows = cols")
    parser.add_argument("--instructions", type=int, default=4)
    args = parser.parse_args()
    config = gemm_config(args.rows)
    print(f"{config.describe()}; one isolated step: {step_latency(config)} cycles")
    print(f"| {'program':<28} | {'issue':<12} | {'beats':>6} | {'cycles':>6} | "
          f"{'overhead':>8} | {'per instr.':>10} | {'beats/cycle':>11} |")
    print(f"|{'-' * 30}|{'-' * 14}|{'-' * 8}|{'-' * 8}|{'-' * 10}|{'-' * 12}|{'-' * 13}|")
    for name, program in programs(args.rows, args.instructions).items():
        beats = sum(i.outer * i.inner for i in program) * args.rows
        for back_to_back in (False, True):
            cycles = run(config, program, back_to_back)
            issue = "back to back" if back_to_back else "one by one"
            overhead = cycles - beats
            print(f"| {name:<28} | {issue:<12} | {beats:>6} | {cycles:>6} | {overhead:>8} | "
                  f"{overhead / len(program):>10.1f} | {beats / cycles:>11.1%} |")


if __name__ == "__main__":
    main()
