"""Compile every ResNet-50 layer (full size) with the heuristic mapping on an 8x8 GEMM array.

Prints, per layer, the tensorize choices found, the time to map and to generate code, and the
instruction count; then the totals (wall clock, and this process's CPU time, which is what
one core spends). Target: the whole model under 10 s on one core.

    .venv/bin/python benchmarks/bench_compile_resnet50.py [--library]
"""

from __future__ import annotations

import argparse
import time

from tensorforge.compiler.codegen import generate
from tensorforge.compiler.mappers import default_mapping, device_choices, library_mapping
from tensorforge.compiler.zoo import load_model
from tensorforge.config import AcceleratorConfig


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--library", action="store_true", help="time the im2col mapper too")
    args = parser.parse_args()
    config = AcceleratorConfig()  # 8x8 GEMM, 64 KiB scratchpad, 16 KiB accumulator
    model = load_model("resnet50")
    print(f"config: {config.describe()}")
    print(f"{'layer':<18}{'choices':>8}{'map s':>8}{'codegen s':>10}{'instructions':>14}"
          + (f"{'library ins':>13}" if args.library else ""))
    total_map = total_gen = 0.0
    total_instructions = 0
    start, start_cpu = time.perf_counter(), time.process_time()
    for layer in model.layers:
        workload = layer.workload
        choices = len(device_choices(workload, config))
        t0 = time.perf_counter()
        mapping = default_mapping(workload, config)
        t1 = time.perf_counter()
        program = generate(workload, mapping, config)
        t2 = time.perf_counter()
        total_map += t1 - t0
        total_gen += t2 - t1
        total_instructions += len(program.instructions)
        line = (f"{layer.name:<18}{choices:>8}{t1 - t0:>8.2f}{t2 - t1:>10.2f}"
                f"{len(program.instructions):>14}")
        if args.library:
            library = generate(workload, library_mapping(workload, config), config)
            line += f"{len(library.instructions):>13}"
        print(line)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - start_cpu
    print(f"total: {elapsed:.2f} s for {len(model.layers)} layers (mapping {total_map:.2f} s, "
          f"code generation {total_gen:.2f} s, {total_instructions} instructions); "
          f"target under 10 s")
    # on a shared machine the wall clock counts other processes' time too
    print(f"cpu time: {cpu:.2f} s")


if __name__ == "__main__":
    main()
