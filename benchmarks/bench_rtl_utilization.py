"""PE utilization of compute-bound programs on the generated RTL, and where the lost cycles go.

Runs, on the Verilator model of an 8x8 int8 weight-stationary systolic GEMM accelerator with
8 banks and 16-beat bursts on a 128-bit bus (ideal DRAM), a 64x64x64 GEMM (the default
mapping, and two smaller row tilings that let LOAD, COMPUTE and STORE overlap) and a 3x3
convolution layer, each checked against numpy. Prints per workload: cycles,
ideal cycles (MACs / 64 PEs), utilization (target >= 90%), simulated cycles per second, and a
breakdown of the cycles lost against the ideal, from the accelerator's counters:

* compute idle = cycles - compute_busy: the compute unit had no instruction (waiting for
  LOADs at the start, for tokens, for the last STORE at the end);
* compute overhead = compute_busy - ideal: the compute unit was busy but not issuing MACs
  (stationary loads, pipeline fill and drain, ZERO instructions, bank conflicts);
* bank conflicts and token waits as the counters count them (overlapping the above).

    .venv/bin/python benchmarks/bench_rtl_utilization.py [--latency CYCLES] [--bandwidth B]
"""

from __future__ import annotations

import argparse
import time

from tensorforge.compiler.mappers import default_mapping
from tensorforge.compiler.mapping import Mapping
from tensorforge.compiler.workload import parse_workload
from tensorforge.config import AcceleratorConfig
from tensorforge.sim.rtl_jobs import DramTiming
from tensorforge.sim.rtl_run import RtlCase, RunOptions, accelerator_model, run_programs_on_rtl

CONFIG = AcceleratorConfig.from_dict({
    "intrinsic": "gemm",
    "array": {"rows": 8, "cols": 8, "interconnect": "systolic", "dataflow": "ws"},
    "scratchpad": {"capacity": "32KiB", "banks": 8, "accumulator": "16KiB"},
    "dma": {"bus_bits": 128, "max_burst": 16},
})
GEMM = ("C[i,j] += A[i,k] * B[k,j]", "i=64,j=64,k=64")
CONV = ("C[k,x,y] += A[c,x+r-1,y+s-1] * B[k,c,r,s]", "k=32,c=32,x=14,y=14,r=3,s=3")
# name -> (workload, tile sizes replacing the default mapping's; None keeps it)
WORKLOADS = {
    "GEMM 64x64x64, default mapping": (GEMM, None),
    "GEMM 64x64x64, tiles i=16": (GEMM, {"i": 16, "j": 64, "k": 64}),
    "GEMM 64x64x64, tiles i=8": (GEMM, {"i": 8, "j": 64, "k": 64}),
    "conv 3x3 32->32 ch 14x14, default": (CONV, None),
}


def _case(name: str, seed: int) -> RtlCase:
    (text, sizes), tiles = WORKLOADS[name]
    workload = parse_workload(text, sizes, name=name)
    mapping = default_mapping(workload, CONFIG)
    if tiles is not None:
        mapping = Mapping.from_dict({**mapping.to_dict(), "tiles": tiles}, workload)
    return RtlCase(workload, mapping, seed=seed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=int, default=0, help="DRAM latency in cycles")
    parser.add_argument("--bandwidth", type=float, default=None, help="DRAM bytes per cycle")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    started = time.perf_counter()
    model = accelerator_model(CONFIG)
    print(f"config: {CONFIG.describe()}")
    print(f"DRAM: latency {args.latency} cycles, bandwidth "
          f"{args.bandwidth or CONFIG.dma.bus_bytes} B/cycle; model "
          f"{'built' if model.was_built else 'cached'} ({time.perf_counter() - started:.0f} s)")
    cases = [_case(name, args.seed) for name in WORKLOADS]
    options = RunOptions(timing=DramTiming(args.latency, args.bandwidth), seed=args.seed)
    results = run_programs_on_rtl(CONFIG, cases, options)

    header = (f"| {'workload':<36} | match | {'cycles':>8} | {'ideal':>8} | util. | "
              f"{'cmp idle':>8} | {'cmp ovh':>8} | {'bank cf':>7} | {'tok wait':>8} | "
              f"{'load busy':>9} | {'store busy':>10} | {'cyc/s':>7} |")
    print(header)
    print("|" + "|".join("-" * (len(part)) for part in header.split("|")[1:-1]) + "|")
    for name, result in zip(WORKLOADS, results, strict=True):
        idle = result.cycles - result.compute_busy
        overhead = result.compute_busy - result.ideal_cycles
        print(f"| {name:<36} | {'yes' if result.match else 'NO':<5} | {result.cycles:>8,} | "
              f"{result.ideal_cycles:>8,.0f} | {result.utilization:>5.1%} | {idle:>8,} | "
              f"{overhead:>8,.0f} | {result.bank_conflict_stalls:>7,} | "
              f"{result.dependency_waits:>8,} | {result.load_busy:>9,} | "
              f"{result.store_busy:>10,} | "
              f"{result.sim_cycles_per_second:>7,.0f} |")
    for name, result in zip(WORKLOADS, results, strict=True):
        print(f"{name}: {result.instructions} instructions, DRAM read {result.dram_bytes_read:,} B"
              f" (predicted {result.expected_traffic.read:,}), written "
              f"{result.dram_bytes_written:,} B, simulated in {result.sim_seconds:.1f} s")


if __name__ == "__main__":
    main()
